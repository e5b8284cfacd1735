"""A band edge that no measurement can cross does not make a verdict marginal.

A share cannot exceed 1 and a loss cannot fall below 0, so a share of 1.00 in the
band [0.9, 1] or a loss of 0 in [0, 0.01] cannot turn over by moving past that edge:
the margin counts only edges inside the quantity's domain (docs/reproduce.md, *The
margin*). These tests pin that rule in ``summary.margin``, its threading through the
summary of a run (built-in kinds and a ``measure`` plugin's declared domain), the
index, and the reading the docs' criterion tables are checked with.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from doc_criteria_support import margin_of, verdict_of
from synthetic_runs import rows, write_run

from mcclab.analysis.index import load_entries
from mcclab.analysis.plugins import measure
from mcclab.analysis.results import load_run
from mcclab.analysis.summary import is_marginal, judge, margin, summarise
from mcclab.audit import FRACTION_KINDS, FRACTION_MEASURES, Criterion, scale_of
from mcclab.model.plugins import get_measure
from mcclab.model.quantities import KIND_DOMAINS, domain_of

FRACTION = (0.0, 1.0)
OPEN = (0.0, math.inf)


def _verdict_and_margin(value: float, band: tuple[float, float],
                        domain: tuple[float, float] | None) -> tuple[str, float | None, bool]:
    """(verdict, margin, marginal) of ``value`` judged by the range ``band`` alone."""
    verdict = judge(value, None, None, band)
    inside = margin(value, None, None, band, domain)
    return verdict, inside, is_marginal(verdict, inside)


# ---------------------------------------------------------------- the rule


def test_a_share_on_the_domain_s_upper_end_is_not_marginal():
    verdict, inside, marginal = _verdict_and_margin(1.0, (0.9, 1.0), FRACTION)
    # Only the lower edge can be crossed: it lies a whole band (two half-widths) away.
    assert (verdict, marginal) == ("pass", False)
    assert inside == pytest.approx(2.0)


def test_a_share_a_hair_below_the_domain_s_end_is_not_marginal_either():
    # 0.999 is 0.001 from 1.0, but nothing lies beyond 1.0: the verdict turns over only
    # if the value falls to 0.9, 0.099 away, nearly the whole band.
    verdict, inside, marginal = _verdict_and_margin(0.999, (0.9, 1.0), FRACTION)
    assert (verdict, marginal) == ("pass", False)
    assert inside == pytest.approx(0.099 / 0.05)


def test_a_loss_of_zero_in_a_band_from_zero_is_not_marginal():
    verdict, inside, marginal = _verdict_and_margin(0.0, (0.0, 0.01), FRACTION)
    assert (verdict, marginal) == ("pass", False)
    assert inside == pytest.approx(2.0)
    # a throughput of 0 under a band from 0 likewise: rates are not negative
    assert margin(0.0, None, None, (0.0, 2.16e6), OPEN) == pytest.approx(2.0)


def test_a_value_near_an_edge_that_can_be_crossed_is_still_marginal():
    # near the interior edge of a band that touches the domain's end
    verdict, inside, marginal = _verdict_and_margin(0.903, (0.9, 1.0), FRACTION)
    assert (verdict, marginal) == ("pass", True)
    assert inside == pytest.approx(0.06)
    # a loss near the upper end of a band from 0
    verdict, inside, marginal = _verdict_and_margin(0.0098, (0.0, 0.01), FRACTION)
    assert (verdict, marginal) == ("pass", True)
    assert inside == pytest.approx(0.04)


def test_a_fail_near_an_edge_is_still_marginal():
    verdict, inside, marginal = _verdict_and_margin(0.0102, (0.0, 0.01), FRACTION)
    assert (verdict, marginal) == ("fail", True)
    assert inside == pytest.approx(-0.04)
    verdict, inside, marginal = _verdict_and_margin(0.897, (0.9, 1.0), FRACTION)
    assert (verdict, marginal) == ("fail", True)
    assert inside == pytest.approx(-0.06)
    # A value beyond an edge the domain says cannot be crossed (a share just above 1
    # from a queue draining into the window) is a fail, read as any other.
    verdict, inside, marginal = _verdict_and_margin(1.002, (0.9, 1.0), FRACTION)
    assert (verdict, marginal) == ("fail", True)
    assert inside == pytest.approx(-0.04)


def test_a_band_with_no_edge_that_can_be_crossed_has_no_margin():
    for value in (0.0, 0.5, 1.0):
        verdict, inside, marginal = _verdict_and_margin(value, (0.0, 1.0), FRACTION)
        assert (verdict, inside, marginal) == ("pass", None, False)
    # edges beyond the domain's ends count as on them
    assert margin(1.0, None, None, (-0.1, 1.1), FRACTION) is None


def test_a_tolerance_band_reaching_past_the_domain_keeps_its_half_width():
    # utilisation 99.5 % +-5 %: [0.94525, 1.04475]; only the lower edge can be crossed
    inside = margin(1.0, 0.995, 0.05, None, FRACTION)
    assert inside == pytest.approx((1.0 - 0.94525) / 0.04975)
    assert not is_marginal("pass", inside)


@pytest.mark.parametrize(("value", "band"), [
    (0.55, (0.45, 0.65)), (0.454, (0.45, 0.65)), (0.64, (0.45, 0.65)), (0.3, (0.45, 0.65)),
    (0.95, (0.9, 0.99)), (0.999, (0.9, 0.99)), (0.1, (0.001, 0.2)),
])
def test_a_band_inside_the_domain_reads_as_without_one(value, band):
    assert margin(value, None, None, band, FRACTION) == pytest.approx(
        margin(value, None, None, band))
    # the ordinary definition: distance to the nearer edge over the half-width
    half = (band[1] - band[0]) / 2
    assert margin(value, None, None, band) == pytest.approx(
        (half - abs(value - (band[0] + half))) / half)


def test_without_a_domain_every_edge_counts():
    assert margin(1.0, None, None, (0.9, 1.0)) == pytest.approx(0.0)
    assert margin(1.0, None, None, (0.9, 1.0), None) == pytest.approx(0.0)


# ---------------------------------------------------------------- the domains


def test_every_kind_and_fraction_measure_has_its_domain():
    assert domain_of("share") == domain_of("utilisation") == FRACTION
    assert domain_of("loss") == domain_of("fairness") == FRACTION
    assert domain_of("throughput") == domain_of("ratio") == OPEN
    # The audit's fraction scales and the margin's domains must not drift apart.
    assert {k for k, d in KIND_DOMAINS.items() if d == FRACTION} == set(FRACTION_KINDS)
    for name in sorted(FRACTION_MEASURES):
        assert get_measure(name).domain == FRACTION, name
        assert domain_of("measure", name) == FRACTION, name
        assert scale_of("measure", name).name == "fraction"
    # a measure that declares none, and one no longer registered, have none
    assert domain_of("measure", "ormcc.rtt_cr") is None
    assert domain_of("measure", "nosuchprefix.gone") is None
    assert domain_of("measure", None) is None


def test_a_measure_refuses_an_empty_domain():
    with pytest.raises(ValueError, match="domain"):
        measure("marginunit.empty", domain=(1, 0))


# ---------------------------------------------------------------- threaded through


@measure("marginunit.full", unit="1", domain=(0, 1))
def _full(run) -> float:  # noqa: ANN001
    """A fraction that is at its most: 1."""
    return 1.0


@measure("marginunit.open", unit="1")
def _open(run) -> float:  # noqa: ANN001
    """The same value from a measure that declares no domain."""
    return 1.0


# m reaches r1 at 1 Mbit/s with no loss over the window (10, 60].
REFERENCES = [
    {"kind": "loss", "label": "loss", "source": "lab check", "flow": "m", "paper": 0,
     "within": [0, 0.01]},
    {"kind": "share", "label": "share of 1", "source": "lab check", "flow": "m",
     "capacity": "1Mbit", "paper": 1, "within": [0.9, 1.0]},
    {"kind": "share", "label": "share near 0.9", "source": "lab check", "flow": "m",
     "capacity": "1.108Mbit", "paper": 1, "within": [0.9, 1.0]},
    {"kind": "measure", "label": "fraction measure", "source": "lab check",
     "measure": "marginunit.full", "paper": 1, "within": [0.9, 1.0]},
    {"kind": "measure", "label": "open measure", "source": "lab check",
     "measure": "marginunit.open", "paper": 1, "within": [0.9, 1.0]},
]
# label: (margin, marginal)
EXPECTED = {"loss": (2.0, False), "share of 1": (2.0, False),
            "share near 0.9": ((1e6 / 1.108e6 - 0.9) / 0.05, True),
            "fraction measure": (2.0, False), "open measure": (0.0, True)}


def _run(results: Path) -> Path:
    return write_run(results / "margins" / "20261121-201500-m1",
                     rows("m", "multicast", "r1", 1e6, range(1, 61)), references=REFERENCES)


def test_the_summary_of_a_run_counts_only_edges_that_can_be_crossed(tmp_path):
    quantities = {q.label: q for q in summarise(load_run(_run(tmp_path))).quantities}
    assert set(quantities) == set(EXPECTED)
    for label, (inside, marginal) in EXPECTED.items():
        q = quantities[label]
        assert q.verdict == "pass", label
        assert q.margin == pytest.approx(inside), label
        assert q.marginal is marginal, label
        assert ("marginal" in q.note) is marginal, label


def test_the_index_counts_only_edges_that_can_be_crossed(tmp_path):
    (entry,) = load_entries([_run(tmp_path)])
    got = {row.label: (row.margin, row.marginal) for row in entry.rows}
    assert set(got) == set(EXPECTED)
    for label, (inside, marginal) in EXPECTED.items():
        assert got[label][0] == pytest.approx(inside), label
        assert got[label][1] is marginal, label


def _criterion(kind: str, band: tuple[float, float]) -> Criterion:
    """A criterion as ``mcclab audit bands`` reads it (``kind``: a measure's name)."""
    return Criterion(experiment="x", spec="x.yaml", profiles=["paper"], label="x", kind=kind,
                     unit="1", source="Table I", paper=1.0, tolerance=None, within=band,
                     band=band, scale=scale_of("measure", kind), origin="paper")


def test_the_doc_tables_read_the_measure_s_domain_as_the_index_does():
    cr_share = _criterion("ormcc.cr_share", (0.5, 1.0))
    assert margin_of(cr_share, 1.0) == pytest.approx(2.0)
    assert verdict_of(cr_share, 1.0) == "met"
    assert verdict_of(cr_share, 0.52) == "marginal met"
    assert verdict_of(cr_share, 0.48) == "marginal missed"
    # a measure that declares no domain keeps both edges
    ratio = _criterion("ormcc.leaf_ratio", (0.5, 1.0))
    assert margin_of(ratio, 1.0) == pytest.approx(0.0)
    assert verdict_of(ratio, 1.0) == "marginal met"
    # a built-in kind: a loss of 0 in [0, 0.1 %]
    loss = _criterion("loss", (0.0, 0.001))
    assert margin_of(loss, 0.0) == pytest.approx(2.0)
    assert verdict_of(loss, 0.0) == "met"
