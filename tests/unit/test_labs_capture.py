"""Capture targets, filters, the IGMP/PIM decoder, and link down/up routing."""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path

import pytest
from tshark_support import tshark_count

from mcclab.capture import (
    CaptureError,
    Entry,
    bpf,
    counts,
    decode,
    packets,
    parse_target,
    read_pcap,
    tcpdump_argv,
    timeline,
)
from mcclab.labs.linkstate import link_cmds, routes_without
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import load_topology

REPO = Path(__file__).resolve().parents[2]
CHAIN = REPO / "topologies" / "chain3.yaml"


def ip4(text: str) -> bytes:
    return ipaddress.IPv4Address(text).packed


def ipv4(src: str, dst: str, proto: int, payload: bytes, options: bytes = b"") -> bytes:
    ihl = (20 + len(options)) // 4
    header = struct.pack(
        "!BBHHHBBH4s4s",
        0x40 | ihl,
        0,
        20 + len(options) + len(payload),
        0,
        0,
        1,
        proto,
        0,
        ip4(src),
        ip4(dst),
    )
    return header + options + payload


def igmpv3_report(records: list[tuple[int, str, list[str]]]) -> bytes:
    body = b""
    for rtype, group, sources in records:
        body += struct.pack("!BBH4s", rtype, 0, len(sources), ip4(group))
        body += b"".join(ip4(s) for s in sources)
    return struct.pack("!BBHHH", 0x22, 0, 0, 0, len(records)) + body


def enc_src(addr: str, flags: int) -> bytes:
    return struct.pack("!BBBB4s", 1, 0, flags, 32, ip4(addr))


def pim_join_prune(upstream: str, groups: list[tuple[str, list[bytes], list[bytes]]]) -> bytes:
    out = struct.pack("!BBH", 0x23, 0, 0) + struct.pack("!BB4s", 1, 0, ip4(upstream))
    out += struct.pack("!BBH", 0, len(groups), 210)
    for group, joins, prunes in groups:
        out += struct.pack("!BBBB4s", 1, 0, 0, 32, ip4(group))
        out += struct.pack("!HH", len(joins), len(prunes)) + b"".join(joins) + b"".join(prunes)
    return out


def pcap(frames: list[tuple[float, bytes]], linktype: int = 1) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for ts, ip in frames:
        frame = (
            b"\x01\x00\x5e\x00\x00\x16" + b"\x02" * 6 + b"\x08\x00" + ip
            if linktype == 1
            else struct.pack("!HHHH", 0x0800, 0, 0, 1) + b"\0" * 12 + ip
        )  # SLL2
        out += struct.pack("<IIII", int(ts), int((ts % 1) * 1e6), len(frame), len(frame))
        out += frame
    return out


ROUTER_ALERT = b"\x94\x04\x00\x00"


def sample_frames() -> list[tuple[float, bytes]]:
    return [
        (
            100.0,
            ipv4(
                "10.0.3.2",
                "224.0.0.22",
                2,
                igmpv3_report([(4, "239.1.1.1", []), (5, "232.1.1.1", ["10.0.0.1"])]),
                ROUTER_ALERT,
            ),
        ),
        (
            100.5,
            ipv4(
                "10.0.1.2",
                "224.0.0.13",
                103,
                pim_join_prune(
                    "10.0.1.1",
                    [
                        ("239.1.1.1", [enc_src("10.0.2.2", 0x07)], []),
                        ("239.1.1.2", [enc_src("10.0.0.1", 0x04)], [enc_src("10.0.0.1", 0x05)]),
                    ],
                ),
            ),
        ),
        (
            101.0,
            ipv4("10.0.3.2", "224.0.0.22", 2, igmpv3_report([(3, "239.1.1.1", [])]), ROUTER_ALERT),
        ),
        (
            101.2,
            ipv4(
                "10.0.3.1",
                "239.1.1.1",
                2,
                struct.pack("!BBH4s", 0x11, 10, 0, ip4("239.1.1.1")) + b"\0" * 4,
            ),
        ),
        (102.0, ipv4("10.0.0.1", "239.1.1.1", 17, b"\0" * 12)),  # data: not a message
    ]


@pytest.mark.parametrize("linktype", [1, 276])
def test_decoder_reads_reports_joins_prunes(tmp_path, linktype):
    path = tmp_path / "x.pcap"
    path.write_bytes(pcap(sample_frames(), linktype))
    msgs = read_pcap(path)
    assert [(m.protocol, m.kind) for m in msgs] == [
        ("IGMP", "report"),
        ("PIM", "join/prune"),
        ("IGMP", "report"),
        ("IGMP", "query"),
    ]
    join_report, jp, leave, query = msgs
    assert join_report.version == 3 and join_report.records == (
        "TO_EX 239.1.1.1",
        "ALLOW 232.1.1.1 [10.0.0.1]",
    )
    assert join_report.joins == (Entry("239.1.1.1"), Entry("232.1.1.1", "10.0.0.1"))
    assert jp.joins == (Entry("239.1.1.1"), Entry("239.1.1.2", "10.0.0.1"))
    assert jp.prunes == (Entry("239.1.1.2", "10.0.0.1", rpt=True),)
    assert str(jp.prunes[0]) == "(10.0.0.1,239.1.1.2,rpt)"
    assert leave.prunes == (Entry("239.1.1.1"),) and not leave.joins
    assert query.joins == (Entry("239.1.1.1"),)
    c = counts(msgs)
    assert (c["igmp-report"], c["igmp-leave"], c["pim-join"], c["pim-prune"], c["igmp-query"]) == (
        2,
        1,
        1,
        1,
        1,
    )
    lines = timeline(msgs, start=99.0)
    # The group-specific query is listed; general queries and hellos would not be.
    assert [round(t, 1) for t, _ in lines] == [1.0, 1.5, 2.0, 2.2]
    assert "join (*,239.1.1.1) (10.0.0.1,239.1.1.2)" in lines[1][1]


def test_decoder_ignores_truncated_and_foreign(tmp_path):
    assert decode(0.0, b"\x45" + b"\0" * 5) is None
    truncated = ipv4(
        "10.0.0.1",
        "224.0.0.13",
        103,
        pim_join_prune("10.0.1.1", [("239.1.1.1", [enc_src("10.0.2.2", 0x07)], [])]),
    )[:-6]
    assert decode(0.0, truncated) is None
    with pytest.raises(ValueError, match="not a classic pcap"):
        list(packets(b"\x0a\x0d\x0d\x0a" + b"\0" * 40))


def test_targets_and_filters():
    topo = load_topology(CHAIN)
    plan = plan_addresses(topo)
    link = parse_target(topo, plan, "r2-r3")
    assert (link.node, link.iface, link.netns) == (
        "r2",
        plan.iface_towards("r2", "r3").name,
        "mcl-r2",
    )
    assert parse_target(topo, plan, "r3:r2").node == "r3"
    assert parse_target(topo, plan, "h2n1").iface is None
    for bad, why in (
        ("r1-r3", "no link between r1 and r3"),
        ("zz", "neither a node"),
        ("r1-zz", "'zz' is not a node"),
    ):
        with pytest.raises(CaptureError, match=why):
            parse_target(topo, plan, bad)
    control = topo.addressing.control
    assert bpf("igmp", control) == f"(igmp) and not net {control}"
    assert bpf("routing", None) == "(igmp or pim)"
    assert bpf("all", None) == ""
    assert bpf("udp port 5001", None) == "(udp port 5001)"
    argv = tcpdump_argv(link, "(pim)", Path("/x.pcap"))
    assert argv[:3] == ["tcpdump", "-i", link.iface] and argv[-1] == "(pim)"
    assert "-U" in argv and "-w" in argv


RING = """\
name: ring
routing: {rp: r1}
nodes: {src: {kind: host}, r1: {kind: router}, r2: {kind: router}, r3: {kind: router},
        r4: {kind: router}, h: {kind: host}}
links:
  - {endpoints: [src, r1]}
  - {endpoints: [r1, r2]}
  - {endpoints: [r1, r3]}
  - {endpoints: [r2, r4]}
  - {endpoints: [r3, r4]}
  - {endpoints: [r4, h]}
"""


def test_link_down_moves_routes_to_the_other_path(tmp_path):
    path = tmp_path / "ring.yaml"
    path.write_text(RING)
    topo = load_topology(path)
    plan = plan_addresses(topo)
    src_net = plan.interfaces["src"][0].subnet

    def via(down: set[str]) -> str | None:
        routes = [
            r for r in routes_without(topo, plan, down) if r.node == "r4" and r.dest == src_net
        ]
        return routes[0].dev if routes else None

    assert via(set()) == plan.iface_towards("r4", "r2").name  # tie broken by name
    assert via({"r2-r4"}) == plan.iface_towards("r4", "r3").name
    assert via({"r2-r4", "r3-r4"}) is None
    cmds, down = link_cmds(topo, plan, "r4", "r2", False, set())
    assert down == {"r2-r4"}
    words = [" ".join(c.argv) for c in cmds]
    assert f"ip link set {plan.iface_towards('r4', 'r2').name} down" in words[:2]
    assert any(
        c.netns == "mcl-r4"
        and f"ip route replace {src_net}" in " ".join(c.argv)
        and plan.iface_towards("r4", "r3").name in c.argv
        for c in cmds
    )
    cmds, down = link_cmds(topo, plan, "r2", "r4", True, down)
    assert down == set()
    with pytest.raises(ValueError, match="no link between r1 and r4"):
        link_cmds(topo, plan, "r1", "r4", False, set())


def test_decoder_agrees_with_tshark(tmp_path):
    """The same synthetic capture, counted by tshark's dissectors and by the decoder."""
    path = tmp_path / "x.pcap"
    path.write_bytes(pcap(sample_frames()))

    def tshark(display_filter: str) -> int:
        return tshark_count(path, display_filter)

    c = counts(read_pcap(path))
    assert tshark("igmp.type == 0x22") == c["igmp-report"]
    assert tshark("igmp.type == 0x11") == c["igmp-query"]
    assert tshark("pim.type == 3 && pim.numjoins > 0") == c["pim-join"]
    assert tshark("pim.type == 3 && pim.numprunes > 0") == c["pim-prune"]
    assert tshark("igmp.record_type == 3") == c["igmp-leave"]


def test_descriptions_of_queries_and_registers():
    from mcclab.capture import Message

    query = Message(0.0, "10.0.3.1", "239.1.1.1", "IGMP", "query", 3, joins=(Entry("239.1.1.1"),))
    general = Message(0.0, "10.0.3.1", "224.0.0.1", "IGMP", "query", 3)
    reg = Message(
        0.0, "10.0.0.2", "10.0.2.2", "PIM", "register", 2, joins=(Entry("239.1.1.1", "10.0.0.1"),)
    )
    assert query.describe().endswith("IGMPv3 query: group 239.1.1.1")
    assert general.describe().endswith("IGMPv3 query: general")
    assert reg.describe() == "10.0.0.2 > 10.0.2.2 PIMv2 register: (10.0.0.1,239.1.1.1)"
    assert [t for t, _ in timeline([general, query], start=0.0)] == [0.0]
