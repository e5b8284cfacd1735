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
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from standins import stand_ins

from mcclab.model.loader import load_topology
from mcclab.testbed.inventory import load_inventory
from mcclab.testbed.provision import plan_provision, run_plan

# timeout: the whole playbook in check mode took about 35 s here (two cores), twice
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


def test_provision_check_mode_over_ssh_on_one_stand_in(tmp_path):
    topo = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
    tag = f"pv{os.getpid() % 100000}"  # this test's own names, never a lab's
    folder = tmp_path / "standins"
    # Ansible's master sockets live in the work folder: a short path (108 bytes).
    work = Path(tempfile.mkdtemp(prefix="mcp-", dir="/tmp"))
    lines: list[str] = []
    try:
        with stand_ins(topo, tag, folder, only=["s1"]) as si:
            inv = load_inventory(si.inventory, None)  # no experiment: every host listed
            assert list(inv.hosts) == ["s1"]
            address = si.hosts["s1"].address
            assert _accepted(folder / "sshd-s1.log") == []
            plan = plan_provision(inv, work, check=True)
            start = time.monotonic()
            result = run_plan(plan, work, lines.append)
            took = time.monotonic() - start
            logins = _accepted(folder / "sshd-s1.log")
            # every master connection Ansible opened was closed after it
            assert list((work / "cp").iterdir()) == []
            # The command line does the same, its output streamed, its summary last.
            cli = subprocess.run([sys.executable, "-m", "mcclab", "testbed", "provision",
                                  "--inventory", str(si.inventory), "--check"],
                                 capture_output=True, text=True, timeout=300, check=False,
                                 env={**os.environ, "COLUMNS": "200"})
            cli_logins = _accepted(folder / "sshd-s1.log")[len(logins):]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"playbook in check mode on the stand-in: {took:.1f} s")
    # Ansible reached the stand-in itself: its sshd, on the control network only it and
    # the control namespace have, let root in from the controller's side.
    assert logins and all(who == ("root", str(si.plan.control_gateway.ip)) for who in logins)
    assert address == str(si.plan.control["s1"].ip)
    counts = result.recap["s1"]
    assert list(result.recap) == ["s1"]
    assert counts["unreachable"] == 0 and counts["failed"] == 0, "\n".join(lines[-40:])
    assert counts["ok"] >= 20  # the roles' tasks ran (facts, packages, routers, venv)
    assert "TASK [routers : Install FRR and smcroute] " in "\n".join(lines)
    # Provisioned already: nothing would change, but for the venv's reinstall when its
    # stamp was written from another checkout of mcclab.
    changed = set(result.changed.get("s1", []))
    assert changed <= REINSTALL, changed
    if STAMP.exists() and f"repo: {REPO}\n" not in STAMP.read_text():
        assert changed == REINSTALL
    assert counts["changed"] == len(result.changed.get("s1", []))
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr
    out = cli.stdout.splitlines()
    assert out[0] == (f"provisioning 1 host (check mode: nothing is changed): s1 "
                      f"(root@{address}:22)")
    assert any(line.startswith("PLAY RECAP") for line in out)
    assert out[-1] == f"s1: ok, would change {counts['changed']} tasks"
    assert cli_logins
