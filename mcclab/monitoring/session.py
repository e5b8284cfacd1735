"""One run's monitoring, from start to stop: what the runner calls.

``start_monitoring`` is called by the runner once the lab is up and the flows'
launch plan is known, before any flow starts. It

1. lists the run's scrape targets (``mcclab.monitoring.targets``);
2. where the machine runs no Prometheus service, checks and prepares the
   run's own database folder on disk (``mcclab.monitoring.storage``), before
   any process starts: an unusable folder is reported and nothing is started;
3. starts the router and link exporter in the root namespace, bound to the
   control gateway address only (strict ``rp_filter`` on the root's lab
   bridges, set by ``mcclab.net.node_config`` for every lab, keeps experiment
   addresses away from it); where the lab's nodes are machines of their own
   (its ``monitoring_hosts``, :class:`RemoteSites`), their routers are read by
   exporters on those machines, every endpoint is forwarded to this machine's
   loopback, and the exporter here listens on loopback too;
4. starts a Prometheus of the run's own on 127.0.0.1 with the targets as
   static configuration, or drops them into the service's file_sd directory;
5. returns a :class:`Monitoring` whose ``url`` is the Grafana dashboard of the
   run (or Prometheus's graph page where there is no Grafana).

The files and command lines come from ``mcclab.monitoring.plan`` (data), and
``mcclab.monitoring.lifecycle`` writes and starts them. ``Monitoring.stop``
(called before teardown) copies every series of the run into the results
folder (``mcclab.monitoring.export``), stops what was started and removes the
run's database. Monitoring never fails a run: a part that cannot start is
reported in ``notes`` and left out.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mcclab.monitoring import export, grafana, lifecycle, storage
from mcclab.monitoring import plan as plans
from mcclab.monitoring import prometheus as prom
from mcclab.monitoring.exporter import IperfSource
from mcclab.monitoring.targets import flow_protocols, iperf_sources, targets_for
from mcclab.slowdown import scaled
from mcclab.state import LabState, TrackedProcess, all_states, kill_group

if TYPE_CHECKING:
    from mcclab.experiment.launch import LaunchPlan
    from mcclab.lab import Lab

EXPORTER_PORT = 9463
FIRST_SCRAPE_TIMEOUT = 12.0
# Flows run this long past the end (runner.TAIL); the dashboard link covers it.
TAIL = 2.0
STATE_FILE = "monitoring.json"  # in <lab>/monitoring/ while running, in logs/ afterwards
LOOPBACK = "127.0.0.1"


class RemoteSites(Protocol):
    """A lab whose nodes are machines of their own (``mcclab.testbed.monitoring``), as
    its ``monitoring_hosts`` attribute; a lab without one has every node here."""

    def start(self, targets: list[prom.Target], sources: list[IperfSource],
              started: list[TrackedProcess]) -> tuple[list[prom.Target], list[IperfSource]]:
        """Start the exporters on the nodes' machines (their processes into ``started``)
        and make every node's endpoint reachable on this machine's loopback; return the
        targets to scrape and the sources left to the exporter here."""
        ...


@dataclass
class Monitoring:
    """A running monitoring setup; ``url`` is what the runner announces."""

    url: str | None = None
    run: str = ""
    experiment: str = ""
    started: float = 0.0  # Unix time
    duration: float = 0.0
    prometheus_url: str | None = None
    exporter_url: str | None = None
    grafana_base: str | None = None
    service: bool = False  # the machine's Prometheus service is used
    state: LabState | None = None
    processes: list[TrackedProcess] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)  # kept in logs/monitoring/
    targets_file: Path | None = None  # service mode: removed at stop
    tsdb: Path | None = None  # the run's own Prometheus's database: removed at stop
    tsdb_bytes: int | None = None  # its size on disk once Prometheus stopped
    notes: list[str] = field(default_factory=list)

    @property
    def announcement(self) -> str:
        """One line for the user: where to watch the run live, or why monitoring is off."""
        if self.url and self.grafana_base:
            return f"live dashboards: {self.url}"
        if self.url:
            return f"live metrics (Prometheus; no Grafana on this machine): {self.url}"
        return "live monitoring unavailable: " + ("; ".join(self.notes) or "not started")

    def record(self, ended: float | None = None) -> dict[str, Any]:
        """What monitoring.json keeps about this run's monitoring."""
        rec: dict[str, Any] = {
            "run": self.run, "experiment": self.experiment, "started": self.started,
            "ended": ended, "prometheus": self.prometheus_url, "service": self.service,
            "grafana": None, "notes": self.notes, "exporter": self.exporter_url,
            "tsdb": None if self.tsdb is None else str(self.tsdb),
            "tsdb_bytes": self.tsdb_bytes,
        }
        if self.grafana_base:
            rec["grafana"] = grafana.dashboard_url(self.grafana_base, self.run, self.started - 5,
                                                   ended, refresh=None)
        return rec

    def stop(self, run_dir: Path, before_export: Callable[[], None] = lambda: None) -> None:
        """Copy the run's series into ``run_dir``, stop what was started, remove the
        run's database; never raises.

        ``before_export`` runs once the last scrape is in (the runner stops its flows
        there, so a long export does not compete with them for the CPU).
        """
        ended = time.time()
        try:
            if self.prometheus_url:
                # One more scrape interval, so the last second of the run is stored.
                time.sleep(1.2)
                ended = time.time()
            before_export()
            if self.prometheus_url:
                n = export.copy_series(self.prometheus_url, self.run, self.started - 1, ended,
                                       run_dir)
                if n == 0:
                    self.notes.append("Prometheus stored no series for this run")
        except Exception as exc:  # noqa: BLE001 - the run's own data matter more
            self.notes.append(f"export of the series failed: {type(exc).__name__}: {exc}")
        for proc in self.processes:
            kill_group(proc)
            if self.state is not None and proc in self.state.processes:
                self.state.processes.remove(proc)
        self.processes.clear()
        if self.tsdb is not None:
            self.tsdb_bytes = storage.disk_usage(self.tsdb)
            storage.release(self.state, self.tsdb)
        if self.targets_file is not None:
            self.targets_file.unlink(missing_ok=True)
        if self.state is not None:
            with contextlib.suppress(OSError):
                self.state.save()
        with contextlib.suppress(OSError):
            export.keep_configs(run_dir, self.files)
            (run_dir / "logs" / STATE_FILE).write_text(json.dumps(self.record(ended), indent=1))


def start_monitoring(lab: Lab, run_dir: Path, experiment: Any, launches: LaunchPlan
                     ) -> Monitoring:
    """Start monitoring for a run (see the module docstring); never raises for its own parts."""
    mon = Monitoring(run=run_dir.name, experiment=str(getattr(experiment, "name", "")),
                     started=time.time(), duration=float(getattr(experiment, "duration", 0.0)),
                     state=lab.state)
    try:
        _start(lab, mon, experiment, launches)
    except Exception as exc:  # noqa: BLE001 - monitoring must not fail the experiment
        mon.notes.append(str(exc) if isinstance(exc, storage.StorageError)
                         else f"{type(exc).__name__}: {exc}")
        for proc in mon.processes:
            kill_group(proc)
        mon.processes.clear()
        mon.prometheus_url = mon.url = None
    return mon


def _start(lab: Lab, mon: Monitoring, experiment: Any, launches: LaunchPlan) -> None:
    """The steps of start_monitoring; raises on the first that fails."""
    state = lab.state
    hosts: RemoteSites | None = getattr(lab, "monitoring_hosts", None)
    # With the nodes on other machines this one has no control-network address: its
    # exporter listens on loopback, where their endpoints are forwarded to.
    gateway = LOOPBACK if hosts is not None else str(lab.plan.control_gateway.ip)
    work = state.path / "monitoring"
    logs = state.path / "logs"
    protocols = flow_protocols(experiment)
    port = prom.free_port(gateway, EXPORTER_PORT)
    target_list = targets_for(mon.run, mon.experiment, launches, protocols,
                              f"{gateway}:{port}")

    # Where the series go is settled before anything starts: the machine's service,
    # or a Prometheus of our own whose database folder must be usable.
    service = prom.find_service()
    if service is None:
        tsdb = storage.prepare(state, storage.tsdb_root(), {s.lab_id for s in all_states()})
        mon.tsdb = tsdb
    work.mkdir(parents=True, exist_ok=True)

    routers, sources = lab.topo.names("router"), iperf_sources(launches, protocols)
    if hosts is not None:
        target_list, sources = hosts.start(target_list, sources, mon.processes)
        routers = []  # each read by an exporter on its own machine
    exporter = plans.exporter_plan(
        work, logs, state.path, lab.topo.model_dump(mode="json"), lab.link_backend,
        routers, sources, gateway, port, sys.executable)
    # Each GET of /metrics is a full scrape (commands in every router's and link's
    # namespace): under emulation one took longer than the 1-s answer timeout,
    # so the exporter never looked ready. The answer timeout is scaled too.
    probe_timeout = scaled(1.0)
    lifecycle.start(state, exporter, lambda: lifecycle.answers(exporter.url, probe_timeout),
                    mon.processes)
    mon.files.update(exporter.keep)
    mon.exporter_url = exporter.url

    if service is None:
        listen = f"127.0.0.1:{prom.free_port('127.0.0.1', prom.DEFAULT_PORT)}"
        own = plans.prometheus_plan(work, logs, tsdb, target_list, listen)
        lifecycle.start(state, own, lambda: prom.ready(own.url), mon.processes)
        mon.prometheus_url = own.url
        mon.files.update(own.keep)
    else:
        mon.service = True
        prom.sweep_targets(service.targets_dir, {s.lab_id for s in all_states()})
        drop = plans.service_plan(service, state.lab_id, target_list)
        mon.targets_file = drop.targets_file
        lifecycle.write_atomically(drop.targets_file, drop.text)
        mon.prometheus_url = drop.url
        mon.files.update(targets=drop.targets_file)

    # Prometheus applies new targets in batches every 5 s (static ones too), so its
    # first scrape comes up to 5 s after it starts. Waiting for it here, before any
    # flow starts, keeps the run's first seconds in the series.
    first_scrape = scaled(FIRST_SCRAPE_TIMEOUT)
    if not lifecycle.first_scrape(mon.prometheus_url, mon.run, first_scrape):
        mon.notes.append(f"no scrape within {first_scrape:g}s of the start; "
                         "the first seconds may be missing")
    mon.started = time.time()
    mon.grafana_base = grafana.grafana_base()
    end = mon.started + mon.duration + TAIL
    if mon.grafana_base:
        mon.url = grafana.dashboard_url(mon.grafana_base, mon.run, mon.started - 5, end)
    else:
        mon.url = grafana.prometheus_url(mon.prometheus_url, mon.run, mon.started - 5, end)
    (work / STATE_FILE).write_text(json.dumps(mon.record(), indent=1))
