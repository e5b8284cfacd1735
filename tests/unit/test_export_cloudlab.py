"""`mcclab export cloudlab`: the RSpec's per-direction properties, the profile script, refusals."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from lxml import etree

from mcclab.export.cloudlab import (
    DEFAULT_IMAGE,
    build_request,
    check_rspec,
    cloudlab_problems,
    export_cloudlab,
    request_rows,
    rspec_xml,
)
from mcclab.export.common import ExportRefused, build_plan
from mcclab.model.loader import resolve_topology
from tests.unit.test_export_ns import DROPTAIL, topo

NS = {"r": "http://www.geni.net/resources/rspec/3"}


def export(t: Any, **kw: Any) -> tuple[str, Any]:
    """The profile script and the parsed RSpec of a topology."""
    script, xml = export_cloudlab(build_plan(t, "t.yaml", "exp", "paper"), **kw)
    return script, etree.fromstring(xml.encode())


def props(root: Any, link: str) -> dict[tuple[str, str], dict[str, str]]:
    """A link's properties by (source, dest) interface."""
    el = root.find(f"r:link[@client_id='{link}']", NS)
    return {(p.get("source_id"), p.get("dest_id")): {k: v for k, v in p.attrib.items()
                                                     if k not in ("source_id", "dest_id")}
            for p in el.findall("r:property", NS)}


def refused(t: Any) -> list[tuple[str, str]]:
    """CloudLab's refusals of a topology; the export must raise with the same ones."""
    plan = build_plan(t, "t.yaml", "exp", "paper")
    problems = cloudlab_problems(plan)
    with pytest.raises(ExportRefused) as info:
        export_cloudlab(plan)
    assert info.value.problems == problems and info.value.path == "t.yaml"
    return problems


def test_symmetric_link_capacity_latency_loss_in_both_directions():
    _, root = export(topo({"rate": "3.2Mbit", "delay": "20ms", "loss": "1%", "queue": DROPTAIL}))
    assert props(root, "link0") == {
        ("r1:eth0", "src:eth0"): {"capacity": "3200", "latency": "20", "packet_loss": "0.01"},
        ("src:eth0", "r1:eth0"): {"capacity": "3200", "latency": "20", "packet_loss": "0.01"},
    }


def test_per_direction_asymmetry_lands_on_the_right_property():
    _, root = export(topo({"rate": "10Mbit", "delay": "100ms", "forward": {"loss": "2%"},
                           "reverse": {"rate": "2Mbit", "delay": "30ms"}}))
    assert props(root, "link0") == {
        # src -> r1 is the forward direction
        ("src:eth0", "r1:eth0"): {"capacity": "10000", "latency": "100", "packet_loss": "0.02"},
        ("r1:eth0", "src:eth0"): {"capacity": "2000", "latency": "30"},
    }


def test_unshaped_link_and_direction_carry_no_property():
    _, root = export(topo({}))
    assert props(root, "link0") == {}
    _, root = export(topo({"delay": "10ms", "reverse": {"delay": "0ms"}}))
    assert props(root, "link0") == {("src:eth0", "r1:eth0"): {"latency": "10"}}


def test_nodes_images_addresses_services_and_routing():
    _, root = export(topo({"rate": "10Mbit"}), image="urn:x", node_type="xenvm",
                     start_script="/s/start")
    nodes = {n.get("client_id"): n for n in root.findall("r:node", NS)}
    assert list(nodes) == ["src", "r1", "h1"]
    r1 = nodes["r1"]
    assert r1.find("r:sliver_type", NS).get("name") == "emulab-xen"
    assert r1.find("r:sliver_type/r:disk_image", NS).get("name") == "urn:x"
    ips = [(i.get("client_id"), i.find("r:ip", NS).get("address"))
           for i in r1.findall("r:interface", NS)]
    assert ips == [("r1:eth0", "10.0.0.2"), ("r1:eth1", "10.0.1.1")]
    assert r1.find("r:services/r:execute", NS).get("command") == "/s/start router r1 exp paper"
    emulab = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
    assert root.find(f"{{{emulab}}}routing_style").get("style") == "static"
    _, raw = export(topo({"rate": "10Mbit"}))
    node = raw.find("r:node", NS)
    assert node.find("r:sliver_type", NS).get("name") == "raw"
    assert node.find("r:sliver_type/r:disk_image", NS).get("name") == DEFAULT_IMAGE
    assert node.find("r:services", NS) is None


def test_lan_is_a_lan_link_with_every_member():
    _, root = export(topo({"rate": "10Mbit"}, lan=True))
    lan = root.find("r:link[@client_id='lan1']", NS)
    assert lan.find("r:link_type", NS).get("name") == "lan"
    assert [r.get("client_id") for r in lan.findall("r:interface_ref", NS)] == ["h1:eth1",
                                                                               "h2:eth0"]


def test_check_rspec_finds_a_missing_property_and_a_wrong_address():
    rows = request_rows(build_plan(topo({"rate": "10Mbit", "delay": "5ms"}), "t.yaml"))
    xml = rspec_xml(build_request(rows))
    assert check_rspec(xml, rows, DEFAULT_IMAGE, "rawpc") == []
    broken = xml.replace('capacity="10000" latency="5"/>', 'capacity="10000"/>', 1)
    assert any("latency" in w for w in check_rspec(broken, rows, DEFAULT_IMAGE, "rawpc"))
    moved = xml.replace('address="10.0.1.2"', 'address="10.0.1.9"')
    assert check_rspec(moved, rows, DEFAULT_IMAGE, "rawpc") == [
        "h1:eth0: address is not 10.0.1.2/255.255.255.0"]


def run_profile(script: str) -> str:
    """Execute a profile script against a stub of CloudLab's geni.portal; return its RSpec.

    geni-lib's own geni.portal does not import on Python 3; the portal's
    context gives the script a pg.Request and prints it, as the stub does.
    """
    import geni
    import geni.rspec.pg as pg

    printed: list[str] = []

    class Context:
        def __init__(self) -> None:
            self.request: Any = None

        def makeRequestRSpec(self) -> Any:  # noqa: N802 (the portal's name)
            self.request = pg.Request()
            return self.request

        def printRequestRSpec(self) -> None:  # noqa: N802
            printed.append(rspec_xml(self.request))

    stub = types.ModuleType("geni.portal")
    stub.context = Context()
    saved = sys.modules.get("geni.portal")
    sys.modules["geni.portal"] = stub
    try:
        exec(compile(script, "profile.py", "exec"), {"__name__": "__main__"})  # noqa: S102
    finally:
        if saved is None:
            sys.modules.pop("geni.portal", None)
        else:
            sys.modules["geni.portal"] = saved
        if hasattr(geni, "portal") and geni.portal is stub:
            del geni.portal
    assert len(printed) == 1
    return printed[0]


@pytest.mark.parametrize("kw", [{}, {"node_type": "xenvm", "image": "urn:y",
                                     "start_script": "/a/b"}])
def test_profile_script_builds_the_same_rspec(kw):
    t = topo({"rate": "10Mbit", "delay": "40ms", "forward": {"loss": "1%"},
              "reverse": {"rate": "1Mbit"}}, lan=True)
    script, xml = export_cloudlab(build_plan(t, "t.yaml", "exp", "paper"), **kw)
    assert "import geni.portal as portal" in script
    assert "portal.context.makeRequestRSpec()" in script
    assert run_profile(script) == xml


@pytest.mark.parametrize("params, field, words", [
    ({"rate": "10Mbit", "delay": "10ms", "jitter": "2ms"}, "links[0].jitter", "jitter"),
    ({"rate": "10Mbit", "gilbert_elliott": {"p": "1%", "r": "50%"}},
     "links[0].gilbert_elliott", "Gilbert-Elliott"),
    ({"rate": "10.5kbit"}, "links[0].rate", "whole number of kbit/s"),
    ({"rate": "10Mbit", "delay": "2.5ms"}, "links[0].delay", "whole number of ms"),
    ({"rate": "10Mbit", "queue": {"limit": "40pkt"}}, "links[0].queue.limit", "40pkt drop-tail"),
    ({"rate": "10Mbit", "queue": {"limit": "50pkt", "discipline": "red", "red": {
        "min_th": "5pkt", "max_th": "15pkt", "max_p": "10%"}}},
     "links[0].queue.discipline", "RED"),
])
def test_refusals_name_the_field_in_both_directions(params, field, words):
    problems = refused(topo(params))
    assert [f for f, _ in problems] == [field, field]
    assert all(words in reason for _, reason in problems)


def test_a_queue_on_an_unshaped_direction_is_not_refused():
    # Without a rate the queue never fills; mcclab ignores it, and so does the export.
    _, root = export(topo({"delay": "5ms", "queue": {"limit": "10pkt"}}))
    assert props(root, "link0")[("src:eth0", "r1:eth0")] == {"latency": "5"}


def test_shaped_lan_port_is_refused():
    data = topo({"rate": "10Mbit"}, lan=True).model_dump(mode="json")
    data["links"][3].update({"delay": "10ms"})
    problems = refused(resolve_topology(data, "t.yaml"))
    assert [f for f, _ in problems] == ["links[3].delay", "links[3].delay"]
    assert "LAN port" in problems[0][1]
