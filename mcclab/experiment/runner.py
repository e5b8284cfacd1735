"""Run an experiment: lab up, flows on schedule, live progress, teardown, results folder.

The results folder is written whatever happens once the lab may have been
touched: a run stopped by Ctrl-C or SIGTERM is marked ``interrupted`` (with the
phase the signal came in) and keeps the data up to that second; a run that
fails is marked ``failed`` with the error. A run the lab refuses before
anything was created (``PreflightError``: the lab is busy, the kernel lacks a
feature) leaves no folder: the caller says why. Runs never overwrite each other
(each gets a fresh, exclusively created folder). ``run.json`` names the runner
(pid, start time, boot) so a run whose runner was killed outright can be told
from one still going (``mcclab.experiment.record``).

A run goes through the phases of ``PHASES``. In ``STOP_AT_ONCE`` a signal
stops the run where it is; in the others (the run's own start and its
wind-up: export, teardown, tables) it is noted and the phase finishes, so the
lab is always torn down and the record written; a second signal never breaks
that. A signal noted during the wind-up skips the analysis (``mcclab report``
builds it later from the folder).
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

from mcclab import resultsdir
from mcclab.commands import Cmd
from mcclab.experiment import tables
from mcclab.experiment.captures import start_captures
from mcclab.experiment.launch import Launch, LaunchPlan, plan_launches
from mcclab.experiment.loader import REPO, Resolved
from mcclab.experiment.record import runner_identity
from mcclab.experiment.spec import Experiment, MulticastFlow
from mcclab.experiment.starts import (
    Gate,
    Starter,
    StartRecord,
    armed_argv,
    boot_clock,
    read_marks,
    spawn_armed,
)
from mcclab.forkserver import ForkServer, forkable, preload, start_tool
from mcclab.jsonfile import write_json_atomic
from mcclab.lab import Lab, LabOptions, PreflightError
from mcclab.model.topology import Topology
from mcclab.monitoring.session import Monitoring, MonitoringStart
from mcclab.net.node_config import netns_name
from mcclab.probes.reach import wait_for
from mcclab.routing import frr
from mcclab.state import TrackedProcess, kill_groups

RESULTS = REPO / "results"
# Flows keep running this long past the end, so every report interval that ends
# inside the run (iperf3's, agents') is printed before the processes are stopped.
TAIL = 1.5
RECORD_EVERY = 5  # seconds between rewrites of run.json during the run
PACKAGES = ["frr", "pimd", "smcroute", "iperf3", "mininet", "iproute2", "nftables", "iptables"]


# The phases of a run, in order (run.json's ``phase`` while it runs, and the phase
# each signal came in).
PHASES = ("starting", "bring-up", "monitoring", "running", "export", "teardown", "tables",
          "analysis")
# Phases a signal stops at once; in the others it is noted and the phase finishes.
STOP_AT_ONCE = frozenset({"bring-up", "monitoring", "running", "analysis"})
# Test seam: MCCLAB_TEST_PAUSE_AT=<phase> makes the runner print PAUSE_MARK and the
# phase on stdout at a fixed point of that phase and wait there for a signal, so a
# test can signal each phase deterministically. Read once per run; unset, it costs a
# string comparison per phase.
PAUSE_ENV = "MCCLAB_TEST_PAUSE_AT"
PAUSE_MARK = "mcclab-test-pause:"
PAUSE_LIMIT = 120.0


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived during the run.

    A BaseException, as KeyboardInterrupt is: code that catches Exception to carry
    on (monitoring start, readiness polls, the analysis) must not swallow a stop.
    """


@dataclass
class Stopper:
    """The run's SIGINT/SIGTERM handler: which signals came in which phase, and
    whether to stop at once."""

    phase: str = "starting"
    received: list[tuple[str, str]] = field(default_factory=list)  # (signal, phase)
    acted: int = 0  # signals already answered by raising Interrupted
    raised: bool = False
    pause_at: str | None = None
    # (phase, CLOCK_MONOTONIC at entry), for run.json's phase_s: where a run's wall
    # time goes besides the experiment itself (bring-up, export, analysis).
    entered: list[tuple[str, float]] = field(default_factory=list)

    def handler(self, signum: int, _frame: object) -> None:
        """Note the signal; raise Interrupted where the run stops at once."""
        self.received.append((signal.Signals(signum).name, self.phase))
        # Once only before the wind-up: the cleanup the first signal started (Lab.up
        # tearing down what it built) must not be broken by a second one. The
        # analysis can always stop: the data and the record are written by then.
        if self.phase == "analysis" or (self.phase in STOP_AT_ONCE and not self.raised):
            self._raise()

    def _raise(self) -> None:
        self.raised = True
        self.acted = len(self.received)
        raise Interrupted(self.received[-1][0])

    def enter(self, phase: str) -> None:
        """Move to ``phase``; a signal noted and not yet answered stops it at once."""
        self.phase = phase
        self.entered.append((phase, time.monotonic()))
        if phase in STOP_AT_ONCE and len(self.received) > self.acted and (
                phase == "analysis" or not self.raised):
            self._raise()

    def durations(self, now: float | None = None) -> dict[str, float]:
        """Seconds spent in each phase entered so far (the current one up to ``now``)."""
        now = time.monotonic() if now is None else now
        out: dict[str, float] = {}
        ends = [since for _, since in self.entered[1:]] + [now]
        for (phase, since), until in zip(self.entered, ends, strict=False):
            out[phase] = round(out.get(phase, 0.0) + until - since, 3)
        return out

    def checkpoint(self, phase: str) -> None:
        """The test seam's pause point in ``phase`` (see PAUSE_ENV); nothing otherwise."""
        if self.pause_at != phase:
            return
        seen = len(self.received)
        print(f"{PAUSE_MARK} {phase}", flush=True)
        deadline = time.monotonic() + PAUSE_LIMIT
        while len(self.received) == seen and time.monotonic() < deadline:
            time.sleep(0.05)

    def first(self) -> tuple[str, str] | None:
        """The first signal and its phase, if any came."""
        return self.received[0] if self.received else None


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
    # Builds the lab (the real one by default; tests pass a fake).
    lab: Callable[[Topology, LabOptions], Lab] = Lab
    # Builds summary.json, the figures and report.html from the finished folder
    # (``mcclab run`` passes mcclab.analysis.report.build_report). Injected, because
    # the runner writes results folders and the analysis only reads them: neither
    # package imports the other. None leaves the report to ``mcclab report``.
    analyse: Callable[[Path], object] | None = None


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
    links: tables.CsvAppender | None = None  # tables/links.csv, written each second
    iperf: dict[str, IperfWatch] = field(default_factory=dict)  # flow -> its server's log
    sinks: dict[str, tuple[TrackedProcess, Path]] = field(default_factory=dict)  # flow -> out
    forks: ForkServer | None = None
    starts: StartRecord = field(default_factory=StartRecord)  # tables/starts.csv
    agents: dict[str, Any] = field(default_factory=lambda: {"mode": "process"})  # run.json's
    stop: Stopper = field(default_factory=Stopper)
    runner: dict[str, Any] = field(default_factory=runner_identity)
    analyse: Callable[[Path], object] | None = None  # RunOptions.analyse
    # run.json's bring_up_steps_s: each bring-up step's end, seconds into the bring-up
    steps: dict[str, float] = field(default_factory=dict)


@dataclass
class IperfWatch:
    """When each test of one iperf3 server really began, on the run's clock."""

    log: Path
    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)  # each test's newest interval end
    follower: tables.IperfFollower | None = None

    def poll(self, now: float) -> None:
        """Note the start of tests whose first report appeared since the last poll; a log
        that was rewritten (it shrank) is read from its start, its tests counted anew."""
        if self.follower is None:
            self.follower = tables.IperfFollower(self.log)
        try:
            reports = self.follower.new_intervals()
        except OSError:
            return
        if self.follower.lines.restarted:
            # The reports now number the rewritten log's tests from 0, and the tables
            # read that log alone (tables.iperf_series): what the old one gave is void.
            self.ends.clear()
            self.starts.clear()
        tables.note_interval_ends(self.ends, reports)
        # The newest report was written at most one poll ago (--forceflush).
        self.starts += [now - end for end in self.ends[len(self.starts):]]


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
        if lab.routers is not None:  # how the routers came up, and what had to be mended
            env["routing_ready"] = {"seconds": lab.routers.ready_after,
                                    "remedies": list(lab.routers.remedies)}
    return env


def _run_record(res: Resolved, st: RunState) -> dict[str, Any]:
    """run.json content."""
    exp = res.experiment
    profile = exp.profiles.get(res.profile)
    first = st.stop.first()
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
        **_start_lags(st),
        "agents": st.agents,
        **st.runner,
        **({"phase": st.stop.phase} if st.status == "running" else {}),
        "interrupted_phase": first[1] if first else None,
        "signals": [{"signal": sig, "phase": phase} for sig, phase in st.stop.received],
        "phase_s": st.stop.durations(),
        "bring_up_steps_s": st.steps,
    }


def _record(res: Resolved, st: RunState) -> None:
    """Rewrite run.json with the run's state now."""
    write_json_atomic(st.run_dir / "run.json", _run_record(res, st))


def _settle(st: RunState) -> None:
    """The final status: a run that saw a signal anywhere is interrupted (unless failed)."""
    first = st.stop.first()
    if first is None:
        return
    if st.status in ("running", "complete"):
        st.status = "interrupted"
    if st.status == "interrupted":
        st.error = f"stopped by {first[0]} during {first[1]}"


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
    argv = launch.argv
    if launch.role == "host":
        # The host starts and stops its agents on the run's clock (CLOCK_MONOTONIC, the
        # same in every namespace), not on its own start.
        what = f"agent host {launch.flow} at {launch.node}"
        argv = (*argv, "--t0", f"{st.t0:.6f}")
    elif launch.role == "source":
        # An on/off UDP source keeps the run's schedule however late it was forked.
        argv = (*argv, "--t0", f"{st.t0:.6f}")
    proc = start_tool(lab.state, st.forks, argv, netns_name(launch.node), out, what,
                      runner=lab.runner)
    st.running[index] = proc
    if launch.role == "server":
        st.iperf[launch.flow] = IperfWatch(out)
        _wait_for_line(proc, out, "Server listening", f"iperf3 server of {launch.flow}")
    elif launch.role == "sink":
        # Not waited for here: dozens start together (ormcc-table2), each source waits
        # for its own sink instead.
        st.sinks[launch.flow] = (proc, out)


def _start_listeners(lab: Lab, lp: LaunchPlan, st: RunState, indices: list[int]) -> None:
    """Start the listeners planned at 0 (iperf3 servers) all at once, before the clock,
    then wait for them together until each listens."""
    waiting: dict[str, tuple[TrackedProcess, Path]] = {}
    for i in indices:
        launch = lp.launches[i]
        out = Path(launch.log)
        proc = start_tool(lab.state, st.forks, launch.argv, netns_name(launch.node), out,
                          f"flow {launch.flow} {launch.role} {launch.node}", runner=lab.runner)
        st.running[i] = proc
        st.iperf[launch.flow] = IperfWatch(out)
        waiting[launch.flow] = (proc, out)

    def listening() -> bool:
        for flow, (proc, out) in list(waiting.items()):
            if not proc.alive():
                raise RuntimeError(f"iperf3 server of {flow} exited: "
                                   f"{out.read_text(errors='replace')[-500:]}")
            if "Server listening" in out.read_text(errors="replace"):
                del waiting[flow]
        return not waiting

    if waiting:
        wait_for(listening, 10.0 + 0.1 * len(waiting), f"{len(waiting)} iperf3 servers")


def _starter(lab: Lab, lp: LaunchPlan, st: RunState) -> Starter:
    """The run's starts (mcclab.experiment.starts): listeners before the clock, iperf3
    clients armed behind a gate the clock opens, the rest by the loop on time."""
    gate = Gate()
    marks = st.run_dir / "logs" / "armed-starts.txt"

    def arm(i: int, delay: float) -> None:
        launch = lp.launches[i]
        argv = armed_argv(launch.argv, delay, str(i), marks)
        st.running[i] = spawn_armed(lab.state, Cmd(argv, netns_name(launch.node)), gate,
                                    Path(launch.log),
                                    f"flow {launch.flow} {launch.role} {launch.node}",
                                    runner=lab.runner)

    return Starter(lp.launches, time.monotonic,
                   lambda indices: _start_listeners(lab, lp, st, indices), arm, gate.release,
                   lambda i: _start(lab, lp.launches[i], st, i), record=st.starts)


def _start_lags(st: RunState) -> dict[str, Any]:
    """run.json's summary of tables/starts.csv: the worst lag and the late launches."""
    if not st.starts.starts or st.status == "running":
        return {}  # armed starts are read from their marks once the run is over
    worst = st.starts.worst()
    return {"start_lag_max_s": None if worst is None else round(worst, 3),
            "starts_late": len(st.starts.late())}


def _write_starts(lp: LaunchPlan, st: RunState) -> None:
    """tables/starts.csv: each launch's planned and real start, and an iperf3 test's begin."""
    st.starts.take_marks(read_marks(st.run_dir / "logs" / "armed-starts.txt"))
    tests: dict[int, float] = {}
    for flow, watch in st.iperf.items():
        clients = [i for i, launch in enumerate(lp.launches)
                   if launch.flow == flow and launch.role == "client"]
        tests.update({i: round(at, 3) for i, at in zip(clients, watch.starts, strict=False)})

    def describe(i: int) -> dict[str, object]:
        launch = lp.launches[i]
        return {"flow": launch.flow, "role": launch.role, "node": launch.node,
                "test_began_s": tests.get(i, "")}

    st.starts.write(st.run_dir / "tables" / "starts.csv", describe)


def _sample_links(lab: Lab, st: RunState, t: int) -> None:
    """Append one row per link direction of the emulator's counters."""
    if lab.links is None:
        return
    try:
        records = lab.links.records()
    except Exception:  # noqa: BLE001 - counters are best effort; health is checked apart
        return
    rows = []
    for rec in records:
        row = {"t": t, **rec}
        # The results contract names what left the link "out".
        row["pkts_out"], row["bytes_out"] = row.pop("pkts_sent"), row.pop("bytes_sent")
        rows.append(row)
    if st.links is None:
        st.links = tables.CsvAppender(st.run_dir / resultsdir.LINKS_CSV)
    st.links.append(rows)


def lab_options(exp: Experiment, run_dir: Path, options: RunOptions) -> LabOptions:
    """How a run brings its lab up: named after the run, the experiment's seed for the links."""
    return LabOptions(lab_id=f"{exp.name}-{run_dir.name}",
                      readiness_timeout=options.readiness_timeout,
                      lock_timeout=options.lock_timeout, progress=options.progress,
                      link_seed=exp.seed)


def execute(res: Resolved, options: RunOptions) -> Path:
    """Run a resolved experiment and return its results folder.

    Raises PreflightError, leaving no folder, when the lab refuses to start.
    """
    stop = Stopper(pause_at=os.environ.get(PAUSE_ENV))
    # Installed before the folder exists: a signal from here on is noted and answered
    # once the record is there (phase 'starting'), never kills a half-made folder.
    old = {s: signal.signal(s, stop.handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _execute(res, options, stop)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _execute(res: Resolved, options: RunOptions, stop: Stopper) -> Path:
    """The body of :func:`execute`, with the run's signal handler in place."""
    exp = res.experiment
    run_dir = new_run_dir(options.results, exp.name)
    options.started(run_dir)
    (run_dir / "logs").mkdir()
    (run_dir / "tables").mkdir()
    (run_dir / "sessions").mkdir()
    st = RunState(run_dir, started=datetime.now(UTC).isoformat(), stop=stop,
                  analyse=options.analyse)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(
        res.experiment.model_dump(mode="json"), sort_keys=False))
    (run_dir / "topology.yaml").write_text(yaml.safe_dump(
        res.topology.model_dump(mode="json"), sort_keys=False))
    _record(res, st)
    lab_opts = lab_options(exp, run_dir, options)
    # Monitoring begins with the bring-up's first progress report once the lab's
    # record exists, so Prometheus's start overlaps the rest of the bring-up: made
    # before the lab, whose progress reaches it, and handed the lab once made.
    monitoring = MonitoringStart(None, run_dir, exp)  # starts nothing yet
    lab_opts.progress = _bring_up_progress(lab_opts.progress, stop, st.steps,
                                           monitoring.begin)
    lab = options.lab(res.topology, lab_opts)
    monitoring.attach(lab)
    launch_plan: LaunchPlan | None = None
    refused = False
    try:
        stop.enter("bring-up")
        _record(res, st)
        lab.up()
        _step_done(stop, st.steps, "lab up")
        write_json_atomic(run_dir / "env.json", environment(lab))
        _step_done(stop, st.steps, "environment recorded")
        # Namespaces the lab's runner sends to machines of their own (a testbed's hosts).
        launch_plan = plan_launches(exp, lab.plan, run_dir, remote=set(lab.runner.remote))
        st.agents = launch_plan.agents
        for path, content in launch_plan.files.items():
            Path(path).write_text(content)
        _step_done(stop, st.steps, "launches planned")
        # The targets and the exporter as soon as they can be (waited for below).
        monitoring.exporter(launch_plan)
        lab.runner.run_all(launch_plan.setup)
        _step_done(stop, st.steps, "setup commands")
        start_captures(lab, exp, run_dir)  # pcaps in captures/; teardown stops them
        tools = {target[0] for launch in launch_plan.launches
                 if (target := forkable(launch.argv)) is not None}
        if options.fork and tools:
            st.forks = ForkServer.start(lab.state, preload(tools),
                                        run_dir / "logs" / "forkserver.log")
        _step_done(stop, st.steps, "captures and fork server")
        stop.enter("monitoring")
        _record(res, st)
        live = monitoring.finish()
        stop.checkpoint("monitoring")
        options.announce(live.announcement)
        stop.enter("running")
        _record(res, st)
        _timeline(lab, exp.duration, launch_plan, st, options,
                  lambda: _record(res, st))
        st.status = "complete"
    except PreflightError:
        refused = True  # nothing was created: no folder either
        raise
    except Interrupted:
        st.status = "interrupted"
    except Exception as exc:  # noqa: BLE001 - any failure is recorded, then re-raised
        stop.phase = "export"  # from here on a signal must not break the wind-up
        st.status, st.error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if refused:
            lab.down()
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            _wind_up(lab, res, st, launch_plan, monitoring.mon if monitoring.begun else None)
    return run_dir


def _bring_up_progress(progress: Callable[[str, int, int], None], stop: Stopper,
                       steps: dict[str, float], each: Callable[[], None] = lambda: None
                       ) -> Callable[[str, int, int], None]:
    """The lab's progress callback, with the test pause once every router runs; each
    step's completion goes into ``steps`` (seconds after the bring-up began).

    ``each`` is called at every report, first (the runner's monitoring begins at the
    first one after the lab's record exists, and ignores the others).
    """
    def report(step: str, done: int, total: int) -> None:
        each()
        progress(step, done, total)
        if done == total:
            _step_done(stop, steps, step)
        if step == "starting routers" and done == total:
            stop.checkpoint("bring-up")
    return report


def _step_done(stop: Stopper, steps: dict[str, float], step: str) -> None:
    """Note in ``steps`` when ``step`` ended, in seconds after the bring-up began (once)."""
    if step in steps:
        return
    began = next((t for phase, t in stop.entered if phase == "bring-up"), None)
    if began is not None:
        steps[step] = round(time.monotonic() - began, 3)


def _wind_up(lab: Lab, res: Resolved, st: RunState, lp: LaunchPlan | None,
             monitoring: Monitoring | None) -> None:
    """Export, teardown, tables, record, analysis: whatever stopped the run."""
    st.stop.enter("export")

    def before_export() -> None:
        _stop_flows(st)
        st.stop.checkpoint("export")

    if monitoring is not None:
        monitoring.stop(st.run_dir, before_export=before_export)
    _finish(lab, res, st, lp)


def _timeline(lab: Lab, duration: float, lp: LaunchPlan, st: RunState,
              options: RunOptions, record: Callable[[], None] = lambda: None) -> None:
    """Start and stop processes on schedule; sample counters and check health each second.

    ``record`` rewrites run.json every RECORD_EVERY seconds, so the record of a runner
    killed outright still says how far it got.
    """
    # Agents in a host are started and stopped by their host (agents.host).
    order = sorted((i for i, launch in enumerate(lp.launches) if launch.host is None),
                   key=lambda i: lp.launches[i].start)
    # Servers first and receivers before senders at equal times, so nothing is lost to
    # a listener that is not there yet.
    rank = {"server": 0, "sink": 0, "receiver": 1, "host": 1, "sender": 2, "client": 3,
            "source": 3}
    order.sort(key=lambda i: (lp.launches[i].start, rank[lp.launches[i].role]))
    stops = {i: lp.launches[i].stop for i in order if lp.launches[i].stop is not None}
    starter = _starter(lab, lp, st)
    st.t0 = starter.begin(order)
    st.starts.boot_t0 = boot_clock() - (time.monotonic() - st.t0)
    next_second = 1
    while True:
        now = time.monotonic() - st.t0
        st.elapsed = min(now, duration)
        busy = starter.due()  # True: more are due, so no sleep this turn
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
            if next_second % RECORD_EVERY == 0:
                record()
            next_second += 1
        if now >= duration + TAIL:
            break
        if not busy:
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
    st.stop.enter("teardown")
    st.stop.checkpoint("teardown")
    try:
        lab.down()
    finally:
        st.stop.enter("tables")
        if lp is not None and st.t0 is not None:
            try:
                _write_tables(res, st, lp)
            except Exception as exc:  # noqa: BLE001 - the record must still be written
                if st.status in ("running", "complete"):
                    st.status = "failed"
                st.error = st.error or f"writing the tables failed: {type(exc).__name__}: {exc}"
        if not (run_dir / "env.json").exists():
            write_json_atomic(run_dir / "env.json", environment(lab))
        _settle(st)
        _record(res, st)
        try:
            st.stop.enter("analysis")
            st.stop.checkpoint("analysis")
            _analyse(run_dir, st.analyse)
            _record(res, st)  # with the analysis's own time in phase_s
        except Interrupted:
            # The data and the record are complete; `mcclab report` builds the rest.
            _settle(st)
            _record(res, st)


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
    tables.per_second(series, st.t0, seconds).to_csv(st.run_dir / resultsdir.PER_SECOND_CSV,
                                                     index=False)
    agents = [(Path(launch.log), launch.flow, launch.node, launch.role) for launch in lp.launches
              if launch.role in ("sender", "receiver")]
    tables.protocol_table(agents, st.t0, seconds).to_csv(
        st.run_dir / resultsdir.PROTOCOL_CSV, index=False)
    timing = [tables.AgentLaunch(Path(launch.log), launch.flow, launch.node, launch.role,
                                 launch.start, launch.stop)
              for launch in lp.launches if launch.role in ("sender", "receiver")]
    tables.agent_timing_table(timing, st.t0).to_csv(st.run_dir / resultsdir.AGENTS_CSV,
                                                    index=False)
    _write_starts(lp, st)
    if st.links is not None:
        st.links.close()


def _analyse(run_dir: Path, analyse: Callable[[Path], object] | None) -> None:
    """Summary, figures and report from the folder alone, by the injected ``analyse``.

    A failing analysis must not hide the run: the data are written already and
    `mcclab report` can rebuild once the problem is fixed.
    """
    if analyse is None:
        return
    try:
        analyse(run_dir)
    except Exception as exc:  # noqa: BLE001 - reported, never fatal to the run record
        (run_dir / "analysis-error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
