"""Topology models and generators: structure, per-direction parameters, validation."""

import json

import pytest

from mcclab.model.loader import SpecError, read_yaml, resolve_topology
from mcclab.model.schema import topology_schema

RED = {"min_th": "5pkt", "max_th": "15pkt", "max_p": "10%", "weight": 0.002}


def explicit(links, nodes=None, **extra):
    nodes = nodes or {"a": {"kind": "host"}, "r": {"kind": "router"}, "b": {"kind": "host"}}
    return {"name": "t", "nodes": nodes, "links": links, **extra}


def test_per_direction_overrides_merge_with_shared_parameters():
    topo = resolve_topology(explicit([
        {"endpoints": ["a", "r"], "rate": "10Mbit", "delay": "10ms",
         "reverse": {"rate": "1Mbit", "queue": {"limit": "40pkt", "discipline": "red",
                                                  "red": RED}}},
        {"endpoints": ["r", "b"]},
    ]))
    fwd, rev = topo.links[0].direction(True), topo.links[0].direction(False)
    assert (fwd.rate, fwd.delay, fwd.queue) == (10e6, 0.01, None)
    assert (rev.rate, rev.delay) == (1e6, 0.01)
    assert rev.queue.red.min_th == 5 and rev.queue.red.gentle is True


def test_override_is_validated_after_merging():
    with pytest.raises(SpecError, match="jitter"):
        resolve_topology(explicit([
            {"endpoints": ["a", "r"], "delay": "1ms", "forward": {"jitter": "5ms"}},
            {"endpoints": ["r", "b"]},
        ]), "x.yaml")


def test_errors_name_file_and_every_bad_field():
    with pytest.raises(SpecError) as info:
        resolve_topology(explicit([
            {"endpoints": ["a", "r"], "rate": 10, "delay": "5 parsecs"},
            {"endpoints": ["r", "b"], "queue": {"limit": "0pkt"}},
        ]), "topologies/bad.yaml")
    fields = [f for f, _ in info.value.problems]
    assert "links[0].rate" in fields and "links[0].delay" in fields
    assert "links[1].queue.limit" in fields
    assert str(info.value).startswith("topologies/bad.yaml: ")


def test_unknown_key_is_an_error_not_dropped():
    with pytest.raises(SpecError, match=r"links\[0\]\.dealy: unknown key"):
        resolve_topology(explicit([{"endpoints": ["a", "r"], "dealy": "5ms"},
                                   {"endpoints": ["r", "b"]}]), "f.yaml")


def test_duplicate_yaml_keys_are_rejected(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: a\nname: b\n")
    with pytest.raises(SpecError, match="duplicate key"):
        read_yaml(path)


@pytest.mark.parametrize(
    ("spec", "hosts", "routers", "links"),
    [
        ({"kind": "star", "leaves": 4}, 5, 1, 5),
        ({"kind": "star", "leaves": 4, "hub_size": 4}, 5, 1, 5),
        ({"kind": "star", "leaves": 5, "hub_size": 2}, 6, 3, 8),
        ({"kind": "tree", "depth": 2, "fanout": 2}, 5, 3, 7),
        ({"kind": "tree", "depth": 3, "fanout": 4}, 65, 21, 85),
        ({"kind": "chain", "routers": 3, "hosts_per_router": 2}, 7, 3, 9),
        ({"kind": "dumbbell", "pairs": 3}, 6, 2, 7),
    ],
)
def test_generators_shape(spec, hosts, routers, links):
    topo = resolve_topology({"name": "g", "generate": spec})
    assert len(topo.names("host")) == hosts
    assert len(topo.names("router")) == routers
    assert len(topo.links) == links


def test_star_hubs_share_out_the_leaves_behind_the_hub_link():
    topo = resolve_topology({"name": "g", "generate": {
        "kind": "star", "leaves": 5, "hub_size": 2, "leaf_link": {"rate": "1Mbit"},
        "hub_link": {"rate": "100Mbit"}}})
    by_pair = {link.endpoints: link for link in topo.links}
    hubs = {h: r for (r, h) in by_pair if h.startswith("h")}
    assert hubs == {"h1": "r0", "h2": "r0", "h3": "r1", "h4": "r1", "h5": "r2"}
    assert by_pair[("r0", "r1")].rate == by_pair[("r0", "r2")].rate == 100e6
    assert all(by_pair[(r, h)].rate == 1e6 for h, r in hubs.items())
    assert ("src", "r0") in by_pair


def test_tree_levels_apply_per_depth():
    topo = resolve_topology({"name": "g", "generate": {
        "kind": "tree", "depth": 2, "fanout": 2,
        "levels": [{"rate": "10Mbit"}, {"rate": "1Mbit", "delay": "50ms"}]}})
    by_pair = {link.endpoints: link for link in topo.links}
    assert by_pair[("r0", "r1")].rate == 10e6
    assert by_pair[("r1", "h1")].rate == 1e6 and by_pair[("r1", "h1")].delay == 0.05


def test_chain_hops_give_per_hop_parameters():
    topo = resolve_topology({"name": "c", "generate": {
        "kind": "chain", "routers": 3, "hosts_per_router": 0,
        "hops": [{"rate": "1Mbit"}, {"rate": "2Mbit"}]}})
    rates = {link.endpoints: link.rate for link in topo.links}
    assert rates[("r1", "r2")] == 1e6 and rates[("r2", "r3")] == 2e6


def test_rp_defaults_to_first_router_and_must_be_a_router():
    topo = resolve_topology({"name": "g", "generate": {"kind": "dumbbell", "pairs": 1}})
    assert topo.rp == "rl"
    with pytest.raises(SpecError, match="routing"):
        resolve_topology({"name": "g", "generate": {"kind": "dumbbell", "pairs": 1},
                          "routing": {"rp": "s1"}})


def test_immediate_leave_needs_the_frr10_backend():
    spec = {"name": "g", "generate": {"kind": "dumbbell", "pairs": 1},
            "routing": {"igmp": {"immediate_leave": True}}}
    with pytest.raises(SpecError, match="immediate_leave.*frr10"):
        resolve_topology(spec)
    spec["routing"]["backend"] = "frr10"
    assert resolve_topology(spec).routing.igmp.immediate_leave


def test_schema_is_generated_and_describes_units():
    schema = topology_schema()
    text = json.dumps(schema)
    assert schema["additionalProperties"] is False
    assert "Mbit" in text and '"20ms"' in text
    link = schema["$defs"]["Link"]
    assert link["additionalProperties"] is False and "delay" in link["properties"]


def test_dumped_topology_validates_again():
    topo = resolve_topology({"name": "g", "generate": {
        "kind": "star", "leaves": 2,
        "leaf_link": {"rate": "3.2Mbit", "delay": "25ms", "loss": "1%",
                      "queue": {"limit": "40pkt", "discipline": "red", "red": RED}}}})
    again = resolve_topology(topo.model_dump(mode="json"))
    assert again == topo
