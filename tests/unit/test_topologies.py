"""The topology files in topologies/ and the malformed fixtures.

Every topology file must load, validate and get a complete address plan; the
paper topologies are spot-checked against the values their papers give (see
docs/topologies.md for what the papers leave open and what was chosen). Every
malformed fixture must be rejected with a SpecError naming the file and the
field path written on its first line (``# expect: <field path>``) and, when
given on its second line, part of the reason (``# reason: <text>``).
"""

from __future__ import annotations

import math
import re
from collections import deque
from functools import cache
from pathlib import Path

import pytest

from mcclab.lab import router_interfaces
from mcclab.links.plan import needs_emulation
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import SpecError, load_topology
from mcclab.model.topology import Link, LinkParams, Topology
from mcclab.routing.limits import vif_problems

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY_DIR = ROOT / "topologies"
MALFORMED_DIR = ROOT / "tests" / "fixtures" / "malformed"
TOPOLOGY_FILES = sorted(TOPOLOGY_DIR.glob("*.yaml"))
MALFORMED_FILES = sorted(MALFORMED_DIR.glob("*.yaml"))

REQUIRED = {
    "webrc-fig3",
    "webrc-fig11",
    "webrc-dumbbell",
    "rlc-fig2a",
    "rlc-fig2b",
    "ormcc-fig3",
    "ormcc-fig5",
    "ormcc-fig7",
    "ormcc-fig9",
    "ormcc-fig10",
    "stair-fig8",
    "stair-fig12",
    "chain3",
    "star4",
    "tree2",
    "dumbbell",
    "lan",
}

# The multicast (or first) sender of each topology; the RP must sit next to it.
SOURCES = {
    "webrc-fig3": "src",
    "webrc-fig11": "src",
    "webrc-dumbbell": "s1",
    "rlc-fig2a": "n0",
    "rlc-fig2b": "n0",
    "ormcc-fig3": "src",
    "ormcc-fig3-n8": "src",
    "ormcc-fig3-n16": "src",
    "ormcc-fig3-n24": "src",
    "ormcc-fig3-n32": "src",
    "ormcc-fig3-n64": "src",
    "ormcc-fig5-n4": "src1",
    "ormcc-fig7-n8": "src",
    "ormcc-fig10-n8": "src",
    "ormcc-fig9-n6": "src",
    "ormcc-fig5": "src1",
    "ormcc-fig7": "src",
    "ormcc-fig9": "src",
    "ormcc-fig10": "src",
    "stair-fig8": "src",
    "stair-fig12": "src",
    "chain3": "src",
    "star4": "src",
    "tree2": "src",
    "dumbbell": "s1",
    "lan": "src",
}

MBIT = 1e6
MS = 1e-3


@cache
def topo(name: str) -> Topology:
    """A topology file by name, loaded once."""
    return load_topology(TOPOLOGY_DIR / f"{name}.yaml")


def route(t: Topology, a: str, b: str) -> list[tuple[Link, bool]]:
    """The hop-count shortest path a -> b as (link, forward?) pairs; hosts never forward."""
    adj: dict[str, list[tuple[str, Link, bool]]] = {n: [] for n in t.nodes}
    for link in t.links:
        x, y = link.endpoints
        adj[x].append((y, link, True))
        adj[y].append((x, link, False))
    prev: dict[str, tuple[str, Link, bool]] = {}
    queue, seen = deque([a]), {a}
    while queue:
        node = queue.popleft()
        if node == b:
            break
        if node != a and t.kind_of(node) == "host":
            continue
        for nxt, link, fwd in adj[node]:
            if nxt not in seen:
                seen.add(nxt)
                prev[nxt] = (node, link, fwd)
                queue.append(nxt)
    assert b in seen, f"no path {a} -> {b}"
    hops, node = [], b
    while node != a:
        node, link, fwd = prev[node]
        hops.append((link, fwd))
    return hops[::-1]


def params(t: Topology, a: str, b: str) -> list[LinkParams]:
    """Per-direction parameters of every link on the path a -> b, in order."""
    return [link.direction(fwd) for link, fwd in route(t, a, b)]


def one_way(t: Topology, a: str, b: str) -> float:
    return sum(p.delay for p in params(t, a, b))


def rtt(t: Topology, a: str, b: str) -> float:
    return one_way(t, a, b) + one_way(t, b, a)


def bottleneck(t: Topology, a: str, b: str) -> float:
    return min(p.rate for p in params(t, a, b) if p.rate is not None)


def link_between(t: Topology, a: str, b: str) -> Link:
    (link,) = [lk for lk in t.links if set(lk.endpoints) == {a, b}]
    return link


def only_link(t: Topology, host: str) -> Link:
    """The single link of a host."""
    (link,) = [lk for lk in t.links if host in lk.endpoints]
    return link


# ----------------------------------------------------------------- every file


def test_every_required_topology_exists():
    missing = REQUIRED - {p.stem for p in TOPOLOGY_FILES}
    assert not missing, sorted(missing)


@pytest.mark.parametrize("path", TOPOLOGY_FILES, ids=lambda p: p.stem)
def test_topology_loads_and_validates(path):
    t = load_topology(path)
    assert t.name == path.stem
    assert t.description.strip() and t.reference.strip()
    assert t.names("host") and t.names("router")


@pytest.mark.parametrize("path", TOPOLOGY_FILES, ids=lambda p: p.stem)
def test_sender_is_a_host_next_to_the_rp(path):
    t = topo(path.stem)
    source = SOURCES[path.stem]
    assert t.kind_of(source) == "host"
    assert [link for link, _ in route(t, source, t.rp)] == [link_between(t, source, t.rp)]


@pytest.mark.parametrize("path", TOPOLOGY_FILES, ids=lambda p: p.stem)
def test_shaped_links_have_an_explicit_queue(path):
    for link in topo(path.stem).links:
        for fwd in (True, False):
            p = link.direction(fwd)
            assert p.rate is None or p.queue is not None, link.endpoints


@pytest.mark.parametrize("path", TOPOLOGY_FILES, ids=lambda p: p.stem)
def test_address_plan_routes_every_node_to_every_subnet(path):
    plan = plan_addresses(topo(path.stem))
    subnets = {i.subnet for ifaces in plan.interfaces.values() for i in ifaces}
    for node, ifaces in plan.interfaces.items():
        assert ifaces, f"{node} has no interface"
        local = {i.subnet for i in ifaces}
        routed = {r.dest for r in plan.routes_of(node)}
        assert not local & routed, f"{node} has a route to a connected subnet"
        missing = subnets - local - routed
        assert not missing, f"{node} has no route to {sorted(map(str, missing))}"
        assert all(len(i.name) <= 15 for i in ifaces)  # Linux IFNAMSIZ - 1


# ------------------------------------------------------------------- WEBRC


def test_webrc_fig3_round_trips_and_shared_loss():
    t = topo("webrc-fig3")
    x = rtt(t, "r1", "r2")
    y = rtt(t, "r2", "a")
    z = rtt(t, "r2", "b")
    assert (x, y, z) == pytest.approx((0.2, 0.05, 0.1))
    # Sender and its router are coincident (footnote 6): MRTT_A alone = X + Y.
    assert rtt(t, "src", "a") == pytest.approx(0.25)
    assert rtt(t, "src", "b") == pytest.approx(0.3)
    shared = link_between(t, "r1", "r2")
    down = shared.direction(shared.endpoints == ("r1", "r2"))
    up = shared.direction(shared.endpoints != ("r1", "r2"))
    assert (down.loss, up.loss) == (pytest.approx(0.01), 0.0)
    others = [lk for lk in t.links if lk is not shared]
    assert all(lk.direction(f).loss == 0 for lk in others for f in (True, False))


def test_webrc_dumbbell_is_the_section_5_2_bottleneck():
    t = topo("webrc-dumbbell")
    for s, d in (("s1", "d1"), ("s2", "d2")):
        assert rtt(t, s, d) == pytest.approx(0.1)
        assert bottleneck(t, s, d) == pytest.approx(3.2 * MBIT)
    neck = link_between(t, "rl", "rr").direction(True)
    assert (neck.queue.limit, neck.queue.discipline) == (40, "droptail")


def test_default_dumbbell():
    t = topo("dumbbell")
    assert sorted(t.names("host")) == ["d1", "d2", "s1", "s2"]
    neck = link_between(t, "rl", "rr").direction(True)
    assert (neck.rate, neck.delay) == (pytest.approx(3.2 * MBIT), pytest.approx(20 * MS))
    assert (neck.queue.limit, neck.queue.discipline) == (40, "droptail")
    for host in t.names("host"):
        assert only_link(t, host).direction(True).rate == pytest.approx(10 * MBIT)


# --------------------------------------------------------------------- RLC


def test_rlc_fig2a_two_paths_share_a_red_bottleneck():
    t = topo("rlc-fig2a")
    assert rtt(t, "n0", "n5") == pytest.approx(0.42)
    assert rtt(t, "n4", "n3") != pytest.approx(0.42)  # "two paths with different delays"
    neck = link_between(t, "n1", "n2")
    for a, b in (("n0", "n5"), ("n4", "n3")):
        assert neck in [lk for lk, _ in route(t, a, b)]
        assert bottleneck(t, a, b) == neck.rate
    q = neck.direction(True).queue
    assert (q.limit, q.discipline) == (50, "red")  # ns defaults
    assert (q.red.min_th, q.red.max_th, q.red.weight) == (5, 15, 0.002)


def test_rlc_fig2b_receiver_bottlenecks():
    t = topo("rlc-fig2b")
    for rx in ("n5", "n6", "n7"):
        assert bottleneck(t, "n0", rx) == pytest.approx(1.5 * MBIT)
    assert bottleneck(t, "n0", "n8") == pytest.approx(0.5 * MBIT)
    assert bottleneck(t, "n0", "n9") == pytest.approx(128e3)
    assert {n for n in t.names("host") if n != "n0"} == {f"n{i}" for i in range(5, 10)}


# ------------------------------------------------------------------- ORMCC


def test_ormcc_fig3_star_of_64_receivers():
    t = topo("ormcc-fig3")
    receivers = [f"h{i}" for i in range(1, 65)]
    assert len(t.names("host")) == 129  # "129 end nodes"
    assert t.names("router") == ["r0"]
    for i, rx in enumerate(receivers, start=1):
        link = link_between(t, "r0", rx)
        # Each receiver's own link is its bottleneck, shared by the flows from
        # src (multicast) and s<i> (TCP + single-receiver ORMCC).
        assert bottleneck(t, "src", rx) == bottleneck(t, f"s{i}", rx) == link.rate
        assert link.direction(True).queue.limit == 50  # 50 kB / 1000 B


@pytest.mark.parametrize(("n", "last_of_group"), [(32, (16, 32)), (64, (22, 44, 64))])
def test_ormcc_fig3_split_over_routers_without_changing_a_path(n, last_of_group):
    """Past 29 leaves, groups of leaves and sources move behind plain veths; no path changes."""
    t = topo(f"ormcc-fig3-n{n}")
    assert vif_problems(t.routing.backend, router_interfaces(t)) == []
    firsts = (1, *(last + 1 for last in last_of_group[:-1]))
    for g, (first, last) in enumerate(zip(firsts, last_of_group, strict=True)):
        leaves, sources = ("r0", "r1") if g == 0 else (f"r{2 * g}", f"r{2 * g + 1}")
        assert link_between(t, leaves, f"h{first}") and link_between(t, leaves, f"h{last}")
        assert link_between(t, sources, f"s{first}") and link_between(t, sources, f"s{last}")
        if g:
            for plain in (link_between(t, "r0", leaves), link_between(t, "r1", sources)):
                assert not any(needs_emulation(plain.direction(fwd)) for fwd in (True, False))
    for i in sorted({*firsts, *last_of_group}):
        rx = f"h{i}"
        assert one_way(t, "src", rx) == pytest.approx(one_way(t, "src", "h1"))
        assert one_way(t, f"s{i}", rx) == pytest.approx(0.050)  # base RTT 100 ms
        assert bottleneck(t, "src", rx) == bottleneck(t, f"s{i}", rx) == 1 * MBIT


def test_ormcc_fig5_long_and_short_flows():
    t = topo("ormcc-fig5")
    groups = {g: [f"g{g}h{i}" for i in range(1, 17)] for g in (1, 2, 3)}
    assert all(n in t.nodes for members in groups.values() for n in members)
    necks = {link_between(t, "r1", "r2"), link_between(t, "r2", "r3")}
    for lk in necks:
        p = lk.direction(True)
        assert p.rate == pytest.approx(1 * MBIT)
        assert (p.queue.limit, p.queue.discipline) == (50, "red")

    def crossed(a, b):
        return {lk for lk, _ in route(t, a, b)} & necks

    assert all(len(crossed("src1", rx)) == 2 for rx in groups[1])
    assert all(len(crossed("src2", rx)) == 1 for rx in groups[2])
    assert all(len(crossed("src3", rx)) == 1 for rx in groups[3])
    assert crossed("src2", "g2h1") != crossed("src3", "g3h1")
    # Group 3 sits on its own router r4 so that no router needs more multicast
    # vifs than the kernel has; the extra hop must not change the short flow.
    assert vif_problems(t.routing.backend, router_interfaces(t)) == []
    assert one_way(t, "src3", "g3h1") == pytest.approx(one_way(t, "src2", "g2h1"))
    plain = link_between(t, "r3", "r4")
    assert not any(needs_emulation(plain.direction(fwd)) for fwd in (True, False))
    # Proportional fairness: the long flow gets one third of a bottleneck.
    assert bottleneck(t, "src1", "g1h1") / 3 == pytest.approx(0.33 * MBIT, rel=0.02)


def test_ormcc_fig7_every_link_2mbit_20ms():
    t = topo("ormcc-fig7")
    receivers = [f"h{i}" for i in range(1, 33)]
    assert sorted(receivers) == sorted(n for n in t.names("host") if n.startswith("h"))
    # Every receiver is two "links" from the source (src - r0, link i); h17..h32
    # sit on a second router r1 (vifs) whose plain link to r0 emulates nothing.
    for rx in receivers:
        emulated = [p for p in params(t, "src", rx) if needs_emulation(p)]
        assert [(p.rate, p.delay) for p in emulated] == [
            (pytest.approx(2 * MBIT), pytest.approx(20 * MS))] * 2
    assert vif_problems(t.routing.backend, router_interfaces(t)) == []


def test_ormcc_fig9_long_links_as_the_paper_places_them():
    t = topo("ormcc-fig9")
    receivers = [n for n in t.names("host") if n.startswith("h")]
    assert len(receivers) == 64
    tree = [lk for lk in t.links if not any(e.startswith("x") for e in lk.endpoints)]
    assert all(lk.rate == pytest.approx(2 * MBIT) for lk in tree)
    assert {round(lk.delay, 3) for lk in tree} == {0.02, 0.2}
    depth = {"r0": 0}
    for rx in receivers:
        path = route(t, "r0", rx)
        assert len(path) == 3  # three levels below the root
        assert sum(lk.delay == pytest.approx(0.2) for lk, _ in path) <= 1
        node = "r0"
        for level, (lk, _) in enumerate(path, start=1):
            node = next(e for e in lk.endpoints if e != node)
            depth[node] = level
    per_level = {1: 0, 2: 0, 3: 0}
    for lk in tree:
        if lk.delay == pytest.approx(0.2):
            per_level[max(depth[e] for e in lk.endpoints)] += 1
    assert per_level == {1: 2, 2: 4, 3: 8}


def test_ormcc_fig10_access_and_core_links():
    t = topo("ormcc-fig10")
    leaves = [n for n in t.names("host") if n != "src"]
    assert len(leaves) == 36
    for link in t.links:
        p = link.direction(True)
        if any(e in leaves for e in link.endpoints):
            assert (p.rate, p.delay) == (pytest.approx(1 * MBIT), pytest.approx(50 * MS))
        else:
            assert (p.rate, p.delay) == (pytest.approx(100 * MBIT), 0.0)


# ------------------------------------------------------------------- STAIR


def _stair_red_ok(p: LinkParams) -> bool:
    """STAIR sec. VI: RED, limit 2 x BDP (512 B packets), thresholds 5% / 50%, gentle."""
    q = p.queue
    limit = math.ceil(2 * p.rate * p.delay / (512 * 8))
    return (
        q.discipline == "red"
        and q.limit == limit
        and q.red.gentle
        and abs(q.red.min_th - 0.05 * limit) <= 0.5
        and abs(q.red.max_th - 0.5 * limit) <= 0.5
    )


def test_stair_fig8_rtts_and_red_queues():
    t = topo("stair-fig8")
    for i, expected in ((1, 0.032), (2, 0.064), (3, 0.128)):
        assert rtt(t, "src", f"s{i}") == pytest.approx(expected)
        assert rtt(t, "tsrc", f"t{i}") == pytest.approx(expected)  # same conditions
    for link in t.links:
        p = link.direction(True)
        assert p.rate == pytest.approx(200 * MBIT)
        assert _stair_red_ok(p), link.endpoints


def test_stair_fig12_heterogeneous_bottlenecks():
    t = topo("stair-fig12")
    fair = {1: 3, 2: 4, 3: 5, 4: 6, 5: 7, 6: 10}  # Mbit/s, 10 TCP + 1 STAIR per link
    for i, share in fair.items():
        neck = link_between(t, "b", f"c{i}")
        assert bottleneck(t, "src", f"s{i}") == neck.rate
        assert neck in [lk for lk, _ in route(t, "tsrc", f"t{i}")]
        assert neck.rate / 11 == pytest.approx(share * MBIT)
        assert rtt(t, "src", f"s{i}") == pytest.approx(0.032)
        assert rtt(t, "tsrc", f"t{i}") == pytest.approx(0.032)
        assert _stair_red_ok(neck.direction(True)), neck.endpoints
    shared = link_between(t, "a", "b")
    assert shared.rate > sum(link_between(t, "b", f"c{i}").rate for i in fair)


def test_stair_fig12_tcp_crosses_one_emulated_link():
    """Userspace links cost CPU per packet: each TCP path holds the bottleneck alone."""
    t = topo("stair-fig12")
    emulated = {frozenset(lk.endpoints) for lk in t.links if needs_emulation(lk.direction(True))}
    necks = {frozenset(("b", f"c{i}")) for i in range(1, 7)}
    assert emulated == necks | {frozenset(("a", "b"))}  # A - B for its counters (Fig. 14)
    for i in range(1, 7):
        for a, b in (("tsrc", f"t{i}"), (f"t{i}", "tsrc")):
            crossed = [lk for lk, fwd in route(t, a, b) if needs_emulation(lk.direction(fwd))]
            assert [frozenset(lk.endpoints) for lk in crossed] == [frozenset(("b", f"c{i}"))]


# ------------------------------------------------------- test topologies


def test_chain3():
    t = topo("chain3")
    assert t.names("router") == ["r1", "r2", "r3"]
    assert [set(lk.endpoints) for lk, _ in route(t, "r1", "r3")] == [{"r1", "r2"}, {"r2", "r3"}]
    attached = {h: next(e for e in only_link(t, h).endpoints if e != h) for h in t.names("host")}
    assert attached == {"src": "r1", "h1n1": "r1", "h2n1": "r2", "h2n2": "r2", "h3n1": "r3"}


def test_star4():
    t = topo("star4")
    assert sorted(n for n in t.names("host") if n != "src") == ["h1", "h2", "h3", "h4"]
    assert t.names("router") == ["r0"]


def test_tree2():
    t = topo("tree2")
    leaves = [n for n in t.names("host") if n != "src"]
    assert len(leaves) == 4 and len(t.names("router")) == 3
    assert all(len(route(t, "r0", h)) == 2 for h in leaves)


def test_lan_hosts_share_one_subnet_with_the_router():
    t = topo("lan")
    plan = plan_addresses(t)
    lan = t.names("lan")
    assert len(lan) == 1
    members = [i for ifs in plan.interfaces.values() for i in ifs if i.lan == lan[0]]
    assert sorted(i.node for i in members) == ["h1", "h2", "h3", "r1"]
    assert len({i.subnet for i in members}) == 1


# ------------------------------------------------------ malformed fixtures


def expectation(path: Path) -> tuple[str, str | None]:
    """The ``# expect:`` field path and optional ``# reason:`` text of a fixture."""
    lines = path.read_text().splitlines()
    m = re.fullmatch(r"# expect: (\S.*)", lines[0])
    assert m, f"{path.name}: first line must be '# expect: <field path>'"
    r = re.fullmatch(r"# reason: (\S.*)", lines[1]) if len(lines) > 1 else None
    return m.group(1).strip(), r.group(1).strip() if r else None


def mentions(text: str, field: str) -> bool:
    """True when ``field`` occurs in ``text`` as a whole path, not a prefix of a longer one."""
    return re.search(r"(?<![\w.\]])" + re.escape(field) + r"(?![\w.\[])", text) is not None


def test_enough_distinct_malformed_fixtures():
    assert len(MALFORMED_FILES) >= 24
    expectations = [expectation(p) for p in MALFORMED_FILES]
    assert len(set(expectations)) == len(expectations), "two fixtures test the same error"


@pytest.mark.parametrize("path", MALFORMED_FILES, ids=lambda p: p.stem)
def test_malformed_fixture_is_rejected_naming_file_and_field(path):
    field, reason = expectation(path)
    with pytest.raises(SpecError) as info:
        load_topology(path)
    err = info.value
    message = str(err)
    assert err.path == str(path)
    assert all(line.startswith(f"{path}: ") for line in message.splitlines())
    assert mentions(message, field), message
    # The field is a problem's path, or (for whole-graph checks) named in its reason.
    hits = [(f, r) for f, r in err.problems if f == field or mentions(r, field)]
    assert hits, message
    if reason is not None:
        assert any(reason in r for _, r in hits), message
