"""TFMCC's behaviour end to end on the simulated clock (real agents, encoded packets and
reports), against what RFC 4654 says the protocol does:

* sec. 1 and 2.1: the sending rate follows the TCP equation for the CLR's loss-event rate
  and RTT: on one random-loss path, the mean rate is within 15 % of the equation's rate
  for the loss-event rate actually seen. The band is the estimator's: eight loss
  intervals average a few hundred packets, so the instantaneous rate scatters by tens of
  per cent around the equation's, and the increase limit makes the rate lag after each rise;
* sec. 3 (CLR selection): the slowest of two receivers becomes the CLR and the rate
  follows its equation rate, also when it joins late;
* sec. 4.5 (feedback suppression): reports per feedback round grow about as log n, not
  as n: at most log2 n per round, and the share of receivers reporting per round falls
  by more than half from 8 to 64 receivers;
* sec. 3.6 (slow start): the rate at least doubles per round trip until the first loss
  and never exceeds twice what the bottleneck delivers.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

import agents.tfmcc
from agents.runtime.session import Session
from agents.sim import Link, Simulation, simulate


def tcp_rate(s: float, rtt: float, p: float) -> float:
    """RFC 4654 sec. 2.1, written out here so a change to the core's copy cannot hide:
    X = 8s / (R sqrt(2p/3) + t_RTO (3 sqrt(3p/8)) p (1 + 32p^2)), t_RTO = 4R."""
    t_rto = 4 * rtt
    return 8 * s / (rtt * math.sqrt(2 * p / 3) + t_rto * 3 * math.sqrt(3 * p / 8) * p
                    * (1 + 32 * p ** 2))


@pytest.fixture(autouse=True)
def seeded_ids(monkeypatch):
    """Receiver ids (and so their timer draws) from a seeded source: reproducible runs."""
    ids = random.Random(29)
    monkeypatch.setattr(agents.tfmcc, "receiver_ids", lambda: ids.getrandbits(32))


def session() -> Session:
    return Session.model_validate({
        "protocol": "tfmcc", "flow": "t", "session_id": 9, "source": "10.0.0.1",
        "channels": [{"group": "239.1.1.1", "port": 5000}], "feedback_port": 6000,
        "params": {"packet_size": "1000B"}})


def rates(res, after: float) -> list[float]:
    return [r["core"]["rate_bps"] for r in res.sender.records("stats") if r["t"] > after]


@pytest.mark.parametrize(("loss", "seed"), [(0.01, 1), (0.03, 2)])
def test_single_receiver_converges_to_the_equation_rate(loss, seed):
    res = simulate(session(), "s", ["r"], duration=200.0, links={"r": Link(delay=0.05, loss=loss)},
                   seed=seed)
    node = res.receivers["r"]
    r = node.agent.core
    got = node.agent.stats.received()
    p = r.loss.events / got.packets  # loss events per packet over the run
    assert r.current_rtt() == pytest.approx(0.1, rel=0.02)  # measured from echoes
    assert res.sender.agent.core.rmax == pytest.approx(0.1, rel=0.05)
    mean = statistics.mean(rates(res, 50.0))
    assert 0.85 <= mean / tcp_rate(1000, 0.1, p) <= 1.15


LOSSES = {"fast": Link(delay=0.05, loss=0.005), "slow": Link(delay=0.05, loss=0.04)}


def test_the_slowest_receiver_becomes_clr():
    res = simulate(session(), "s", ["fast", "slow"], duration=120.0, links=LOSSES, seed=4)
    sender = res.sender.agent.core
    fast, slow = res.receivers["fast"].agent.core, res.receivers["slow"].agent.core
    assert sender.clr == slow.rid
    assert fast.counts["fb_sent"] < slow.counts["fb_sent"] / 10
    mean = statistics.mean(rates(res, 40.0))
    # near the slow path's equation rate, well below the fast path's
    p_slow = slow.loss.events / res.receivers["slow"].agent.stats.received().packets
    assert 0.8 <= mean / tcp_rate(1000, 0.1, p_slow) <= 1.2
    assert mean < 0.5 * fast.calc_rate(120.0)


def test_clr_switches_to_a_slower_receiver_that_joins_late():
    res = simulate(session(), "s", ["fast", "slow"], duration=120.0, links=LOSSES,
                   starts={"slow": 50.0}, seed=5)
    sender = res.sender.agent.core
    fast, slow = res.receivers["fast"].agent.core, res.receivers["slow"].agent.core
    switches = res.sender.records("tfmcc_clr")
    before = [s for s in switches if s["t"] < 50.0]
    assert before and before[-1]["clr"] == fast.rid
    assert sender.clr == slow.rid and switches[-1]["clr"] == slow.rid
    early = statistics.mean(r["core"]["rate_bps"] for r in res.sender.records("stats")
                            if 30.0 < r["t"] < 50.0)
    late = statistics.mean(rates(res, 80.0))
    assert late < 0.5 * early


@pytest.fixture(scope="module")
def per_round():
    """Mean non-CLR reports per feedback round for n identical receivers (2 % loss, 100 ms),
    two seeds each, slow start's first rounds left out."""
    out = {}
    for n in (8, 16, 32, 64):
        counts = []
        for seed in (1, 2):
            ids = random.Random(seed)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(agents.tfmcc, "receiver_ids", lambda ids=ids: ids.getrandbits(32))
                res = simulate(session(), "s", [f"r{i}" for i in range(n)], duration=60.0,
                               links=Link(delay=0.05, loss=0.02), seed=seed)
            counts += res.sender.agent.core.round_history[5:]
            suppressed = sum(r.agent.core.counts["fb_suppressed"]
                             for r in res.receivers.values())
            sent = sum(r.agent.core.counts["fb_sent"] - r.agent.core.counts["fb_sent_clr"]
                       for r in res.receivers.values())
            assert suppressed > sent
        out[n] = statistics.mean(counts)
    return out


def test_feedback_per_round_stays_within_log_n(per_round):
    print("non-CLR reports per round:", per_round)
    for n, mean in per_round.items():
        assert mean <= math.log2(n), (n, mean)


def test_share_of_receivers_reporting_falls_as_n_grows(per_round):
    assert per_round[64] / 64 < 0.5 * per_round[8] / 8


def sampled(sim: Simulation, duration: float, every: float = 0.01
            ) -> list[tuple[float, float, float]]:
    """Run ``sim``, sampling the sender core's rate and R_max every ``every`` seconds."""
    out: list[tuple[float, float, float]] = []
    core = sim.nodes["s"].agent.core

    def sample(t: float) -> None:
        out.append((t, core.rate, core.rmax))
        if t + every < duration:
            sim.loop.call_at(t + every, lambda: sample(t + every))

    sim.loop.call_at(0.0, lambda: sample(0.0))
    sim.run(duration)
    return out


def test_slow_start_doubles_per_rtt_up_to_twice_the_bottleneck():
    link = Link(delay=0.05, rate=1e6, queue=20)
    sim = Simulation(session(), seed=6)
    sim.add("s", "sender")
    sim.add("r", "receiver", link)
    trace = sampled(sim, 20.0)
    sender = sim.nodes["s"]
    assert not sender.agent.core.slow_start
    end = sender.records("tfmcc_slow_start_end")
    assert len(end) == 1
    # from 16 kbit/s (a packet per 0.5 s) to the 1 Mbit/s bottleneck takes 6 doublings;
    # with a round trip of 0.1-0.5 s and a report per RTT from the CLR, under 8 s
    assert end[0]["t"] < 8.0
    in_ss = [rate for t, rate, _ in trace if t <= end[0]["t"]]
    # twice the receive rate, which the bottleneck caps: above it, never above twice it
    assert link.rate < max(in_ss) <= 2 * link.rate
    after = [rate for t, rate, _ in trace if t > 10.0]
    assert statistics.mean(after) <= link.rate * 1.05


def test_increase_after_the_clr_goes_silent_is_one_packet_per_rmax_per_rmax():
    # "slow" loses everything from 40 s on: it falls silent, stops being the CLR, and
    # the rate climbs to what "fast" reports, by at most 8s/R_max bit/s every R_max
    slow = Link(delay=0.05, loss=0.04, outages=((40.0, 1000.0),))
    sim = Simulation(session(), seed=8)
    sim.add("s", "sender")
    sim.add("fast", "receiver", LOSSES["fast"])
    sim.add("slow", "receiver", slow)
    trace = sampled(sim, 70.0)
    core = sim.nodes["s"].agent.core
    assert core.clr == sim.nodes["fast"].agent.core.rid and core.counts["clr_timeouts"] >= 1
    assert core.rmax == pytest.approx(0.1, rel=0.05)
    # over one second (100 samples): the limit is 8s/R_max bit/s every R_max with the
    # sender's own R_max, and the rate moves at packet sends, so the first step in the
    # second may carry up to one packet interval (8s/a) of increase from before it
    for (t, a, _), (_, b, _) in zip(trace, trace[100:], strict=False):
        if t > 41.0:
            rmax = min(r for u, _, r in trace if t <= u <= t + 1.0)
            assert b - a <= 1000 * 8 / rmax ** 2 * (1.0 + 1000 * 8 / a) * 1.02, t
    before = statistics.mean(rate for t, rate, _ in trace if 30.0 < t < 40.0)
    after = statistics.mean(rate for t, rate, _ in trace if t > 60.0)
    assert after > 2 * before  # it does climb


def test_a_burst_of_losses_within_one_rtt_is_one_loss_event():
    # sec. 4.1: losses less than an RTT apart belong to one event. 25 drop episodes of
    # 50 ms (< the 100 ms RTT), each costing several packets at the rates reached
    outages = tuple((10.0 + 2 * k, 10.05 + 2 * k) for k in range(25))
    res = simulate(session(), "s", ["r"], duration=62.0,
                   links={"r": Link(delay=0.05, outages=outages)}, seed=9)
    r = res.receivers["r"].agent.core
    assert res.receivers["r"].port.counters.outage_drops == r.counts["lost_packets"]
    assert r.counts["lost_packets"] > 2 * len(outages)
    assert r.counts["loss_events"] <= len(outages)
