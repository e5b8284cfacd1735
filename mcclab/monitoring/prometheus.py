"""Prometheus for a run: configuration and targets as data, the command line, the HTTP API.

One scrape configuration serves both ways of running Prometheus:

* **per run** (the default): the runner starts ``/usr/bin/prometheus`` in the
  root namespace, in its own process group, tracked in the lab state, listening
  on 127.0.0.1 only, with its configuration in the lab's directory and its TSDB
  on disk (``mcclab.monitoring.storage``);
* **the machine's service** (the VM, provisioned by ``ansible/roles/grafana``):
  when ``/etc/mcclab/prometheus.json`` names a Prometheus that answers, the
  runner only drops the run's target file, ``<lab-id>.json``, into the
  service's ``file_sd`` directory and removes it at the end of the run (a file
  left by a crashed run is swept at the next run's start; it only makes the
  service scrape endpoints that are gone).

Either way there is one target group per endpoint, whose labels (run,
experiment, node, flow, protocol, role, component) become target labels.
``honor_labels`` keeps the agents' and exporter's own node/flow/protocol
labels, and metric relabelling fills ``flow``/``protocol`` with ``none`` (and
``node`` with ``root``) where a series has none, so every stored series
carries the five common labels. The same per-run configuration is kept in
the results (``logs/monitoring/prometheus.yml``).
"""

from __future__ import annotations

import json
import socket
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcclab.monitoring import metric_names as mn

PROMETHEUS_BIN = "/usr/bin/prometheus"
SERVICE_MARKER = Path("/etc/mcclab/prometheus.json")
SCRAPE_INTERVAL = "1s"
RUN_RETENTION = "2d"  # a per-run TSDB is removed at the run's end; this only bounds it
# The head block keeps every sample in memory until it spans 1.5 block lengths, then
# the oldest block length is cut to an on-disk block (Prometheus's default: 2 h, so a
# run's head grew with the run). Two minutes is the shortest block whose chunks still
# fill to Prometheus's 120 samples at the 1-s scrape interval (a shorter one cuts every
# chunk short and compresses worse); the head then holds at most 3 min of samples
# whatever the run's length. The largest block is left at Prometheus's default (10 %
# of the retention), so on-disk blocks keep merging (2 m, 6 m, 18 m, ...) and their
# number (each keeps its files open) grows slowly with the run, capped by the retention.
RUN_BLOCK = "2m"
# Prometheus preallocates each block's chunk file at the segment size (512 MiB by
# default) and truncates it once the block is written: with 2-min blocks every
# compaction took 512 MiB for a moment, on disk, or in RAM where the TSDB root is on
# tmpfs (MCCLAB_TSDB_ROOT may point there). 64 MiB keeps that below Prometheus's own
# resident size (~100 MiB in the soak), and a block of the largest length still fits
# in a few files.
RUN_CHUNK_SEGMENT = "64MB"
DEFAULT_PORT = 9090


@dataclass(frozen=True)
class Target:
    """One scrape endpoint and its target labels."""

    address: str  # host:port
    labels: dict[str, str]


def scrape_config(targets_glob: str | None = None, targets: list[Target] | None = None,
                  interval: str = SCRAPE_INTERVAL) -> dict[str, Any]:
    """prometheus.yml as data: one job, its targets static or read from target files.

    A per-run Prometheus gets its ``targets`` as static configuration: it
    scrapes them from its first second. The machine's service reads
    ``targets_glob`` (file_sd), because runs come and go while it keeps running;
    it applies a new file within about 5 s (Prometheus's discovery batching).
    ``ansible/roles/grafana/templates/prometheus.yml.j2`` renders the service's
    configuration (a unit test compares the two).
    """
    fill = [{"source_labels": [label], "regex": "", "target_label": label,
             "replacement": mn.NO_FLOW if label != "node" else mn.ROOT_NODE}
            for label in ("node", "flow", "protocol")]
    job: dict[str, Any] = {"job_name": mn.JOB, "honor_labels": True}
    if targets is not None:
        job["static_configs"] = targets_document(targets)
    else:
        job["file_sd_configs"] = [{"files": [targets_glob], "refresh_interval": "5s"}]
    job["metric_relabel_configs"] = fill
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": interval},
        "scrape_configs": [job],
    }


def targets_glob(directory: Path) -> str:
    """The file_sd pattern for a directory of target files (file_sd allows a wildcard in
    the last path component only)."""
    return str(directory / "*.json")


def targets_path(directory: Path, lab_id: str) -> Path:
    """The target file of one lab."""
    return directory / f"{lab_id}.json"


def sweep_targets(directory: Path, live_labs: set[str]) -> list[Path]:
    """Remove target files of labs that no longer exist (left by a crashed runner)."""
    removed = []
    for path in directory.glob("*.json") if directory.is_dir() else []:
        if path.stem not in live_labs:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def targets_document(targets: list[Target]) -> list[dict[str, Any]]:
    """The file_sd JSON document for a list of targets."""
    return [{"targets": [t.address], "labels": dict(sorted(t.labels.items()))} for t in targets]


def argv(config: Path, data: Path, listen: str, retention: str = RUN_RETENTION,
         binary: str = PROMETHEUS_BIN, block: str | None = RUN_BLOCK) -> list[str]:
    """A per-run Prometheus: loopback only, its own TSDB, a bounded retention, and
    short head blocks (``block``; None keeps Prometheus's 2 h blocks and 512-MiB chunk
    segments), so the samples it holds in memory stay bounded over a long run. The
    flags are hidden in ``--help`` but real: the smallest block length sets how much
    the in-memory head holds, the segment size what a compaction preallocates."""
    out = [binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
           f"--storage.tsdb.retention.time={retention}", f"--web.listen-address={listen}",
           "--log.level=warn"]
    if block is not None:
        out += [f"--storage.tsdb.min-block-duration={block}",
                f"--storage.tsdb.max-block-chunk-segment-size={RUN_CHUNK_SEGMENT}"]
    return out


def free_port(host: str, preferred: int) -> int:
    """``preferred`` if nothing listens there on ``host``, else a free port the kernel picks."""
    for port in (preferred, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # As the servers do: connections in TIME_WAIT from a previous run's
            # scrapes must not make the port look taken.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError(f"no free port on {host}")


@dataclass(frozen=True)
class Service:
    """A Prometheus that runs as a service of this machine (the VM's)."""

    url: str
    targets_dir: Path


def find_service(marker: Path = SERVICE_MARKER, timeout: float = 1.0) -> Service | None:
    """The machine's Prometheus service, if it is provisioned and ready now."""
    try:
        data = json.loads(marker.read_text())
        service = Service(data["url"].rstrip("/"), Path(data["targets_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return service if ready(service.url, timeout) else None


def ready(url: str, timeout: float = 1.0) -> bool:
    """True when Prometheus at ``url`` answers its readiness endpoint."""
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def api(url: str, path: str, params: dict[str, str] | list[tuple[str, str]],
        timeout: float = 30.0) -> Any:
    """GET an HTTP API endpoint (``/api/v1/...``) and return its ``data``."""
    query = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}{path}?{query}", timeout=timeout) as resp:
        body = json.loads(resp.read())
    if body.get("status") != "success":
        raise RuntimeError(f"Prometheus {path}: {body.get('error', body)}")
    return body["data"]


def query_range(url: str, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
    """A range query's result (a list of series with ``metric`` and ``values``)."""
    data = api(url, "/api/v1/query_range", {"query": expr, "start": f"{start:.3f}",
                                             "end": f"{end:.3f}", "step": f"{step:g}"})
    return data["result"]


def series(url: str, selector: str, start: float, end: float) -> list[dict[str, str]]:
    """The label sets of every series matching ``selector`` in [start, end] (no samples)."""
    return api(url, "/api/v1/series", [("match[]", selector), ("start", f"{start:.3f}"),
                                       ("end", f"{end:.3f}")])


def with_name(selector: str, name: str) -> str:
    """``selector`` (``{label="value",...}``) narrowed to one metric name."""
    inner = selector.strip()[1:-1].strip()
    matcher = f'__name__="{name}"'
    return "{" + (f"{matcher},{inner}" if inner else matcher) + "}"


def raw_samples(url: str, selector: str, start: float, end: float) -> list[dict]:
    """Every raw sample of the series matching ``selector`` in [start, end].

    A range-vector selector evaluated at ``end`` returns the stored samples
    themselves (not a resampled grid), so an export is exact.
    """
    seconds = max(1, int(end - start + 1.999))
    data = api(url, "/api/v1/query", {"query": f"{selector}[{seconds}s]", "time": f"{end:.3f}"})
    return data["result"]
