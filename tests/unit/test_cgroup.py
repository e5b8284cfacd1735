"""A lab's cgroup: /proc parsing, the I/O layer on a fake root, and the real cgroup2 tree."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcclab import cgroup
from mcclab.state import proc_stat_fields

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
PURE_V2 = """\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0
"""


def test_the_cgroup2_mount_is_found_in_hybrid_and_pure_v2_layouts():
    assert cgroup.cgroup2_mount(HYBRID) == Path("/sys/fs/cgroup/unified")
    assert cgroup.cgroup2_mount(PURE_V2) == Path("/sys/fs/cgroup")
    v1_only = "\n".join(line for line in HYBRID.splitlines() if "cgroup2" not in line)
    assert cgroup.cgroup2_mount(v1_only) is None
    # /proc/mounts escapes a space as \040
    assert cgroup.cgroup2_mount("none /mnt/my\\040cg cgroup2 rw 0 0\n") == Path("/mnt/my cg")


def test_a_process_cgroup_v2_path_is_its_0_colon_colon_line():
    assert cgroup.v2_path("4:memory:/x\n1:cpu:/\n0::/user.slice/session-3.scope\n") == \
        "/user.slice/session-3.scope"
    assert cgroup.v2_path("0::/\n") == "/"
    assert cgroup.v2_path("4:memory:/x\n1:cpu:/\n") is None  # v1 only


def test_lab_cgroups_live_under_one_parent_and_ids_cannot_escape_it():
    root = Path("/sys/fs/cgroup")
    assert cgroup.lab_dir(root, "chain3-20260101-120000") == \
        Path("/sys/fs/cgroup/mcclab/chain3-20260101-120000")
    for bad in ("", ".", "..", "a/b"):
        with pytest.raises(ValueError):
            cgroup.lab_dir(root, bad)
    assert cgroup.under(root, "/user.slice/x") == Path("/sys/fs/cgroup/user.slice/x")
    assert cgroup.under(root, "/") == root
    assert cgroup.parse_procs("12\n345\n") == [12, 345]
    assert cgroup.parse_procs("") == []


def test_find_root_reads_the_mounts_file(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(PURE_V2)
    assert cgroup.find_root(mounts) == Path("/sys/fs/cgroup")
    assert cgroup.find_root(tmp_path / "missing") is None


def test_create_refuses_a_hierarchy_without_cgroup_kill_and_leaves_nothing(tmp_path):
    # A plain folder behaves like a kernel before 5.14: the new cgroup has no cgroup.kill.
    path = tmp_path / "mcclab" / "lab1"
    assert cgroup.create(path) is False
    assert not path.exists()


def test_create_accepts_a_cgroup_with_cgroup_kill(tmp_path):
    path = tmp_path / "mcclab" / "lab1"
    path.mkdir(parents=True)
    (path / "cgroup.kill").write_text("")
    assert cgroup.create(path) is True


def test_create_says_no_where_the_hierarchy_is_not_writable(tmp_path):
    (tmp_path / "mcclab").write_text("a file where the parent cgroup should be")
    assert cgroup.create(tmp_path / "mcclab" / "lab1") is False


def fake_cgroup(path: Path, pids: list[int]) -> Path:
    """A folder that looks like a cgroup holding ``pids``."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
    (path / "cgroup.kill").write_text("")
    return path


def test_members_counts_child_cgroups_and_a_missing_cgroup_has_none(tmp_path):
    lab = fake_cgroup(tmp_path / "lab", [10, 11])
    fake_cgroup(lab / "sub", [12])
    assert sorted(cgroup.members(lab)) == [10, 11, 12]
    assert cgroup.members(tmp_path / "missing") == []


def test_move_writes_the_pid_to_cgroup_procs(tmp_path):
    lab = fake_cgroup(tmp_path / "lab", [])
    cgroup.move(4242, lab)
    assert (lab / "cgroup.procs").read_text() == "4242\n"


def write_now(path: Path, text: str) -> None:
    """Replace a fake kernel file at once, so a reader never sees it half written."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def test_kill_writes_cgroup_kill_and_waits_for_the_cgroup_to_empty(tmp_path, monkeypatch):
    # Without cgroup.events the members are what kill waits on. A pid above any pid_max
    # (2**22) is one no process can have, so the by-pid kill of what is still listed
    # finds nothing to signal.
    lab = fake_cgroup(tmp_path / "lab", [2**31 - 1])
    monkeypatch.setattr(cgroup, "remove", lambda path: shutil.rmtree(path) is None)

    def kernel() -> None:  # the kernel empties cgroup.procs as the processes die
        time.sleep(0.3)
        write_now(lab / "cgroup.procs", "")

    threading.Thread(target=kernel).start()
    start = time.monotonic()
    assert cgroup.kill(lab, timeout=5.0) is True
    assert 0.3 <= time.monotonic() - start < 3.0
    assert not lab.exists()


def test_kill_writes_cgroup_kill_and_says_when_the_cgroup_stays(tmp_path):
    # A folder with files cannot be rmdir'd, unlike a real cgroup: kill says it is not gone.
    lab = fake_cgroup(tmp_path / "lab", [])
    assert cgroup.kill(lab, timeout=0.3) is False
    assert (lab / "cgroup.kill").read_text() == "1\n"


def test_a_pid_0_in_cgroup_procs_is_no_member():
    # The kernel lists 0 for a task reaped while the file was read; kill(0) would signal
    # the caller's own process group.
    assert cgroup.parse_procs("12\n0\n13\n") == [12, 13]


def test_events_lines_parse_to_a_dict():
    assert cgroup.parse_events("populated 1\nfrozen 0\n") == {"populated": "1", "frozen": "0"}
    assert cgroup.parse_events("") == {}


def test_kill_waits_for_a_dying_process_that_cgroup_procs_no_longer_lists(tmp_path, monkeypatch):
    # The kernel drops a process from cgroup.procs once all its threads are exiting, and
    # refuses rmdir until it has left the cgroup ("populated 0"). An rmdir between the
    # two failed once in CI and left an empty cgroup behind.
    lab = fake_cgroup(tmp_path / "lab", [])
    (lab / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    tries = []

    def rmdir_like_the_kernel(path: Path) -> bool:
        tries.append(path)
        if cgroup.parse_events((lab / "cgroup.events").read_text())["populated"] == "1":
            return False  # EBUSY
        shutil.rmtree(lab)
        return True

    monkeypatch.setattr(cgroup, "remove", rmdir_like_the_kernel)

    def kernel() -> None:
        time.sleep(0.3)
        write_now(lab / "cgroup.events", "populated 0\nfrozen 0\n")

    threading.Thread(target=kernel).start()
    start = time.monotonic()
    assert cgroup.kill(lab, timeout=5.0) is True
    assert time.monotonic() - start >= 0.3
    assert not lab.exists()


def test_kill_retries_an_rmdir_the_kernel_refused_once(tmp_path, monkeypatch):
    lab = fake_cgroup(tmp_path / "lab", [])
    answers = [False, True]
    monkeypatch.setattr(cgroup, "remove", lambda _path: answers.pop(0))
    assert cgroup.kill(lab, timeout=5.0) is True
    assert answers == []


def test_kill_gives_up_at_its_deadline_on_a_cgroup_that_stays_populated(tmp_path):
    lab = fake_cgroup(tmp_path / "lab", [])
    (lab / "cgroup.events").write_text("populated 1\n")
    start = time.monotonic()
    assert cgroup.kill(lab, timeout=0.3) is False
    assert 0.3 <= time.monotonic() - start < 2.0


def test_kill_of_a_cgroup_that_is_gone_succeeds(tmp_path):
    assert cgroup.kill(tmp_path / "never-made") is True


def test_remove_takes_child_cgroups_first(tmp_path):
    (tmp_path / "lab" / "sub" / "subsub").mkdir(parents=True)
    assert cgroup.remove(tmp_path / "lab") is True
    assert not (tmp_path / "lab").exists()


# --- the machine's own cgroup2 tree ---------------------------------------------------------

ROOT = cgroup.find_root()


def _usable() -> str | None:
    """Why the real-cgroup test cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    if ROOT is None:
        return "no cgroup2 mount"
    probe = ROOT / cgroup.PARENT / f"probe-{os.getpid()}"
    ok = cgroup.create(probe)
    cgroup.remove(probe)
    return None if ok else "cgroup2 has no cgroup.kill (Linux < 5.14) or is read-only"


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie counts as gone)."""
    fields = proc_stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


@pytest.mark.skipif(_usable() is not None, reason=str(_usable()))
def test_a_daemon_forked_inside_the_cgroup_is_killed_and_its_owner_is_spared():
    assert ROOT is not None
    path = cgroup.lab_dir(ROOT, f"unit-{os.getpid()}")
    home = cgroup.current(os.getpid(), ROOT)
    assert home is not None and home.is_dir()
    assert cgroup.create(path)
    daemon = None
    try:
        # As Lab.up does: the owner moves in, so what it forks is inside from its fork.
        cgroup.move(os.getpid(), path)
        assert cgroup.current(os.getpid(), ROOT) == path
        # A daemon that leaves its parent's session and is orphaned at once: nothing
        # records its pid, and no process-group kill of ours would reach it.
        script = ("import subprocess\n"
                  "p = subprocess.Popen(['sleep', '300'], start_new_session=True,\n"
                  "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                  "print(p.pid)\n")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             check=True, timeout=30)
        daemon = int(out.stdout)
        # As Lab.down does: the owner moves home before the kill.
        cgroup.move(os.getpid(), home)
        assert cgroup.members(path) == [daemon]
        assert os.getsid(daemon) == daemon and not _gone(daemon)

        assert cgroup.kill(path, timeout=5.0) is True
        assert not path.exists()
        deadline = time.monotonic() + 5.0
        while not _gone(daemon) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(daemon)
        assert cgroup.current(os.getpid(), ROOT) == home
    finally:
        if cgroup.current(os.getpid(), ROOT) != home:
            cgroup.move(os.getpid(), home)
        if daemon is not None and not _gone(daemon):
            os.kill(daemon, 9)
        cgroup.kill(path, timeout=5.0)


@pytest.mark.skipif(_usable() is not None, reason=str(_usable()))
def test_killing_a_cgroup_from_inside_it_moves_the_killer_out_first():
    assert ROOT is not None
    path = cgroup.lab_dir(ROOT, f"unit-self-{os.getpid()}")
    home = cgroup.current(os.getpid(), ROOT)
    assert home is not None
    assert cgroup.create(path)
    try:
        cgroup.move(os.getpid(), path)
        assert cgroup.kill(path, timeout=5.0) is True  # we are still here to see it
        assert not path.exists()
    finally:
        cgroup.move(os.getpid(), home)
        cgroup.remove(path)



# A process whose main thread has exited while another thread runs on: cgroup.kill
# (signalling each process through its main thread) was seen to leave it alive, and
# once killed it leaves cgroup.procs when its last thread starts to exit but the
# cgroup only when that thread has freed the process's memory (512 MB: ~40 ms on a
# 2-core VM), so an rmdir as soon as cgroup.procs is empty is refused.
HEADLESS = """
import ctypes, sys, threading, time
memory = bytearray(512 << 20)
threading.Thread(target=time.sleep, args=(120,)).start()
print("up", flush=True)
ctypes.CDLL(None).pthread_exit(None)
"""


TEST_PARENT = "mcclab-test"


@contextlib.contextmanager
def scratch_cgroup(name: str) -> Iterator[Path]:
    """A cgroup for one test, outside <root>/mcclab: a `mcclab clean` running meanwhile
    must not take it for a crashed lab's. Killed and removed, with its parent, after."""
    assert ROOT is not None
    path = ROOT / TEST_PARENT / f"{name}-{os.getpid()}"
    assert cgroup.create(path)
    try:
        yield path
    finally:
        cgroup.kill(path, timeout=5.0)
        with contextlib.suppress(OSError):
            (ROOT / TEST_PARENT).rmdir()


@pytest.mark.skipif(_usable() is not None, reason=str(_usable()))
def test_a_process_without_its_main_thread_is_killed_and_its_cgroup_removed():
    for trial in range(3):
        with scratch_cgroup(f"headless-{trial}") as path:
            headless_is_killed(path, trial)


def headless_is_killed(path: Path, trial: int) -> None:
    """One trial: HEADLESS in cgroup ``path``, killed, the cgroup gone."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HEADLESS], stdout=subprocess.PIPE, text=True,
        preexec_fn=lambda p=path: cgroup.move(os.getpid(), p))
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"
        deadline = time.monotonic() + 5.0
        while proc_stat_fields(proc.pid) is not None and \
                proc_stat_fields(proc.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)  # until the main thread has exited (the leader shows Z)
        assert cgroup.members(path) == [proc.pid]
        assert cgroup.kill(path, timeout=5.0) is True, f"trial {trial}: cgroup left"
        assert not path.exists()
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.skipif(_usable() is not None, reason=str(_usable()))
def test_a_listed_pid_is_signalled_only_while_it_is_in_the_cgroup(tmp_path):
    # kill_member checks the process's own cgroup after pinning it with a pidfd: a pid
    # read from cgroup.procs that now belongs to a process elsewhere is left alone.
    with scratch_cgroup("member") as path:
        one_member_signalled(path)


def one_member_signalled(path: Path) -> None:
    """A process inside cgroup ``path`` is signalled, one outside it is not."""
    outside = subprocess.Popen(["sleep", "30"])
    inside = subprocess.Popen(["sleep", "30"],
                              preexec_fn=lambda: cgroup.move(os.getpid(), path))
    try:
        assert cgroup.kill_member(outside.pid, path) is False
        assert outside.poll() is None
        assert cgroup.kill_member(inside.pid, path) is True
        assert inside.wait(timeout=10) == -signal.SIGKILL
        assert cgroup.kill_member(inside.pid, path) is False  # gone
    finally:
        outside.kill()
        inside.kill()
        outside.wait(timeout=10)
        inside.wait(timeout=10)
