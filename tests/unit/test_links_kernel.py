"""The kernel backend's tc commands, asserted as data.

This machine's kernel has no sch_netem, sch_red or sch_prio, so the trees cannot
be installed here (`make vm-check` installs them in a Debian VM); these tests pin
the qdisc tree, the units and the derived numbers (burst, RED byte thresholds,
tc's Wlog) instead.
"""

from __future__ import annotations

import json
import math

import pytest

from mcclab.links import kernel, plan_directions
from mcclab.links.plan import kernel_placement
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import resolve_topology

RED = {"limit": "40pkt", "discipline": "red",
       "red": {"min_th": "5pkt", "max_th": "15pkt", "max_p": "10%", "weight": 0.002,
               "gentle": False}}


def direction(**link):
    """The forward direction r -> d of an s - r - d path, and where the kernel puts it."""
    t = resolve_topology({
        "name": "p", "nodes": {"s": {"kind": "host"}, "r": {"kind": "router"},
                               "d": {"kind": "host"}},
        "links": [{"endpoints": ["s", "r"]}, {"endpoints": ["r", "d"], **link}]})
    d = plan_directions(t)[0]
    return d, kernel_placement(t, plan_addresses(t), d)


def tree(**link):
    """The direction, its placement and its commands as strings."""
    d, where = direction(**link)
    return d, where, [str(c) for c in kernel.direction_cmds(d, where)]


def head(dev: str, control_netem: str, data_netem: str) -> list[str]:
    """The first commands of every tree: the prio root, its three filters, the two netems."""
    return [
        f"[mcl-r] tc qdisc del dev {dev} root",
        f"[mcl-r] tc qdisc add dev {dev} root handle 1: stab overhead -14 "
        "prio bands 2 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
        f"[mcl-r] tc filter add dev {dev} parent 1: protocol ip prio 1 "
        "u32 match ip protocol 2 0xff flowid 1:1",
        f"[mcl-r] tc filter add dev {dev} parent 1: protocol ip prio 1 "
        "u32 match ip protocol 103 0xff flowid 1:1",
        f"[mcl-r] tc filter add dev {dev} parent 1: protocol arp prio 2 "
        "u32 match u32 0 0 flowid 1:1",
        f"[mcl-r] tc qdisc add dev {dev} parent 1:1 handle 2: {control_netem}",
        f"[mcl-r] tc qdisc add dev {dev} parent 1:2 handle 3: {data_netem}",
    ]


def test_droptail_tree_prio_root_netem_per_band_htb_class_pfifo_leaf():
    d, where, cmds = tree(rate="10Mbit", delay="20ms", queue={"limit": "40pkt"})
    dev = where.iface
    assert where.node == "r" and where.hook == "egress"
    netem = "netem limit 100000 delay 20000us"
    assert cmds == head(dev, netem, netem) + [
        f"[mcl-r] tc qdisc add dev {dev} parent 3:1 handle 10: htb default 1",
        f"[mcl-r] tc class add dev {dev} parent 10: classid 10:1 htb rate 10000000bit "
        "ceil 10000000bit burst 1500 cburst 1500 quantum 1514",
        f"[mcl-r] tc qdisc add dev {dev} parent 10:1 handle 20: pfifo limit 40",
    ]
    # Deleting veth's default noqueue fails; that must not stop the lab.
    assert kernel.direction_cmds(d, where)[0].check is False


@pytest.mark.parametrize("loss, netem_loss", [
    ({"loss": "2%"}, "loss random 2%"),
    ({"gilbert_elliott": {"p": "1%", "r": "30%", "loss_bad": "80%", "loss_good": "0.1%"}},
     "loss gemodel 1% 30% 80% 0.1%"),
])
def test_igmp_pim_and_arp_take_the_delay_and_jitter_but_never_the_loss_or_the_queue(
        loss, netem_loss):
    # docs/links.md, Control packets: a leaf whose queue dropped two IGMP queries lost its
    # groups for ~110 s. Only protocols 2 and 103 and ARP (which the userspace backend
    # never sees) reach band 1:1; its netem has no loss and nothing under it, while the
    # data band has the loss, the rate and the queue.
    _, where, cmds = tree(rate="1Mbit", delay="5ms", jitter="1ms", queue={"limit": "20pkt"},
                          **loss)
    data = f"netem limit 100000 delay 5000us 1000us {netem_loss}"
    assert cmds[:7] == head(where.iface, "netem limit 100000 delay 5000us 1000us", data)
    under_control = [c for c in cmds if " parent 2:" in c]
    assert under_control == []
    assert any(" parent 3:1 handle 10: htb" in c for c in cmds)


def test_the_feature_probe_tries_the_trees_own_prio():
    # A 2-band prio with tc's default priomap (which names band 2) is refused: a probe
    # without the tree's priomap found no prio on a stock Debian kernel that has it.
    from mcclab.features import _QDISC_PROBES
    _, _, cmds = tree(rate="1Mbit")
    words = cmds[1].split()
    assert _QDISC_PROBES["prio"] == words[words.index("prio"):]


def test_every_skb_priority_goes_to_the_data_band():
    # prio's default priomap would send TC_PRIO_CONTROL (the kernel's own IGMP reports)
    # and interactive TOS to band 0 without a filter: only the u32 filters may.
    _, _, cmds = tree(rate="1Mbit")
    words = cmds[1].split()
    priomap = words[words.index("priomap") + 1:]
    assert priomap == ["1"] * 16
    assert words[words.index("bands") + 1] == "2"


def test_red_tree_has_byte_thresholds_tc_burst_for_the_weight_and_a_packet_limit():
    _, where, cmds = tree(rate="1Mbit", queue=RED)
    dev = where.iface
    burst = kernel.red_burst_for_wlog(5000, 1000, 9)
    assert cmds[-2] == (
        f"[mcl-r] tc qdisc add dev {dev} parent 10:1 handle 20: red limit 60000 min 5000 "
        f"max 15000 avpkt 1000 burst {burst} probability 0.1 bandwidth 1000000bit")
    assert cmds[-1] == f"[mcl-r] tc qdisc add dev {dev} parent 20:1 handle 30: pfifo limit 40"


def test_red_thresholds_scale_with_the_stated_mean_packet_size():
    assert kernel.RED_MEAN_PKT == 1000
    q = dict(RED, limit="160pkt", red=dict(RED["red"], min_th="20pkt", max_th="60pkt"))
    _, _, cmds = tree(rate="50Mbit", queue=q)
    words = cmds[-2].split()
    assert words[words.index("min") + 1] == "20000"
    assert words[words.index("max") + 1] == "60000"
    assert words[words.index("limit") + 1] == str(160 * 1500)


@pytest.mark.parametrize("weight,wlog", [(0.5, 1), (0.002, 9), (0.001, 10), (0.0001, 13),
                                         (0.2, 2)])
def test_weight_becomes_the_nearest_power_of_two(weight, wlog):
    assert kernel.red_wlog(weight) == wlog


@pytest.mark.parametrize("min_th", [2, 5, 20, 60])
@pytest.mark.parametrize("wlog", [1, 3, 9, 13])
def test_the_chosen_burst_makes_tc_compute_exactly_the_wanted_wlog(min_th, wlog):
    qmin, avpkt = min_th * 1000, 1000
    burst = kernel.red_burst_for_wlog(qmin, avpkt, wlog)
    assert kernel.tc_red_eval_ewma(qmin, burst, avpkt) == wlog
    # and it is the smallest such burst (tc would warn about needlessly large ones)
    assert kernel.tc_red_eval_ewma(qmin, burst - 1, avpkt) != wlog


def test_tc_red_eval_ewma_matches_hand_computation():
    # min 5 pkts, burst 8 (tc's default (2*min+max)/(3*avpkt) for 5/15): a = 8 + 1 - 5 = 4;
    # W = 2^-w must satisfy 4 <= (1 - (1-W)^8)/W; W = 1/8 gives 5.25 (ok), W = 1/4 gives 3.6.
    assert (1 - (1 - 0.25) ** 8) / 0.25 < 4 <= (1 - (1 - 0.125) ** 8) / 0.125
    assert kernel.tc_red_eval_ewma(5000, 8, 1000) == 3
    assert kernel.tc_red_eval_ewma(5000, 3, 1000) == -1  # burst below min/avpkt: tc refuses


@pytest.mark.parametrize("rate,burst", [(320e3, 1500), (1e6, 1500), (10e6, 1500),
                                        (50e6, 6250), (1e9, 125000)])
def test_burst_is_one_mtu_or_one_millisecond_of_the_rate(rate, burst):
    assert kernel.htb_burst_bytes(rate) == burst
    # never Mininet's fixed 15 kB, which on 320 kbit/s is a 375 ms line-rate burst
    assert burst * 8 / rate <= max(1500 * 8 / rate, 1e-3) + 1e-12


def test_delay_jitter_loss_units():
    _, _, cmds = tree(delay="12.5ms", jitter="2ms", loss="1%")
    assert cmds[6].endswith("handle 3: netem limit 100000 delay 12500us 2000us loss random 1%")
    assert cmds[5].endswith("handle 2: netem limit 100000 delay 12500us 2000us")
    assert len(cmds) == 7  # no rate: the two netems alone, no htb, no queue


def test_gilbert_elliott_maps_to_netem_gemodel_p_r_lossbad_lossgood():
    ge = {"p": "1%", "r": "30%", "loss_bad": "80%", "loss_good": "0.1%"}
    _, _, cmds = tree(rate="1Mbit", gilbert_elliott=ge)
    assert "loss gemodel 1% 30% 80% 0.1%" in cmds[6]


def test_max_p_of_one_stays_inside_tcs_u32():
    q = dict(RED, red=dict(RED["red"], max_p="100%"))
    _, _, cmds = tree(rate="1Mbit", queue=q)
    words = cmds[-2].split()
    p = float(words[words.index("probability") + 1])
    assert p < 1 and math.floor(p * 2 ** 32) < 2 ** 32


def test_kernel_problems_name_the_link():
    d, _ = direction(rate="1Mbit", queue=dict(RED, red=dict(RED["red"], gentle=True)))
    assert kernel.problems(d) == [
        "links[1] (r->d): the kernel's RED has no gentle mode; set 'gentle: false' "
        "or use link_backend: userspace"]
    d, _ = direction(rate="1Mbit", queue=dict(RED, red=dict(RED["red"], weight=0.9)))
    assert "above 0.7" in kernel.problems(d)[0]
    d, _ = direction(rate="1Mbit", queue=dict(RED, red=dict(RED["red"], min_th="1pkt")))
    assert "min_th >= 2pkt" in kernel.problems(d)[0]
    d, _ = direction(rate="1Mbit", queue=RED)
    assert kernel.problems(d) == []


def test_lan_to_node_tree_goes_on_the_bridge_port_in_the_root_namespace():
    t = resolve_topology({
        "name": "l", "nodes": {"r": {"kind": "router"}, "lan": {"kind": "lan"},
                               "h": {"kind": "host"}},
        "links": [{"endpoints": ["r", "lan"]}, {"endpoints": ["lan", "h"], "rate": "1Mbit"}]})
    plan = plan_addresses(t)
    d = plan_directions(t)[0]
    cmds = [str(c) for c in kernel.direction_cmds(d, kernel_placement(t, plan, d))]
    assert cmds[1].startswith("tc qdisc add dev mclp1 root handle 1:")  # no [netns] prefix


def test_stats_separate_random_loss_from_queue_drops():
    d, where, _ = tree(rate="1Mbit", delay="10ms", loss="1%", queue={"limit": "40pkt"})
    # the kernel passes the data netem's losses and the leaf's drops up to the root prio
    sample = [
        {"kind": "prio", "handle": "1:", "root": True, "options": {"bands": 2},
         "bytes": 1_500_300, "packets": 1003, "drops": 37, "overlimits": 0, "requeues": 0,
         "backlog": 30000, "qlen": 21},
        {"kind": "netem", "handle": "2:", "parent": "1:1", "options": {"limit": 100000},
         "bytes": 300, "packets": 3, "drops": 0, "overlimits": 0, "requeues": 0,
         "backlog": 40, "qlen": 1},
        {"kind": "netem", "handle": "3:", "parent": "1:2", "options": {"limit": 100000},
         "bytes": 1_500_000, "packets": 1000, "drops": 37, "overlimits": 0, "requeues": 0,
         "backlog": 30000, "qlen": 20},
        {"kind": "htb", "handle": "10:", "parent": "3:1", "bytes": 1_500_000, "packets": 1000,
         "drops": 0, "overlimits": 500, "requeues": 0, "backlog": 0, "qlen": 0},
        {"kind": "pfifo", "handle": "20:", "parent": "10:1", "options": {"limit": 40},
         "bytes": 1_500_000, "packets": 1000, "drops": 25, "overlimits": 0, "requeues": 0,
         "backlog": 15000, "qlen": 10},
    ]
    c = kernel.parse_stats(json.dumps(sample), d, where, 12.5)
    assert (c.pkts_sent, c.bytes_sent) == (1003, 1_500_300)
    assert (c.drops_queue, c.drops_loss) == (25, 12)
    assert (c.qlen_pkts, c.qlen_bytes, c.in_flight) == (10, 15000, 21)
    assert c.pkts_in == 1003 + 37 + 21
    assert c.control_in == 3 + 1  # sent and held by the control band
    assert c.bytes_in is None and c.red_avg is None and c.backend == "kernel"
    assert c.as_dict()["src"] == "r"


def test_stats_cmd_reads_json_from_the_right_namespace():
    _, where, _ = tree(rate="1Mbit")
    assert str(kernel.stats_cmd(where)) == f"[mcl-r] tc -s -j qdisc show dev {where.iface}"
