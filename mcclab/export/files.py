"""Write the exports of an experiment: everything is built and checked before any file is."""

from __future__ import annotations

import re
from pathlib import Path

from mcclab.export.cloudlab import DEFAULT_IMAGE, export_cloudlab
from mcclab.export.common import plan_for_experiment
from mcclab.export.ns import DEFAULT_OS, render_ns

# What may appear inside the NS file's and the RSpec's quoted strings unescaped.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+-]+$")
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_.:/+-]+$")
DEFAULT_START_SCRIPT = "/usr/local/bin/mcclab-node-start"


def check_option(value: str, what: str, path: bool = False) -> str:
    """Refuse an option value that would need quoting in Tcl or a shell ('$', spaces, quotes)."""
    pattern = _SAFE_PATH if path else _SAFE_WORD
    if not pattern.match(value):
        kind = "an absolute path of" if path else "made of"
        raise ValueError(f"{what} {value!r} must be {kind} letters, digits and _ . / + - only")
    return value


def write_emulab(experiment: str, profile: str, out: Path | None, os_image: str = DEFAULT_OS,
                 start_script: str | None = DEFAULT_START_SCRIPT) -> Path:
    """Write EXPERIMENT's NS file (default ``EXPERIMENT.ns``); return its path.

    Raises SpecError (ExportRefused for what Emulab cannot express) before
    anything is written.
    """
    plan = plan_for_experiment(experiment, profile)
    text = render_ns(plan, os_image, start_script)
    path = out or Path(f"{plan.experiment}.ns")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def write_cloudlab(experiment: str, profile: str, out: Path | None, image: str = DEFAULT_IMAGE,
                   node_type: str = "rawpc",
                   start_script: str | None = DEFAULT_START_SCRIPT) -> list[Path]:
    """Write EXPERIMENT's ``profile.py`` and ``request.xml`` into a folder; return their paths.

    The folder defaults to ``EXPERIMENT-cloudlab``. Raises SpecError
    (ExportRefused for what CloudLab cannot express) before anything is written.
    """
    plan = plan_for_experiment(experiment, profile)
    script, xml = export_cloudlab(plan, image, node_type, start_script)
    folder = out or Path(f"{plan.experiment}-cloudlab")
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "profile.py", folder / "request.xml"]
    paths[0].write_text(script)
    paths[1].write_text(xml)
    return paths
