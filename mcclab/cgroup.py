"""A lab's own cgroup v2, so every process it starts can be found and killed, recorded or not.

The lab's owner (the process that runs ``Lab.up``) moves itself into
``<cgroup2 mount>/mcclab/<lab id>`` before it creates anything. A child is in
its parent's cgroup from the moment it is forked, so every descendant (Mininet
shells, routers, link emulators, the fork server and its tools, exporters,
iperf3) is inside, even one forked in the instant before its pid reaches the
lab's state file, and even a daemon that double-forks into a new session.
Writing ``1`` to ``cgroup.kill`` (Linux 5.14+) SIGKILLs all of them at once (all
but a process whose main thread has exited before its others, which :func:`kill`
then ends by pid).
At teardown the owner moves back to its own cgroup first, so the kill spares it.

Where there is no cgroup2 mount, or no ``cgroup.kill``, or the hierarchy is not
writable (an unprivileged container), :func:`create` says so and the lab falls
back to its state file alone.

Pure helpers parse ``/proc`` text; the thin I/O layer below them takes the
cgroup root as a parameter, so tests can point it at a folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

PARENT = "mcclab"  # every lab's cgroup is a child of <root>/mcclab
MOUNTS = Path("/proc/mounts")


# --- pure helpers ---------------------------------------------------------------------------

def _unescape(field: str) -> str:
    """A /proc/mounts field with its octal escapes (``\\040`` for a space) decoded."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def cgroup2_mount(mounts: str) -> Path | None:
    """The first cgroup2 mount point in ``/proc/mounts`` text, or None if there is none.

    On a pure cgroup v2 system it is /sys/fs/cgroup; in hybrid mode (v1
    controllers plus the v2 tree) it is usually /sys/fs/cgroup/unified.
    """
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(_unescape(fields[1]))
    return None


def v2_path(proc_cgroup: str) -> str | None:
    """A process's cgroup v2 path (``/user.slice/...``) from its ``/proc/PID/cgroup`` text.

    The v2 line is ``0::PATH``; v1 lines carry a hierarchy number and controllers.
    """
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def lab_dir(root: Path, lab_id: str) -> Path:
    """Where the cgroup of lab ``lab_id`` lives under the cgroup2 mount ``root``."""
    if not lab_id or "/" in lab_id or lab_id in (".", ".."):
        raise ValueError(f"lab id {lab_id!r} cannot name a cgroup")
    return root / PARENT / lab_id


def under(root: Path, path: str) -> Path:
    """The directory of cgroup ``path`` (as /proc/PID/cgroup names it) under ``root``."""
    return root / path.lstrip("/")


def parse_procs(text: str) -> list[int]:
    """The pids listed in a ``cgroup.procs`` file.

    A 0 is left out: the kernel prints it for a task that was reaped while the file
    was read (or one outside the reader's pid namespace), and 0 is no process (to
    ``kill`` it means the caller's own process group).
    """
    return [pid for pid in (int(word) for word in text.split()) if pid > 0]


# --- I/O ------------------------------------------------------------------------------------

def find_root(mounts: Path = MOUNTS) -> Path | None:
    """This machine's cgroup2 mount point, or None without one."""
    try:
        return cgroup2_mount(mounts.read_text())
    except OSError:
        return None


def create(path: Path) -> bool:
    """Make the cgroup ``path``; True if it exists now and has ``cgroup.kill``.

    False means no usable cgroup (not writable, or a kernel before 5.14): the
    caller falls back to its state file, and nothing is left behind.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    if (path / "cgroup.kill").exists():
        return True
    with contextlib.suppress(OSError):
        path.rmdir()
    return False


def current(pid: int, root: Path) -> Path | None:
    """The directory of the cgroup v2 that ``pid`` is in, or None if unknown."""
    try:
        path = v2_path(Path(f"/proc/{pid}/cgroup").read_text())
    except OSError:
        return None
    return None if path is None else under(root, path)


def move(pid: int, path: Path) -> None:
    """Move process ``pid`` (all its threads) into cgroup ``path``; raises OSError if refused."""
    (path / "cgroup.procs").write_text(f"{pid}\n")


def parse_events(text: str) -> dict[str, str]:
    """The key/value lines of a ``cgroup.events`` file (``populated 1``, ``frozen 0``)."""
    return dict(line.split(None, 1) for line in text.splitlines() if len(line.split()) == 2)


def members(path: Path) -> list[int]:
    """Pids in cgroup ``path`` and its descendants (none if it does not exist)."""
    pids: list[int] = []
    if not path.is_dir():
        return pids
    for folder, _dirs, files in os.walk(path):
        if "cgroup.procs" in files:
            with contextlib.suppress(OSError):
                pids += parse_procs((Path(folder) / "cgroup.procs").read_text())
    return pids


def populated(path: Path) -> bool:
    """True while cgroup ``path`` or a descendant holds a task, a dying one included.

    ``cgroup.procs`` stops listing a process once all its threads are exiting, but
    the kernel refuses to rmdir the cgroup until that process has left it, which
    ``populated 0`` in ``cgroup.events`` reports. Without that file, the members.
    """
    try:
        text = (path / "cgroup.events").read_text()
    except FileNotFoundError:
        return bool(members(path))
    except OSError:
        return False  # the cgroup went away while we looked
    return parse_events(text).get("populated", "0") != "0"


def remove(path: Path) -> bool:
    """rmdir cgroup ``path`` and any child cgroup, deepest first; True if it is gone."""
    if not path.is_dir():
        return True
    for folder, _dirs, _files in os.walk(path, topdown=False):
        with contextlib.suppress(OSError):
            os.rmdir(folder)
    return not path.exists()


def kill(path: Path, timeout: float = 5.0) -> bool:
    """SIGKILL every process in cgroup ``path``, wait until it is empty, remove it.

    True when the cgroup is gone (or never existed). A process exits the cgroup
    as it dies, before it is reaped, so an unreaped child does not hold it; but
    it leaves a moment after it vanishes from ``cgroup.procs``, so the wait is for
    :func:`populated` to say no, and the rmdir is retried until the deadline. A
    process still listed after ``cgroup.kill`` gets a SIGKILL by pid while it waits.
    Our own process is moved to the root first if it is inside (a `mcclab clean`
    started from within a lab must not kill itself).
    """
    if not path.is_dir():
        return True
    me = os.getpid()
    root = find_root()  # once: the self-move below and the by-pid kills in the wait
    if root is not None and me in members(path):
        with contextlib.suppress(OSError):
            move(me, root)
    with contextlib.suppress(OSError):
        (path / "cgroup.kill").write_text("1\n")
    started = time.monotonic()
    deadline = started + timeout
    while True:
        if not populated(path) and remove(path):
            return True
        now = time.monotonic()
        if now >= deadline:
            return False
        # cgroup.kill signals each process through its main thread, and one whose main
        # thread has already exited while others run on was seen to survive it: what
        # is still listed after a grace period for the kill gets a process-wide SIGKILL.
        if now - started >= KILL_GRACE:
            for pid in members(path):
                if pid != me:
                    kill_member(pid, path, root)
        time.sleep(0.02)


KILL_GRACE = 0.2  # s: long enough for cgroup.kill's own victims to leave cgroup.procs


def kill_member(pid: int, path: Path, root: Path | None = None) -> bool:
    """SIGKILL process ``pid`` if it is (still) in cgroup ``path``; True if signalled.

    A pidfd pins the process before its cgroup is checked, so a pid recycled by a
    process elsewhere between the listing and the signal is never hit. ``root``: the
    cgroup2 mount (looked up when not given).
    """
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False  # gone already
    try:
        where = v2_path(Path(f"/proc/{pid}/cgroup").read_text())
        root = root or find_root()
        if where is None or root is None or not _inside(under(root, where), path):
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except OSError:  # exited meanwhile (ProcessLookupError), or /proc refused
        return False
    finally:
        os.close(fd)


def _inside(cg: Path, path: Path) -> bool:
    """Whether cgroup directory ``cg`` is ``path`` or below it."""
    return cg == path or path in cg.parents
