"""Run an experiment: lab up, flows on schedule, live progress, teardown, results folder.

The results folder is always written, whatever happens: a run stopped by
Ctrl-C or SIGTERM is marked ``interrupted`` and keeps the data up to that
second; a run that fails is marked ``failed`` with the error. Runs never
overwrite each other (each gets a fresh, exclusively created folder).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from mcclab.experiment import tables
from mcclab.experiment.launch import Launch, LaunchPlan, plan_launches
from mcclab.experiment.loader import REPO, Resolved
from mcclab.experiment.spec import Experiment, MulticastFlow
from mcclab.forkserver import ForkServer, forkable, preload, start_tool
from mcclab.lab import Lab, LabOptions
from mcclab.monitoring import Monitoring, start_monitoring
from mcclab.net.node_config import netns_name
from mcclab.probes.reach import wait_for
from mcclab.routing import frr
from mcclab.state import TrackedProcess, kill_groups

RESULTS = REPO / "results"
# Flows keep running this long past the end, so every report interval that ends
# inside the run (iperf3's, agents') is printed before the processes are stopped.
TAIL = 1.5
PACKAGES = ["frr", "pimd", "smcroute", "iperf3", "mininet", "iproute2", "nftables", "iptables"]


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived during the run."""


@dataclass
class RunOptions:
    """How to run: where results go and how to report progress (explicit, no globals)."""

    results: Path = RESULTS
    progress: Callable[[str, int, int], None] = lambda *a: None
    live: Callable[[float, float, dict[str, float]], None] = lambda *a: None
    announce: Callable[[str], None] = lambda text: None
    readiness_timeout: float = 60.0
    lock_timeout: float = 0.0
    # Fork agents and UDP on/off tools from one preloaded interpreter
    # (mcclab.forkserver); False execs a fresh interpreter for each.
    fork: bool = True
    # Called with the run's folder as soon as it exists, so a caller (a sweep)
    # knows where a run that then raises left its record.
    started: Callable[[Path], None] = lambda path: None


@dataclass
class RunState:
    """Mutable bookkeeping of a run in progress."""

    run_dir: Path
    started: str
    status: str = "running"
    error: str | None = None
    t0: float | None = None
    elapsed: float = 0.0
    running: dict[int, TrackedProcess] = field(default_factory=dict)
    link_rows: list[dict[str, Any]] = field(default_factory=list)
    iperf: dict[str, IperfWatch] = field(default_factory=dict)  # flow -> its server's log
    sinks: dict[str, tuple[TrackedProcess, Path]] = field(default_factory=dict)  # flow -> out
    forks: ForkServer | None = None


@dataclass
class IperfWatch:
    """When each test of one iperf3 server really began, on the run's clock."""

    log: Path
    size: int = -1
    starts: list[float] = field(default_factory=list)

    def poll(self, now: float) -> None:
        """Note the start of tests whose first report appeared since the last poll."""
        try:
            size = self.log.stat().st_size
        except OSError:
            return
        if size == self.size:
            return
        self.size = size
        ends = tables.latest_interval_ends(self.log.read_text(errors="replace"))
        # The newest report was written at most one poll ago (--forceflush).
        self.starts += [now - end for end in ends[len(self.starts):]]


def new_run_dir(results: Path, experiment: str) -> Path:
    """A fresh folder results/<experiment>/<run-id>; created exclusively, never reused."""
    base = results / experiment
    base.mkdir(parents=True, exist_ok=True)
    while True:
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
        try:
            (base / run_id).mkdir()
            return base / run_id
        except FileExistsError:
            continue


def _git(*args: str) -> str:
    """A git query about the checkout, or '' outside one."""
    try:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
    except OSError:
        return ""


def _frr10_version() -> str | None:
    """The playbook's FRR 10 build, as its pimd reports it ("pimd version 10.7.1")."""
    try:
        out = subprocess.run([f"{frr.SOURCE.bin_dir}/pimd", "--version"], capture_output=True,
                             text=True, timeout=10, check=False).stdout
    except OSError:
        return None
    words = out.split("\n", 1)[0].split()
    return words[-1] if words else None


def environment(lab: Lab | None) -> dict[str, Any]:
    """Kernel, package versions, git SHA and backends, for the run record."""
    versions = {}
    for pkg in PACKAGES:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                             text=True, check=False)
        versions[pkg] = out.stdout.strip() or None
    if versions.get("pimd") is None and Path("/opt/mcclab/pimd").is_dir():
        debs = sorted(Path("/opt/mcclab/cache").glob("pimd_*.deb"))
        versions["pimd"] = debs[-1].name.split("_")[1] if debs else "private prefix"
    versions["frr10"] = _frr10_version()
    env: dict[str, Any] = {
        "kernel": platform.release(), "machine": platform.machine(), "host": platform.node(),
        "cpus": os.cpu_count(), "python": sys.version.split()[0], "packages": versions,
        "git_sha": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain")),
    }
    if lab is not None:
        env["routing_backend"] = lab.topo.routing.backend
        env["link_backend"] = lab.link_backend
        env["features"] = lab.features.as_dict() if lab.features else {}
    return env


def _write_json(path: Path, data: Any) -> None:
    """Write JSON atomically."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def _run_record(res: Resolved, st: RunState) -> dict[str, Any]:
    """run.json content."""
    exp = res.experiment
    profile = exp.profiles.get(res.profile)
    return {
        "experiment": exp.name, "run_id": st.run_dir.name, "profile": res.profile,
        "status": st.status, "started": st.started,
        "ended": datetime.now(UTC).isoformat() if st.status != "running" else None,
        "duration_s": exp.duration, "warmup_s": exp.warmup, "elapsed_s": round(st.elapsed, 3),
        "error": st.error, "scaling": profile.scaling if profile else "",
        "spec_file": str(res.path),
        "iperf_test_starts_s": {flow: [round(t, 3) for t in watch.starts]
                                for flow, watch in st.iperf.items()},
        "python_tools_started_by": "fork server" if st.forks is not None else "exec",
    }


def _tail(path: str, size: int = 4096) -> str:
    """The end of a growing log file ('' if it does not exist yet)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _live_rates(launches: list[Launch]) -> dict[str, float]:
    """Latest per-flow received rate (bit/s) from receiver logs, for the progress line."""
    rates: dict[str, float] = {}
    for launch in launches:
        if launch.role == "server":
            rate = tables.last_interval_rate(_tail(launch.log))
            if rate is not None:
                rates[launch.flow] = rate
            continue
        if launch.role not in ("receiver", "sink"):
            continue
        for line in reversed(_tail(launch.log).splitlines()):
            if '"stats"' in line:
                with contextlib.suppress(ValueError):
                    rates[launch.flow] = rates.get(launch.flow, 0.0) + json.loads(line).get(
                        "throughput_bps", 0.0)
                break
    return rates


def _wait_for_line(proc: TrackedProcess, out: Path, marker: str, what: str) -> None:
    """Poll ``out`` until it shows ``marker``; raise with its tail if ``proc`` exits first."""
    wait_for(lambda: marker in out.read_text(errors="replace") or not proc.alive(), 10.0, what)
    if not proc.alive():
        raise RuntimeError(f"{what} exited: {out.read_text()[-500:]}")


def _start(lab: Lab, launch: Launch, st: RunState, index: int) -> None:
    """Start one launch in its node, in its own process group.

    An iperf3 server is waited for until it listens; a UDP source waits for its sink.
    """
    if launch.role == "source" and launch.flow in st.sinks:
        _wait_for_line(*st.sinks[launch.flow], "ready", f"UDP sink of {launch.flow}")
    # iperf3 writes its report to stdout; agents write their event log themselves
    # and only a 'ready' line to stdout, which must not interleave with that log.
    out = Path(launch.log) if launch.role in ("server", "client") else Path(
        launch.log).with_suffix(".out")
    what = f"flow {launch.flow} {launch.role} {launch.node}"
    proc = start_tool(lab.state, st.forks, launch.argv, netns_name(launch.node), out, what)
    st.running[index] = proc
    if launch.role == "server":
        st.iperf[launch.flow] = IperfWatch(out)
        _wait_for_line(proc, out, "Server listening", f"iperf3 server of {launch.flow}")
    elif launch.role == "sink":
        # Not waited for here: dozens start together (ormcc-table2), each source waits
        # for its own sink instead.
        st.sinks[launch.flow] = (proc, out)


def _sample_links(lab: Lab, st: RunState, t: int) -> None:
    """Append one row per link direction of the emulator's counters."""
    if lab.links is None:
        return
    try:
        records = lab.links.records()
    except Exception:  # noqa: BLE001 - counters are best effort; health is checked apart
        return
    for rec in records:
        row = {"t": t, **rec}
        # The results contract names what left the link "out".
        row["pkts_out"], row["bytes_out"] = row.pop("pkts_sent"), row.pop("bytes_sent")
        st.link_rows.append(row)


def lab_options(exp: Experiment, run_dir: Path, options: RunOptions) -> LabOptions:
    """How a run brings its lab up: named after the run, the experiment's seed for the links."""
    return LabOptions(lab_id=f"{exp.name}-{run_dir.name}",
                      readiness_timeout=options.readiness_timeout,
                      lock_timeout=options.lock_timeout, progress=options.progress,
                      link_seed=exp.seed)


def execute(res: Resolved, options: RunOptions) -> Path:
    """Run a resolved experiment and return its results folder."""
    exp = res.experiment
    run_dir = new_run_dir(options.results, exp.name)
    options.started(run_dir)
    (run_dir / "logs").mkdir()
    (run_dir / "tables").mkdir()
    (run_dir / "sessions").mkdir()
    st = RunState(run_dir, started=datetime.now(UTC).isoformat())
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(
        res.experiment.model_dump(mode="json"), sort_keys=False))
    (run_dir / "topology.yaml").write_text(yaml.safe_dump(
        res.topology.model_dump(mode="json"), sort_keys=False))
    _write_json(run_dir / "run.json", _run_record(res, st))
    _write_json(run_dir / "env.json", environment(None))

    def on_signal(signum: int, _frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    lab = Lab(res.topology, lab_options(exp, run_dir, options))
    launch_plan: LaunchPlan | None = None
    monitoring: Monitoring | None = None
    try:
        lab.up()
        _write_json(run_dir / "env.json", environment(lab))
        launch_plan = plan_launches(exp, lab.plan, run_dir)
        for path, content in launch_plan.files.items():
            Path(path).write_text(content)
        lab.runner.run_all(launch_plan.setup)
        tools = {target[0] for launch in launch_plan.launches
                 if (target := forkable(launch.argv)) is not None}
        if options.fork and tools:
            st.forks = ForkServer.start(lab.state, preload(tools),
                                        run_dir / "logs" / "forkserver.log")
        monitoring = start_monitoring(lab, run_dir, exp, launch_plan)
        options.announce(monitoring.announcement)
        _timeline(lab, exp.duration, launch_plan, st, options)
        st.status = "complete"
    except Interrupted as exc:
        st.status, st.error = "interrupted", f"stopped by {exc}"
    except Exception as exc:  # noqa: BLE001 - any failure is recorded, then re-raised
        st.status, st.error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        # Ignore further signals while cleaning up: teardown must finish.
        for s in old:
            signal.signal(s, signal.SIG_IGN)
        try:
            if monitoring is not None:
                monitoring.stop(run_dir, before_export=lambda: _stop_flows(st))
            _finish(lab, res, st, launch_plan)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
    return run_dir


def _timeline(lab: Lab, duration: float, lp: LaunchPlan, st: RunState,
              options: RunOptions) -> None:
    """Start and stop processes on schedule; sample counters and check health each second."""
    order = sorted(range(len(lp.launches)), key=lambda i: lp.launches[i].start)
    # Servers first and receivers before senders at equal times, so nothing is lost to
    # a listener that is not there yet.
    rank = {"server": 0, "sink": 0, "receiver": 1, "sender": 2, "client": 3, "source": 3}
    order.sort(key=lambda i: (lp.launches[i].start, rank[lp.launches[i].role]))
    pending = list(order)
    stops = {i: lp.launches[i].stop for i in order if lp.launches[i].stop is not None}
    st.t0 = time.monotonic()
    next_second = 1
    while True:
        now = time.monotonic() - st.t0
        st.elapsed = min(now, duration)
        while pending and lp.launches[pending[0]].start <= now:
            i = pending.pop(0)
            _start(lab, lp.launches[i], st, i)
        for watch in st.iperf.values():
            watch.poll(time.monotonic() - st.t0)
        due = [i for i, stop in stops.items() if stop <= now and i in st.running]
        if due:
            kill_groups([st.running.pop(i) for i in due])  # one grace period for all
            for i in due:
                del stops[i]
        if now >= next_second and next_second <= duration:
            _sample_links(lab, st, next_second)
            if lab.links is not None:
                lab.links.check()
            options.progress("running", min(next_second, int(duration)), int(duration))
            options.live(now, duration, _live_rates(lp.launches))
            next_second += 1
        if now >= duration + TAIL:
            break
        time.sleep(min(0.05, max(0.0, next_second - now)))


def _stop_flows(st: RunState) -> None:
    """Stop every flow still running, then the fork server (a second call does nothing)."""
    # Signalled together: one grace period in all, not one per process (hundreds of
    # iperf3 clients in ormcc-table2). Agents write a last stats record on SIGTERM.
    kill_groups(list(st.running.values()), grace=3.0)
    st.running.clear()
    if st.forks is not None:
        # After its tools: it reaps them, so they must be gone before it is.
        st.forks.close()


def _finish(lab: Lab, res: Resolved, st: RunState, lp: LaunchPlan | None) -> None:
    """Stop flows, keep logs, tear down, write tables, record and report."""
    _stop_flows(st)
    run_dir = st.run_dir
    logs = run_dir / "logs"
    if lab.state.path.exists():
        for item in ("commands.log", "nodes", "logs"):
            src = lab.state.path / item
            if src.is_dir():
                shutil.copytree(src, logs / f"lab-{item}", dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.sock", "*.api", "*.vty"))
            elif src.is_file():
                shutil.copy2(src, logs / f"lab-{item}")
    try:
        lab.down()
    finally:
        if lp is not None and st.t0 is not None:
            _write_tables(res, st, lp)
        _write_json(run_dir / "run.json", _run_record(res, st))
        _analyse(run_dir)


def _write_tables(res: Resolved, st: RunState, lp: LaunchPlan) -> None:
    """tables/per_second.csv, tables/protocol.csv and tables/links.csv from the raw logs and
    samples."""
    assert st.t0 is not None
    series: list[tables.Series] = []
    exp = res.experiment
    for flow in exp.flows:
        if isinstance(flow, MulticastFlow):
            for launch in lp.launches:
                if launch.flow == flow.name and launch.role == "receiver":
                    series.append(tables.agent_series(Path(launch.log), flow.name, launch.node))
            continue
        sink = next((launch for launch in lp.launches
                     if launch.flow == flow.name and launch.role == "sink"), None)
        if sink is not None:  # an on/off UDP flow: its sink logs like an agent
            series.append(tables.agent_series(Path(sink.log), flow.name, sink.node, flow.type))
            continue
        scheduled = [launch.start for launch in lp.launches
                     if launch.flow == flow.name and launch.role == "client"]
        watch = st.iperf.get(flow.name)
        seen = watch.starts if watch else []
        # Each test where it really began; the schedule only where no report was seen.
        starts = [st.t0 + (seen[k] if k < len(seen) else at)
                  for k, at in enumerate(scheduled)]
        server = next(launch for launch in lp.launches
                      if launch.flow == flow.name and launch.role == "server")
        series.append(tables.iperf_series(Path(server.log), flow.name, flow.type, server.node,
                                          starts))
    seconds = int(st.elapsed + 1e-6)
    tables.per_second(series, st.t0, seconds).to_csv(st.run_dir / "tables" / "per_second.csv",
                                                     index=False)
    agents = [(Path(launch.log), launch.flow, launch.node, launch.role) for launch in lp.launches
              if launch.role in ("sender", "receiver")]
    tables.protocol_table(agents, st.t0, seconds).to_csv(
        st.run_dir / "tables" / "protocol.csv", index=False)
    timing = [tables.AgentLaunch(Path(launch.log), launch.flow, launch.node, launch.role,
                                 launch.start, launch.stop)
              for launch in lp.launches if launch.role in ("sender", "receiver")]
    tables.agent_timing_table(timing, st.t0).to_csv(st.run_dir / "tables" / "agents.csv",
                                                    index=False)
    if st.link_rows:
        import pandas as pd

        pd.DataFrame(st.link_rows).to_csv(st.run_dir / "tables" / "links.csv", index=False)


def _analyse(run_dir: Path) -> None:
    """Summary, figures and report from the folder alone (mcclab.analysis).

    A failing analysis must not hide the run: the data are written already and
    `mcclab report` can rebuild once the problem is fixed.
    """
    from mcclab.analysis.report import build_report

    try:
        build_report(run_dir)
    except Exception as exc:  # noqa: BLE001 - reported, never fatal to the run record
        (run_dir / "analysis-error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
