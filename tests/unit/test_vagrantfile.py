"""`vagrant validate` accepts the project's Vagrantfile (Debian's vagrant package).

Skips, saying so, where vagrant is not installed (`.ci/run` installs it). The
Vagrantfile is validated from a copy, so nothing is written into the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("vagrant") is None,
                                reason="vagrant is not installed (apt-get install vagrant)")


def validate(folder: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`vagrant validate` in ``folder`` with a private VAGRANT_HOME."""
    env = os.environ | {"VAGRANT_HOME": str(home), "VAGRANT_CHECKPOINT_DISABLE": "1",
                        "VAGRANT_NO_COLOR": "1"}
    # --ignore-provider: without it vagrant refuses to validate on a machine with no usable
    # provider (CI has neither libvirt nor VirtualBox, and docker only where its daemon
    # runs); the provider blocks need those providers' plugins to be checked anyway.
    return subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)


def test_project_vagrantfile_validates(tmp_path):
    work = tmp_path / "checkout"
    work.mkdir()
    shutil.copy(REPO / "Vagrantfile", work / "Vagrantfile")
    res = validate(work, tmp_path / "home")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "validated successfully" in res.stdout


def test_a_broken_vagrantfile_is_refused(tmp_path):
    # The same file with an option the ansible_local provisioner does not have.
    work = tmp_path / "checkout"
    work.mkdir()
    text = (REPO / "Vagrantfile").read_text()
    broken = text.replace('ansible.limit = "all"',
                          'ansible.limit = "all"\n    ansible.nonsense = 1')
    assert broken != text
    (work / "Vagrantfile").write_text(broken)
    res = validate(work, tmp_path / "home")
    assert res.returncode != 0
    assert "nonsense" in res.stdout + res.stderr
