"""Every value with a unit or a count has a meaningful range, checked when a spec loads.

The malformed fixtures (tests/fixtures/malformed*/) hold one spec per rule;
here: the range helper itself, that every committed experiment (with each of
its profiles and sweep points) and topology still validates, that a value
the models accept is one the later stages accept too, and that an error
found under a profile says which overrides it was resolved with.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from mcclab.experiment.loader import resolve
from mcclab.experiment.sweep import plan
from mcclab.model.loader import SpecError, resolve_topology
from mcclab.model.topology import IgmpSettings, Link
from mcclab.model.units import (
    NonNegDuration,
    PositiveRate,
    format_rate,
    in_range,
    parse_size,
    show_duration,
    span,
)
from mcclab.routing.plan import igmp_timers

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted(p.stem for p in (REPO / "experiments").glob("*.yaml"))


def _profiles(name: str) -> list[str]:
    raw = yaml.safe_load((REPO / "experiments" / f"{name}.yaml").read_text())
    return ["paper"] + (["quick"] if (raw.get("profiles") or {}).get("quick") else [])


CASES = [(name, profile) for name in SPECS for profile in _profiles(name)]


def test_every_experiment_is_covered():
    assert len(SPECS) >= 25
    assert sum(1 for _, profile in CASES if profile == "quick") >= 20


@pytest.mark.parametrize("name, profile", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_every_experiment_validates_with_each_profile_and_sweep_point(name, profile):
    resolved = resolve(name, profile)
    for sweep in resolved.experiment.sweeps:
        _, points = plan(name, sweep, profile, [])
        assert points, f"{name}: sweep {sweep} has no points"


# ------------------------------------------------------------ the range helper


class _Rates(BaseModel):
    rate: PositiveRate
    start: NonNegDuration = 0.0


def test_range_errors_name_the_value_and_range_in_the_spec_units():
    with pytest.raises(ValidationError, match=r"-2Mbit is outside the allowed range \(0bit, inf\)"):
        _Rates(rate="-2Mbit")
    with pytest.raises(ValidationError, match=r"-5ms is outside the allowed range \[0s, inf\)"):
        _Rates(rate="1Mbit", start="-5ms")
    assert _Rates(rate="1bit", start="0s").start == 0.0


def test_range_bounds_open_and_closed():
    check = in_range(format_rate, 0, 10, low_open=True, why="because").func
    assert check(10) == 10 and check(1e-9) == 1e-9
    for bad in (0, -1, 10.5):
        with pytest.raises(ValueError, match=r"\(0bit, 10bit\] \(because\)"):
            check(bad)
    assert span(show_duration, None, 60.0) == "(-inf, 60s]"
    assert span(show_duration, 0, 1.5, high_open=True) == "[0s, 1.5s)"


def test_a_size_is_never_negative():
    assert parse_size("0B") == 0
    with pytest.raises(ValueError, match="negative"):
        parse_size("-1kB")


# ------------------------------- what the models accept, later stages accept


@pytest.mark.parametrize("igmp", [
    {},
    {"query_interval": "1s", "query_response_interval": "900ms"},
    {"query_interval": "65535s", "query_response_interval": "6553.5s",
     "last_member_query_interval": "6553.5s", "last_member_query_count": 7},
    {"last_member_query_interval": "100ms", "last_member_query_count": 1},
    {"query_interval": "2min", "query_response_interval": "0.3s"},
])
def test_igmp_settings_the_topology_accepts_are_ones_the_routers_accept(igmp):
    topo = resolve_topology({
        "name": "t", "nodes": {"h": {"kind": "host"}, "r": {"kind": "router"}},
        "links": [{"endpoints": ["h", "r"]}], "routing": {"igmp": igmp}})
    timers = igmp_timers(topo)  # raises ValueError on what FRR cannot take
    assert timers.query_interval_s == round(topo.routing.igmp.query_interval)


@pytest.mark.parametrize("igmp, field", [
    ({"query_interval": "0.5s"}, "routing.igmp.query_interval"),
    ({"query_interval": "70000s"}, "routing.igmp.query_interval"),
    ({"query_response_interval": "50ms"}, "routing.igmp.query_response_interval"),
    ({"last_member_query_interval": "1.25s"}, "routing.igmp.last_member_query_interval"),
    ({"last_member_query_interval": "7000s"}, "routing.igmp.last_member_query_interval"),
    ({"query_interval": "10s", "query_response_interval": "10s"},
     "routing.igmp.query_response_interval"),
])
def test_igmp_settings_the_routers_refuse_are_refused_at_load(igmp, field):
    with pytest.raises(SpecError) as info:
        resolve_topology({
            "name": "t", "nodes": {"h": {"kind": "host"}, "r": {"kind": "router"}},
            "links": [{"endpoints": ["h", "r"]}], "routing": {"igmp": igmp}}, "t.yaml")
    assert field in [f for f, _ in info.value.problems], str(info.value)


def test_igmp_override_is_checked_on_the_merged_settings(tmp_path):
    # 5s alone would clash with the default 10s response interval; with 2s it is fine.
    spec = tmp_path / "igmp.yaml"
    spec.write_text("name: x\ntopology: topologies/dumbbell.yaml\nduration: 20s\n"
                    "overrides:\n  igmp: {query_interval: 5s, query_response_interval: 2s}\n"
                    "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    assert resolve(str(spec)).topology.routing.igmp.query_interval == 5
    IgmpSettings(query_interval="5s")  # alone, the pair is only checked in a topology
    spec.write_text(spec.read_text().replace(", query_response_interval: 2s", ""))
    with pytest.raises(SpecError, match="must be shorter than igmp.query_interval"):
        resolve(str(spec))


def test_link_limits_are_the_emulators():
    ok = Link.model_validate({"endpoints": ["a", "b"], "rate": "1000Gbit", "delay": "60s",
                              "jitter": "60s", "queue": {"limit": "1000000pkt"}})
    assert ok.rate == 1e12 and ok.delay == 60
    for bad in ({"rate": "1001Gbit"}, {"delay": "60.001s"}, {"queue": {"limit": "1000001pkt"}}):
        with pytest.raises(ValidationError, match="outside the allowed range"):
            Link.model_validate({"endpoints": ["a", "b"], **bad})


# -------------------------------------------- times checked on resolved values


def _timed(tmp_path: Path, start: str) -> Path:
    spec = tmp_path / "timed.yaml"
    spec.write_text("name: x\ntopology: topologies/dumbbell.yaml\nduration: 100s\n"
                    "flows:\n"
                    f"  - {{name: t, type: tcp, sender: s2, receiver: d2, start: {start}}}\n"
                    "  - {name: m, type: multicast, protocol: cbr, sender: s1, receivers: [d1],\n"
                    "     params: {rate: 1Mbit}, receiver_start: {d1: 50s}}\n"
                    "profiles:\n  quick: {set: {duration: 30s, flows.m.receiver_start.d1: 5s}}\n")
    return spec


def test_times_are_checked_against_the_profile_being_run(tmp_path):
    spec = _timed(tmp_path, "10s")
    assert resolve(str(spec)).experiment.duration == 100
    quick = resolve(str(spec), "quick").experiment
    assert quick.duration == 30 and quick.flows[1].receiver_start == {"d1": 5}
    late = _timed(tmp_path, "40s")
    assert resolve(str(late)).experiment.flows[0].start == 40
    with pytest.raises(SpecError) as info:
        resolve(str(late), "quick")
    assert info.value.path == str(late)
    assert [f for f, _ in info.value.problems] == ["flows[0].start"]
    assert "[0s, 30s)" in info.value.problems[0][1]
    assert "profile 'quick': the profile sets duration=30s" in str(info.value)
    # --set and the profile both show, in the order applied
    with pytest.raises(SpecError, match=r"duration=30s.*; --set duration=20s"):
        resolve(str(spec), "quick", ["duration=20s", "flows.t.start=25s"])


def test_an_error_without_overrides_carries_no_note(tmp_path):
    with pytest.raises(SpecError) as info:
        resolve(str(_timed(tmp_path, "100s")))
    assert info.value.note == ""
    assert "checked as resolved" not in str(info.value)


def test_a_flow_may_end_exactly_at_the_run_end_and_a_receiver_join_before_the_sender(tmp_path):
    spec = tmp_path / "edge.yaml"
    spec.write_text("name: x\ntopology: topologies/dumbbell.yaml\nduration: 20s\n"
                    "flows:\n  - {name: t, type: tcp, sender: s2, receiver: d2, stop: 20s}\n"
                    "  - {name: m, type: multicast, protocol: cbr, sender: s1, receivers: [d1],\n"
                    "     params: {rate: 1Mbit}, start: 5s, receiver_start: {d1: 0s}}\n")
    exp = resolve(str(spec)).experiment
    assert exp.flows[0].stop == 20 and exp.flows[1].receiver_start["d1"] == 0


def test_iperf_limit_counts_the_flow_not_the_run(tmp_path):
    spec = tmp_path / "long.yaml"
    spec.write_text("name: x\ntopology: topologies/dumbbell.yaml\nduration: 2000min\n"
                    "flows:\n  - {name: t, type: tcp, sender: s2, receiver: d2, start: 1000min}\n"
                    "  - {name: m, type: multicast, protocol: cbr, sender: s1, receivers: [d1],\n"
                    "     params: {rate: 1Mbit}}\n")
    exp = resolve(str(spec)).experiment  # the TCP flow runs 1000 min < one day
    assert math.isclose(exp.duration - exp.flows[0].start, 60000)
