"""``mcclab testbed provision --check`` over SSH on one stand-in host.

The stand-in (``standins.py``) is a namespace of this test with its own sshd on a
control network that exists only inside it; the SSH client runs in the test's
control namespace. The project's playbook runs against it in Ansible's check
mode, which changes nothing. The stand-in shares this machine's filesystem, which
the playbook has provisioned (``make setup``, CI's first step), so Ansible must
log in (the stand-in's sshd records it), fail nothing and find nothing to do but
what it would do on this machine itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from standins import stand_ins

from mcclab.model.loader import load_topology
from mcclab.state import command_line
from mcclab.testbed.inventory import load_inventory
from mcclab.testbed.provision import read_output

# timeout: the playbook in check mode took about 70 s here (two cores)
pytestmark = [pytest.mark.root, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[2]
STAMP = Path("/opt/mcclab/venv/.mcclab-install-stamp")
# The python role reinstalls mcclab when its install stamp names another checkout or
# another pyproject.toml than this one: check mode then reports those two tasks.
REINSTALL = {"python : Install mcclab editable into the venv",
             "python : Write the install stamp"}


def _accepted(log: Path) -> list[str]:
    """The logins the stand-in's sshd accepted (``-e``: its log is this file)."""
    return re.findall(r"Accepted publickey for (\S+) from (\S+)", log.read_text(errors="replace"))


def _ssh_masters(prefix: str) -> list[str]:
    """Command lines of the processes that name a path under ``prefix`` (an ssh master
    keeps its control socket's path in its process title: ``ssh: <path> [mux]``)."""
    lines = (command_line(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit())
    return [line for line in lines if prefix in line and "ssh" in line]


def test_provision_check_mode_over_ssh_on_one_stand_in(tmp_path):
    topo = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
    tag = f"pv{os.getpid() % 100000}"  # this test's own names, never a lab's
    folder = tmp_path / "standins"
    with stand_ins(topo, tag, folder, only=["s1"]) as si:
        inv = load_inventory(si.inventory, None)  # no experiment: every host listed
        assert list(inv.hosts) == ["s1"]
        address = si.hosts["s1"].address
        assert _accepted(folder / "sshd-s1.log") == []
        # The command line, as a user runs it: Ansible's output streamed, the summary
        # last. (The playbook runs once: it took about 70 s of this test's 146 s twice.)
        start = time.monotonic()
        cli = subprocess.run([sys.executable, "-m", "mcclab", "testbed", "provision",
                              "--inventory", str(si.inventory), "--check"],
                             capture_output=True, text=True, timeout=300, check=False,
                             env={**os.environ, "COLUMNS": "200"})
        took = time.monotonic() - start
        logins = _accepted(folder / "sshd-s1.log")
        # every master connection Ansible opened was closed after it (the command's
        # work folder is a temporary mcclab-provision-* folder)
        masters = _ssh_masters(f"{tempfile.gettempdir()}/mcclab-provision-")
    print(f"playbook in check mode on the stand-in, through the command line: {took:.1f} s")
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr
    assert masters == []
    # Ansible reached the stand-in itself: its sshd, on the control network only it and
    # the control namespace have, let root in from the controller's side.
    assert logins and all(who == ("root", str(si.plan.control_gateway.ip)) for who in logins)
    assert address == str(si.plan.control["s1"].ip)
    out = cli.stdout.splitlines()
    recap, changed_tasks, failures = read_output(out)
    counts = recap["s1"]
    assert list(recap) == ["s1"] and failures == {}
    assert counts["unreachable"] == 0 and counts["failed"] == 0, "\n".join(out[-40:])
    assert counts["ok"] >= 20  # the roles' tasks ran (facts, packages, routers, venv)
    assert "TASK [routers : Install FRR and smcroute] " in "\n".join(out)
    # Provisioned already: nothing would change, but for the venv's reinstall when its
    # stamp was written from another checkout of mcclab.
    changed = set(changed_tasks.get("s1", []))
    assert changed <= REINSTALL, changed
    if STAMP.exists() and f"repo: {REPO}\n" not in STAMP.read_text():
        assert changed == REINSTALL
    assert counts["changed"] == len(changed_tasks.get("s1", []))
    assert out[0] == (f"provisioning 1 host (check mode: nothing is changed): s1 "
                      f"(root@{address}:22)")
    assert any(line.startswith("PLAY RECAP") for line in out)
    assert out[-1] == f"s1: ok, would change {counts['changed']} tasks"
