"""When each process of a run starts: listeners before the clock, armed tools, and the lags.

The runner used to start every launch itself, one after another, when its planned
time came. At ``t = 0`` of ``ormcc-fig4-n64`` that is 64 iperf3 servers (each
waited for until it listened), 193 agents and 64 iperf3 clients. Once the agents
run, the runner is one of some 200 busy processes on two cores: each further
``Popen`` waited ~2 s for the CPU, and the clients, last in line, began 42 s to
173 s late in a 120-s run. Serial starts by one process cannot keep a schedule
once the load they create is there.

So the start-up is split by what a process needs:

* **before the clock**: listeners planned at 0 (iperf3 servers) are started
  before ``t0``, all at once, and then waited for together until each listens;
* **armed**: exec'd tools (iperf3 clients) are started before ``t0`` too, as a
  small ``sh`` wrapper that blocks on a pipe (the *gate*). The runner closes the
  gate at ``t0``; each wrapper then sleeps its planned start, notes the time and
  ``exec``s the tool. Each waits for itself, in parallel, so a loaded runner no
  longer delays them; what remains is one wake-up and one exec;
* **timed**: everything else (agents and on/off UDP tools, forked by the fork
  server) is started by the runner's loop at its planned time, as before.

:class:`StartRecord` keeps, per launch, the planned time, when it really began
and how; the runner writes it to ``tables/starts.csv`` and the worst lag to
``run.json``. The sequencing is :class:`Starter`, with its clock and its ways to
start a process injected, so it is tested on a fake clock.
"""

from __future__ import annotations

import csv
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from mcclab.commands import Cmd
from mcclab.execute import Runner, full_argv
from mcclab.state import LabState, TrackedProcess

# Roles started before the clock when planned at 0, and waited for together.
BEFORE_CLOCK = frozenset({"server"})
# Roles started by a wrapper that waits for the gate and its planned time.
ARMED = frozenset({"client"})
# A start later than this after its planned time is late (issue and docs: one second).
LATE = 1.0
# The wrapper: wait for the gate's EOF on stdin, sleep the planned start, note the time
# (CLOCK_BOOTTIME, via /proc/uptime: no fork), exec the tool. $1 delay, $2 key, $3 file.
_WRAPPER = ('read _gate; [ "$1" = 0 ] || sleep "$1"; read up _idle < /proc/uptime; '
            'echo "$2 $up" >> "$3"; shift 3; exec "$@"')


class Timed(Protocol):
    """What the starter needs of a launch."""

    role: str
    start: float


def armed_argv(argv: Sequence[str], delay: float, key: str, marks: Path) -> tuple[str, ...]:
    """``argv`` wrapped to start ``delay`` seconds after the gate opens, noting
    ``key <boot-time>`` in ``marks`` just before it execs."""
    seconds = "0" if delay <= 0 else f"{delay:.3f}"
    return ("sh", "-c", _WRAPPER, "mcclab-armed", seconds, key, str(marks), *argv)


def boot_clock() -> float:
    """CLOCK_BOOTTIME, the clock /proc/uptime shows (the wrappers' marks)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def read_marks(path: Path) -> dict[str, float]:
    """``key -> boot time`` of every mark an armed wrapper wrote ({} if none)."""
    out: dict[str, float] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


class Gate:
    """A pipe: armed wrappers read its read end and wake together when it is closed."""

    def __init__(self) -> None:
        # Neither end is inheritable: Popen dups the read end onto a wrapper's stdin,
        # and the write end must stay with the runner alone, or EOF never comes.
        self.read_fd, self.write_fd = os.pipe()

    def release(self) -> None:
        """Open the gate: every wrapper reading it sees EOF (a second call does nothing)."""
        for fd in (self.write_fd, self.read_fd):
            if fd >= 0:
                os.close(fd)
        self.read_fd = self.write_fd = -1


def spawn_armed(state: LabState, command: Cmd, gate: Gate, log: Path, what: str,
                runner: Runner | None = None) -> TrackedProcess:
    """Start an armed wrapper (``command`` from :func:`armed_argv`) in its own session,
    stdin on the gate, output to ``log``; record it in the lab's state. ``runner``
    (the lab's) decides where it runs; without one, here."""
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = (runner.argv(command, spawn=True) if runner is not None
            else full_argv(command, spawn=True))
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdin=gate.read_fd, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return state.add_process(proc.pid, what)


@dataclass
class Start:
    """One launch's start: planned and real (seconds of the run's clock)."""

    index: int
    planned: float
    how: str  # before-clock | armed | timed
    began: float | None = None

    @property
    def lag(self) -> float | None:
        """Seconds after its planned time it began (None: never seen to begin)."""
        return None if self.began is None else self.began - self.planned


@dataclass
class StartRecord:
    """Every launch's start, filled in while the run goes."""

    starts: dict[int, Start] = field(default_factory=dict)
    boot_t0: float | None = None  # CLOCK_BOOTTIME at the run's t0

    def note(self, index: int, planned: float, how: str, began: float | None = None) -> None:
        """Record a launch (``began`` on the run's clock, if known now)."""
        self.starts[index] = Start(index, planned, how, began)

    def began(self, index: int, at: float) -> None:
        """The launch began at ``at`` (run clock)."""
        self.starts[index].began = at

    def take_marks(self, marks: dict[str, float]) -> None:
        """Fill in armed launches from their wrappers' marks (boot clock)."""
        if self.boot_t0 is None:
            return
        for key, boot in marks.items():
            start = self.starts.get(int(key)) if key.isdigit() else None
            if start is not None and start.how == "armed":
                start.began = boot - self.boot_t0

    def worst(self) -> float | None:
        """The largest lag of any launch that began (None if none did)."""
        lags = [s.lag for s in self.starts.values() if s.lag is not None]
        return max(lags) if lags else None

    def late(self, limit: float = LATE) -> list[Start]:
        """Launches that began more than ``limit`` after their time, or never."""
        return [s for s in self.starts.values() if s.lag is None or s.lag > limit]

    def write(self, path: Path, describe: Callable[[int], dict[str, object]]) -> None:
        """``tables/starts.csv``: one row per launch, ``describe`` naming its flow,
        role and node (and, for an iperf3 client, ``test_began_s``: when the server saw
        its test begin, after the connection set-up)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, ["flow", "role", "node", "how", "planned_s",
                                         "began_s", "lag_s", "test_began_s"], restval="")
            writer.writeheader()
            for s in sorted(self.starts.values(), key=lambda s: (s.planned, s.index)):
                writer.writerow({**describe(s.index), "how": s.how,
                                 "planned_s": round(s.planned, 3),
                                 "began_s": "" if s.began is None else round(s.began, 3),
                                 "lag_s": "" if s.lag is None else round(s.lag, 3)})


def split(launches: Sequence[Timed]) -> tuple[list[int], list[int], list[int]]:
    """Indices of the launches started before the clock, armed, and timed (each in
    planned order)."""
    before, armed, timed = [], [], []
    for i in sorted(range(len(launches)), key=lambda i: launches[i].start):
        launch = launches[i]
        if launch.role in BEFORE_CLOCK and launch.start <= 0:
            before.append(i)
        elif launch.role in ARMED:
            armed.append(i)
        else:
            timed.append(i)
    return before, armed, timed


@dataclass
class Starter:
    """Sequences a run's starts; how a process is started is injected.

    ``start_many(indices)`` starts launches at once and returns when they are ready
    (listeners); ``arm(index, delay)`` starts a wrapper that begins ``delay``
    seconds after ``release()``; ``start(index)`` starts a launch now. ``clock``
    is monotonic seconds.
    """

    launches: Sequence[Timed]
    clock: Callable[[], float]
    start_many: Callable[[list[int]], None]
    arm: Callable[[int, float], None]
    release: Callable[[], None]
    start: Callable[[int], None]
    record: StartRecord = field(default_factory=StartRecord)
    timed: list[int] = field(default_factory=list)
    t0: float = 0.0

    def begin(self, order: Iterable[int] | None = None) -> float:
        """Listeners, then armed wrappers, then the clock starts and the gate opens;
        returns ``t0``. ``order`` (default: every launch in planned order) names the
        launches this starter starts and the order of the timed ones."""
        indices = list(order) if order is not None else sorted(
            range(len(self.launches)), key=lambda i: self.launches[i].start)
        before, armed, timed = split(self.launches)
        before, armed = [i for i in before if i in indices], [i for i in armed if i in indices]
        keep = set(timed)
        self.timed = [i for i in indices if i in keep]
        try:
            self.start_many(before)
            for i in armed:
                self.arm(i, self.launches[i].start)
            self.t0 = self.clock()
        finally:
            # Also on a failure: the pipe is closed, the wrappers armed so far are ended
            # with the run's other processes.
            self.release()
        for i in before:
            self.record.note(i, 0.0, "before-clock", 0.0)
        for i in armed:
            self.record.note(i, self.launches[i].start, "armed")
        return self.t0

    def due(self, budget: float = 0.25) -> bool:
        """Start timed launches whose time has come (in order), noting when, for up to
        ``budget`` seconds; whether more are due already.

        The budget hands the loop back between starts: 193 agents due at 0 took 160 s
        to start on a loaded machine, and a loop that started them all in one go
        neither sampled links nor watched iperf3 meanwhile.
        """
        until = self.clock() + budget
        while self.timed and self.launches[self.timed[0]].start <= self.clock() - self.t0:
            if self.clock() >= until:
                return True
            i = self.timed.pop(0)
            self.start(i)
            self.record.note(i, self.launches[i].start, "timed", self.clock() - self.t0)
        return False
