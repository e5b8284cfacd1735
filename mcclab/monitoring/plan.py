"""The files and processes of a run's monitoring, as data: nothing here writes or starts.

A run's monitoring is at most two processes, each planned as a
:class:`ProcessPlan`: the files written before it starts (path -> text), its
command line, its log, the URL that answers once it is up, and the files kept
in the results folder. ``mcclab.monitoring.lifecycle`` carries a plan out. The
run's targets reach Prometheus as a target file (file_sd, :class:`TargetsFile`),
written once they are known: the run's own Prometheus reads one in its work
folder; where the machine runs its own Prometheus service, the run only drops
one into that service's ``file_sd`` directory (:class:`ServicePlan`).

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
TARGETS_FILE = "targets.json"  # the run's own Prometheus's target file, in its work folder


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
class TargetsFile:
    """A target file for Prometheus's file_sd: where it goes and what it holds."""

    path: Path
    text: str


@dataclass(frozen=True)
class ServicePlan:
    """The run's part in the machine's Prometheus service: one target file."""

    url: str
    targets: TargetsFile


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


def prometheus_plan(work: Path, logs: Path, tsdb: Path, listen: str,
                    binary: str = prom.PROMETHEUS_BIN) -> ProcessPlan:
    """A Prometheus of the run's own, its database at ``tsdb``, its targets read from
    ``work/targets.json`` (file_sd), which it starts with empty.

    It can start before the run's targets are known (they follow from the launch
    plan, made once the lab is up). Prometheus applies targets, static ones too, in
    batches on a 5-s clock that starts with it: started early, it has the batch that
    takes the targets (:func:`run_targets`) due sooner after they are written than a
    Prometheus started then would. The results keep both files.
    """
    config = work / "prometheus.yml"
    targets_file = work / TARGETS_FILE
    return ProcessPlan(
        what=PROMETHEUS_WHAT, title="Prometheus",
        cmd=Cmd(tuple(prom.argv(config, tsdb, listen, binary=binary))),
        log=logs / "monitoring-prometheus.log", url=f"http://{listen}",
        files={targets_file: targets_text([]),
               config: yaml.safe_dump(prom.scrape_config(targets_glob=str(targets_file)),
                                      sort_keys=False)},
        keep={"prometheus": config, "targets": targets_file})


def run_targets(work: Path, targets: list[prom.Target]) -> TargetsFile:
    """The targets of the run's own Prometheus (:func:`prometheus_plan`), as it reads them."""
    return TargetsFile(work / TARGETS_FILE, targets_text(targets))


def service_plan(service: prom.Service, lab_id: str, targets: list[prom.Target]
                 ) -> ServicePlan:
    """The lab's target file in the service's file_sd directory (removed at the run's end)."""
    return ServicePlan(service.url, TargetsFile(prom.targets_path(service.targets_dir, lab_id),
                                                targets_text(targets)))
