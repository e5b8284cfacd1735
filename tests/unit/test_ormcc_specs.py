"""The ORMCC experiment specs validate in both profiles and match their generator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcclab.experiment.loader import resolve

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted(p.stem for p in (REPO / "experiments").glob("ormcc-*.yaml"))


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_spec_validates(name, profile):
    spec = resolve(name, profile)
    spec = getattr(spec, "experiment", spec)
    assert any(f.type == "multicast" and f.protocol == "ormcc" for f in spec.flows)


def test_generated_specs_are_up_to_date(tmp_path):
    subprocess.run([sys.executable, str(REPO / "experiments" / "gen" / "ormcc.py"),
                    str(tmp_path)], check=True)
    generated = sorted(tmp_path.rglob("*.yaml"))
    assert len(generated) >= 12
    for path in generated:
        committed = REPO / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale: run experiments/gen/ormcc.py and commit its output")


def test_table1_quick_profile_scales_every_period_by_one_fifth():
    quick = getattr(resolve("ormcc-table1", "quick"), "experiment", None) or resolve(
        "ormcc-table1", "quick")
    paper = getattr(resolve("ormcc-table1", "paper"), "experiment", None) or resolve(
        "ormcc-table1", "paper")
    assert quick.duration == pytest.approx(0.2 * paper.duration)
    for q, p in zip(quick.flows[1:], paper.flows[1:], strict=True):
        assert q.start == pytest.approx(0.2 * p.start)
        assert (q.stop or quick.duration) == pytest.approx(0.2 * (p.stop or paper.duration))
