"""Durable record of everything a lab creates, so `mcclab clean` can undo it after SIGKILL.

Each resource is written to ``/run/mcclab/<lab>/state.json`` *before* it is
created. A runner killed at any point therefore leaves a record that names
every namespace, root-namespace interface, process group, directory and
cgroup it may have made. A process's pid is recorded only once it is started;
the lab's cgroup (``mcclab.cgroup``) holds it from its fork on, so one killed
in between is still found. Processes, the lab's owner included, are identified
by pid plus kernel start time, so a recycled pid is never mistaken for them.

`mcclab clean` removes the labs whose owner is dead (crash leftovers) and
leaves the ones in use alone, unless told to remove everything.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mcclab import cgroup
from mcclab.jsonfile import write_json_atomic

STATE_ROOT = Path("/run/mcclab")
NETNS_PREFIX = "mcl-"
ROOT_IFACE_PREFIX = "mcl"


def proc_stat_fields(pid: int) -> list[str] | None:
    """Fields 3 onwards of /proc/PID/stat (state, ppid, ...), or None if there is no such pid.

    Index ``k`` holds field ``k + 3`` of proc(5): 0 the state, 11 and 12 utime and
    stime, 19 the start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses; split after the last ')'.
    return stat.rsplit(")", 1)[1].split()


def proc_start_time(pid: int) -> int | None:
    """The process start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    fields = proc_stat_fields(pid)
    return None if fields is None else int(fields[19])


def same_process(fields: list[str] | None, start_time: int | None) -> bool:
    """Whether stat ``fields`` (see :func:`proc_stat_fields`) show a running process
    that started at ``start_time``.

    No such pid, a zombie, or a different start time (the pid was recycled) is
    not the same process. ``start_time`` None (a record written before start
    times were kept) trusts the pid alone.
    """
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return start_time is None or int(fields[19]) == start_time


def command_line(pid: int) -> str:
    """A process's command line, for messages ('' if it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


@dataclass
class TrackedProcess:
    """A process group leader this lab started."""

    pid: int
    start_time: int
    what: str
    # A node's holder shell ignores SIGTERM (it is interactive) and has nothing
    # to flush, so it is ended with SIGKILL straight away.
    stop_signal: int = signal.SIGTERM

    def alive(self) -> bool:
        """True while the same process (not a recycled pid) still runs.

        A zombie (exited, not yet reaped) is not alive: spawn() does not reap, so a
        dead child lingers as 'Z' until :func:`kill_groups` does, and a tool forked
        by the fork server is the server's child, which only the server can reap.
        """
        return same_process(proc_stat_fields(self.pid), self.start_time)


@dataclass
class LabState:
    """Everything one lab created; persisted after every change."""

    lab_id: str
    created: float = field(default_factory=time.time)
    owner_pid: int = field(default_factory=os.getpid)
    # With the pid, tells the owner from a later process that got its pid.
    owner_start: int | None = field(default_factory=lambda: proc_start_time(os.getpid()))
    netns: list[str] = field(default_factory=list)
    root_ifaces: list[str] = field(default_factory=list)
    processes: list[TrackedProcess] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    # The lab's cgroup v2 directory (None: no cgroup, the state file alone).
    cgroup: str | None = None
    status: str = "creating"

    @property
    def path(self) -> Path:
        """The lab's state directory."""
        return STATE_ROOT / self.lab_id

    def save(self) -> None:
        """Write state.json atomically."""
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path / "state.json", asdict(self))

    @classmethod
    def load(cls, path: Path) -> LabState:
        """Read a state directory back (older records lack the newer fields)."""
        data = json.loads((path / "state.json").read_text())
        data["processes"] = [TrackedProcess(**p) for p in data.get("processes", [])]
        # The defaults describe *this* process, not the record's owner: a record
        # without an owner names none (pid 0 never runs), one without its start
        # time is judged by pid alone.
        data.setdefault("owner_pid", 0)
        data.setdefault("owner_start", None)
        return cls(**data)

    def owner_alive(self) -> bool:
        """Whether the process that built this lab still runs (the lab is in use)."""
        return self.owner_pid > 0 and same_process(proc_stat_fields(self.owner_pid),
                                                   self.owner_start)

    def set_cgroup(self, path: Path | None) -> None:
        """Record the lab's cgroup (before it is created), or that it has none."""
        self.cgroup = None if path is None else str(path)
        self.save()

    def add_netns(self, name: str) -> None:
        """Record a namespace about to be created."""
        self.netns.append(name)
        self.save()

    def add_root_iface(self, name: str) -> None:
        """Record a root-namespace interface about to be created."""
        self.root_ifaces.append(name)
        self.save()

    def add_dir(self, path: Path) -> None:
        """Record a directory about to be created."""
        self.dirs.append(str(path))
        self.save()

    def add_process(self, pid: int, what: str, stop_signal: int = signal.SIGTERM
                    ) -> TrackedProcess:
        """Record a started process group leader."""
        start = proc_start_time(pid)
        proc = TrackedProcess(pid, start if start is not None else -1, what, int(stop_signal))
        self.processes.append(proc)
        self.save()
        return proc


def kill_group(proc: TrackedProcess, grace: float = 3.0) -> None:
    """SIGTERM the process group, then SIGKILL it if the leader has not gone."""
    kill_groups([proc], grace)


def kill_groups(procs: list[TrackedProcess], grace: float = 3.0) -> None:
    """SIGTERM every process group at once, wait up to ``grace`` for all, SIGKILL the rest.

    Signalling together keeps teardown at one grace period, not one per process
    (an interactive shell ignores SIGTERM and always needs the SIGKILL).
    """
    for sig, wait in ((None, grace), (signal.SIGKILL, 2.0)):
        living = [p for p in procs if p.alive()]
        for proc in living:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig or proc.stop_signal)
        deadline = time.monotonic() + wait
        while living and time.monotonic() < deadline:
            for proc in living:
                _reap(proc.pid)
            living = [p for p in living if p.alive()]
            if living:
                time.sleep(0.02)
        if not living:
            return


def _reap(pid: int) -> None:
    """Collect a child's exit status so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _netns_pids(name: str) -> list[int]:
    """Pids of every process still inside a named namespace."""
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True,
                         check=False).stdout
    return [int(p) for p in out.split()]


def _quiet(*argv: str) -> None:
    """Run a cleanup command whose failure only means 'already gone'."""
    subprocess.run(list(argv), capture_output=True, check=False)


def _remove_netns(name: str) -> None:
    """Kill whatever still runs in a named namespace, then delete it.

    Anything left inside (a daemon that escaped its group, a Mininet shell) is
    found by namespace membership, not by name.
    """
    for pid in _netns_pids(name):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
    _quiet("ip", "netns", "del", name)


def destroy(state: LabState) -> None:
    """Undo everything recorded in ``state``: processes, cgroup, namespaces, interfaces, dirs.

    The recorded process groups get their stop signal first (daemons flush their
    logs); the cgroup's kill then ends whatever is left, recorded or not.
    """
    kill_groups(list(reversed(state.processes)))
    if state.cgroup:
        cgroup.kill(Path(state.cgroup))
    for ns in state.netns:
        _remove_netns(ns)
    for iface in state.root_ifaces:
        _quiet("ip", "link", "del", iface)
    for d in state.dirs:
        shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(state.path, ignore_errors=True)


def all_states() -> list[LabState]:
    """Every lab recorded under STATE_ROOT (unreadable records are skipped)."""
    states = []
    if STATE_ROOT.is_dir():
        for path in sorted(STATE_ROOT.iterdir()):
            if (path / "state.json").is_file():
                try:
                    states.append(LabState.load(path))
                except (ValueError, TypeError, OSError):
                    continue
    return states


def leftovers() -> dict[str, list[str]]:
    """mcclab namespaces and root interfaces that exist now (by mcclab's own prefixes)."""
    ns_out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            check=False).stdout
    netns = [line.split()[0] for line in ns_out.splitlines()
             if line.startswith(NETNS_PREFIX)]
    link_out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                              check=False).stdout
    ifaces = []
    for line in link_out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(ROOT_IFACE_PREFIX):
            ifaces.append(name)
    return {"netns": netns, "interfaces": ifaces}


def lab_cgroups() -> list[str]:
    """The lab cgroups that exist now (``<cgroup2>/mcclab/*``)."""
    root = cgroup.find_root()
    parent = root / cgroup.PARENT if root is not None else None
    if parent is None or not parent.is_dir():
        return []
    return sorted(str(p) for p in parent.iterdir() if p.is_dir())


def present_now() -> dict[str, list[str]]:
    """:func:`leftovers` and the lab cgroups (:func:`lab_cgroups`) on the machine now."""
    return {**leftovers(), "cgroups": lab_cgroups()}


@dataclass
class CleanPlan:
    """What `mcclab clean` removes and what it leaves alone."""

    remove: list[LabState]
    keep: list[LabState]  # labs in use: their owner is alive
    stray_netns: list[str]  # mcclab namespaces no lab record names
    stray_ifaces: list[str]
    stray_cgroups: list[str]
    stopped: list[str] = field(default_factory=list)  # labs whose live owner was stopped


def plan_clean(states: list[LabState], present: dict[str, list[str]],
               owner_alive: Callable[[LabState], bool], everything: bool = False,
               only: str | None = None) -> CleanPlan:
    """Choose what to remove: the labs whose owner is dead (all labs if ``everything``),
    and every mcclab namespace, root interface or lab cgroup that no lab record names.

    ``present`` is :func:`leftovers` plus a ``cgroups`` list (:func:`lab_cgroups`),
    taken *before* ``states`` were read: a lab records a resource before it makes
    it, so anything present then that no record names is not a live lab's.

    ``only``: the one lab (its id) to consider. Other labs are neither removed nor
    listed, and nothing stray is swept: a stray belongs to no lab, so it is not
    this one's (its resources are recorded before they are made).
    """
    if only is not None:
        states = [s for s in states if s.lab_id == only]
        present = {}
    keep = [] if everything else [s for s in states if owner_alive(s)]
    kept = {id(s) for s in keep}
    remove = [s for s in states if id(s) not in kept]
    netns = {n for s in states for n in s.netns}
    ifaces = {i for s in states for i in s.root_ifaces}
    cgroups = {s.cgroup for s in states if s.cgroup}
    return CleanPlan(remove=remove, keep=keep,
                     stray_netns=[n for n in present.get("netns", []) if n not in netns],
                     stray_ifaces=[i for i in present.get("interfaces", []) if i not in ifaces],
                     stray_cgroups=[c for c in present.get("cgroups", []) if c not in cgroups])


def stop_owner(state: LabState, timeout: float = 30.0) -> bool:
    """Ask a live lab's owner to tear its lab down (SIGTERM) and wait for it to exit.

    True if it exited in time. A lab owner treats SIGTERM like Ctrl-C; one that
    does not exit is left to the lab's cgroup kill, which ends it too if it is
    still inside.
    """
    if not state.owner_alive():
        return True
    if state.owner_pid == os.getpid():
        return False  # a lab of this very process: its cgroup kill spares us
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.owner_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while state.owner_alive() and time.monotonic() < deadline:
        _reap(state.owner_pid)
        time.sleep(0.1)
    return not state.owner_alive()


def clean(everything: bool = False, owner_timeout: float = 30.0,
          only: str | None = None) -> CleanPlan:
    """Carry out :func:`plan_clean` on this machine and return the plan carried out.

    A lab in use is removed only with ``everything``: its owner is first asked
    to stop (:func:`stop_owner`), then whatever it left is destroyed. ``only``
    limits it to one lab (see :func:`plan_clean`).
    """
    present = present_now()
    plan = plan_clean(all_states(), present, LabState.owner_alive, everything, only)
    for state in plan.remove:
        if state.owner_alive():
            plan.stopped.append(state.lab_id)
            stop_owner(state, owner_timeout)
        destroy(state)
    for ns in plan.stray_netns:
        _remove_netns(ns)
    for iface in plan.stray_ifaces:
        _quiet("ip", "link", "del", iface)
    for path in plan.stray_cgroups:
        cgroup.kill(Path(path))
    return plan


def still_present(plan: CleanPlan, only: str | None = None) -> dict[str, list[str]]:
    """mcclab namespaces, interfaces and lab cgroups left after ``plan`` that no kept
    lab accounts for.

    With ``only`` (a clean of one lab), just those the removed labs recorded.
    """
    netns = {n for s in plan.keep for n in s.netns}
    ifaces = {i for s in plan.keep for i in s.root_ifaces}
    cgroups = {s.cgroup for s in plan.keep if s.cgroup}
    rest = present_now()
    if only is not None:
        mine_ns = {n for s in plan.remove for n in s.netns}
        mine_if = {i for s in plan.remove for i in s.root_ifaces}
        mine_cg = {s.cgroup for s in plan.remove if s.cgroup}
        rest = {"netns": [n for n in rest["netns"] if n in mine_ns],
                "interfaces": [i for i in rest["interfaces"] if i in mine_if],
                "cgroups": [c for c in rest["cgroups"] if c in mine_cg]}
    return {"netns": [n for n in rest["netns"] if n not in netns],
            "interfaces": [i for i in rest["interfaces"] if i not in ifaces],
            "cgroups": [c for c in rest["cgroups"] if c not in cgroups]}
