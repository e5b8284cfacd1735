"""Peak memory of exporting a run's series: all at once, and metric by metric as the runner does.

    python bench/export_memory.py [--series 5260] [--samples 1000] [--metrics 60]

The default shape is the 1000-s soak of ORMCC Fig. 4 at n = 24 (5,260 series of
about 1,000 samples). Prometheus's answers are stood in for by JSON texts of the
same form, written to files first and read back as the runner reads an answer,
so both ways pay for parsing the JSON.
Each way runs in a fresh process and reports its peak resident memory
(``VmHWM``), its time, and the size and digest of the file it wrote; the two
files must be identical. No Prometheus, no root, no network.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcclab.monitoring import export  # noqa: E402

LABELS = ("run", "experiment", "node", "flow", "role", "link", "direction", "protocol")


def make_series(series: int, samples: int, metrics: int, seed: int = 1) -> list[dict]:
    """A matrix result shaped like a run's: label sets and (time, value) pairs."""
    rng = random.Random(seed)
    out = []
    for i in range(series):
        labels = {"__name__": f"mcc_metric_{i % metrics}", "run": "20261126-000000-abcd"}
        for key in rng.sample(LABELS[1:], 4):
            labels[key] = f"{key}{rng.randrange(64)}"
        labels["instance"] = f"10.255.0.{i % 250}:{9000 + i}"
        values = [[1700000000.0 + t + 0.123, str(rng.random() * 1e6)] for t in range(samples)]
        out.append({"metric": labels, "values": values})
    return out


def all_at_once(answers: Path, path: Path) -> int:
    """The old export: one answer for every series, one dict a row, sorted, written."""
    result = json.loads((answers / "all.json").read_text())
    rows = []
    for series in result:
        labels = dict(series["metric"])
        name = labels.pop("__name__", "")
        for ts, value in series.get("values", []):
            rows.append({"time": f"{float(ts):.3f}", "metric": name, **labels, "value": value})
    labels = sorted({k for row in rows for k in row} - set(export.FIXED))
    rows.sort(key=lambda r: (r["metric"], [r.get(k, "") for k in labels], float(r["time"])))
    with gzip.open(path, "wt", newline="", compresslevel=6) as fh:
        writer = csv.DictWriter(fh, ["time", "metric", *labels, "value"], restval="")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def metric_by_metric(answers: Path, path: Path) -> int:
    """The export now: label sets first, then one answer a metric."""
    label_sets = json.loads((answers / "series.json").read_text())
    return export.write_series_csv(
        label_sets, lambda name: json.loads((answers / f"{name}.json").read_text()), path)


def write_answers(answers: Path, series: int, samples: int, metrics: int) -> None:
    """Prometheus's answers as files: every series at once, the label sets, one per metric."""
    result = make_series(series, samples, metrics)
    (answers / "all.json").write_text(json.dumps(result))
    (answers / "series.json").write_text(json.dumps([s["metric"] for s in result]))
    for name in sorted({s["metric"]["__name__"] for s in result}):
        (answers / f"{name}.json").write_text(
            json.dumps([s for s in result if s["metric"]["__name__"] == name]))


def high_water_kib() -> int:
    """This process's peak resident memory (VmHWM; unlike ru_maxrss, exec resets it)."""
    status = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines()
                if line.startswith("VmHWM:"))


def worker(way: str, answers: Path) -> None:
    """Export one way from the answer files; print a JSON line of its figures."""
    base = high_water_kib()
    path = answers / f"{way}.csv.gz"
    began = time.perf_counter()
    rows = (all_at_once if way == "all-at-once" else metric_by_metric)(answers, path)
    took = time.perf_counter() - began
    peak = high_water_kib()
    digest = hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest()[:16]
    print(json.dumps({"way": way, "rows": rows, "peak_mib": peak / 1024,
                      "before_mib": base / 1024, "seconds": took,
                      "file_mib": path.stat().st_size / 2**20, "digest": digest}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=5260)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--metrics", type=int, default=60)
    parser.add_argument("--worker", choices=("all-at-once", "metric-by-metric"))
    parser.add_argument("--answers", type=Path)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.answers)
        return 0
    answers = Path(tempfile.mkdtemp(prefix="mcclab-export-bench-"))
    write_answers(answers, args.series, args.samples, args.metrics)
    print(f"export of {args.series} series x {args.samples} samples in {args.metrics} metrics")
    print(f"{'way':<18} {'rows':>9} {'peak MiB':>9} {'at start':>9} {'export MiB':>11} "
          f"{'s':>6} {'file MiB':>9} digest")
    found = []
    for way in ("all-at-once", "metric-by-metric"):
        out = subprocess.run([sys.executable, __file__, "--worker", way, "--answers",
                              str(answers)], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        found.append(row)
        print(f"{way:<18} {row['rows']:>9} {row['peak_mib']:>9.0f} {row['before_mib']:>9.0f} "
              f"{row['peak_mib'] - row['before_mib']:>11.0f} {row['seconds']:>6.1f} "
              f"{row['file_mib']:>9.1f} {row['digest']}")
    shutil.rmtree(answers, ignore_errors=True)
    same = found[0]["digest"] == found[1]["digest"]
    print("files identical" if same else "FILES DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
