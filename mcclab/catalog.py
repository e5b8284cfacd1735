"""``mcclab list``: the experiment specs, each with its paper, figure and run lengths.

Each spec is resolved with each profile through :func:`mcclab.experiment.loader.resolve`,
the same path ``mcclab run`` takes, so the durations shown are the ones a run
would have (a profile's ``set`` may shorten the run) and a spec that would not
run is reported here too, by file and field.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mcclab.experiment.loader import EXPERIMENTS, PROFILES, resolve
from mcclab.model.loader import SpecError

# "Fig. 9(a)", "Figs. 12-14", "Table 1", "Table II": the figures and tables a reference names.
_FIGURE = re.compile(r"\b(?:Figs?\.|Table)\s+[0-9IVX]+(?:\([a-z]\))?(?:-[0-9]+)?")
# Where a reference stops naming the paper and starts naming a place in it.
_PLACE = re.compile(r"^(?:sec\.|Figs?\.|Table)\s")


@dataclass
class Entry:
    """One experiment: its name, the paper and figure it reproduces, its run lengths (s).

    A duration is None when the spec has no such profile (``quick`` is optional).
    """

    name: str
    path: str
    description: str
    reference: str
    paper: str
    figure: str
    durations_s: dict[str, float | None]

    def as_dict(self) -> dict[str, Any]:
        """The entry as JSON-ready data."""
        return asdict(self)


def split_reference(reference: str) -> tuple[str, str]:
    """(paper, figures) of a spec's ``reference``: the text before the first section or
    figure, and every figure or table it names, comma-separated ('' when none)."""
    figures = ", ".join(dict.fromkeys(_FIGURE.findall(reference)))
    parts = [p.strip() for p in reference.split(",")]
    head = []
    for part in parts:
        if _PLACE.match(part):
            break
        head.append(part)
    # A reference that names no place of the paper (a lab check) is shown whole.
    paper = ", ".join(head) if figures and head else reference
    return paper, figures


def _entry(path: Path) -> Entry:
    """Resolve one spec with every profile; SpecError if any profile it defines fails."""
    durations: dict[str, float | None] = {}
    exp = None
    for profile in PROFILES:
        try:
            resolved = resolve(str(path), profile)
        except SpecError as exc:
            if profile == "quick" and any(field == "profiles.quick" and "defines no quick"
                                          in reason for field, reason in exc.problems):
                durations[profile] = None
                continue
            raise
        durations[profile] = resolved.experiment.duration
        exp = resolved.experiment
    assert exp is not None  # the paper profile always resolves or raised above
    paper, figure = split_reference(exp.reference)
    return Entry(exp.name, str(path), exp.description, exp.reference, paper, figure, durations)


def catalogue(folder: Path = EXPERIMENTS) -> tuple[list[Entry], list[SpecError]]:
    """Every ``*.yaml`` spec in ``folder`` (sorted by file name), and the ones that fail."""
    entries, errors = [], []
    for path in sorted(folder.glob("*.yaml")):
        try:
            entries.append(_entry(path))
        except SpecError as exc:
            errors.append(exc)
    return entries, errors


def default_profile(name_or_path: str) -> str:
    """The profile ``mcclab run`` and ``sweep`` take without ``--profile``.

    ``quick`` when the spec defines one, as ``make experiment`` (PROFILE=quick) and
    ``mcclab reproduce`` do, so a first run takes minutes and the paper's length
    (up to 1000 s a run) is asked for by name; a spec without a quick profile is
    run as written (``paper``). SpecError when there is no such experiment.
    """
    from mcclab.experiment.loader import find_experiment
    from mcclab.model.loader import read_yaml

    profiles = read_yaml(find_experiment(name_or_path)).get("profiles")
    return "quick" if isinstance(profiles, dict) and profiles.get("quick") else "paper"
