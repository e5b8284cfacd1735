"""PGMCC's behaviour end to end on the simulated clock (real agents, encoded packets, ACKs
and NAKs), against what draft-ietf-rmt-bb-pgmcc-03 says the protocol does:

* sec. 2.2 (a TCP-like window): on one random-loss path the sending rate is near TCP's,
  sqrt(3/2) / (RTT sqrt(p)) packets per second for the path's loss rate p, and a burst of
  losses within one round trip halves the window once;
* sec. 2.3, 2.4 (acker selection): of two receivers, the one with the lowest throughput
  estimate, by loss rate or by RTT, becomes the acker and holds it, also when it joins
  late, and the rate follows its path;
* sec. 2.7 (timeouts): an acker that goes silent costs two timeouts, then another
  receiver is elected and the session goes on at its path's rate;
* ORMCC paper sec. V-D (PGMCC's feedback): every packet named for an acker is ACKed and
  every lost packet is NAKed, with no suppression;
* ORMCC paper sec. V-A (drop-to-zero): with eight receivers behind independent losses
  the rate stays near one TCP flow's over such a path.
"""

from __future__ import annotations

import math
import random

import pytest

import agents.pgmcc
from agents.runtime.session import Session
from agents.sim import Link, SimResult, simulate


@pytest.fixture(autouse=True)
def seeded_ids(monkeypatch):
    """Receiver ids from a seeded source: reproducible runs."""
    ids = random.Random(29)
    monkeypatch.setattr(agents.pgmcc, "receiver_ids", lambda: ids.getrandbits(32) or 1)


def session() -> Session:
    return Session.model_validate({
        "protocol": "pgmcc", "flow": "p", "session_id": 9, "source": "10.0.0.1",
        "channels": [{"group": "239.1.1.1", "port": 5000}], "feedback_port": 6000,
        "params": {"packet_size": "1000B"}})


def tcp_pps(rtt: float, p: float) -> float:
    """TCP's steady-state packet rate with periodic losses (Mathis et al.), written out here
    so that a change to the core cannot move it: sqrt(3/2) / (RTT sqrt(p))."""
    return math.sqrt(1.5) / (rtt * math.sqrt(p))


def sent_between(res: SimResult, t0: float, t1: float) -> float:
    """Data packets per second the sender sent in [t0, t1)."""
    rows = [r for r in res.sender.records("stats") if t0 < r["t"] <= t1]
    return sum(r["tx_packets"] for r in rows) / (t1 - t0)


def acker_share(res: SimResult, node: str, t0: float, t1: float) -> float:
    """The share of [t0, t1] during which receiver ``node`` was the acker (from the log)."""
    rid = res.receivers[node].agent.core.rid
    events = [(r["t"], r["acker"]) for r in res.sender.records("pgmcc_acker")]
    events += [(r["t"], None) for r in res.sender.records("pgmcc_acker_drop")]
    events.sort(key=lambda e: e[0])
    held, current, since = 0.0, None, t0
    for t, acker in [*events, (t1, None)]:
        t = min(max(t, t0), t1)
        if current == rid:
            held += t - since
        current, since = acker, t
    return held / (t1 - t0)


@pytest.mark.parametrize(("loss", "seed"), [(0.01, 1), (0.03, 2)])
def test_one_path_gets_about_tcps_rate(loss, seed):
    res = simulate(session(), "s", ["r"], duration=200.0,
                   links={"r": Link(delay=0.05, loss=loss)}, seed=seed)
    core = res.sender.agent.core
    rate = sent_between(res, 20.0, 200.0)
    assert 0.75 <= rate / tcp_pps(0.1, loss) <= 1.1, rate
    assert core.rtt.srtt == pytest.approx(0.1, rel=0.01)
    assert core.counts["timeouts"] <= 3  # the first packet, sent before the join, and few else
    # every cut follows a loss the acker's bitmaps showed, never more than one per loss
    assert 0 < core.counts["cuts"] <= core.counts["lost"]


def test_losses_within_one_round_trip_halve_the_window_once():
    # 5 % random loss: windows of about 5 packets often hold two losses, which the once-per-
    # RTT rule counts as one congestion signal (as TCP does)
    res = simulate(session(), "s", ["r"], duration=200.0,
                   links={"r": Link(delay=0.05, loss=0.05)}, seed=4)
    core = res.sender.agent.core
    assert core.counts["cuts"] < 0.85 * core.counts["lost"]
    assert 0.75 <= sent_between(res, 20.0, 200.0) / tcp_pps(0.1, 0.05) <= 1.1


LOSSES = {"fast": Link(delay=0.05, loss=0.005), "slow": Link(delay=0.05, loss=0.03)}


def test_the_congested_receiver_becomes_the_acker():
    res = simulate(session(), "s", ["fast", "slow"], duration=150.0, links=LOSSES, seed=3)
    assert acker_share(res, "slow", 20.0, 150.0) > 0.9
    rate = sent_between(res, 20.0, 150.0)
    assert 0.7 <= rate / tcp_pps(0.1, 0.03) <= 1.1
    assert rate < 0.6 * tcp_pps(0.1, 0.005)
    fast, slow = res.receivers["fast"].agent.core, res.receivers["slow"].agent.core
    assert slow.counts["acks_sent"] > 20 * fast.counts["acks_sent"]


def test_a_longer_round_trip_also_makes_the_acker():
    links = {"near": Link(delay=0.025, loss=0.02), "far": Link(delay=0.1, loss=0.02)}
    res = simulate(session(), "s", ["near", "far"], duration=120.0, links=links, seed=7)
    assert acker_share(res, "far", 20.0, 120.0) > 0.9
    assert res.sender.agent.core.rtt.srtt == pytest.approx(0.2, rel=0.02)


def test_a_slower_receiver_joining_late_takes_over():
    res = simulate(session(), "s", ["fast", "slow"], duration=150.0, links=LOSSES,
                   starts={"slow": 60.0}, seed=5)
    assert acker_share(res, "fast", 20.0, 60.0) == 1.0
    assert acker_share(res, "slow", 80.0, 150.0) > 0.9
    assert sent_between(res, 100.0, 150.0) < 0.6 * sent_between(res, 30.0, 60.0)


def test_a_silent_acker_is_replaced_after_two_timeouts():
    # "slow" loses everything from 60 s on: its ACKs stop, two timeouts drop it, "fast"
    # answers the next packet's election request and the rate climbs to its path's
    slow = Link(delay=0.05, loss=0.03, outages=((60.0, 1000.0),))
    res = simulate(session(), "s", ["fast", "slow"], duration=150.0,
                   links={"fast": LOSSES["fast"], "slow": slow}, seed=6)
    core = res.sender.agent.core
    drops = res.sender.records("pgmcc_acker_drop")
    assert len(drops) == 1 and 60.0 < drops[0]["t"] < 62.0
    timeouts = [r for r in res.sender.records("pgmcc_timeout") if r["t"] > 60.0]
    assert [r["retry"] for r in timeouts[:2]] == [1, 2] and timeouts[1]["t"] == drops[0]["t"]
    assert core.acker == res.receivers["fast"].agent.core.rid
    assert acker_share(res, "fast", 65.0, 150.0) == 1.0
    assert sent_between(res, 110.0, 150.0) > 2 * sent_between(res, 30.0, 60.0)


def test_every_acker_packet_is_acked_and_every_loss_naked():
    res = simulate(session(), "s", ["fast", "slow"], duration=60.0, links=LOSSES, seed=9)
    core = res.sender.agent.core
    rx = [r.agent.core for r in res.receivers.values()]
    # what the receivers sent reached the sender, but for the last half round trip's
    in_transit = sum(r.counts["acks_sent"] for r in rx) - core.counts["acks_rx"]
    assert 0 <= in_transit <= core.window + 1
    assert 0 <= sum(r.counts["naks_sent"] for r in rx) - core.counts["naks_rx"] <= 3
    for r in rx:
        assert r.counts["naks_sent"] == r.counts["lost_packets"] + r.counts["election_naks"]
    acked = sum(r.counts["acks_sent"] for r in rx)
    got = [res.receivers[n].agent.stats.received().packets for n in ("fast", "slow")]
    # the acker ACKs what reaches it, nearly every packet once slow is acker
    assert 0.9 * got[1] < acked <= got[0] + got[1]


def test_independent_losses_do_not_drag_the_rate_to_zero():
    names = [f"r{i}" for i in range(8)]
    res = simulate(session(), "s", names, duration=200.0, links=Link(delay=0.05, loss=0.01),
                   seed=8)
    # eight paths of 1 % loss: the acker moves among them, the rate stays near one TCP's
    assert sent_between(res, 20.0, 200.0) >= 0.7 * tcp_pps(0.1, 0.01)
