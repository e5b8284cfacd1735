"""Live monitoring of a run: Prometheus scraping the agents and the router and link exporter.

``start_monitoring`` is called by the runner once the lab is up and the
flows' launch plan is known, before any flow starts. It

1. closes the root namespace's control-side interfaces to packets whose source
   is not reachable through them (``rp_filter``), so no experiment address can
   reach the gateway's ports (strict rp_filter on the root's lab bridges, set by
   ``mcclab.net.node_config`` for every lab);
2. starts the router and link exporter (``mcclab.monitoring.exporter``) in the
   root namespace, bound to the control gateway address only;
3. lists the run's scrape targets (every agent's ``--metrics`` endpoint and
   the exporter, labelled with run, experiment, node, flow, protocol, role) and
   either starts a Prometheus of its own on 127.0.0.1 with them as static
   targets, or hands them to the machine's Prometheus service (a file in its
   file_sd directory, removed at stop; files of labs that no longer exist are
   swept at the next start);
4. returns a :class:`Monitoring` whose ``url`` is the Grafana dashboard of the
   run (or Prometheus's graph page where there is no Grafana).

Every process is started with ``mcclab.processes.spawn`` in its own process
group and recorded in the lab state, so ``mcclab clean`` removes it after a
crash. ``Monitoring.stop`` (called before teardown) exports every series of
the run to ``tables/metrics.csv.gz`` and stops what it started. Monitoring never
fails a run: a part that cannot start is reported and left out.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from mcclab.commands import Cmd
from mcclab.monitoring import export, grafana
from mcclab.monitoring import metric_names as mn
from mcclab.monitoring import prometheus as prom
from mcclab.processes import spawn
from mcclab.slowdown import ENV as SCALE_ENV
from mcclab.slowdown import scaled
from mcclab.state import LabState, TrackedProcess, all_states, kill_group

if TYPE_CHECKING:
    from mcclab.experiment.launch import LaunchPlan
    from mcclab.lab import Lab
    from mcclab.monitoring.exporter import IperfSource

EXPORTER_PORT = 9463
READY_TIMEOUT = 15.0
FIRST_SCRAPE_TIMEOUT = 12.0
# Flows run this long past the end (runner.TAIL); the dashboard link covers it.
TAIL = 2.0
STATE_FILE = "monitoring.json"  # in <lab>/monitoring/ while running, in logs/ afterwards

__all__ = ["Monitoring", "start_monitoring", "targets_for"]


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
        }
        if self.grafana_base:
            rec["grafana"] = grafana.dashboard_url(self.grafana_base, self.run, self.started - 5,
                                                   ended, refresh=None)
        return rec

    def stop(self, run_dir: Path, before_export: Callable[[], None] = lambda: None) -> None:
        """Export the run's series into ``run_dir`` and stop what was started; never raises.

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
                url, selector = self.prometheus_url, f'{{run="{self.run}"}}'
                start = self.started - 1
                n = export.write_series_csv(
                    prom.series(url, selector, start, ended),
                    lambda name: prom.raw_samples(url, prom.with_name(selector, name), start,
                                                  ended),
                    run_dir / export.METRICS_CSV)
                if n == 0:
                    self.notes.append("Prometheus stored no series for this run")
        except Exception as exc:  # noqa: BLE001 - the run's own data matter more
            self.notes.append(f"export of the series failed: {type(exc).__name__}: {exc}")
        for proc in self.processes:
            kill_group(proc)
            if self.state is not None and proc in self.state.processes:
                self.state.processes.remove(proc)
        self.processes.clear()
        if self.targets_file is not None:
            self.targets_file.unlink(missing_ok=True)
        if self.state is not None:
            with contextlib.suppress(OSError):
                self.state.save()
        try:
            keep = run_dir / "logs" / "monitoring"
            keep.mkdir(parents=True, exist_ok=True)
            for name, path in self.files.items():
                if path.is_file():
                    shutil.copy2(path, keep / f"{name}{path.suffix}")
            (run_dir / "logs" / STATE_FILE).write_text(json.dumps(self.record(ended), indent=1))
        except OSError:
            pass


def _write_atomically(path: Path, text: str) -> None:
    """Write a file Prometheus watches so that it never reads half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _metrics_endpoint(argv: tuple[str, ...]) -> str | None:
    """The ``--metrics ADDR:PORT`` of an agent command line."""
    for i, word in enumerate(argv[:-1]):
        if word == "--metrics":
            return argv[i + 1]
    return None


def _flow_protocols(experiment: Any) -> dict[str, str]:
    """Flow name -> protocol label: the agent protocol, or tcp/udp for iperf3 flows."""
    out = {}
    for flow in getattr(experiment, "flows", []):
        protocol = getattr(flow, "protocol", None)
        if protocol is None:
            protocol = getattr(flow, "carrier", None) or flow.type
        out[flow.name] = str(protocol)
    return out


def targets_for(run: str, experiment: str, launches: LaunchPlan, protocols: dict[str, str],
                exporter: str) -> list[prom.Target]:
    """Every scrape target of a run: each agent's endpoint and the exporter."""
    base = {"run": run, "experiment": experiment}
    out = [prom.Target(exporter, {**base, "node": mn.ROOT_NODE, "flow": mn.NO_FLOW,
                                  "protocol": mn.NO_FLOW, "role": "exporter",
                                  "component": "exporter"})]
    for launch in launches.launches:
        endpoint = _metrics_endpoint(launch.argv)
        if endpoint is None:
            continue
        out.append(prom.Target(endpoint, {
            **base, "node": launch.node, "flow": launch.flow,
            "protocol": protocols.get(launch.flow, mn.NO_FLOW), "role": launch.role,
            "component": "agent"}))
    return out


def _iperf_sources(launches: LaunchPlan, protocols: dict[str, str]) -> list[IperfSource]:
    """The iperf3 servers and UDP sinks whose reports the exporter turns into flow rates."""
    # Imported here: `python -m mcclab.monitoring.exporter` must not find the module
    # already imported by this package.
    from mcclab.monitoring.exporter import IperfSource

    return [IperfSource(launch.flow, launch.node, protocols.get(launch.flow, "tcp"), launch.log,
                        "iperf3" if launch.role == "server" else "stats")
            for launch in launches.launches if launch.role in ("server", "sink")]


def _wait(check: Any, procs: list[TrackedProcess], what: str, log: Path) -> None:
    """Poll ``check()`` until true; raise if a process died or time ran out.

    The timeout is READY_TIMEOUT times ``MCCLAB_TIMEOUT_SCALE`` (a slow CPU, e.g.
    the VM check's emulated guest, starts the exporter's Python far slower).
    """
    timeout = scaled(READY_TIMEOUT)
    deadline = time.monotonic() + timeout
    while not check():
        if any(not p.alive() for p in procs):
            tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
            raise RuntimeError(f"{what} exited during start-up: {tail.strip()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within {timeout:g}s (log: {log}); on a slow "
                               f"machine set {SCALE_ENV} to stretch this wait")
        time.sleep(0.1)


def _answers(url: str, timeout: float = 1.0) -> bool:
    """True when an HTTP GET of ``url`` succeeds within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def _first_scrape(url: str, run: str, timeout: float) -> bool:
    """Wait until Prometheus has stored a scrape of the run's exporter."""
    deadline = time.monotonic() + timeout
    query = {"query": f'up{{run="{run}", component="exporter"}}'}
    while time.monotonic() < deadline:
        try:
            if prom.api(url, "/api/v1/query", query, timeout=2.0)["result"]:
                return True
        except (OSError, RuntimeError, ValueError):
            pass
        time.sleep(0.2)
    return False


def start_monitoring(lab: Lab, run_dir: Path, experiment: Any, launches: LaunchPlan
                     ) -> Monitoring:
    """Start monitoring for a run (see the module docstring); never raises for its own parts."""
    mon = Monitoring(run=run_dir.name, experiment=str(getattr(experiment, "name", "")),
                     started=time.time(), duration=float(getattr(experiment, "duration", 0.0)),
                     state=lab.state)
    try:
        _start(lab, mon, experiment, launches)
    except Exception as exc:  # noqa: BLE001 - monitoring must not fail the experiment
        mon.notes.append(f"{type(exc).__name__}: {exc}")
        for proc in mon.processes:
            kill_group(proc)
        mon.processes.clear()
        mon.prometheus_url = mon.url = None
    return mon


def _start(lab: Lab, mon: Monitoring, experiment: Any, launches: LaunchPlan) -> None:
    """The steps of start_monitoring; raises on the first that fails."""
    from mcclab.monitoring.exporter import ExporterConfig
    from mcclab.monitoring.exporter import argv as exporter_argv

    state = lab.state
    gateway = str(lab.plan.control_gateway.ip)
    work = state.path / "monitoring"
    work.mkdir(parents=True, exist_ok=True)
    protocols = _flow_protocols(experiment)

    # The router and link exporter, on the control gateway address only.
    port = prom.free_port(gateway, EXPORTER_PORT)
    topology = work / "topology.yaml"
    topology.write_text(yaml.safe_dump(lab.topo.model_dump(mode="json"), sort_keys=False))
    config = ExporterConfig(listen=gateway, port=port, lab_dir=str(state.path),
                            topology=str(topology), link_backend=lab.link_backend,
                            routers=lab.topo.names("router"),
                            iperf=_iperf_sources(launches, protocols))
    config_file = work / "exporter.json"
    config_file.write_text(config.to_json())
    exporter_log = state.path / "logs" / "monitoring-exporter.log"
    proc = spawn(state, Cmd(tuple(exporter_argv(sys.executable, config_file))), exporter_log,
                 "monitoring exporter")
    mon.processes.append(proc)
    exporter_url = f"http://{gateway}:{port}/metrics"
    # Each GET of /metrics is a full scrape (commands in every router's and link's
    # namespace): under emulation one took longer than the 1-s answer timeout,
    # so the exporter never looked ready. The answer timeout is scaled too.
    probe_timeout = scaled(1.0)
    _wait(lambda: _answers(exporter_url, probe_timeout), [proc], "the router and link exporter",
          exporter_log)
    mon.files.update(exporter=config_file)
    mon.exporter_url = exporter_url

    # The run's targets, for the service's Prometheus or for one of our own.
    target_list = targets_for(mon.run, mon.experiment, launches, protocols,
                              f"{gateway}:{port}")
    document = json.dumps(prom.targets_document(target_list), indent=1)
    service = prom.find_service()
    if service is not None:
        mon.service = True
        prom.sweep_targets(service.targets_dir, {s.lab_id for s in all_states()})
        mon.targets_file = prom.targets_path(service.targets_dir, state.lab_id)
        _write_atomically(mon.targets_file, document)
        mon.prometheus_url = service.url
        mon.files.update(targets=mon.targets_file)
    else:
        # Static targets: scraped from Prometheus's first second (file_sd would wait
        # for its 5-s discovery batching). targets.json is kept for the record.
        targets = work / "targets.json"
        _write_atomically(targets, document)
        config_yml = work / "prometheus.yml"
        config_yml.write_text(yaml.safe_dump(prom.scrape_config(targets=target_list),
                                             sort_keys=False))
        listen = f"127.0.0.1:{prom.free_port('127.0.0.1', prom.DEFAULT_PORT)}"
        prom_log = state.path / "logs" / "monitoring-prometheus.log"
        pproc = spawn(state, Cmd(tuple(prom.argv(config_yml, work / "data", listen))), prom_log,
                      "monitoring prometheus")
        mon.processes.append(pproc)
        url = f"http://{listen}"
        _wait(lambda: prom.ready(url), [pproc], "Prometheus", prom_log)
        mon.prometheus_url = url
        mon.files.update(prometheus=config_yml, targets=targets)

    # Prometheus applies new targets in batches every 5 s (static ones too), so its
    # first scrape comes up to 5 s after it starts. Waiting for it here, before any
    # flow starts, keeps the run's first seconds in the series.
    first_scrape = scaled(FIRST_SCRAPE_TIMEOUT)
    if not _first_scrape(mon.prometheus_url, mon.run, first_scrape):
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
