"""Durable record of everything a lab creates, so `mcclab clean` can undo it after SIGKILL.

Each resource is written to ``/run/mcclab/<lab>/state.json`` *before* it is
created. A runner killed at any point therefore leaves a record that names
every namespace, root-namespace interface, process group and directory it may
have made. Processes are identified by pid plus kernel start time, so a
recycled pid is never killed by mistake.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
        fields = proc_stat_fields(self.pid)
        return (fields is not None and int(fields[19]) == self.start_time
                and fields[0] not in ("Z", "X"))


@dataclass
class LabState:
    """Everything one lab created; persisted after every change."""

    lab_id: str
    created: float = field(default_factory=time.time)
    owner_pid: int = field(default_factory=os.getpid)
    netns: list[str] = field(default_factory=list)
    root_ifaces: list[str] = field(default_factory=list)
    processes: list[TrackedProcess] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    status: str = "creating"

    @property
    def path(self) -> Path:
        """The lab's state directory."""
        return STATE_ROOT / self.lab_id

    def save(self) -> None:
        """Write state.json atomically."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / "state.json.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.path / "state.json")

    @classmethod
    def load(cls, path: Path) -> LabState:
        """Read a state directory back."""
        data = json.loads((path / "state.json").read_text())
        data["processes"] = [TrackedProcess(**p) for p in data.get("processes", [])]
        return cls(**data)

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


def destroy(state: LabState) -> None:
    """Undo everything recorded in ``state``: processes, namespaces, interfaces, dirs."""
    kill_groups(list(reversed(state.processes)))
    for ns in state.netns:
        # Anything left inside (a daemon that escaped its group, a Mininet shell)
        # is found by namespace membership, not by name.
        for pid in _netns_pids(ns):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)
        _quiet("ip", "netns", "del", ns)
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


def clean_everything() -> dict[str, int]:
    """Destroy every recorded lab, then sweep any leftover mcclab namespace or interface."""
    counts = {"labs": 0, "netns": 0, "interfaces": 0}
    for state in all_states():
        destroy(state)
        counts["labs"] += 1
    rest = leftovers()
    for ns in rest["netns"]:
        destroy(LabState(lab_id=f"sweep-{ns}", netns=[ns]))
        counts["netns"] += 1
    for iface in rest["interfaces"]:
        _quiet("ip", "link", "del", iface)
        counts["interfaces"] += 1
    return counts
