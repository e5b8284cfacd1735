"""tracking.*: which receiver a single-rate sender tracks, from any protocol's id gauges."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import synthetic_runs
import yaml

from mcclab.analysis.plugins import get_figure, get_measure
from mcclab.analysis.protocols import tracking
from mcclab.analysis.results import load_run
from mcclab.analysis.summary import summarise
from mcclab.resultsdir import PROTOCOL_COLUMNS, PROTOCOL_CSV

REPO = Path(__file__).resolve().parents[2]

RIDS = {"h1": 101, "h2": 202, "h3": 303}
# PGMCC-like acker ids per second 1..20: none, h1, a one-second gap, h2, an id no
# receiver has, h1 again.
ACKER = [-1, -1] + [101] * 6 + [-1] + [202] * 5 + [999] * 2 + [101] * 4


def _write_run(folder, proto_rows, duration=20.0):
    """A run of one multicast flow 'm' (receivers h1..h3) with these protocol rows."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({
        "experiment": "x", "run_id": "r", "profile": "quick", "status": "complete",
        "duration_s": duration, "warmup_s": 0.0, "elapsed_s": duration}))
    tables = folder / "tables"
    tables.mkdir()
    pd.DataFrame([{"t": t, "flow": "m", "kind": "multicast", "node": n,
                   "throughput_bps": 8000, "packets": 1, "lost": 0, "level": ""}
                  for t in range(1, int(duration) + 1) for n in RIDS]).to_csv(
        tables / "per_second.csv", index=False)
    pd.DataFrame(proto_rows, columns=["t", "flow", "node", "role", "name", "value"]).to_csv(
        tables / "protocol.csv", index=False)
    return load_run(folder)


def _rows(ids, name="acker_id", flow="m", valid=None):
    """Sender rows of ``name`` (and ``cr_valid`` from ``valid``) and every receiver's rid."""
    out = []
    for t, value in enumerate(ids, start=1):
        out.append({"t": t, "flow": flow, "node": "src", "role": "sender", "name": name,
                    "value": value})
        if valid is not None and valid[t - 1] is not None:
            out.append({"t": t, "flow": flow, "node": "src", "role": "sender",
                        "name": "cr_valid", "value": valid[t - 1]})
        out += [{"t": t, "flow": flow, "node": node, "role": "receiver", "name": "rid",
                 "value": rid} for node, rid in RIDS.items()]
    return out


@pytest.fixture
def run(tmp_path):
    """The ACKER sequence on flow m; flow 'other' always tracks h3 and must not count."""
    return _write_run(tmp_path, _rows(ACKER) + _rows([303] * 20, flow="other"))


def test_each_second_maps_the_id_to_its_receiver(run):
    nodes = tracking.tracked_nodes(run, "m", "acker_id")
    assert list(nodes) == ["", ""] + ["h1"] * 6 + [""] + ["h2"] * 5 + ["?"] * 2 + ["h1"] * 4
    assert list(nodes.index) == list(range(1, 21))


def test_shares_of_the_whole_run_add_up_and_name_none_and_unknown(run):
    got = tracking.shares(run, "m", "acker_id", 0.0, 20.0)
    assert got == pytest.approx({"h1": 0.5, "h2": 0.25, "": 0.15, "?": 0.1})
    assert list(got) == ["h1", "h2", "", "?"]        # largest first
    assert tracking.most_tracked(run, "m", "acker_id", 0.0, 20.0) == ("h1", pytest.approx(0.5))


def test_share_measure_reads_a_period_of_the_duration(run):
    # (8, 14]: t 9 tracks none, 10..14 h2.
    assert tracking.share(run, "m", "acker_id", "h2", start_frac=0.4, end_frac=0.7) == \
        pytest.approx(5 / 6)
    assert tracking.share(run, "m", "acker_id", "h1", start_frac=0.4, end_frac=0.7) == 0.0
    assert tracking.share(run, "m", "acker_id", "h1") == pytest.approx(0.5)
    assert tracking.share(run, "other", "acker_id", "h3") == 1.0
    # (2, 4]: the first tracked second (3) counts, the second before the period does not.
    assert tracking.share(run, "m", "acker_id", "h1", start_frac=0.1, end_frac=0.2) == 1.0


def test_lead_is_positive_only_for_the_receiver_tracked_most(run):
    assert tracking.lead(run, "m", "acker_id", "h1") == pytest.approx(0.5 - 0.25)
    assert tracking.lead(run, "m", "acker_id", "h2") == pytest.approx(0.25 - 0.5)
    assert tracking.lead(run, "m", "acker_id", "h3") == pytest.approx(-0.5)
    # In (8, 14] no other receiver competes: h2's lead is its share.
    assert tracking.lead(run, "m", "acker_id", "h2", start_frac=0.4, end_frac=0.7) == \
        pytest.approx(5 / 6)


def test_switches_skip_gaps_and_the_first_choice(run):
    assert tracking.switch_times(run, "m", "acker_id", 0.0, 20.0) == [
        (10.0, "h2"), (15.0, "?"), (17.0, "h1")]
    assert tracking.switches(run, "m", "acker_id") == 3
    # (0, 9]: h1 then a gap: the first choice and the gap are no switch.
    assert tracking.switches(run, "m", "acker_id", end_frac=0.45) == 0
    assert tracking.switches(run, "other", "acker_id") == 0


def test_a_gap_between_two_receivers_is_one_switch(tmp_path):
    run = _write_run(tmp_path, _rows([101, -1, -1, 202, 202, -1, 202, 101, 101, 101]),
                     duration=10.0)
    assert tracking.switch_times(run, "m", "acker_id", 0.0, 10.0) == [(4.0, "h2"), (8.0, "h1")]


def test_valid_gauge_holds_back_an_invalid_choice(tmp_path):
    # ORMCC-like: cr_id names h2 throughout, valid from t 6; cr_valid first reported at
    # t 3 (before it, no validity: none) and missing at t 10 (the last value holds).
    valid = [None, None, 0, 0, 0] + [1] * 4 + [None] + [1] * 10
    run = _write_run(tmp_path, _rows([202] * 20, name="cr_id", valid=valid))
    assert tracking.share(run, "m", "cr_id", "h2", valid="cr_valid") == pytest.approx(15 / 20)
    assert tracking.share(run, "m", "cr_id", "h2") == 1.0
    assert tracking.most_tracked(run, "m", "cr_id", 0.0, 5.0, valid="cr_valid") == (
        "", pytest.approx(math.nan, nan_ok=True))


def test_a_misspelt_gauge_is_an_error_naming_the_known_ones(run):
    with pytest.raises(ValueError, match=r"no sender of flow 'm' reported a gauge 'clr_id'; "
                                         r"its sender gauges are acker_id"):
        tracking.share(run, "m", "clr_id", "h1")
    with pytest.raises(ValueError, match=r"no receiver .* gauge 'receiver_id'.* rid"):
        tracking.share(run, "m", "acker_id", "h1", rid="receiver_id")
    with pytest.raises(ValueError, match="start_frac < end_frac"):
        tracking.share(run, "m", "acker_id", "h1", start_frac=0.5, end_frac=0.5)


def test_nothing_to_measure_is_nan(tmp_path, run):
    empty = _write_run(tmp_path / "empty", [])
    for fn in (tracking.share, tracking.lead):
        assert math.isnan(fn(empty, "m", "acker_id", "h1"))
    assert math.isnan(tracking.switches(empty, "m", "acker_id"))
    # The run ends at 20 s: a period after the sender's last report has no second.
    short = _write_run(tmp_path / "long", _rows(ACKER), duration=40.0)
    assert math.isnan(tracking.share(short, "m", "acker_id", "h1", start_frac=0.6))


def test_registered_by_name_for_specs():
    for name, fn in (("tracking.share", tracking.share), ("tracking.lead", tracking.lead),
                     ("tracking.switches", tracking.switches)):
        plugin = get_measure(name)
        assert plugin.unit == "1" and plugin.fn is fn
    get_measure("tracking.share").check_args(
        {"flow": "m", "tracked": "cr_id", "valid": "cr_valid", "node": "h2",
         "start_frac": 0.22, "end_frac": 0.4}, leading=1)


def test_timeline_figure_draws_for_a_tracked_flow(run, tmp_path):
    paths = get_figure("tracking.timeline").fn(run, tmp_path / "fig", flow="m",
                                               tracked="acker_id")
    assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)
    assert get_figure("tracking.timeline").fn(run, tmp_path / "fig", flow="nope",
                                              tracked="acker_id") == []


@pytest.mark.parametrize("scheme, gauge", [("pgmcc", "acker_id"), ("tfmcc", "clr_id")])
def test_fig8_comparison_spec_reads_a_run_that_follows_table1(tmp_path, scheme, gauge):
    """The generated spec's references, evaluated by the summary on a quick-profile-like run
    whose sender tracks Table I's supposed CR (h1, h2, h3, h2, h1 in 40-s periods): every
    period reads share 1 and lead 1, four switches, and no row errs or gets a verdict."""
    spec = yaml.safe_load((REPO / "experiments" / f"ormcc-table1-{scheme}.yaml").read_text())
    supposed = {1: 101, 2: 202, 3: 303, 4: 202, 5: 101}
    ids = [supposed[1 + (t - 1) // 40] for t in range(1, 201)]
    per_second = [r for t in range(1, 201) for node in RIDS
                  for r in synthetic_runs.rows("multi", "multicast", node, 400e3, [t])]
    folder = synthetic_runs.write_run(
        tmp_path / f"ormcc-table1-{scheme}" / "r", per_second, references=spec["references"],
        flows=[{"name": "multi", "type": "multicast", "protocol": scheme}],
        duration_s=200.0, warmup_s=0.0)
    pd.DataFrame(_rows(ids, name=gauge, flow="multi"), columns=PROTOCOL_COLUMNS).to_csv(
        folder / PROTOCOL_CSV, index=False)
    got = {q.label: q for q in summarise(load_run(folder)).quantities}
    assert len(got) == 13 and all(q.verdict == "n/a" and q.error is None for q in got.values())
    # The two settle rows read the sender's event log, which this run has none of
    # (tests/unit/test_tracking_settle.py reads one): no value, and no error either.
    settles = [got.pop(label) for label in list(got) if "delay to settle" in label]
    assert len(settles) == 2 and all(q.measured is None for q in settles)
    values = {q.measure: set() for q in got.values()}
    for q in got.values():
        values[q.measure].add(q.measured)
    assert values == {"tracking.share": {1.0}, "tracking.lead": {1.0},
                      "tracking.switches": {4.0}}
