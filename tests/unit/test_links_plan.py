"""Which link directions are emulated, where, and which backend a lab picks (no root needed)."""

from __future__ import annotations

import dataclasses

import pytest

from mcclab.features import KernelFeatures
from mcclab.links import link_problems, plan_directions, select_backend, selection_reason
from mcclab.links.plan import (
    DEFAULT_QUEUE_LIMIT,
    kernel_placement,
    userspace_placement,
    warnings,
)
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import resolve_topology

SHAPED = {"rate": "10Mbit", "delay": "5ms", "queue": {"limit": "40pkt"}}


def path_topo(**link):
    """s - r - d; the r-d link carries ``link``'s parameters, s-r is unshaped."""
    return resolve_topology({
        "name": "p", "routing": {"backend": "smcroute"},
        "nodes": {"s": {"kind": "host"}, "r": {"kind": "router"}, "d": {"kind": "host"}},
        "links": [{"endpoints": ["s", "r"]}, {"endpoints": ["r", "d"], **link}],
    })


def lan_topo():
    """r1 on a LAN with two hosts; every LAN attachment shaped."""
    return resolve_topology({
        "name": "l", "routing": {"backend": "smcroute"},
        "nodes": {"src": {"kind": "host"}, "r1": {"kind": "router"}, "lan1": {"kind": "lan"},
                  "h1": {"kind": "host"}, "h2": {"kind": "host"}},
        "links": [{"endpoints": ["src", "r1"], **SHAPED},
                  {"endpoints": ["r1", "lan1"], **SHAPED},
                  {"endpoints": ["lan1", "h1"], **SHAPED},
                  {"endpoints": ["h2", "lan1"], **SHAPED}],
    })


def features(**over):
    base = {f.name: True for f in dataclasses.fields(KernelFeatures)}
    return KernelFeatures(**(base | over))


def test_unshaped_links_are_not_emulated_and_shaped_ones_in_both_directions():
    dirs = plan_directions(path_topo(**SHAPED))
    assert [(d.link, d.src, d.dst, d.forward) for d in dirs] == [
        (1, "r", "d", True), (1, "d", "r", False)]
    assert [d.queue_num for d in dirs] == [2, 3]
    assert dirs[0].name == "l1:r-d"
    assert dirs[0].where == "links[1] (r->d)"


def test_per_direction_overrides_are_resolved():
    t = path_topo(rate="10Mbit", delay="5ms", forward={"loss": "1%", "delay": "20ms"})
    fwd, rev = plan_directions(t)
    assert (fwd.params.delay, fwd.params.loss) == (0.020, 0.01)
    assert (rev.params.delay, rev.params.loss) == (0.005, 0.0)


def test_delay_alone_is_emulated_and_only_one_direction_when_the_other_is_default():
    t = path_topo(forward={"delay": "1ms"})
    (only,) = plan_directions(t)
    assert (only.src, only.dst, only.params.rate, only.queue) == ("r", "d", None, None)


def test_queue_defaults_to_ns2_50_packets_when_a_rate_has_no_queue():
    (d, _) = plan_directions(path_topo(rate="1Mbit"))
    assert d.queue is not None and d.queue.limit == DEFAULT_QUEUE_LIMIT == 50
    assert d.queue.discipline == "droptail"


def test_a_queue_without_rate_is_ignored_with_a_warning():
    t = path_topo(delay="5ms", queue={"limit": "10pkt"})
    assert all(d.queue is None for d in plan_directions(t))
    assert any("links[1] (r->d): a queue without a rate never fills" in w
               for w in warnings(t, "userspace"))


def test_userspace_emulates_at_a_routers_egress_else_at_the_receivers_ingress():
    # r -> d leaves a router: emulated there, so d's kernel sees (and timestamps) each
    # packet only after its delay; d -> r comes from a host: at r's ingress, so no
    # held packet is charged to a socket on d.
    t = path_topo(**SHAPED)
    plan = plan_addresses(t)
    fwd, rev = plan_directions(t)
    w = userspace_placement(t, plan, fwd)
    assert (w.node, w.iface, w.hook, w.netns) == ("r", plan.iface_towards("r", "d").name,
                                                  "egress", "mcl-r")
    w = userspace_placement(t, plan, rev)
    assert (w.node, w.iface, w.hook) == ("r", plan.iface_towards("r", "d").name, "ingress")


def test_userspace_lan_attachments_node_to_lan_at_egress_lan_to_node_at_ingress():
    t = lan_topo()
    plan = plan_addresses(t)
    placed = {(d.src, d.dst): userspace_placement(t, plan, d) for d in plan_directions(t)}
    assert placed[("r1", "lan1")].node == "r1" and placed[("r1", "lan1")].hook == "egress"
    assert placed[("lan1", "r1")].node == "r1" and placed[("lan1", "r1")].hook == "ingress"
    assert placed[("lan1", "h1")].node == "h1" and placed[("lan1", "h1")].hook == "ingress"
    assert placed[("h2", "lan1")].node == "h2" and placed[("h2", "lan1")].hook == "egress"
    # A host sending into a LAN is emulated at its egress, which throttles local senders.
    notes = warnings(t, "userspace")
    assert any("links[3] (h2->lan1): emulated at h2's egress" in n for n in notes)
    assert not any("r1->lan1" in n for n in notes)  # routers forward: no socket is charged
    assert not any("egress" in n for n in warnings(t, "kernel"))


def test_kernel_emulates_at_the_senders_egress_and_lan_ports_in_the_root_namespace():
    t = lan_topo()
    plan = plan_addresses(t)
    placed = {(d.src, d.dst): kernel_placement(t, plan, d) for d in plan_directions(t)}
    w = placed[("src", "r1")]
    assert (w.node, w.iface, w.hook) == ("src", plan.iface_towards("src", "r1").name, "egress")
    w = placed[("lan1", "h1")]
    assert (w.node, w.netns, w.iface, w.hook) == (None, None, plan.lan_ports[2], "egress")
    assert w.iface == "mclp2"


def test_auto_picks_kernel_when_every_qdisc_exists_else_userspace():
    t = path_topo(**SHAPED)
    assert select_backend(t, features()) == "kernel"
    assert select_backend(t, features(netem=False, red=False)) == "userspace"
    assert "lacks netem, red" in selection_reason(t, features(netem=False, red=False))
    # the control band (IGMP and PIM spared, docs/links.md) needs prio and u32
    assert select_backend(t, features(prio=False)) == "userspace"
    assert select_backend(t, features(u32=False)) == "userspace"
    assert "lacks u32" in selection_reason(t, features(u32=False))
    assert features(prio=False).missing_for("kernel") == ["prio"]


def test_nothing_to_emulate_means_backend_none():
    t = path_topo()
    assert select_backend(t, features()) == "none"
    assert link_problems(t, "none", features(nfqueue=False)) == []


def test_explicit_backend_is_an_override():
    t = path_topo(**SHAPED).model_copy(update={"link_backend": "userspace"})
    assert select_backend(t, features()) == "userspace"
    assert selection_reason(t, features()) == "link_backend: userspace in the topology"


def test_auto_falls_back_to_userspace_for_gentle_red_and_kernel_refuses_it():
    red = {"limit": "40pkt", "discipline": "red",
           "red": {"min_th": "5pkt", "max_th": "15pkt", "max_p": "10%"}}  # gentle by default
    t = path_topo(rate="10Mbit", queue=red)
    assert select_backend(t, features()) == "userspace"
    assert "gentle" in selection_reason(t, features())
    forced = t.model_copy(update={"link_backend": "kernel"})
    problems = link_problems(forced, "kernel", features())
    assert problems and problems[0].startswith("links[1] (r->d): the kernel's RED has no gentle")


def test_userspace_needs_the_emulator_binary(monkeypatch, tmp_path):
    monkeypatch.setenv("MCCLAB_LINKEMU", str(tmp_path / "missing"))
    problems = link_problems(path_topo(**SHAPED), "userspace", features(netem=False))
    assert any("run 'make -C linkemu'" in p for p in problems)


@pytest.mark.parametrize("missing", ["nfqueue"])
def test_a_backend_other_than_the_kernels_default_reports_its_missing_features(missing):
    t = path_topo(**SHAPED).model_copy(update={"link_backend": "userspace"})
    # features.link_backend('userspace') is 'userspace', so preflight() reports it;
    # link_problems only adds what preflight could not know.
    assert not any("nfqueue" in p for p in link_problems(t, "userspace", features(nfqueue=False)))
    red = {"limit": "40pkt", "discipline": "red",
           "red": {"min_th": "5pkt", "max_th": "15pkt", "max_p": "10%"}}
    auto = path_topo(rate="10Mbit", queue=red)  # auto -> userspace although the kernel has all
    assert any(missing in p for p in link_problems(auto, "userspace", features(nfqueue=False)))
