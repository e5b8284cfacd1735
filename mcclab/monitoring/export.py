"""The run's series, kept in the results folder: ``tables/metrics.csv.gz``, and back to OpenMetrics.

:func:`copy_series` copies them from the run's Prometheus at the end of the run
(before its database is removed), and :func:`keep_configs` keeps the monitoring
configuration beside them in ``logs/monitoring/``.

``metrics.csv.gz`` is a gzipped CSV (``pandas.read_csv`` and ``zcat`` read it as
it is), tidy, one row per stored sample: ``time`` (Unix seconds),
``metric``, one column per label, ``value``. It holds every raw sample with
the run's label, so ``python -m mcclab.monitoring.replay RUN`` can load it
into a fresh Prometheus (``promtool tsdb create-blocks-from openmetrics``) and
the dashboards show the run again, as they did live.

It is gzipped because the labels repeat on every row: a 300-s run of 73
agents wrote 242 MB of plain CSV, 91 MB for 120 s; gzip takes the 91 MB to
2.8 MB in under a second. Run folders written by older versions of mcclab hold
a plain ``tables/metrics.csv``, which :func:`metrics_path` still finds.
"""

from __future__ import annotations

import csv
import gzip
import math
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO

from mcclab.monitoring import prometheus as prom

METRICS_CSV = Path("tables") / "metrics.csv.gz"
LEGACY_METRICS_CSV = Path("tables") / "metrics.csv"
FIXED = ("time", "metric", "value")
CONFIGS = Path("logs") / "monitoring"


def metrics_path(run_dir: Path) -> Path:
    """A run's series file: the gzipped one, or the plain one of an older run folder."""
    legacy = run_dir / LEGACY_METRICS_CSV
    return legacy if legacy.exists() and not (run_dir / METRICS_CSV).exists() \
        else run_dir / METRICS_CSV


def _open_text(path: Path, mode: str) -> IO[str]:
    """Open a CSV for text reading or writing, through gzip when it ends in .gz."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", newline="", compresslevel=6)
    return path.open(mode, newline="")


def write_series_csv(label_sets: list[dict[str, str]], fetch: Callable[[str], list[dict]],
                     path: Path) -> int:
    """Write the run's samples to ``path``, one metric at a time; returns the row count.

    Rows are sorted by metric, then by every label's value ("" where a series lacks
    the label), then by time.

    ``label_sets`` are the run's series as Prometheus's series API lists them (labels
    only, no samples), and ``fetch(name)`` returns one metric's matrix result. Asking
    for every sample of a run at once held them all in memory twice, as JSON and as
    row dicts: exporting a 1000-s, 73-agent run took the runner to 5.7 GB and
    Prometheus to 870 MB. Metric by metric, only one metric's samples are held.
    """
    labels = sorted({k for series in label_sets for k in series} - {"__name__"} - set(FIXED))
    names = sorted({series.get("__name__", "") for series in label_sets})
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with _open_text(path, "w") as fh:
        writer = csv.writer(fh)
        writer.writerow(["time", "metric", *labels, "value"])
        for name in names:
            keyed = []
            for series in fetch(name):
                values = [series["metric"].get(k, "") for k in labels]
                keyed.append((values, series.get("values", [])))
            # Prometheus answers series in its own order: sort, so the file is deterministic.
            for values, samples in sorted(keyed, key=lambda item: item[0]):
                for ts, value in sorted(samples, key=lambda sample: float(sample[0])):
                    writer.writerow([f"{float(ts):.3f}", name, *values, value])
                    count += 1
    return count


def copy_series(url: str, run: str, start: float, end: float, run_dir: Path) -> int:
    """Every raw sample labelled ``run`` in [start, end] from the Prometheus at ``url``
    into ``run_dir``'s ``tables/metrics.csv.gz``; returns the row count."""
    selector = f'{{run="{run}"}}'
    return write_series_csv(
        prom.series(url, selector, start, end),
        lambda name: prom.raw_samples(url, prom.with_name(selector, name), start, end),
        run_dir / METRICS_CSV)


def keep_configs(run_dir: Path, files: Mapping[str, Path]) -> list[Path]:
    """Copy monitoring files into ``logs/monitoring/`` as ``<name><suffix>``; returns the copies.

    A file that is gone (a part that never started) is left out.
    """
    keep = run_dir / CONFIGS
    keep.mkdir(parents=True, exist_ok=True)
    copies = []
    for name, path in files.items():
        if path.is_file():
            copies.append(Path(shutil.copy2(path, keep / f"{name}{path.suffix}")))
    return copies


def read_csv(path: Path) -> list[dict[str, str]]:
    """metrics.csv(.gz) back as rows (empty label cells dropped: Prometheus has no empty labels)."""
    with _open_text(path, "r") as fh:
        return [{k: v for k, v in row.items() if v != "" or k in FIXED}
                for row in csv.DictReader(fh)]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(text: str) -> str:
    """A sample value as OpenMetrics writes it."""
    value = float(text)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def to_openmetrics(rows: Iterable[dict[str, str]]) -> str:
    """OpenMetrics text for ``promtool tsdb create-blocks-from openmetrics``.

    Every metric is written untyped (no ``# TYPE``), so counter names keep
    their ``_total``; each series' samples are contiguous and in time order.
    """
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, str]]] = {}
    for row in rows:
        labels = tuple(sorted((k, v) for k, v in row.items() if k not in FIXED))
        series.setdefault((row["metric"], labels), []).append(
            (float(row["time"]), _number(row["value"])))
    lines = []
    for (name, labels), samples in sorted(series.items()):
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
        for ts, value in sorted(samples):
            lines.append(f"{name}{{{text}}} {value} {ts:.3f}")
    return "\n".join(lines) + "\n# EOF\n"
