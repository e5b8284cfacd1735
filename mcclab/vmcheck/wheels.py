"""A wheelhouse for the guest's ``pip install -e /vagrant[dev]``, built natively on the host.

Under emulation pip took over 20 minutes for the project's dependencies
(resolving and downloading over TLS through QEMU's user-mode network, building,
byte-compiling). The host has the same Python (Debian 12's 3.11, x86_64), so
``pip wheel`` here produces exactly the wheels pip would pick in the guest. The
guest's pip is pointed at them (``find-links``, ``no-index``) and still does
the install itself, so the playbook's pip task runs for real.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import sys
import tomllib
from pathlib import Path

GUEST_WHEELHOUSE = "/var/cache/mcclab-wheels"
GUEST_PYTHON = (3, 11)  # Debian 12's python3
GUEST_MACHINE = "x86_64"
# setuptools' editable build asks for `wheel` on the setuptools versions that
# predate its built-in bdist_wheel; harmless otherwise.
EDITABLE_BUILD_EXTRA = ("wheel",)


def requirements(pyproject_text: str, extras: str) -> list[str]:
    """Build requirements, dependencies and the named extras' dependencies of a project."""
    data = tomllib.loads(pyproject_text)
    reqs = list(data.get("build-system", {}).get("requires", []))
    reqs += EDITABLE_BUILD_EXTRA
    reqs += runtime_requirements(pyproject_text, extras)
    return list(dict.fromkeys(reqs))


def runtime_requirements(pyproject_text: str, extras: str) -> list[str]:
    """What ``pip install PROJECT[extras]`` installs besides the project itself."""
    project = tomllib.loads(pyproject_text).get("project", {})
    reqs = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in (e.strip() for e in extras.split(",") if e.strip()):
        if extra not in optional:
            raise ValueError(f"pyproject.toml has no extra {extra!r}")
        reqs += optional[extra]
    return list(dict.fromkeys(reqs))


def venv_install_argv(venv: str, reqs: list[str]) -> list[str]:
    """The venv's pip installing ``reqs`` from the guest wheelhouse only."""
    return [f"{venv}/bin/python", "-m", "pip", "install", "--quiet", "--no-index",
            "--find-links", GUEST_WHEELHOUSE, *reqs]


def digest(reqs: list[str], python: tuple[int, int], machine: str) -> str:
    """Names the cached wheelhouse: the requirements and the interpreter they are for."""
    data = {"reqs": reqs, "python": list(python), "machine": machine}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def host_matches_guest() -> str | None:
    """Why the host's wheels would not fit the guest (None if they do)."""
    if sys.version_info[:2] != GUEST_PYTHON or platform.machine() != GUEST_MACHINE:
        return (f"the wheelhouse is built with this host's Python "
                f"{sys.version_info[0]}.{sys.version_info[1]} on {platform.machine()}, the "
                f"guest has {GUEST_PYTHON[0]}.{GUEST_PYTHON[1]} on {GUEST_MACHINE}")
    return None


def pip_wheel_argv(python: str, reqs: list[str], dest: Path) -> list[str]:
    """``pip wheel`` for every requirement (binary wheels where they exist, else built)."""
    return [python, "-m", "pip", "wheel", "--quiet", "--prefer-binary", "--no-cache-dir",
            "--wheel-dir", str(dest), *reqs]


_WHEEL = re.compile(r"^[A-Za-z0-9_.]+-[^-]+(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def wheel_files(folder: Path) -> list[Path]:
    """The wheels in a folder (a half-built wheelhouse has none or stray files)."""
    return sorted(p for p in folder.glob("*.whl") if _WHEEL.match(p.name))
