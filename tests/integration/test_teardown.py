"""Acceptance: `mcclab clean` removes everything, even after SIGKILL of a running `mcclab up`;
a lab's own teardown leaves nothing open in its process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcclab.lab import Lab, LabOptions
from mcclab.model.loader import load_topology
from mcclab.state import STATE_ROOT, leftovers

pytestmark = [pytest.mark.root, pytest.mark.timeout(900)]

MCCLAB = [sys.executable, "-m", "mcclab"]


def mcclab_processes() -> list[str]:
    """Processes whose network namespace is an mcclab one, or that run an mcclab daemon dir."""
    found = []
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmdline = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(STATE_ROOT) in cmdline or "mcclab.probes" in cmdline:
            found.append(f"{pid_dir.name}: {cmdline[:120]}")
    return found


def named_netns_pids() -> list[int]:
    """Pids living in any mcl- namespace."""
    pids = []
    for ns in leftovers()["netns"]:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        pids += [int(p) for p in out.split()]
    return pids


def start_up(topology: Path) -> tuple[subprocess.Popen, list[str]]:
    """Start `mcclab up` and wait until it reports the lab ready."""
    proc = subprocess.Popen(MCCLAB + ["up", "--wait", "600", str(topology)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    deadline = time.monotonic() + 600
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("ready"):
            return proc, lines
    proc.kill()
    raise AssertionError("mcclab up never became ready:\n" + "".join(lines))


def test_clean_after_sigkill_leaves_nothing_and_up_works_again(topologies):
    topology = topologies / "chain3.yaml"
    proc, _ = start_up(topology)
    # The lab exists: namespaces, root interfaces and daemons.
    assert len(leftovers()["netns"]) == 8  # chain3: src, r1-r3, four hosts
    assert named_netns_pids(), "no process runs inside the lab's namespaces"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    # SIGKILL gave the runner no chance to clean: everything is still there.
    assert leftovers()["netns"] and named_netns_pids()

    subprocess.run(MCCLAB + ["clean"], check=True, capture_output=True, timeout=120)
    rest = leftovers()
    assert rest == {"netns": [], "interfaces": []}
    ip_netns = subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
    assert "mcl-" not in ip_netns
    ip_link = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "mcl" not in ip_link
    assert mcclab_processes() == []
    # Only the machine-wide lock and its waiting queue may remain: no lab record,
    # config or log, and no ticket of ours in the queue.
    assert {p.name for p in STATE_ROOT.glob("*")} <= {".lab.lock", ".lab.queue"}
    assert not [t for t in (STATE_ROOT / ".lab.queue").glob("*")
                if t.name.endswith(f"-{proc.pid}")]

    # A second lab comes up normally and tears itself down on SIGTERM.
    proc, _ = start_up(topology)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert leftovers() == {"netns": [], "interfaces": []}
    assert mcclab_processes() == []


def test_malformed_topology_creates_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ngenerate: {kind: star, leaves: 2, leaf_link: {dealy: 5ms}}\n")
    before = leftovers()
    out = subprocess.run(MCCLAB + ["up", str(bad)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert f"{bad}: generate.leaf_link.dealy: unknown key" in out.stderr
    assert leftovers() == before


def open_descriptors() -> dict[int, str]:
    """This process's open descriptors and what each points at."""
    out = {}
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            out[int(fd.name)] = os.readlink(fd)
    return out


def shells_of_this_process() -> list[int]:
    """Children of this process not yet reaped: Mininet shells a lab left behind."""
    me = str(os.getpid())
    kids = []
    for pid_dir in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            # stat is "pid (comm) state ppid ...", and comm may hold spaces
            if pid_dir.name.isdigit() and \
                    (pid_dir / "stat").read_text().rsplit(")", 1)[1].split()[1] == me:
                kids.append(int(pid_dir.name))
    return kids


def test_lab_down_closes_what_it_opened_so_a_sweep_can_run_lab_after_lab(topologies,
                                                                         kernel_features):
    # A sweep runs every point's lab in one process. Teardown once left two pty
    # descriptors per node open, and the tenth 60-node run failed in select().
    topo = load_topology(str(topologies / "lan.yaml"))  # hosts, a router and a LAN bridge
    before = open_descriptors()
    kids = shells_of_this_process()
    for _ in range(2):
        with Lab(topo, LabOptions(features=kernel_features, lock_timeout=600.0)) as lab:
            assert len(lab.backend.hosts) == 6  # src, r1, lan1, h1-h3: each has a shell
        left = {fd: what for fd, what in open_descriptors().items() if fd not in before}
        assert left == {}
        assert shells_of_this_process() == kids
