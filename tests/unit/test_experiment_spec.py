"""Experiment specs: malformed specs fail before anything starts; profiles and --set apply.

Each malformed spec opens with comment lines: ``# expect: <field path>`` (the
field the error must name), optionally ``# reason: <text>`` (part of the
reason it must give) and ``# profile: <name>`` (the profile to resolve it
with; default paper, the spec as written).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcclab.experiment.loader import resolve
from mcclab.model.loader import SpecError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "malformed_experiments"
MALFORMED = sorted(FIXTURES.glob("*.yaml"))


def test_enough_malformed_specs():
    assert len(MALFORMED) >= 15


def header(path: Path) -> dict[str, str]:
    """The ``# key: value`` comment lines a fixture opens with; ``expect`` is required."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.fullmatch(r"# (expect|reason|profile): (\S.*)", line)
        if not m:
            break
        out[m.group(1)] = m.group(2).strip()
    assert "expect" in out, f"{path.name}: first line must be '# expect: <field path>'"
    return out


@pytest.mark.parametrize("path", MALFORMED, ids=[p.stem for p in MALFORMED])
def test_malformed_spec_is_rejected_naming_file_and_field(path):
    want = header(path)
    with pytest.raises(SpecError) as info:
        resolve(str(path), want.get("profile", "paper"))
    assert info.value.path == str(path)
    hits = [reason for field, reason in info.value.problems if field == want["expect"]]
    assert hits, str(info.value)
    if "reason" in want:
        assert any(want["reason"] in reason for reason in hits), str(info.value)


def test_unknown_profile_and_missing_quick_profile(tmp_path):
    with pytest.raises(SpecError, match="unknown profile"):
        resolve("default", "turbo")
    spec = tmp_path / "noquick.yaml"
    spec.write_text("name: x\ntopology: topologies/dumbbell.yaml\nduration: 10s\n"
                    "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    with pytest.raises(SpecError, match="no quick profile"):
        resolve(str(spec), "quick")


def test_unknown_experiment_lists_the_known_ones():
    with pytest.raises(SpecError, match="known: .*default"):
        resolve("no-such-experiment")


def test_quick_profile_and_set_overrides():
    paper = resolve("default")
    quick = resolve("default", "quick")
    assert paper.experiment.duration == 500 and quick.experiment.duration == 150
    custom = resolve("default", "quick", ["duration=30s", "warmup=2s",
                                           "flows.webrc.params.session_rate=2Mbit",
                                           "tcp.model=linux-cubic"])
    flows = {f.name: f for f in custom.experiment.flows}
    assert custom.experiment.duration == 30
    assert flows["webrc"].params["session_rate"] == "2Mbit"
    assert custom.experiment.tcp is not None and custom.experiment.tcp.model == "linux-cubic"


def test_set_with_a_bad_value_names_the_field():
    with pytest.raises(SpecError) as info:
        resolve("default", "paper", ["duration=ten"])
    assert "duration" in [f for f, _ in info.value.problems]
    with pytest.raises(SpecError, match="not key=value"):
        resolve("default", "paper", ["duration"])


def test_topology_overrides_apply_per_direction(tmp_path):
    spec = tmp_path / "ov.yaml"
    spec.write_text(
        "name: ov\ntopology: topologies/dumbbell.yaml\nduration: 10s\n"
        "overrides:\n  routing_backend: smcroute\n  link_backend: userspace\n"
        "  links: [{endpoints: [rr, rl], rate: 1Mbit, forward: {delay: 50ms}}]\n"
        "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    topo = resolve(str(spec)).topology
    link = next(li for li in topo.links if set(li.endpoints) == {"rl", "rr"})
    assert link.endpoints == ("rl", "rr")
    # "forward" was given for rr->rl, which is this link's reverse direction.
    assert link.direction(False).delay == 0.05 and link.direction(True).delay == 0.02
    assert link.direction(True).rate == 1e6
    assert topo.routing.backend == "smcroute" and topo.link_backend == "userspace"


def test_igmp_overrides_change_only_the_keys_given(tmp_path):
    spec = tmp_path / "igmp.yaml"
    spec.write_text(
        "name: ig\ntopology: topologies/dumbbell.yaml\nduration: 10s\n"
        "overrides:\n  igmp: {last_member_query_interval: 200ms, last_member_query_count: 1}\n"
        "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    base = resolve("default").topology.routing.igmp
    igmp = resolve(str(spec)).topology.routing.igmp
    assert igmp.last_member_query_interval == pytest.approx(0.2)
    assert igmp.last_member_query_count == 1
    assert igmp.query_interval == base.query_interval  # untouched
    assert igmp.unsolicited_report_interval == base.unsolicited_report_interval


@pytest.mark.parametrize("igmp, field", [
    ("{last_member_query_interval: 100}", "overrides.igmp.last_member_query_interval"),
    ("{last_member_query_count: 0}", "overrides.igmp.last_member_query_count"),
    ("{leave_latency: 10ms}", "overrides.igmp.leave_latency"),
])
def test_igmp_overrides_need_units_and_known_keys(tmp_path, igmp, field):
    spec = tmp_path / "igmp.yaml"
    spec.write_text(
        "name: ig\ntopology: topologies/dumbbell.yaml\nduration: 10s\n"
        f"overrides:\n  igmp: {igmp}\n"
        "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    with pytest.raises(SpecError) as info:
        resolve(str(spec))
    assert field in [f for f, _ in info.value.problems], str(info.value)
