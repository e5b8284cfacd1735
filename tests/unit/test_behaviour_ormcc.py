"""ORMCC's behaviour on the simulated clock, against the paper's own claims, with the real
cores driven by the fluid bottleneck model of ``ormcc_fluid`` (Appendix II-A's setting).

* Property 2 (sec. III-C, Appendix II-B): "ORMCC is TCP-friendly on the representative
  path". The source cuts at most once per RTT_cr, so its loss-event rate is its cuts per
  packet sent; its mean rate must be near TCP's square-root law (the paper's Eq. (1)
  simplification, ``s sqrt(3/2) / (RTT sqrt(p))``) for that rate and its own RTT_cr.
* Sec. V-D: "the overall feedback volume with suppression is approximately equal to
  that from a single receiver if without suppression", tested there as CIs sent <
  2 x (CIs sent + suppressed) / n; Appendix II-D: the volume "is independent of the
  total number of receivers". Here 8 and 64 receivers, one most congested path.
"""

from __future__ import annotations

import math
import random

import pytest
from ormcc_fluid import FluidRun, Path

from agents.ormcc.params import OrmccParams

PARAMS = OrmccParams(packet_size="1000B", beta=0.65)
S_BITS = 8000


def tcp_rate(p: float, rtt: float) -> float:
    """TCP's square-root law in bit/s (1000-byte packets)."""
    return S_BITS * math.sqrt(1.5) / (rtt * math.sqrt(p))


@pytest.mark.parametrize("tcp_flows", [1, 2])
def test_rate_follows_the_tcp_equation_for_its_loss_event_rate_and_rtt(tcp_flows):
    duration = 300.0
    path = Path(w=2e6, q=25000, delay=0.03, tcp=tcp_flows)
    run = FluidRun([path], PARAMS)
    run.run(duration)
    sender = run.sender
    p = sender.counts["rate_cuts"] / run.seq  # loss events per packet sent
    assert 0.001 < p < 0.05
    assert sender.rtt_cr == pytest.approx(path.rtt(), rel=0.1)
    mean = run.mean_rate(duration / 4, duration)
    assert 0.75 <= mean / tcp_rate(p, sender.rtt_cr) <= 1.25
    # ... and near the fair share of the bottleneck with the AIMD flows (sec. II-B)
    assert 0.7 <= mean / (path.w / (tcp_flows + 1)) <= 1.2


def congested_one(n: int, duration: float = 200.0) -> FluidRun:
    """Receiver 1 behind the most congested path (1.5 Mbit/s and one AIMD flow), the
    others behind 3-5 Mbit/s paths with one or two AIMD flows each."""
    rng = random.Random(1)
    paths = [Path(w=1.5e6, q=25000, delay=0.03, tcp=1)]
    paths += [Path(w=rng.uniform(3e6, 5e6), q=25000, delay=rng.uniform(0.02, 0.05),
                   tcp=rng.choice([1, 2])) for _ in range(n - 1)]
    run = FluidRun(paths, PARAMS)
    run.run(duration)
    return run


@pytest.fixture(scope="module")
def volumes():
    out = {}
    for n in (8, 64):
        run = congested_one(n)
        sent = sum(r.counts["ci_sent"] for r in run.receivers)
        suppressed = sum(r.counts["ci_suppressed"] for r in run.receivers)
        out[n] = (sent, suppressed, run)
    return out


def test_feedback_volume_is_about_one_receivers_without_suppression(volumes):
    for n, (sent, suppressed, _) in volumes.items():
        assert sent < 2 * (sent + suppressed) / n, n  # the paper's test (sec. V-D)
        assert suppressed > sent  # most CIs suppressed


def test_feedback_volume_stays_flat_from_8_to_64_receivers(volumes):
    (s8, sup8, r8), (s64, sup64, r64) = volumes[8], volumes[64]
    # eight times the receivers, eight times the CIs that would be sent...
    assert (s64 + sup64) > 3 * (s8 + sup8)
    # ... but about the same number sent
    assert 0.67 <= s64 / s8 <= 1.5
    for run, sent in ((r8, s8), (r64, s64)):
        assert run.sender.counts["ci_rx"] == sent  # every CI sent reached the source
