"""Each protocol's mutants (agents/<protocol>/mutants.py) still apply to its core.

A mutant whose text no longer occurs exactly once in its file cannot be applied, and
`make mutants` stops on it: this test says so at once, when a core changes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_mutants", REPO / "bench" / "mutants.py")
mutants = importlib.util.module_from_spec(_spec)
sys.modules["bench_mutants"] = mutants  # dataclasses look their module up
_spec.loader.exec_module(mutants)

TESTS, MUTANTS = mutants.load()


def test_every_protocol_with_a_behaviour_test_has_mutants():
    behaviour = {p.stem.removeprefix("test_behaviour_")
                 for p in (REPO / "tests" / "unit").glob("test_behaviour_*.py")}
    assert behaviour <= set(TESTS), behaviour - set(TESTS)
    assert {m.protocol for m in MUTANTS} == set(TESTS)


@pytest.mark.parametrize("m", MUTANTS, ids=lambda m: f"{m.protocol}: {m.what}")
def test_each_mutant_applies_once_and_changes_its_file(m):
    text = (REPO / m.file).read_text()
    assert text.count(m.old) == 1, f"{m.file}: the mutant's text occurs {text.count(m.old)} times"
    assert m.new != m.old
    assert all((REPO / t).is_file() for t in TESTS[m.protocol])
