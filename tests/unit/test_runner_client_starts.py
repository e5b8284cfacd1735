"""The per-second table places each iperf3 test at the time its client really started."""

from __future__ import annotations

from mcclab.experiment.launch import Launch
from mcclab.experiment.runner import client_starts


def launch(flow: str, role: str, start: float) -> Launch:
    return Launch(flow, role, "h1", ("true",), start, None, f"/tmp/{flow}-{role}.txt")


def test_spawn_times_replace_the_schedule():
    launches = [launch("tcp1", "server", 0.0), launch("tcp1", "client", 0.5),
                launch("tcp2", "server", 0.0), launch("tcp2", "client", 0.6),
                launch("tcp1", "client", 30.0)]
    # the runner got to tcp1's first client 2.1 s late (servers first, one by one)
    spawned = {0: 100.0, 1: 102.6, 2: 100.1, 3: 102.7}
    assert client_starts(launches, "tcp1", 100.0, spawned) == [102.6, 130.0]
    assert client_starts(launches, "tcp2", 100.0, spawned) == [102.7]
    assert client_starts(launches, "tcp2", 100.0, {}) == [100.6]  # never spawned: schedule
