"""Replicated flows: count, {i} placeholders, receiver ranges, --set on templates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mcclab.experiment.loader import resolve
from mcclab.experiment.replicate import evaluate, expand_flows, expand_range, substitute
from mcclab.model.loader import SpecError


def test_placeholders_and_ranges():
    assert substitute("tcp{i}", 3) == "tcp3"
    assert substitute("{(i-1)*5}s", 3) == "10s"
    assert substitute("{i/2}s", 3) == "1.5s"
    assert substitute("h{1..4}", 2) == "h{1..4}"  # ranges are not placeholders
    assert expand_range("h{1..3}") == ["h1", "h2", "h3"]
    assert expand_range("h{2*i-1..2*i}", 2) == ["h3", "h4"]
    assert expand_range("r{1..2}x{1..2}") == ["r1x1", "r1x2", "r2x1", "r2x2"]
    assert expand_range("plain") == ["plain"]
    assert evaluate("-i+10//3", 1) == 2
    for bad in ("i**2", "__import__('os')", "j", "1/0"):
        with pytest.raises(ValueError, match="cannot evaluate"):
            evaluate(bad, 1)
    with pytest.raises(ValueError, match="whole bounds"):
        expand_range("h{3..1}")
    with pytest.raises(ValueError, match="cannot evaluate"):
        expand_range("h{1..i}")  # i only inside a replicated flow


def test_expand_flows_substitutes_every_string_and_keeps_others():
    data = {"flows": [
        {"name": "m{i}", "count": 2, "type": "multicast", "protocol": "cbr", "sender": "s{i}",
         "receivers": ["d{i}", "x{1..2}"], "receiver_params": {"d{i}": {"tag": "g{i}"}},
         "receiver_start": {"d{i}": "{i*10}s"}, "params": {"rate": "1Mbit"}},
        {"name": "plain", "type": "tcp", "sender": "a", "receiver": "b"},
    ], "references": [{"kind": "fairness", "flows": ["m{i}", "plain"]},
                      {"kind": "share", "of_flows": ["m{1..2}"]},
                      {"kind": "measure", "args": {"flows": ["m{i}"]}}]}
    replicas = expand_flows(data, "x.yaml")
    assert replicas == {"m{i}": ["m1", "m2"]}
    first, second, plain = data["flows"]
    assert first == {"name": "m1", "type": "multicast", "protocol": "cbr", "sender": "s1",
                     "receivers": ["d1", "x1", "x2"], "receiver_params": {"d1": {"tag": "g1"}},
                     "receiver_start": {"d1": "10s"}, "params": {"rate": "1Mbit"}}
    assert second["name"] == "m2" and second["receiver_start"] == {"d2": "20s"}
    assert plain == {"name": "plain", "type": "tcp", "sender": "a", "receiver": "b"}
    assert data["references"][0]["flows"] == ["m1", "m2", "plain"]
    assert data["references"][1]["of_flows"] == ["m1", "m2"]
    assert data["references"][2]["args"]["flows"] == ["m1", "m2"]


def test_figure_args_name_the_replicas_in_every_list():
    data = {"flows": [{"name": "t{i}", "count": 2, "type": "tcp"}, {"name": "u", "type": "tcp"}],
            "figures": [{"figure": "x.panels", "args": {
                "flow": "t{i}", "nodes": ["h{1..2}", "r"], "bound": 1.8,
                "panels": [{"tcp": ["t{i}"], "title": "(a)"}, {"tcp": ["u", "t{1..1}"]}]}}]}
    expand_flows(data, "x.yaml")
    assert data["figures"][0]["args"] == {
        "flow": "t{i}", "nodes": ["h1", "h2", "r"], "bound": 1.8,  # a single name is kept
        "panels": [{"tcp": ["t1", "t2"], "title": "(a)"}, {"tcp": ["u", "t1"]}]}
    bad = {"flows": [], "figures": [{"figure": "x", "args": {"tcp": ["t{2..1}"]}}]}
    with pytest.raises(SpecError) as info:
        expand_flows(bad, "x.yaml")
    assert info.value.problems[0][0] == "figures[0]"


def test_count_one_and_bad_counts():
    data = {"flows": [{"name": "t{i}", "count": 1, "type": "tcp"}]}
    expand_flows(data, "x.yaml")
    assert data["flows"] == [{"name": "t1", "type": "tcp"}]
    for count in (0, -1, "2", 1.5, True):
        with pytest.raises(SpecError, match=r"flows\[0\].count"):
            expand_flows({"flows": [{"name": "t{i}", "count": count}]}, "x.yaml")


@pytest.fixture
def spec(tmp_path):
    """A dumbbell with 4 pairs and a templated TCP flow plus a multicast flow with a range."""
    topo = tmp_path / "db4.yaml"
    topo.write_text(yaml.safe_dump({"name": "db4", "generate": {
        "kind": "dumbbell", "pairs": 4,
        "bottleneck": {"rate": "4Mbit", "delay": "10ms",
                       "queue": {"limit": "40pkt", "discipline": "droptail"}},
        "access_link": {"rate": "10Mbit", "delay": "5ms",
                        "queue": {"limit": "100pkt", "discipline": "droptail"}}}}))
    path = tmp_path / "rep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "rep", "topology": str(topo), "duration": "30s",
        "flows": [
            {"name": "cbr", "type": "multicast", "protocol": "cbr", "sender": "s1",
             "receivers": ["d{1..4}"], "params": {"rate": "100kbit"}},
            {"name": "tcp{i}", "count": 2, "type": "tcp", "sender": "s{i+1}",
             "receiver": "d{i+1}", "start": "{(i-1)*5}s"},
        ],
        "references": [{"kind": "fairness", "label": "TCP fairness", "flows": ["tcp{i}"],
                        "paper": 1.0, "within": [0.9, 1.0]}],
        "profiles": {"quick": {"set": {"flows.tcp{i}.count": 3, "duration": "20s"}}},
    }))
    return str(path)


def test_resolve_expands_before_checking_nodes(spec):
    exp = resolve(spec).experiment
    names = [f.name for f in exp.flows]
    assert names == ["cbr", "tcp1", "tcp2"]
    tcp1, tcp2 = exp.flows[1:]
    assert (tcp1.sender, tcp1.receiver, tcp1.start) == ("s2", "d2", 0.0)
    assert (tcp2.sender, tcp2.receiver, tcp2.start) == ("s3", "d3", 5.0)
    assert exp.flows[0].receivers == ["d1", "d2", "d3", "d4"]
    assert exp.references[0].flows == ["tcp1", "tcp2"]


def test_set_addresses_the_template_and_the_replicas(spec):
    quick = resolve(spec, "quick").experiment  # the profile sets the count to 3
    assert [f.name for f in quick.flows] == ["cbr", "tcp1", "tcp2", "tcp3"]
    assert quick.references[0].flows == ["tcp1", "tcp2", "tcp3"]
    # the quick profile's count, then the command line's count and cc for every replica
    two = resolve(spec, "quick", ["flows.tcp{i}.count=2", "flows.tcp{i}.cc=cubic"]).experiment
    assert [(f.name, f.cc) for f in two.flows[1:]] == [("tcp1", "cubic"), ("tcp2", "cubic")]
    # a replica's own key is applied after expansion
    mixed = resolve(spec, "paper", ["flows.tcp2.cc=bbr"]).experiment
    assert [f.cc for f in mixed.flows[1:]] == ["reno", "bbr"]
    with pytest.raises(SpecError, match="no list entry named 'tcp7'"):
        resolve(spec, "paper", ["flows.tcp7.cc=bbr"])


def test_too_many_replicas_name_unknown_nodes(spec):
    # 4 replicas would need s5 and d5, which the topology does not have
    with pytest.raises(SpecError) as info:
        resolve(spec, "paper", ["flows.tcp{i}.count=4"])
    topology = yaml.safe_load(Path(spec).read_text())["topology"]
    assert ("flows[4]", f"unknown node 's5' in {topology}") in info.value.problems
