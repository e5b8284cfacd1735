"""Find the labs under ``labs/`` and load each lab's checks.py by path.

A lab's checks module is imported under a private name (``mcclab_lab_NN``), so
labs never import one another and the folder needs no ``__init__.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from mcclab.labs.checks import CheckFn, check_id
from mcclab.labs.model import FOLDER, LabSpec, load_spec, resolve_path
from mcclab.model.loader import SpecError

REPO = Path(__file__).resolve().parents[2]
LABS = REPO / "labs"


@dataclass(frozen=True)
class LabEntry:
    """One lab of the catalogue: its folder and its validated lab.yaml."""

    dir: Path
    spec: LabSpec
    repo: Path = REPO

    @property
    def name(self) -> str:
        """The folder's name, e.g. ``01-igmp-pim`` (also the work folder's)."""
        return self.dir.name

    @property
    def topology(self) -> Path:
        """The lab's topology file."""
        return resolve_path(self.spec.topology, self.dir, self.repo)

    def work_dir(self, results: Path) -> Path:
        """The student's folder for this lab: ``<results>/labs/NN-slug``."""
        return results / "labs" / self.name


def lab_dirs(root: Path = LABS) -> list[Path]:
    """Every ``NN-slug`` folder under ``root`` holding a lab.yaml, by number."""
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and FOLDER.match(p.name) and (p / "lab.yaml").is_file()
    )


def discover(root: Path = LABS, repo: Path = REPO) -> list[LabEntry]:
    """Every lab under ``root``, validated; raises SpecError for the first bad lab.yaml."""
    return [LabEntry(d, load_spec(d, repo), repo) for d in lab_dirs(root)]


def find(ref: str | int, root: Path = LABS, repo: Path = REPO) -> LabEntry:
    """A lab by number (``1``, ``01``), slug (``igmp-pim``) or folder name."""
    text = str(ref)
    for d in lab_dirs(root):
        number, _, slug = d.name.partition("-")
        if text in (d.name, slug) or (text.isdigit() and int(text) == int(number)):
            return LabEntry(d, load_spec(d, repo), repo)
    known = ", ".join(d.name for d in lab_dirs(root)) or "none"
    raise SpecError(root / text, [("(lab)", f"no such lab; known: {known}")])


def load_checks(lab: LabEntry) -> dict[str, CheckFn]:
    """The lab's checks by question id, from its checks.py (none if it has no such file).

    Raises SpecError when the file names a question lab.yaml lacks, or checks one twice.
    """
    path = lab.dir / "checks.py"
    if not path.is_file():
        return {}
    name = f"mcclab_lab_{lab.spec.id:02d}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        module_spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop(name, None)
        raise
    checks: dict[str, CheckFn] = {}
    problems = []
    for attr, value in vars(module).items():
        qid = check_id(value)
        if qid is None:
            continue
        if lab.spec.question(qid) is None:
            problems.append((f"{attr}", f"checks question {qid!r}, which lab.yaml does not list"))
        elif qid in checks:
            problems.append((f"{attr}", f"a second check of question {qid!r}"))
        else:
            checks[qid] = value
    if problems:
        raise SpecError(path, problems)
    return checks
