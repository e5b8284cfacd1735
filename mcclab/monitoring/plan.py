"""The files and processes of a run's monitoring, as data: nothing here writes or starts.

A run's monitoring is at most two processes, each planned as a
:class:`ProcessPlan`: the files written before it starts (path -> text), its
command line, its log, the URL that answers once it is up, and the files kept
in the results folder. ``mcclab.monitoring.lifecycle`` carries a plan out. Where
the machine runs its own Prometheus service, the run only drops a target file
into that service's ``file_sd`` directory (:class:`ServicePlan`).

Kept as data so the unit tests read exactly what would be written and run,
without root, a lab or a Prometheus binary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mcclab.commands import Cmd
from mcclab.monitoring import exporter
from mcclab.monitoring import prometheus as prom
from mcclab.monitoring.exporter import ExporterConfig, IperfSource

EXPORTER_WHAT = "monitoring exporter"  # their names in the lab record (mcclab clean lists them)
PROMETHEUS_WHAT = "monitoring prometheus"


@dataclass(frozen=True)
class ProcessPlan:
    """One monitoring process: what to write, what to run, where it answers."""

    what: str  # its name in the lab record
    title: str  # its name in messages
    cmd: Cmd
    log: Path
    url: str  # answers once the process is ready
    files: dict[Path, str] = field(default_factory=dict)  # written before it starts
    keep: dict[str, Path] = field(default_factory=dict)  # kept in logs/monitoring/ by name


@dataclass(frozen=True)
class ServicePlan:
    """The run's part in the machine's Prometheus service: one target file."""

    url: str
    targets_file: Path
    text: str


def targets_text(targets: list[prom.Target]) -> str:
    """The file_sd JSON document of ``targets``, as written to disk."""
    return json.dumps(prom.targets_document(targets), indent=1)


def exporter_plan(work: Path, logs: Path, lab_dir: Path, topology: dict[str, Any],
                  link_backend: str, routers: list[str], iperf: list[IperfSource],
                  listen: str, port: int, python: str) -> ProcessPlan:
    """The router and link exporter, listening on ``listen:port`` (the control gateway).

    It reads the lab's topology from ``work/topology.yaml`` (the resolved model
    the lab was built from) and everything else from ``work/exporter.json``.
    """
    topology_file = work / "topology.yaml"
    config_file = work / "exporter.json"
    config = ExporterConfig(listen=listen, port=port, lab_dir=str(lab_dir),
                            topology=str(topology_file), link_backend=link_backend,
                            routers=list(routers), iperf=list(iperf))
    return ProcessPlan(
        what=EXPORTER_WHAT, title="the router and link exporter",
        cmd=Cmd(tuple(exporter.argv(python, config_file))),
        log=logs / "monitoring-exporter.log", url=f"http://{listen}:{port}/metrics",
        files={topology_file: yaml.safe_dump(topology, sort_keys=False),
               config_file: config.to_json()},
        keep={"exporter": config_file})


def prometheus_plan(work: Path, logs: Path, tsdb: Path, targets: list[prom.Target],
                    listen: str, binary: str = prom.PROMETHEUS_BIN) -> ProcessPlan:
    """A Prometheus of the run's own: static targets, its database at ``tsdb``.

    Static targets are scraped from Prometheus's first second (file_sd would wait
    for its 5-s discovery batching). ``targets.json`` is written as well, for the
    record: the results keep it with ``prometheus.yml``.
    """
    config = work / "prometheus.yml"
    targets_file = work / "targets.json"
    return ProcessPlan(
        what=PROMETHEUS_WHAT, title="Prometheus",
        cmd=Cmd(tuple(prom.argv(config, tsdb, listen, binary=binary))),
        log=logs / "monitoring-prometheus.log", url=f"http://{listen}",
        files={targets_file: targets_text(targets),
               config: yaml.safe_dump(prom.scrape_config(targets=targets), sort_keys=False)},
        keep={"prometheus": config, "targets": targets_file})


def service_plan(service: prom.Service, lab_id: str, targets: list[prom.Target]
                 ) -> ServicePlan:
    """The lab's target file in the service's file_sd directory (removed at the run's end)."""
    return ServicePlan(service.url, prom.targets_path(service.targets_dir, lab_id),
                       targets_text(targets))
