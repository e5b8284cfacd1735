"""The ORMCC experiment specs validate in both profiles and match their generator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcclab.experiment.loader import resolve

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted(p.stem for p in (REPO / "experiments").glob("ormcc-*.yaml"))


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_spec_validates(name, profile):
    spec = resolve(name, profile)
    spec = getattr(spec, "experiment", spec)
    assert any(f.type == "multicast" and f.protocol == "ormcc" for f in spec.flows)


def test_generated_specs_are_up_to_date(tmp_path):
    subprocess.run([sys.executable, str(REPO / "experiments" / "gen" / "ormcc.py"),
                    str(tmp_path)], check=True)
    generated = sorted(tmp_path.rglob("*.yaml"))
    assert len(generated) >= 12
    for path in generated:
        committed = REPO / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale: run experiments/gen/ormcc.py and commit its output")


def test_table1_quick_profile_scales_every_period_by_one_fifth():
    quick = getattr(resolve("ormcc-table1", "quick"), "experiment", None) or resolve(
        "ormcc-table1", "quick")
    paper = getattr(resolve("ormcc-table1", "paper"), "experiment", None) or resolve(
        "ormcc-table1", "paper")
    assert quick.duration == pytest.approx(0.2 * paper.duration)
    for q, p in zip(quick.flows[1:], paper.flows[1:], strict=True):
        assert q.start == pytest.approx(0.2 * p.start)
        assert (q.stop or quick.duration) == pytest.approx(0.2 * (p.stop or paper.duration))


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_every_profile_fits_the_kernels_multicast_vifs(name, profile):
    """A router beyond 31 interfaces gets no vif for the rest: their receivers see nothing."""
    from mcclab.lab import router_interfaces
    from mcclab.routing.limits import vif_problems

    topo = resolve(name, profile).topology
    assert vif_problems(topo.routing.backend, router_interfaces(topo)) == []


def test_fig4_sources_behind_a_second_router_keep_the_100_ms_base_rtt():
    topo = resolve("ormcc-fig4-n24", "quick").topology
    assert topo.nodes["r1"].kind == "router"
    by_pair = {frozenset(link.endpoints): link for link in topo.links}
    up = by_pair[frozenset(("r0", "r1"))]
    down = by_pair[frozenset(("r0", "h24"))]
    assert 2 * (up.delay + down.delay) == pytest.approx(0.100)
    assert by_pair[frozenset(("r1", "s24"))].rate is None
    assert up.queue.limit >= 1000  # shared by 24 sources: never the bottleneck


NS2_TCP = [n for n in SPECS if n.startswith(("ormcc-fig4", "ormcc-table1", "ormcc-table2"))]
EMULAB = [n for n in SPECS if n.startswith("ormcc-fig11")]


def tcp_windows(name: str) -> set:
    """The window ceilings of a spec's TCP flows."""
    from mcclab.experiment.spec import carries_tcp, tcp_model

    exp = resolve(name, "paper").experiment
    return {tcp_model(exp, f).max_window for f in exp.flows if carries_tcp(f)}


@pytest.mark.parametrize("name", NS2_TCP)
def test_ns2_simulations_cap_tcp_at_ns2s_default_window(name):
    """The paper's ns-2 runs get ns-2's default window_, 20 packets."""
    assert tcp_windows(name) == {20}


@pytest.mark.parametrize("name", EMULAB)
def test_the_emulab_run_keeps_the_kernels_window(name):
    """Fig. 11 ran on Emulab with kernel TCP: no ceiling."""
    assert tcp_windows(name) == {None}


def test_every_spec_with_tcp_is_an_ns2_or_an_emulab_run():
    """A new ORMCC spec with TCP flows must say which kind of run it reproduces."""
    with_tcp = {n for n in SPECS if tcp_windows(n)} - {"ormcc-smoke"}
    assert with_tcp == set(NS2_TCP) | set(EMULAB)
    assert len(NS2_TCP) >= 5 and len(EMULAB) == 3


def test_table2_cut_keeps_one_branch_of_each_kind_of_path_and_its_cross_traffic():
    """ormcc-table2-n6: a 200 ms link at level 1, 2 or 3, or none, on some receiver's path."""
    res = resolve("ormcc-table2-n6", "quick")
    topo, exp = res.topology, res.experiment
    links = {frozenset(link.endpoints): link for link in topo.links}
    parent = {}
    for link in topo.links:
        a, b = link.endpoints
        if a.startswith("r") and b[0] in "rh":
            parent[b] = a
    kinds = set()
    for host in exp.flows[0].receivers:
        hops, node = [], host
        while node in parent:
            hops.append(links[frozenset((parent[node], node))].delay)
            node = parent[node]
        assert node == "r0" and len(hops) == 3, (host, hops)
        slow = [3 - i for i, d in enumerate(hops) if d == pytest.approx(0.2)]  # level of it
        assert len(slow) <= 1, host  # at most one 200 ms link per path, as in Fig. 9
        kinds.add(slow[0] if slow else None)
    assert kinds == {1, 2, 3, None}
    # Two TCP and two UDP on/off flows on every tree link, from the parent's x host.
    onoff = [f for f in exp.flows if f.type == "onoff"]
    assert len(onoff) == 4 * len(parent)
    for child, up in parent.items():
        dst = child if child.startswith("h") else "x" + child[1:]
        mine = [f for f in onoff if (f.sender, f.receiver) == ("x" + up[1:], dst)]
        assert sorted(f.carrier for f in mine) == ["tcp", "tcp", "udp", "udp"], child
