"""tracking.settle*: how soon a single-rate sender settles on the receiver a change asks for."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import synthetic_runs

from mcclab.analysis.plugins import get_measure
from mcclab.analysis.protocols import tracking
from mcclab.analysis.protocols.tracking import NONE, UNKNOWN, Timeline, settle_delay
from mcclab.analysis.results import load_run
from mcclab.analysis.summary import summarise
from mcclab.resultsdir import LOGS, PROTOCOL_COLUMNS, PROTOCOL_CSV

ADDRESSES = {"src": "10.0.0.1", "h1": "10.0.2.2", "h2": "10.0.3.2", "h3": "10.0.4.2"}
RIDS = {"h1": 101, "h2": 202, "h3": 303}
CLOCK0 = 5000.0
"""The sender's agent clock at experiment time 0 in the synthetic logs."""


# ---- the rule itself, on timelines -------------------------------------------------


def test_a_flap_shorter_than_the_hold_is_not_settling():
    # Boundary at 50: h2 for 1 s (52-53), h3, then h2 for good from 55.
    line = Timeline([(0.0, "h1"), (52.0, "h2"), (53.0, "h3"), (55.0, "h2")], 100.0)
    assert settle_delay(line, 50.0, 100.0, "h2", hold=5.0) == pytest.approx(5.0)
    # With a hold shorter than the flap, the flap counts.
    assert settle_delay(line, 50.0, 100.0, "h2", hold=0.5) == pytest.approx(2.0)


def test_a_gap_with_no_receiver_breaks_the_hold():
    line = Timeline([(0.0, "h1"), (51.0, "h2"), (54.0, NONE), (54.5, "h2")], 100.0)
    assert settle_delay(line, 50.0, 100.0, "h2", hold=5.0) == pytest.approx(4.5)


def test_a_stretch_exactly_as_long_as_the_hold_counts():
    line = Timeline([(0.0, "h1"), (52.0, "h2"), (57.0, "h1"), (60.0, "h2")], 100.0)
    assert settle_delay(line, 50.0, 100.0, "h2", hold=5.0) == pytest.approx(2.0)
    assert settle_delay(line, 50.0, 100.0, "h2", hold=5.01) == pytest.approx(10.0)


def test_already_tracked_at_the_boundary_is_zero_and_earlier_changes_do_not_count():
    # h2 since 10: settled at the boundary itself, not 40 s "early".
    assert settle_delay(Timeline([(10.0, "h2")], 100.0), 50.0, 100.0, "h2") == 0.0
    # A change exactly at the boundary is the state at the boundary.
    assert settle_delay(Timeline([(0.0, "h1"), (50.0, "h2")], 100.0), 50.0, 100.0, "h2") == 0.0
    # h2 before the boundary, another receiver across it: the delay runs from the boundary
    # to h2's return, not from h2's earlier stretch.
    line = Timeline([(40.0, "h2"), (45.0, "h1"), (60.0, "h2")], 100.0)
    assert settle_delay(line, 50.0, 100.0, "h2") == pytest.approx(10.0)


def test_the_hold_must_end_within_the_period_and_the_known_timeline():
    line = Timeline([(0.0, "h1"), (97.0, "h2")], 200.0)
    assert math.isnan(settle_delay(line, 50.0, 100.0, "h2", hold=5.0))
    assert settle_delay(line, 50.0, 110.0, "h2", hold=5.0) == pytest.approx(47.0)
    # The sender's state is known only to 99: a stretch cut there is not a hold.
    assert math.isnan(settle_delay(Timeline(line.changes, 99.0), 50.0, 200.0, "h2"))
    assert math.isnan(settle_delay(Timeline([], 100.0), 0.0, 100.0, "h1"))


# ---- runs: the sender's log and its gauge -------------------------------------------


def _record(t: float, event: str, **fields: object) -> dict:
    return {"t": CLOCK0 + t, "event": event, "node": "src", "role": "sender", **fields}


def _start() -> dict:
    nodes = {n: {"address": a} for n, a in ADDRESSES.items()}
    return _record(0.25, "start", session={"protocol": "x", "flow": "m", "nodes": nodes})


def _write(folder: Path, log: list[dict] | None, acker: list[int] | None = None,
           duration: float = 100.0) -> Path:
    """A run of flow m (sender src, receivers h1..h3): the sender's event log (its start
    at 0.25 s of the run, on an agent clock CLOCK0 ahead) and, with ``acker``, one
    ``acker_id`` gauge value a second from t 1."""
    seconds = range(1, int(duration) + 1)
    per_second = [r for n in RIDS for r in synthetic_runs.rows("m", "multicast", n, 8e3, seconds)]
    agents = synthetic_runs.agent_rows("m", "src", "sender", [(1.25, 0.1)])
    synthetic_runs.write_run(folder, per_second, agents=agents, duration_s=duration,
                             warmup_s=0.0,
                             flows=[{"name": "m", "type": "multicast", "protocol": "x"}])
    if log is not None:
        (folder / LOGS / "m-sender-src.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in log) + '{"t": 1, "event": "cut sh')
    if acker is not None:
        rows = []
        for t, value in enumerate(acker, start=1):
            rows.append({"t": t, "flow": "m", "node": "src", "role": "sender",
                         "name": "acker_id", "value": value})
            rows += [{"t": t, "flow": "m", "node": n, "role": "receiver", "name": "rid",
                      "value": rid} for n, rid in RIDS.items()]
        pd.DataFrame(rows, columns=PROTOCOL_COLUMNS).to_csv(folder / PROTOCOL_CSV, index=False)
    return folder


def _choose(t: float, node: str, port: int = 4000) -> dict:
    return _record(t, "choose", peer=f"{ADDRESSES[node]}:{port}")


# Table I in 100 s: h1, then h2 from 20, h3 from 40, h2 from 60, h1 from 80.
CHANGES = [[0.2, "h2"], [0.4, "h3"], [0.6, "h2"], [0.8, "h1"]]
LOG = [
    _start(),
    _choose(1.0, "h1"),
    _choose(21.5, "h2"),                                  # 1.5 s after 20
    _choose(41.0, "h3"), _choose(42.0, "h2"), _choose(43.0, "h3"),  # a flap: 3 s after 40
    _record(64.0, "drop"), _choose(66.0, "h2"),           # h3 dropped, h2 at 6 s after 60
    _choose(82.0, "h3"), _record(90.0, "stop"),           # h1 never: the last period missed
]


@pytest.fixture
def run(tmp_path):
    return load_run(_write(tmp_path / "r", LOG))


def test_the_log_is_placed_in_run_time_and_peers_name_receivers(tmp_path, run):
    line = tracking.event_timeline(run, "m", "choose", ["drop"])
    assert line.changes == [(1.0, "h1"), (21.5, "h2"), (41.0, "h3"), (42.0, "h2"),
                            (43.0, "h3"), (64.0, NONE), (66.0, "h2"), (82.0, "h3")]
    assert line.end == pytest.approx(90.0)
    # Without the drop, h3 stays tracked until h2 is chosen.
    assert (64.0, NONE) not in tracking.event_timeline(run, "m", "choose").changes
    stranger = load_run(_write(tmp_path / "s", [_start(), _record(2.0, "choose",
                                                                  peer="10.9.9.9:1")]))
    assert tracking.event_timeline(stranger, "m", "choose").changes == [(2.0, UNKNOWN)]


def test_each_boundary_runs_to_the_next_one(run):
    got = tracking.settle_delays(run, "m", CHANGES, event="choose", drops=["drop"])
    assert [length for length, _ in got] == pytest.approx([20.0, 20.0, 20.0, 20.0])
    delays = [d for _, d in got]
    assert delays[:3] == pytest.approx([1.5, 3.0, 6.0])
    # h1 never comes back after 80: missed, not measured against a later period.
    assert math.isnan(delays[3])


def test_a_receiver_settled_on_after_its_period_does_not_count_for_it(tmp_path):
    # h2 is asked for in 20-40 but chosen only at 45 (in h3's period).
    log = [_start(), _choose(1.0, "h1"), _choose(45.0, "h2"), _record(99.0, "stop")]
    run = load_run(_write(tmp_path / "late", log))
    got = tracking.settle_delays(run, "m", [[0.2, "h2"], [0.4, "h3"]], event="choose")
    assert math.isnan(got[0][1]) and math.isnan(got[1][1])
    assert math.isnan(tracking.settle(run, "m", "h2", 0.2, 0.4, event="choose"))
    assert tracking.settle(run, "m", "h2", 0.2, event="choose") == pytest.approx(25.0)


def test_summary_counts_a_miss_as_its_whole_period(run):
    def stat(name: str) -> float:
        return tracking.settle_stat(run, "m", CHANGES, name, event="choose", drops=["drop"])
    assert tracking.settle_missed(run, "m", CHANGES, event="choose", drops=["drop"]) == 1.0
    assert tracking.settle_missed(run, "m", CHANGES[:3], event="choose", drops=["drop"]) == 0.0
    assert stat("max") == pytest.approx(20.0)
    assert stat("mean") == pytest.approx((1.5 + 3.0 + 6.0 + 20.0) / 4)
    with pytest.raises(ValueError, match="stat must be one of"):
        stat("median")


def test_valid_gauge_in_stats_gives_a_timed_out_receiver_back(tmp_path):
    # ORMCC-like: h1 chosen at 1, timed out at 30, taken back unlogged; the first stats
    # record saying valid is at 32.6.
    log = [_start(), _choose(1.0, "h1"), _record(30.0, "timeout"),
           _record(31.6, "stats", core={"cr_valid": 0.0}),
           _record(32.6, "stats", core={"cr_valid": 1.0}),
           _record(33.6, "stats", core={"cr_valid": 1.0}), _record(99.0, "stop")]
    run = load_run(_write(tmp_path / "v", log))
    line = tracking.event_timeline(run, "m", "choose", ["timeout"], valid="cr_valid")
    assert [n for _, n in line.changes] == ["h1", NONE, "h1"]
    assert [t for t, _ in line.changes] == pytest.approx([1.0, 30.0, 32.6])
    assert tracking.settle(run, "m", "h1", 0.3, event="choose", drops=["timeout"],
                           valid="cr_valid") == pytest.approx(2.6)
    # Without the gauge nothing gives h1 back.
    assert math.isnan(tracking.settle(run, "m", "h1", 0.3, event="choose",
                                      drops=["timeout"]))


def test_the_gauge_gives_the_same_rule_to_the_second(tmp_path):
    # Per-second acker ids: h1, then h2 from t 22 with a one-second flap to h3 at t 24,
    # h2 again from 25.
    acker = [101] * 21 + [202] * 2 + [303] + [202] * 76
    run = load_run(_write(tmp_path / "g", None, acker))
    line = tracking.gauge_timeline(run, "m", "acker_id")
    assert line.changes == [(1.0, "h1"), (22.0, "h2"), (24.0, "h3"), (25.0, "h2")]
    assert line.end == 100.0
    assert tracking.settle(run, "m", "h2", 0.2, 0.4, tracked="acker_id") == pytest.approx(5.0)
    assert tracking.settle(run, "m", "h2", 0.2, 0.4, tracked="acker_id",
                           hold_s=1.0) == pytest.approx(2.0)


def test_errors_name_what_is_there(run):
    with pytest.raises(ValueError, match=r"logged no 'chose' record; its events are "
                                         r"choose, drop, start, stop"):
        tracking.settle(run, "m", "h2", 0.2, event="chose")
    with pytest.raises(ValueError, match="not both or neither"):
        tracking.settle(run, "m", "h2", 0.2)
    with pytest.raises(ValueError, match="not both or neither"):
        tracking.settle(run, "m", "h2", 0.2, tracked="acker_id", event="choose")
    with pytest.raises(ValueError, match="start_frac < end_frac"):
        tracking.settle(run, "m", "h2", 0.5, 0.5, event="choose")


def test_nothing_to_read_is_nan_and_a_missing_log_an_error(tmp_path):
    bare = load_run(synthetic_runs.write_run(tmp_path / "bare", None, duration_s=100.0,
                                             warmup_s=0.0))
    assert math.isnan(tracking.settle(bare, "m", "h2", 0.2, event="choose"))
    assert math.isnan(tracking.settle(bare, "m", "h2", 0.2, tracked="acker_id"))
    assert math.isnan(tracking.settle_stat(bare, "m", CHANGES, event="choose"))
    assert math.isnan(tracking.settle_missed(bare, "m", CHANGES, tracked="acker_id"))
    no_log = load_run(_write(tmp_path / "nolog", None))
    with pytest.raises(ValueError, match="no start record"):
        tracking.settle(no_log, "m", "h2", 0.2, event="choose")


def test_registered_by_name_for_specs():
    assert get_measure("tracking.settle").fn is tracking.settle
    assert get_measure("tracking.settle").unit == "s"
    assert get_measure("tracking.settle_stat").fn is tracking.settle_stat
    assert get_measure("tracking.settle_stat").unit == "s"
    assert get_measure("tracking.settle_missed").fn is tracking.settle_missed
    get_measure("tracking.settle").check_args(
        {"flow": "multi", "node": "h2", "at_frac": 0.6, "until_frac": 0.8,
         "event": "ormcc_cr", "drops": ["ormcc_cr_timeout"], "valid": "cr_valid"}, leading=1)
    get_measure("tracking.settle_stat").check_args(
        {"flow": "multi", "changes": CHANGES, "stat": "max", "tracked": "acker_id"}, leading=1)


def test_a_spec_reports_the_settle_time_without_a_paper_value(tmp_path):
    """As docs/comparison.md shows it: a measure row with no paper value and no band is
    evaluated from the folder and reported with no verdict."""
    references = [
        {"kind": "measure", "label": "settle on h3 after 40 s", "measure": "tracking.settle",
         "args": {"flow": "m", "event": "choose", "drops": ["drop"], "node": "h3",
                  "at_frac": 0.4, "until_frac": 0.6}},
        {"kind": "measure", "label": "mean settle time", "measure": "tracking.settle_stat",
         "args": {"flow": "m", "event": "choose", "drops": ["drop"], "changes": CHANGES}}]
    folder = _write(tmp_path / "spec", LOG)
    synthetic_runs.write_run(folder, None, references=references, duration_s=100.0,
                             warmup_s=0.0, agents=synthetic_runs.agent_rows(
                                 "m", "src", "sender", [(1.25, 0.1)]),
                             flows=[{"name": "m", "type": "multicast", "protocol": "x"}])
    got = {q.label: q for q in summarise(load_run(folder)).quantities}
    assert got["settle on h3 after 40 s"].measured == pytest.approx(3.0)
    assert got["mean settle time"].measured == pytest.approx((1.5 + 3.0 + 6.0 + 20.0) / 4)
    assert {q.verdict for q in got.values()} == {"n/a"}
