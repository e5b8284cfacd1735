"""Soak: one long run, with every long-lived process's memory and descriptors sampled.

    python bench/soak.py [--experiment ormcc-fig4-n24] [--profile paper] [--every 10]

Starts `mcclab run` (by default ORMCC's Fig. 4 star at n = 24, the paper profile:
1000 s, 73 agents, 24 TCP flows) and, every ``--every`` seconds while it runs, reads
from /proc, for the runner and for every process the lab recorded (routers, link
emulators, exporter, Prometheus, fork server, agents, iperf3): resident memory
(VmRSS) and open descriptors; and the size of the run's Prometheus database
(``--storage.tsdb.path``, under /run, which is memory). Processes are grouped by kind
(the first word of what the lab recorded, or the agent's role).

Growth is judged after the warm-up, while the flows run: for each kind, the median
of the last five samples against the median of the first five after ``--settle``
seconds of flows. The run passes when no kind's RSS or descriptors grow by more than
10 % (descriptors: and by more than two), and when no scrape was lost: in
``tables/metrics.csv.gz``, each series of an agent that ran the whole time has a
sample for every scrape interval (a gap longer than 1.5 intervals counts as a loss).

Writes ``soak.csv`` (every sample) and ``soak.json`` (the verdict) into the run
folder, and prints a table, with each kind's largest RSS once the flows had stopped
(the export of the series and the teardown). The TSDB's size is reported, not
judged: it holds the run's samples. Needs root. Takes the run's length plus about
2 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from mcclab.state import STATE_ROOT, proc_stat_fields, same_process

REPO = Path(__file__).resolve().parent.parent
LIMIT = 0.10


def kind_of(what: str) -> str:
    """A process's kind from the lab's description of it."""
    words = what.split()
    if words[:1] == ["flow"] and len(words) >= 3:
        return f"{words[2]}"  # sender, receiver, client, server, sink, source
    if words[:1] == ["monitoring"] and len(words) >= 2:
        return words[1]
    if words[:1] == ["shell"]:
        return "shell"
    return words[0] if words else "?"


def sample_process(pid: int) -> tuple[int, int] | None:
    """(RSS in kB, open descriptors) of a process, or None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = next((int(line.split()[1]) for line in status.splitlines()
                if line.startswith("VmRSS:")), 0)
    return rss, fds


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a stopped flow lingers as a zombie until it is reaped)."""
    return same_process(proc_stat_fields(pid), None)


def tree_size(path: Path) -> int:
    """Bytes under ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


def tsdb_path(pid: int) -> Path | None:
    """The --storage.tsdb.path of a Prometheus process."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for arg in argv:
        if arg.startswith(b"--storage.tsdb.path="):
            return Path(arg.split(b"=", 1)[1].decode())
    return None


def growth(rows: list[dict], settle: float, end: float, window: int = 5
           ) -> dict[str, dict[str, float]]:
    """Per kind, over the flows' time after ``settle`` up to ``end``: RSS and descriptors.

    Growth is a trend, not a peak: the median of the last ``window`` samples against
    the median of the first ``window`` after ``settle`` (a descriptor count of 4 that
    reads 11 while a scrape's sockets are open is not a leak). The largest sample is
    reported beside it.
    """
    by_time: dict[float, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for row in rows:
        totals = by_time[row["t"]][row["kind"]]
        totals[0] += row["rss_kb"]
        totals[1] += row["fds"]
    times = sorted(t for t in by_time if settle <= t <= end)
    out: dict[str, dict[str, float]] = {}
    kinds = {kind for t in times for kind in by_time[t]}
    for kind in sorted(kinds):
        seen = [by_time[t][kind] for t in times if kind in by_time[t]]
        if len(seen) < 2 * window:
            continue
        first, last = seen[:window], seen[-window:]
        rss0, rss1 = (statistics.median(v[0] for v in part) for part in (first, last))
        fd0, fd1 = (statistics.median(v[1] for v in part) for part in (first, last))
        out[kind] = {"rss_kb_start": rss0, "rss_kb_end": rss1,
                     "rss_kb_max": max(v[0] for v in seen),
                     "rss_growth": rss1 / rss0 - 1 if rss0 else 0.0,
                     "fds_start": fd0, "fds_end": fd1, "fds_max": max(v[1] for v in seen),
                     "fds_growth": fd1 / fd0 - 1 if fd0 else 0.0}
    return out


def fd_growth(kind: dict[str, float]) -> float:
    """Descriptor growth that counts: over 10 % and by more than two descriptors.

    A kind with four descriptors reads five while a scrape's socket is open; one
    descriptor is 25 % of four, and no leak.
    """
    return kind["fds_growth"] if kind["fds_end"] - kind["fds_start"] > 2 else 0.0


def after_flows(rows: list[dict], end: float) -> dict[str, float]:
    """Per kind, the largest RSS (kB) once the flows had stopped: the export and teardown."""
    peak: dict[str, float] = defaultdict(float)
    totals: dict[tuple[float, str], int] = defaultdict(int)
    for row in rows:
        if row["t"] > end:
            totals[(row["t"], row["kind"])] += row["rss_kb"]
    for (_t, kind), rss in totals.items():
        peak[kind] = max(peak[kind], rss)
    return dict(peak)


def lost_scrapes(metrics_csv: Path, interval: float = 1.0) -> tuple[int, int]:
    """(series checked, gaps longer than 1.5 scrape intervals) in the run's metrics table."""
    stamps: dict[str, list[float]] = defaultdict(list)
    with gzip.open(metrics_csv, "rt") as handle:
        reader = csv.DictReader(handle)
        time_key = next(k for k in ("timestamp", "time", "t") if k in (reader.fieldnames or []))
        keys = [k for k in (reader.fieldnames or []) if k not in (time_key, "value")]
        for row in reader:
            stamps["|".join(row[k] for k in keys)].append(float(row[time_key]))
    if not stamps:
        return 0, 0
    # Only series present from the first scrape to the last (those that lived all run).
    first = min(min(v) for v in stamps.values())
    last = max(max(v) for v in stamps.values())
    gaps = checked = 0
    for values in stamps.values():
        values.sort()
        if values[0] - first > 30 or last - values[-1] > 30:
            continue
        checked += 1
        gaps += sum(1 for a, b in zip(values, values[1:], strict=False) if b - a > 1.5 * interval)
    return checked, gaps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="ormcc-fig4-n24")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--set", action="append", default=[], dest="settings")
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=120.0,
                        help="seconds of flows before growth is measured")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/soak.py needs root (it builds a lab)", file=sys.stderr)
        return 2
    results = args.results or Path(tempfile.mkdtemp(prefix="mcclab-soak-"))
    argv = [sys.executable, "-m", "mcclab", "run", args.experiment, "--profile", args.profile,
            "--results", str(results), "--wait", "1800"]
    for item in args.settings:
        argv += ["--set", item]
    print("soak:", " ".join(argv[1:]), flush=True)
    runner = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    rows: list[dict] = []
    tsdb_rows: list[tuple[float, int]] = []
    t_flows = None
    t_last_flows = 0.0
    run_dir = None
    state_dir = None
    while runner.poll() is None:
        time.sleep(args.every if t_flows is not None else 1.0)
        if run_dir is None:
            found = [p.parent for p in results.glob("*/*/run.json")]
            if found:
                run_dir = found[0]
                state_dir = STATE_ROOT / f"{run_dir.parent.name}-{run_dir.name}"
        if state_dir is None:
            continue
        try:
            state = json.loads((state_dir / "state.json").read_text())
        except (OSError, ValueError):
            continue
        procs = [(p["pid"], kind_of(p["what"])) for p in state.get("processes", [])]
        if t_flows is None:
            if not any(p["what"].startswith("flow") for p in state.get("processes", [])):
                continue
            t_flows = time.monotonic()
        t = round(time.monotonic() - t_flows, 1)
        if any(p["what"].startswith("flow") and running(p["pid"])
               for p in state.get("processes", [])):
            t_last_flows = t
        for pid, kind in [(runner.pid, "runner"), *procs]:
            got = sample_process(pid)
            if got is not None:
                rows.append({"t": t, "pid": pid, "kind": kind, "rss_kb": got[0], "fds": got[1]})
            if kind == "prometheus":
                path = tsdb_path(pid)
                if path is not None:
                    tsdb_rows.append((t, tree_size(path)))
        if rows and int(t) % 60 < args.every:
            total = sum(r["rss_kb"] for r in rows if r["t"] == t)
            print(f"  t={t:6.0f} s  processes {sum(1 for r in rows if r['t'] == t):4d}  "
                  f"RSS {total / 1024:7.1f} MiB  TSDB "
                  f"{(tsdb_rows[-1][1] if tsdb_rows else 0) / 2**20:6.1f} MiB", flush=True)
    if run_dir is None:
        print("the run left no folder", file=sys.stderr)
        return 1
    status = json.loads((run_dir / "run.json").read_text()).get("status")
    with (run_dir / "soak.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["t", "pid", "kind", "rss_kb", "fds"])
        writer.writeheader()
        writer.writerows(rows)
    grown = growth(rows, args.settle, t_last_flows)
    export_peak = after_flows(rows, t_last_flows)
    metrics = run_dir / "tables" / "metrics.csv.gz"
    checked, gaps = lost_scrapes(metrics) if metrics.exists() else (0, -1)
    worst = max((max(v["rss_growth"], fd_growth(v)) for v in grown.values()), default=0.0)
    tsdb = {"at_settle": next((b for t, b in tsdb_rows if t >= args.settle), None),
            "end": tsdb_rows[-1][1] if tsdb_rows else None}
    verdict = {"run": str(run_dir), "status": status, "kinds": grown, "tsdb_bytes": tsdb,
               "flows_seconds": t_last_flows, "rss_kb_after_flows": export_peak,
               "series_checked": checked, "scrape_gaps": gaps, "worst_growth": worst,
               "pass": status == "complete" and worst <= LIMIT and gaps == 0 and checked > 0}
    (run_dir / "soak.json").write_text(json.dumps(verdict, indent=1))
    print(f"\nrun {run_dir}: {status}")
    print(f"from {args.settle:.0f} s to {t_last_flows:.0f} s of flows (medians of 5 samples):")
    print(f"{'kind':<12} {'RSS MiB':>9} {'end':>9} {'max':>9} {'growth':>7} {'fds':>6} "
          f"{'end':>6} {'max':>6} {'growth':>7} {'after flows MiB':>16}")
    for kind, v in sorted(grown.items()):
        late = export_peak.get(kind)
        print(f"{kind:<12} {v['rss_kb_start'] / 1024:9.1f} {v['rss_kb_end'] / 1024:9.1f} "
              f"{v['rss_kb_max'] / 1024:9.1f} {v['rss_growth']:7.1%} {v['fds_start']:6.0f} "
              f"{v['fds_end']:6.0f} {v['fds_max']:6.0f} {v['fds_growth']:7.1%} "
              f"{late / 1024 if late else 0:16.1f}")
    print(f"Prometheus TSDB: {(tsdb['at_settle'] or 0) / 2**20:.1f} MiB at {args.settle:.0f} s, "
          f"{(tsdb['end'] or 0) / 2**20:.1f} MiB at the end")
    print(f"scrapes: {checked} series checked, {gaps} gaps")
    print(f"verdict: {'pass' if verdict['pass'] else 'FAIL'} (worst growth {worst:.1%}, "
          f"limit {LIMIT:.0%})")
    return 0 if verdict["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
