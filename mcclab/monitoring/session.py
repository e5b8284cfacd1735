"""One run's monitoring, from start to stop: what the runner calls.

The runner starts monitoring in three steps (:class:`MonitoringStart`), so that
the slow part overlaps the lab's bring-up: Prometheus applies targets in
batches on a 5-s clock that starts with it, and its first scrape must be in
before the first flow starts.

1. ``begin``, as soon as the lab's record exists (the bring-up's first
   progress report): where the machine runs no Prometheus service, checks and
   prepares the run's own database folder on disk (``mcclab.monitoring.storage``),
   before any process starts (an unusable folder is reported and nothing is
   started), then starts a Prometheus of the run's own on 127.0.0.1, with no
   target yet;
2. ``exporter``, once the lab is up and the flows' launch plan is known: lists
   the run's scrape targets (``mcclab.monitoring.targets``) and writes them as
   a target file, for the run's own Prometheus or into the service's file_sd
   directory; starts the router and link exporter in the root namespace, bound
   to the control gateway address only (strict ``rp_filter`` on the root's lab
   bridges, set by ``mcclab.net.node_config`` for every lab, keeps experiment
   addresses away from it); where the lab's nodes are machines of their own
   (its ``monitoring_hosts``, :class:`RemoteSites`), their routers are read by
   exporters on those machines, every endpoint is forwarded to this machine's
   loopback, and the exporter here listens on loopback too;
3. ``finish``, right before the first flow: waits until the exporter and
   Prometheus answer and the exporter has been scraped once, and returns a
   :class:`Monitoring` whose ``url`` is the Grafana dashboard of the run (or
   Prometheus's graph page where there is no Grafana).

``start_monitoring`` takes the three steps at once. The files and command lines
come from ``mcclab.monitoring.plan`` (data), and ``mcclab.monitoring.lifecycle``
writes and starts them. ``Monitoring.stop`` (called before teardown, whatever
step the run got to) copies every series of the run into the results folder
(``mcclab.monitoring.export``), stops what was started and removes the run's
database. Monitoring never fails a run: a part that cannot start is reported in
``notes`` and left out.
"""

from __future__ import annotations

import contextlib
import enum
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
        # Only a start that got as far as the first scrape has series of the run: one
        # stopped during the bring-up has none to keep.
        source = self.prometheus_url if self.url is not None else None
        try:
            if source:
                # One more scrape interval, so the last second of the run is stored.
                time.sleep(1.2)
                ended = time.time()
            before_export()
            if source:
                n = export.copy_series(source, self.run, self.started - 1, ended,
                                       run_dir)
                if n == 0:
                    self.notes.append("Prometheus stored no series for this run")
        except Exception as exc:  # noqa: BLE001 - the run's own data matter more
            self.notes.append(f"export of the series failed: {type(exc).__name__}: {exc}")
        forgotten = False
        for proc in self.processes:
            kill_group(proc)
            if self.state is not None and proc in self.state.processes:
                self.state.processes.remove(proc)
                forgotten = True
        self.processes.clear()
        if self.tsdb is not None:
            self.tsdb_bytes = storage.disk_usage(self.tsdb)
            storage.release(self.state, self.tsdb)
        if self.targets_file is not None:
            self.targets_file.unlink(missing_ok=True)
        if self.state is not None and forgotten:
            with contextlib.suppress(OSError):
                self.state.save()
        with contextlib.suppress(OSError):
            export.keep_configs(run_dir, self.files)
            (run_dir / "logs" / STATE_FILE).write_text(json.dumps(self.record(ended), indent=1))


def start_monitoring(lab: Lab, run_dir: Path, experiment: Any, launches: LaunchPlan
                     ) -> Monitoring:
    """Start monitoring for a run in one go (see the module docstring); never raises for
    its own parts. The runner takes the steps apart (:class:`MonitoringStart`)."""
    start = MonitoringStart(lab, run_dir, experiment)
    start.begin()
    start.exporter(launches)
    return start.finish()


class Step(enum.Enum):
    """How far a :class:`MonitoringStart` got: each step after the one before it, and
    FAILED, from any of them, for good."""

    NEW = "new"  # nothing taken yet
    BEGUN = "begun"  # begin taken (Prometheus may run)
    EXPORTER = "exporter"  # targets written, exporter started
    FINISHED = "finished"  # finish taken
    FAILED = "failed"  # a step failed: what it started was stopped, later steps do nothing


class MonitoringStart:
    """A run's monitoring, started in three steps so that its slow part (Prometheus's
    start and the 5-s batch that applies the targets) overlaps the lab's bring-up.

    1. :meth:`begin` needs only the lab's record (the state, its folder, its cgroup):
       it settles where the series go and starts the run's own Prometheus, with no
       target yet. The runner calls it as soon as the bring-up reports progress.
    2. :meth:`exporter` needs the launch plan and the lab up (the routers' namespaces,
       the control gateway's address): it writes the targets and starts the exporter.
    3. :meth:`finish` waits for both to answer and for the first scrape of the exporter.

    Nothing waits before :meth:`finish`. Each step runs once, in order (``step``);
    :meth:`exporter` begins first if :meth:`begin` has not (a lab that reports no
    progress). A step never raises for monitoring's own parts: the failure goes into
    ``mon.notes``, what was started is stopped, and the later steps do nothing. A
    BaseException (the runner's Interrupted) passes; ``mon.stop`` then ends whatever
    was started.

    ``lab`` may follow (:meth:`attach`): the runner makes this object first, so that
    the lab it then makes can report its progress to :meth:`begin`.
    """

    def __init__(self, lab: Lab | None, run_dir: Path, experiment: Any) -> None:
        self.lab: Lab | None = None
        self.experiment = experiment
        self.mon = Monitoring(run=run_dir.name,
                              experiment=str(getattr(experiment, "name", "")),
                              started=time.time(),
                              duration=float(getattr(experiment, "duration", 0.0)))
        self.step = Step.NEW
        if lab is not None:
            self.attach(lab)
        self._gateway = LOOPBACK
        self._service: prom.Service | None = None
        # What finish() waits for: each started process's readiness, in order.
        self._waits: list[tuple[Callable[[], bool], TrackedProcess, plans.ProcessPlan]] = []

    def attach(self, lab: Lab) -> None:
        """Hand over the run's lab (before its bring-up: :meth:`begin` needs its record)."""
        self.lab = lab
        self.mon.state = lab.state

    @property
    def begun(self) -> bool:
        """The first step was taken: something may have started."""
        return self.step is not Step.NEW

    def _the_lab(self) -> Lab:
        if self.lab is None:
            raise RuntimeError("monitoring was given no lab")
        return self.lab

    def begin(self) -> None:
        """Settle where the series go; start the run's own Prometheus (not waited for).

        Does nothing until the lab's record exists (what starts here must be recorded
        in it, so that ``mcclab clean`` finds it); :meth:`exporter` then begins.
        """
        state = getattr(self.lab, "state", None)
        if self.step is Step.NEW and state is not None and state.path.is_dir():
            self._begin_now()

    def _begin_now(self) -> None:
        self.step = Step.BEGUN
        self._guard(self._begin)

    def exporter(self, launches: LaunchPlan) -> None:
        """Write the run's targets and start the exporter (not waited for)."""
        if self.step is Step.NEW:
            self._begin_now()  # the lab is up: its record exists
        if self.step is not Step.BEGUN:
            return  # taken already, or a step failed
        self.step = Step.EXPORTER
        self._guard(lambda: self._exporter(launches))

    def finish(self) -> Monitoring:
        """Wait until everything started answers and the exporter was scraped once."""
        if self.step in (Step.NEW, Step.BEGUN, Step.EXPORTER):
            exported = self.step is Step.EXPORTER
            # Taken before the wait: an Interrupted in it leaves nothing to take again.
            self.step = Step.FINISHED
            self._guard(lambda: self._finish(exported))
        return self.mon

    def _guard(self, part: Callable[[], None]) -> None:
        """Run ``part`` of a step; on its failure note why and stop what was started."""
        mon = self.mon
        try:
            part()
        except Exception as exc:  # noqa: BLE001 - monitoring must not fail the experiment
            self.step = Step.FAILED
            mon.notes.append(str(exc) if isinstance(exc, storage.StorageError)
                             else f"{type(exc).__name__}: {exc}")
            for proc in mon.processes:
                kill_group(proc)
            mon.processes.clear()
            mon.prometheus_url = mon.url = None

    def _begin(self) -> None:
        lab, mon = self._the_lab(), self.mon
        hosts: RemoteSites | None = getattr(lab, "monitoring_hosts", None)
        # With the nodes on other machines this one has no control-network address: its
        # exporter listens on loopback, where their endpoints are forwarded to.
        self._gateway = LOOPBACK if hosts is not None else str(lab.plan.control_gateway.ip)
        state = lab.state
        # Where the series go is settled before anything starts: the machine's service,
        # or a Prometheus of our own whose database folder must be usable.
        self._service = prom.find_service()
        if self._service is not None:
            mon.service = True
            prom.sweep_targets(self._service.targets_dir, {s.lab_id for s in all_states()})
            mon.prometheus_url = self._service.url
            (state.path / "monitoring").mkdir(parents=True, exist_ok=True)
            return
        tsdb = mon.tsdb = storage.prepare(state, storage.tsdb_root(),
                                          {s.lab_id for s in all_states()})
        work = state.path / "monitoring"
        work.mkdir(parents=True, exist_ok=True)
        listen = f"127.0.0.1:{prom.free_port('127.0.0.1', prom.DEFAULT_PORT)}"
        own = plans.prometheus_plan(work, state.path / "logs", tsdb, listen)
        proc = lifecycle.launch(state, own, mon.processes)
        self._waits.append((lambda: prom.ready(own.url), proc, own))
        mon.prometheus_url = own.url
        mon.files.update(own.keep)

    def _exporter(self, launches: LaunchPlan) -> None:
        lab, mon, gateway = self._the_lab(), self.mon, self._gateway
        state = lab.state
        work = state.path / "monitoring"
        hosts: RemoteSites | None = getattr(lab, "monitoring_hosts", None)
        protocols = flow_protocols(self.experiment)
        port = prom.free_port(gateway, EXPORTER_PORT)
        target_list = targets_for(mon.run, mon.experiment, launches, protocols,
                                  f"{gateway}:{port}")
        routers, sources = lab.topo.names("router"), iperf_sources(launches, protocols)
        if hosts is not None:
            target_list, sources = hosts.start(target_list, sources, mon.processes)
            routers = []  # each read by an exporter on its own machine
        exporter = plans.exporter_plan(
            work, state.path / "logs", state.path, lab.topo.model_dump(mode="json"),
            lab.link_backend, routers, sources, gateway, port, sys.executable)
        # Each GET of /metrics is a full scrape (commands in every router's and link's
        # namespace): under emulation one took longer than the 1-s answer timeout,
        # so the exporter never looked ready. The answer timeout is scaled too.
        probe_timeout = scaled(1.0)
        proc = lifecycle.launch(state, exporter, mon.processes)
        # Waited for first: a dead exporter is the likelier failure, and says more.
        self._waits.insert(0, (lambda: lifecycle.answers(exporter.url, probe_timeout), proc,
                               exporter))
        mon.files.update(exporter.keep)
        mon.exporter_url = exporter.url
        # Prometheus applies the file at its next 5-s batch; the exporter's target
        # fails (up 0) until the exporter listens, which finish() waits for.
        if self._service is None:
            own = plans.run_targets(work, target_list)
            lifecycle.write_atomically(own.path, own.text)
        else:
            drop = plans.service_plan(self._service, state.lab_id, target_list).targets
            mon.targets_file = drop.path
            lifecycle.write_atomically(drop.path, drop.text)
            mon.files.update(targets=drop.path)

    def _finish(self, exported: bool) -> None:
        mon = self.mon
        if not exported or mon.prometheus_url is None:
            raise RuntimeError("the run's targets were never written")
        for ready, proc, plan in self._waits:
            lifecycle.wait_ready(ready, [proc], plan.title, plan.log)
        # Waiting for the first scrape here, before any flow starts, keeps the run's
        # first seconds in the series.
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
            mon.url = grafana.prometheus_url(mon.prometheus_url, mon.run, mon.started - 5,
                                             end)
        work = self._the_lab().state.path / "monitoring"
        (work / STATE_FILE).write_text(json.dumps(mon.record(), indent=1))
