"""The pacing clock on a simulated clock: exact long-run rate, no early sends, bounded bursts."""

from __future__ import annotations

import random

import pytest

from agents.runtime.pacing import Pacer
from agents.sim import SimLoop


def run_paced(rate: float, size: int, duration: float, wake_jitter: float, seed: int = 1):
    """Drive a pacer from timers that fire up to ``wake_jitter`` late; return (due, sent) times."""
    loop = SimLoop()
    rng = random.Random(seed)
    pacer = Pacer(rate, 0.0)
    sends: list[tuple[float, float]] = []

    def wake():
        now = loop.now()
        while pacer.due(now):
            sends.append((pacer.next_due, now))
            pacer.sent(size)
        loop.call_at(pacer.next_due + rng.uniform(0, wake_jitter), wake)

    loop.call_at(0.0, wake)
    loop.run(duration)
    return sends


@pytest.mark.parametrize(("rate", "size"), [(1e6, 1000), (64e3, 200), (10e6, 1500), (3.3e5, 577)])
def test_rate_is_exact_over_ten_simulated_seconds(rate, size):
    sends = run_paced(rate, size, 10.0, wake_jitter=0.002)
    achieved = len(sends) * size * 8 / 10.0
    assert achieved == pytest.approx(rate, rel=0.01)
    # Timer lateness never accumulates: the schedule stays within one packet of ideal.
    assert abs(len(sends) - rate * 10.0 / (size * 8)) <= 1 + 0.002 * rate / (size * 8)


def test_never_sends_before_due_and_lateness_is_bounded():
    sends = run_paced(2e6, 1000, 5.0, wake_jitter=0.003)
    assert all(sent >= due for due, sent in sends)
    assert max(sent - due for due, sent in sends) <= 0.003 + 1e-9


def test_due_times_are_evenly_spaced():
    sends = run_paced(1e6, 1000, 1.0, wake_jitter=0.0)
    gaps = {round(b[0] - a[0], 9) for a, b in zip(sends, sends[1:], strict=False)}
    assert gaps == {0.008}


def test_a_long_stall_rebases_instead_of_bursting():
    pacer = Pacer(1e6, 0.0, max_lag=0.25)
    burst = 0
    while pacer.due(2.0):  # woke two seconds late
        burst += 1
        pacer.sent(1000)
    assert burst == 1  # 250 packets would have been due; one is sent, the schedule restarts
    assert pacer.skipped == pytest.approx(2.0)
    assert pacer.next_due == pytest.approx(2.008)


def test_small_lateness_catches_up():
    pacer = Pacer(1e6, 0.0, max_lag=0.25)
    burst = 0
    while pacer.due(0.1):
        burst += 1
        pacer.sent(1000)
    assert burst == 13  # 0, 8, ..., 96 ms
    assert pacer.skipped == 0


def test_rate_change_rescales_the_pending_gap():
    pacer = Pacer(1e6, 0.0)
    pacer.sent(1000)  # next due at 8 ms
    pacer.set_rate(2e6, 0.0)
    assert pacer.next_due == pytest.approx(0.004)
    with pytest.raises(ValueError):
        pacer.set_rate(0, 0.0)
    with pytest.raises(ValueError):
        Pacer(-1, 0.0)
