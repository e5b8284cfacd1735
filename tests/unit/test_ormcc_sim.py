"""ORMCC sessions end to end in simulated time (real agents, encoded packets and CIs)."""

from __future__ import annotations

from agents.runtime.session import Session
from agents.sim import Link, simulate


def session() -> Session:
    return Session.model_validate({
        "protocol": "ormcc", "flow": "o", "session_id": 9, "source": "10.0.0.1",
        "channels": [{"group": "239.1.1.1", "port": 5000}], "feedback_port": 6000,
        "params": {"packet_size": "1000B", "beta": 0.65}})


LINKS = {"r1": Link(delay=0.05, rate=1e6, queue=50), "r2": Link(delay=0.05, rate=2e6, queue=50),
         "r3": Link(delay=0.02, rate=4e6, queue=50)}


def test_slowest_receiver_becomes_cr_and_others_stay_silent():
    res = simulate(session(), "s", ["r1", "r2", "r3"], duration=60.0, links=LINKS, seed=1)
    sender = res.sender.agent.core
    r1, r2, r3 = (res.receivers[n].agent.core for n in ("r1", "r2", "r3"))
    assert sender.cr == r1.rid and sender.cr_valid
    # Only the 1 Mbit/s path ever overflows once the rate follows it.
    assert r1.counts["ci_sent"] > 10
    assert r2.counts["ci_sent"] == r3.counts["ci_sent"] == 0
    # Every CI the CR sent arrived through the runtime's feedback path.
    assert sender.counts["ci_rx"] == r1.counts["ci_sent"]
    assert res.receivers["r1"].records("stats")[-1]["feedback_tx"] == r1.counts["ci_sent"]
    # AIMD keeps the CR's path busy but not swamped: 60-100 % of 1 Mbit/s, loss < 3 %.
    got = res.receivers["r1"].agent.stats.received()
    assert 0.6e6 <= got.bytes * 8 / 60.0 <= 1.0e6
    assert got.lost / (got.packets + got.lost) < 0.03


def test_cr_moves_to_a_slower_receiver_that_joins():
    res = simulate(session(), "s", ["r1", "r2", "r3"], duration=80.0, links=LINKS,
                   starts={"r1": 30.0}, seed=2)
    sender = res.sender.agent.core
    r1, r2 = res.receivers["r1"].agent.core, res.receivers["r2"].agent.core
    switches = res.sender.records("ormcc_cr")
    assert switches[0]["cr"] == r2.rid and switches[0]["t"] < 30.0
    assert switches[-1]["cr"] == r1.rid and switches[-1]["reason"] == "lower_trac"
    assert sender.cr == r1.rid
    rates = [r["core"]["rate_bps"] for r in res.sender.records("stats") if r["t"] > 50.0]
    assert max(rates) < 1.4e6  # now bounded by the 1 Mbit/s path, not the 2 Mbit/s one
