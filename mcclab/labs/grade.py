"""Run a lab's checks and build the result ``mcclab lab check`` prints (and its --json).

The JSON format is stable for autograders::

    {"lab": 1, "slug": "igmp-pim",
     "results": [{"id": "q1", "status": "pass", "message": "..."}, ...],
     "passed": 3, "total": 5}

``status`` is one of pass, fail, pending, error, unchecked; ``results`` follows
the order of lab.yaml's questions; ``total`` counts the checked questions
(discussion questions are ``unchecked`` and count in neither number).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcclab.labs.checks import CheckFn, LabContext, Verdict
from mcclab.labs.model import LabSpec


@dataclass(frozen=True)
class Result:
    """One question's line in the report."""

    id: str
    status: str
    message: str
    text: str = ""


def run_checks(spec: LabSpec, checks: Mapping[str, CheckFn], ctx: LabContext) -> list[Result]:
    """Every question of ``spec`` in order, graded by its check.

    A check that raises, or returns something other than a Verdict, is an ``error``
    with the reason; a checked question without a check is an ``error`` too.
    """
    out = []
    for q in spec.questions:
        if not q.checked:
            out.append(
                Result(q.id, "unchecked", "discussion question: not checked automatically", q.text)
            )
            continue
        fn = checks.get(q.id)
        if fn is None:
            out.append(Result(q.id, "error", f"the lab has no check for {q.id}", q.text))
            continue
        verdict = _call(fn, ctx)
        out.append(Result(q.id, verdict.status, verdict.message, q.text))
    return out


def _call(fn: Callable[[LabContext], Any], ctx: LabContext) -> Verdict:
    """Run one check; anything but a Verdict becomes an error verdict."""
    try:
        verdict = fn(ctx)
    except Exception as exc:  # noqa: BLE001 - any failure of a check is reported, not raised
        return Verdict("error", f"the check failed: {type(exc).__name__}: {exc}")
    if not isinstance(verdict, Verdict):
        return Verdict("error", f"the check returned {type(verdict).__name__}, not a Verdict")
    return verdict


def as_json(spec: LabSpec, results: list[Result]) -> dict[str, Any]:
    """The stable --json document (see the module docstring)."""
    checked = [r for r in results if r.status != "unchecked"]
    return {
        "lab": spec.id,
        "slug": spec.slug,
        "results": [{"id": r.id, "status": r.status, "message": r.message} for r in results],
        "passed": sum(r.status == "pass" for r in checked),
        "total": len(checked),
    }


def read_answers(path: Path) -> dict[str, Any]:
    """A student's answers.yaml (missing file or empty: {}); a bad file raises SpecError."""
    from mcclab.model.loader import read_yaml

    if not path.is_file() or not path.read_text().strip():
        return {}
    return read_yaml(path)


def answers_template(spec: LabSpec, example: Path | None) -> str:
    """The answers file a student starts from: the lab's answers.example.yaml, or one
    empty key per checked question."""
    if example is not None and example.is_file():
        return example.read_text()
    lines = [
        f"# answers to {spec.title}: fill in each value, then run 'mcclab lab check {spec.id}'"
    ]
    lines += [f"{q.id}:   # {q.text}" for q in spec.questions if q.checked]
    return "\n".join(lines) + "\n"
