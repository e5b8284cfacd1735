"""The run's series, kept in the results folder: ``tables/metrics.csv.gz``, and back to OpenMetrics.

``metrics.csv.gz`` is a gzipped CSV (``pandas.read_csv`` and ``zcat`` read it as
it is), tidy, one row per stored sample: ``time`` (Unix seconds),
``metric``, one column per label, ``value``. It holds every raw sample with
the run's label, so ``python -m mcclab.monitoring.replay RUN`` can load it
into a fresh Prometheus (``promtool tsdb create-blocks-from openmetrics``) and
the dashboards show the run again, as they did live.

It is gzipped because the labels repeat on every row: a 300-s run of 73
agents wrote 242 MB of plain CSV, 91 MB for 120 s; gzip takes the 91 MB to
2.8 MB in under a second. Runs before 25 Nov 2026 have a plain
``tables/metrics.csv``, which :func:`metrics_path` still finds.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterable
from pathlib import Path
from typing import IO

METRICS_CSV = Path("tables") / "metrics.csv.gz"
LEGACY_METRICS_CSV = Path("tables") / "metrics.csv"
FIXED = ("time", "metric", "value")


def metrics_path(run_dir: Path) -> Path:
    """A run's series file: the gzipped one, or a plain one written before 25 Nov 2026."""
    legacy = run_dir / LEGACY_METRICS_CSV
    return legacy if legacy.exists() and not (run_dir / METRICS_CSV).exists() \
        else run_dir / METRICS_CSV


def _open_text(path: Path, mode: str) -> IO[str]:
    """Open a CSV for text reading or writing, through gzip when it ends in .gz."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", newline="", compresslevel=6)
    return path.open(mode, newline="")


def rows_from_result(result: list[dict]) -> list[dict[str, str]]:
    """Rows from a Prometheus matrix result (``metric`` labels plus ``values`` pairs)."""
    rows = []
    for series in result:
        labels = dict(series["metric"])
        name = labels.pop("__name__", "")
        for ts, value in series.get("values", []):
            rows.append({"time": f"{float(ts):.3f}", "metric": name, **labels, "value": value})
    return rows


def write_csv(rows: list[dict[str, str]], path: Path) -> int:
    """Write rows sorted by metric, labels and time; returns the number of rows."""
    labels = sorted({k for row in rows for k in row} - set(FIXED))
    columns = ["time", "metric", *labels, "value"]
    rows = sorted(rows, key=lambda r: (r["metric"], [r.get(k, "") for k in labels],
                                       float(r["time"])))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open_text(path, "w") as fh:
        writer = csv.DictWriter(fh, columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


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
