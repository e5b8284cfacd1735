"""The ``lab.yaml`` model: a lab's metadata, validated like every spec file.

Unknown keys are errors and every error names the file and the field
(``mcclab.model.loader.SpecError``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from mcclab.model.loader import SpecError, read_yaml, validate

QuestionId = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
Level = Literal["intro", "intermediate", "advanced"]
# labs/NN-slug: NN is the lab's id, two digits.
FOLDER = re.compile(r"^(\d{2})-([a-z0-9][a-z0-9-]*)$")


class _Strict(BaseModel):
    """Unknown keys are errors; instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Question(_Strict):
    """One question or step of the handout."""

    id: QuestionId
    text: str = Field(min_length=1, description="one-line summary, shown by `mcclab lab check`")
    checked: bool = Field(True, description="false: a discussion question, no automatic check")


class LabSpec(_Strict):
    """The contents of a lab's ``lab.yaml``."""

    id: int = Field(ge=1, le=99, description="the lab's number, the NN of its folder")
    slug: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    title: str = Field(min_length=1)
    level: Level
    minutes: int = Field(gt=0, le=600, description="expected time for a student")
    topology: str = Field(
        description="topologies/NAME.yaml (from the repository root) or "
        "./FILE.yaml (from the lab folder)"
    )
    experiments: list[str] = Field(
        default_factory=list,
        description="experiments the lab runs: "
        "names under experiments/, or ./experiments/NAME.yaml",
    )
    questions: list[Question] = Field(min_length=1)
    live: bool = Field(
        True,
        description="`mcclab lab start` brings the topology up and keeps "
        "it up; false for labs whose steps are experiment runs (`mcclab lab run`)",
    )

    @model_validator(mode="after")
    def _unique_questions(self) -> LabSpec:
        seen: set[str] = set()
        for i, q in enumerate(self.questions):
            if q.id in seen:
                raise ValueError(f"questions[{i}].id: {q.id!r} is used twice")
            seen.add(q.id)
        return self

    def question(self, qid: str) -> Question | None:
        """The question with this id, or None."""
        return next((q for q in self.questions if q.id == qid), None)


def resolve_path(ref: str, lab_dir: Path, repo: Path) -> Path:
    """A path named in lab.yaml: ``./x`` is inside the lab folder, anything else from the repo."""
    return lab_dir / ref[2:] if ref.startswith("./") else repo / ref


def load_spec(lab_dir: Path, repo: Path) -> LabSpec:
    """Read and validate ``lab_dir/lab.yaml``; its id and slug must match the folder's name,
    and the files it names must exist. Raises SpecError naming the file and the field."""
    path = lab_dir / "lab.yaml"
    spec = validate(LabSpec, read_yaml(path), path)
    problems = []
    match = FOLDER.match(lab_dir.name)
    if match is None:
        problems.append(("(folder)", f"{lab_dir.name!r} is not named NN-slug"))
    else:
        if int(match.group(1)) != spec.id:
            problems.append(("id", f"{spec.id} does not match the folder {lab_dir.name!r}"))
        if match.group(2) != spec.slug:
            problems.append(("slug", f"{spec.slug!r} does not match the folder {lab_dir.name!r}"))
    if not resolve_path(spec.topology, lab_dir, repo).is_file():
        problems.append(("topology", f"no such file: {spec.topology}"))
    for i, name in enumerate(spec.experiments):
        exp = experiment_path(name, lab_dir, repo)
        if not exp.is_file():
            problems.append((f"experiments[{i}]", f"no such experiment: {name}"))
        elif read_yaml(exp).get("name") != exp.stem:
            # A lab's runs are filed under the experiment's name and looked up by the stem.
            problems.append(
                (f"experiments[{i}]", f"{name}: its 'name' must be {exp.stem!r}, the file's stem")
            )
    if problems:
        raise SpecError(path, problems)
    return spec


def experiment_path(name: str, lab_dir: Path, repo: Path) -> Path:
    """The spec file of an experiment named in lab.yaml."""
    if name.startswith("./"):
        return lab_dir / name[2:]
    return repo / "experiments" / (name if name.endswith(".yaml") else f"{name}.yaml")


def experiment_key(name: str) -> str:
    """The name a lab's runs of an experiment are filed under: the file's stem."""
    return Path(name).stem if name.endswith(".yaml") else name
