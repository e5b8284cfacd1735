"""The machine-wide lab lock, served first come, first served.

An flock alone is not fair: waiters poll it, and whichever polls first after a release
wins, so a long queue of labs can starve one of them for as long as the others run.
Each waiter therefore takes a ticket (a file named by its arrival time and pid in a
queue folder) and only tries the flock when its ticket is the oldest one whose owner
still runs. The flock stays the real exclusion: the kernel drops it when its holder
dies, even by SIGKILL, and a waiter that dies leaves a ticket that the others skip
because its pid is gone.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO


def ticket_name(arrival_ns: int, pid: int) -> str:
    """A ticket's file name: sorting names sorts by arrival."""
    return f"{arrival_ns:020d}-{pid}"


def _ticket_pid(name: str) -> int | None:
    """The pid a ticket name carries, or None for a foreign file."""
    _, _, pid = name.partition("-")
    return int(pid) if pid.isdigit() else None


def first_in_line(tickets: Iterable[str], alive: Callable[[int], bool]) -> str | None:
    """The oldest ticket whose owner is alive (the one whose turn it is)."""
    for name in sorted(tickets):
        pid = _ticket_pid(name)
        if pid is not None and alive(pid):
            return name
    return None


def _pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists."""
    return Path(f"/proc/{pid}").exists()


class LabLock:
    """An exclusive lock on ``path`` whose waiters queue in ``queue``, oldest first."""

    def __init__(self, path: Path, queue: Path, poll: float = 0.2):
        self.path = path
        self.queue = queue
        self.poll = poll
        self._file: IO[str] | None = None
        self._ticket: Path | None = None

    def acquire(self, timeout: float, ready: Callable[[], bool] = lambda: True) -> bool:
        """Wait up to ``timeout`` seconds for this waiter's turn and the flock.

        ``ready`` is asked while the flock is held; when it says no (say, a lab built by
        a process that predates this lock is still up) the flock is let go and the wait
        goes on. Returns False on timeout, holding nothing.
        """
        self.queue.mkdir(parents=True, exist_ok=True)
        self._ticket = self.queue / ticket_name(time.time_ns(), os.getpid())
        self._ticket.touch()
        self._file = open(self.path, "w")  # noqa: SIM115 - held until release()
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self._my_turn():
                    try:
                        fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        pass
                    else:
                        if ready():
                            self._drop_ticket()
                            return True
                        fcntl.flock(self._file, fcntl.LOCK_UN)
                if time.monotonic() >= deadline:
                    self.release()
                    return False
                time.sleep(self.poll)
        except BaseException:
            self.release()
            raise

    def _my_turn(self) -> bool:
        """Whether this waiter holds the oldest live ticket; dead waiters' tickets go."""
        names = os.listdir(self.queue)
        for name in names:
            pid = _ticket_pid(name)
            if pid is not None and not _pid_alive(pid):
                (self.queue / name).unlink(missing_ok=True)
        assert self._ticket is not None
        return first_in_line(names, _pid_alive) == self._ticket.name

    def _drop_ticket(self) -> None:
        """Leave the queue."""
        if self._ticket is not None:
            self._ticket.unlink(missing_ok=True)
            self._ticket = None

    def release(self) -> None:
        """Let go of the lock and of any ticket still held."""
        self._drop_ticket()
        if self._file is not None:
            self._file.close()
            self._file = None
