"""``mcclab audit bands``: criteria, their sources and bands, on the real tree and made-up specs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mcclab.audit import (
    Allowed,
    Scale,
    apply_allowlist,
    collect,
    counts,
    hardly_fails,
    load_allowlist,
    near_limit,
    origin_of,
    scale_of,
    spec_files,
)
from mcclab.cli import app
from mcclab.model.quantities import accepted_band as band

FRACTION = Scale("fraction", 0.0, 1.0)
OPEN = Scale("open")


@pytest.fixture(scope="module")
def tree():
    """The real tree's criteria, with the checked-in allowlist applied."""
    items, errors = collect()
    stale = apply_allowlist(items, load_allowlist())
    return items, errors, stale


# ---------------------------------------------------------------- the real tree


def test_every_spec_loads_and_the_audit_sees_them_all(tree):
    items, errors, _ = tree
    assert errors == []
    specs = spec_files()
    assert any("labs" in p.parts for p in specs)  # the classroom labs' specs too
    assert not any(p.name == "models.yaml" for p in specs)  # the TCP models are no spec
    assert {i.spec for i in items} <= {p.relative_to(Path(__file__).parents[2]).as_posix()
                                       for p in specs}
    c = counts(items)
    assert c["judged"] > 100 and c["criteria"] > c["judged"]  # reported-only rows are there


def test_no_criterion_lacks_a_source(tree):
    items, _, _ = tree
    assert [(i.experiment, i.label) for i in items if "no-source" in i.flags] == []


def test_the_flags_are_exactly_the_allowlist(tree):
    """A new wide band or unmarked source fails here until it is fixed or listed with a why;
    an entry that no longer matches anything fails too."""
    items, _, stale = tree
    unaccepted = [(i.experiment, i.label, i.open_flags, i.wide) for i in items if i.open_flags]
    assert unaccepted == []
    assert [(e.flag, e.experiment, e.label) for e in stale] == []


def test_known_wide_band_is_flagged(tree):
    """WEBRC Fig. 11's [0, bound] (issue 28) is what the rule is for."""
    items, _, _ = tree
    fig11 = [i for i in items if i.experiment == "webrc-fig11" and i.judged]
    assert fig11 and all("wide" in i.flags for i in fig11)
    assert {p for i in fig11 for p in i.profiles} == {"paper", "quick"}


def test_command_prints_the_table_and_the_counts():
    result = CliRunner().invoke(app, ["audit", "bands", "--flagged"])
    assert result.exit_code == 0, result.output
    assert "webrc-fig11" in result.output and "allowlisted" in result.output
    assert "can hardly fail" in result.output and "no source 0" in result.output


# ---------------------------------------------------------------- the rule


def test_band_is_the_intersection_of_tolerance_and_range():
    assert band(1.0, None, None) is None
    assert band(2.0, 0.1, None) == pytest.approx((1.8, 2.2))
    assert band(2.0, 0.1, (1.9, 3.0)) == pytest.approx((1.9, 2.2))
    assert band(0.5, None, (0.4, 0.6)) == (0.4, 0.6)


def test_scales():
    assert scale_of("share") == FRACTION
    assert scale_of("measure", "ormcc.cr_share") == FRACTION
    assert scale_of("measure", "ormcc.leaf_ratio") == OPEN
    assert scale_of("throughput").name == "open"
    fairness = scale_of("fairness", flows=4)
    assert (fairness.low, fairness.high) == (0.25, 1.0)


@pytest.mark.parametrize(("accepted", "wide", "near"), [
    ((0.45, 0.65), False, False),   # WEBRC's share band: a fifth of [0, 1], in the middle
    ((0.2, 0.75), True, False),     # more than half of [0, 1]
    ((0.3, 0.8), False, True),      # exactly half: passes, marginally
    ((0.75, 1.0), True, False),     # utilisation reaching 1 from below 0.8
    ((0.8, 1.0), False, True),      # a fifth at the end: the limit
    ((0.85, 1.0), False, False),
    ((0.0, 0.001), False, False),   # no loss: one-sided but narrow
    ((0.0, 0.25), True, False),     # a loss band up to a quarter
    ((0.9, 1.2), False, False),     # clipped to [0, 1] first: [0.9, 1]
])
def test_fraction_rule(accepted, wide, near):
    assert (hardly_fails(FRACTION, 0.5, accepted) is not None) is wide
    assert near_limit(FRACTION, 0.5, accepted) is near


def test_fairness_rule_counts_from_one_over_n():
    two = scale_of("fairness", flows=2)  # [0.5, 1]
    assert hardly_fails(two, 0.99, (0.8, 1.0)) is not None  # 40 % of [0.5, 1] at its end
    assert hardly_fails(two, 0.99, (0.9, 1.0)) is None
    assert near_limit(two, 0.99, (0.9, 1.0))
    assert hardly_fails(FRACTION, 0.99, (0.8, 1.0)) is None  # the same band on [0, 1]


@pytest.mark.parametrize(("paper", "accepted", "wide", "near"), [
    (1.0, (0.7, 1.3), False, False),
    (1.0, (0.5, 2.0), False, True),        # x2 either way: the limit itself
    (1.0, (0.45, 1.3), True, False),       # below half the paper value
    (2.11, (1.5, 4.3), True, False),       # above twice it
    (2.16e6, (0.0, 2.16e6), True, False),  # an upper bound alone
    (1.48, (0.0, 2.0), True, False),
    (1.81, (1.0, 1.81), False, True),      # 1.81 below: 90 % of the limit
    (0.0, (0.0, 0.5), True, False),        # no relative width
])
def test_open_rule(paper, accepted, wide, near):
    assert (hardly_fails(OPEN, paper, accepted) is not None) is wide
    assert near_limit(OPEN, paper, accepted) is near


def test_tolerance_bands_go_through_the_same_rule():
    assert hardly_fails(OPEN, 4e5, band(4e5, 1.0, None)) is not None   # ±100 % reaches 0
    assert hardly_fails(OPEN, 4e5, band(4e5, 0.33, None)) is None
    assert hardly_fails(FRACTION, 0.5, band(0.5, 0.6, None)) is not None  # [0.2, 0.8]
    assert hardly_fails(OPEN, 1.0, None) is None  # reported only: nothing to fail


def test_origins():
    assert origin_of("", "WEBRC, Fig. 6", None) == "none"
    assert origin_of("   ", "WEBRC, Fig. 6", None) == "none"
    assert origin_of("Fig. 9: 4.87 Mbit/s", "", None) == "paper"
    assert origin_of("Table II: 415.4 kbit/s", "", None) == "paper"
    assert origin_of("sec. V-D: 97.7 %", "", None) == "paper"
    assert origin_of("Eqs. 1 and 7 at 1 %", "", None) == "paper"
    assert origin_of("lab check: no number in the paper", "", None) == "lab check"
    assert origin_of("keeps the link busy", "lab check (ORMCC)", None) == "lab check (spec)"
    assert origin_of("keeps the link busy", "ORMCC", None) == "unmarked"
    assert origin_of("goodput over 12.5 Mbit/s (paper: 39.5 of 50)", "", None) == "unmarked"
    assert origin_of("as above, without the start-up", "", "paper") == "paper"
    assert origin_of("as above, without the start-up", "", None) == "unmarked"


# ---------------------------------------------------------------- synthetic specs


SPEC = """\
name: {name}
reference: "{reference}"
topology: topologies/webrc-dumbbell.yaml
duration: 60s
warmup: 10s
flows:
  - name: webrc
    type: multicast
    protocol: webrc
    sender: s1
    receivers: [d1]
    ssm: true
    params: {{session_rate: 1Mbit, packet_size: 1024B}}
references: {references}
profiles:
  quick:
    set: {{duration: 30s}}
"""


def _spec(root: Path, name: str, references: list[dict], reference: str = "Synthetic, Fig. 1",
          where: str = "experiments") -> Path:
    folder = root / where
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, reference=reference,
                                references=yaml.safe_dump(references, default_flow_style=True,
                                                          width=10_000).strip()))
    return path


def _util(label: str, source: str, **band_: object) -> dict:
    return {"kind": "utilisation", "label": label, "source": source, "flows": ["webrc"],
            "capacity": "1Mbit", "paper": 0.95, **band_}


def test_synthetic_tree_flags(tmp_path):
    _spec(tmp_path, "alpha", [
        _util("ok", "Fig. 1: 95 %", within=[0.85, 1.0]),
        _util("wide", "Fig. 1: 95 %", within=[0.5, 1.0]),
        _util("nosource", "", tolerance="5%"),
        _util("unmarked", "keeps the link busy", tolerance="5%"),
        _util("inherits", "as above, at another time", tolerance="5%"),
        _util("reported", "keeps the link busy"),  # no criterion: not a check at all
    ])
    _spec(tmp_path, "beta", [_util("checked", "lab check: the link stays busy",
                                   within=[0.5, 1.0])], where="labs/01-x/experiments")
    (tmp_path / "experiments" / "tcp").mkdir()
    (tmp_path / "experiments" / "tcp" / "models.yaml").write_text("models: {}\n")
    items, errors = collect(tmp_path)
    assert errors == []
    found = {i.label: i for i in items}
    assert set(found) == {"ok", "wide", "nosource", "unmarked", "inherits", "reported",
                          "checked"}
    assert found["ok"].flags == [] and found["ok"].profiles == ["paper", "quick"]
    assert found["wide"].flags == ["wide"] and "more than half" not in found["wide"].wide
    assert found["nosource"].flags == ["no-source"]
    assert found["unmarked"].flags == ["unmarked"]
    assert found["inherits"].flags == ["unmarked"]  # inherits the previous row's origin
    assert found["reported"].flags == [] and not found["reported"].judged
    assert found["checked"].origin == "lab check" and found["checked"].flags == ["wide"]
    assert found["checked"].spec == "labs/01-x/experiments/beta.yaml"

    allowed = [Allowed("wide", "*", "wide", "the paper's bound"),
               Allowed("unmarked", "alpha", "unmark*", "a lab reading"),
               Allowed("wide", "gamma", "*", "nothing matches this")]
    stale = apply_allowlist(items, allowed)
    assert [e.experiment for e in stale] == ["gamma"]
    assert found["wide"].open_flags == [] and found["wide"].allowed == {"wide": "the paper's bound"}
    assert found["inherits"].open_flags == ["unmarked"]  # the pattern does not reach it
    assert found["checked"].open_flags == ["wide"]  # a label pattern, not a substring
    assert found["nosource"].open_flags == ["no-source"]
    c = counts(items)
    assert (c["no-source"], c["unmarked"], c["wide"], c["wide open"]) == (1, 2, 2, 1)


@pytest.mark.parametrize(("accepted", "wide", "near"), [
    (None, False, False),          # reported only: nothing to fail
    ((0.7, 1.3), False, False),    # ends x1.86 apart, around their centre 0.95
    ((0.5, 2.0), False, True),     # ends x4 apart: x2 either way of the centre, the limit
    ((0.4, 2.0), True, False),     # x5 apart
    ((0.0, 2.0), True, False),     # reaches 0
])
def test_open_rule_without_a_paper_value_reads_the_range_about_its_centre(accepted, wide, near):
    assert (hardly_fails(OPEN, None, accepted) is not None) is wide
    assert near_limit(OPEN, None, accepted) is near
    assert hardly_fails(FRACTION, None, (0.2, 0.75)) is not None  # the fraction rule as before


def _ratio(label: str, **criterion: object) -> dict:
    return {"kind": "measure", "label": label, "source": "Fig. 4(b): no value in the text",
            "measure": "ormcc.leaf_ratio", "args": {"numerator": "webrc", "flows": ["webrc"]},
            **criterion}


def test_measure_without_paper_value_is_reported_not_flagged(tmp_path):
    """No paper value and no range: reported only, not 'a band that can hardly fail'."""
    _spec(tmp_path, "epsilon", [
        _ratio("reported"),
        _ratio("ranged", within=[0.7, 1.3]),
        _ratio("too wide", within=[0.1, 1.3]),
        _ratio("ideal", paper=1.0, within=[0.7, 1.3]),
    ])
    items, errors = collect(tmp_path)
    assert errors == []
    found = {i.label: i for i in items}
    reported = found["reported"]
    assert (reported.paper, reported.band, reported.judged, reported.flags) == (
        None, None, False, [])
    assert (found["ranged"].paper, found["ranged"].band, found["ranged"].flags) == (
        None, (0.7, 1.3), [])
    assert found["too wide"].flags == ["wide"] and "no paper value" in found["too wide"].wide
    assert found["ideal"].paper == 1.0 and found["ideal"].flags == []
    assert counts(items)["judged"] == 3


def test_command_shows_no_paper_value_as_a_dash(tmp_path, monkeypatch):
    _spec(tmp_path, "zeta", [_ratio("reported"), _ratio("ranged", within=[0.7, 1.3])])
    monkeypatch.setattr("mcclab.audit.collect", lambda: collect(tmp_path))
    monkeypatch.setattr("mcclab.audit.load_allowlist", lambda: [])
    result = CliRunner().invoke(app, ["audit", "bands", "--all"])
    assert result.exit_code == 0, result.output
    lines = [x for x in result.output.splitlines() if "zeta" in x]
    assert lines and all("–" in x for x in lines)
    assert any("reported only" in x for x in lines)


def test_profiles_that_change_a_band_give_two_rows(tmp_path):
    path = _spec(tmp_path, "gamma", [_util("u", "Fig. 1", within=[0.85, 1.0])])
    text = path.read_text().replace("set: {duration: 30s}",
                                    "set: {duration: 30s, references: [{kind: utilisation, "
                                    "label: u, source: Fig. 1, flows: [webrc], capacity: 1Mbit, "
                                    "paper: 0.95, within: [0.7, 1.0]}]}")
    path.write_text(text)
    items, errors = collect(tmp_path)
    assert errors == []
    assert [(i.profiles, i.band, bool(i.wide)) for i in items] == [
        (["paper"], (0.85, 1.0), False), (["quick"], (0.7, 1.0), True)]


def test_a_broken_spec_is_an_error_not_a_silence(tmp_path):
    _spec(tmp_path, "delta", [_util("u", "Fig. 1", within=[0.85, 1.0])])
    bad = tmp_path / "experiments" / "delta.yaml"
    bad.write_text(bad.read_text().replace("topologies/webrc-dumbbell.yaml", "nope.yaml"))
    items, errors = collect(tmp_path)
    assert items == [] and len(errors) == 2 and "nope.yaml" in errors[0]


def test_allowlist_entries_need_a_reason_and_never_allow_a_missing_source(tmp_path):
    path = tmp_path / "allow.yaml"
    path.write_text("allow:\n  - {flag: wide, experiment: x, label: y}\n")
    with pytest.raises(ValueError, match="why"):
        load_allowlist(path)
    path.write_text("allow:\n  - {flag: no-source, experiment: x, label: y, why: z}\n")
    with pytest.raises(ValueError, match="never allowed"):
        load_allowlist(path)
    path.write_text("allow:\n  - {flag: wide, experiment: x, label: y, why: z}\n")
    assert load_allowlist(path) == [Allowed("wide", "x", "y", "z")]


def test_checked_in_allowlist_has_a_reason_per_entry():
    entries = load_allowlist()
    assert entries and all(len(e.why) > 20 and "\n" not in e.why for e in entries)
