"""Appendix II of the ORMCC paper as pure functions (used by tests and docs).

Notation as in the paper: W bottleneck bandwidth, Q buffer, Delta = s/RTT the
ORMCC rate increment per unit time, gamma = Delta_i/Delta the other flows'
increments relative to ORMCC's, X the ORMCC rate when the bottleneck became
full, beta the rate-cut factor. Units only need to be consistent.
"""

from __future__ import annotations

import math


def trac_at_congestion(rate: float, w: float, q: float, delta: float, gamma: float) -> float:
    """Eq. (6)/(7): the TRAC a receiver measures when a loss burst starts at ``rate``."""
    return rate / (1 + math.sqrt(2 * delta * q * (1 + gamma)) / w)


def congestion_degree(w: float, gamma: float) -> float:
    """Eq. (8): W / sqrt(1 + gamma); the lower, the more congested the path."""
    return w / math.sqrt(1 + gamma)


def friendly_beta(w: float, delta: float) -> float:
    """Appendix II-B: the beta that makes (9) hold, (W + 2 Delta) / (2 W) >= 1/2."""
    return (w + 2 * delta) / (2 * w)


def rates_after_cut(x: float, w: float, delta: float, beta: float) -> tuple[float, float]:
    """(V_MCC, V_TCP) just after the common loss at t1, from X at t0 and Delta grown since.

    TCP halves W - X + Delta; ORMCC cuts to beta times the share of W its CR
    receives, (X + Delta) / (W + 2 Delta) * W.
    """
    mcc = beta * (x + delta) / (w + 2 * delta) * w
    tcp = (w - x + delta) / 2
    return mcc, tcp


def eq10_difference(x: float, w: float, delta: float, beta: float) -> float:
    """Eq. (10)'s right-hand side: X/(W-X) - V_MCC/V_TCP in factored form."""
    b = beta * w / (w + 2 * delta)
    return 2 / (w - x + delta) * ((0.5 - b) * x + (x / (2 * (w - x)) - b) * delta)


def aimd_ratio_series(x0: float, w: float, delta: float, beta: float, cycles: int) -> list[float]:
    """V_MCC/V_TCP at each t_{i,0} (the sum just reaches W) over ``cycles`` AIMD cycles.

    Between cuts both flows grow at the same pace (A each) until their sum is W
    again; at the cut both have grown Delta beyond that point.
    """
    mcc, tcp = x0, w - x0
    ratios = [mcc / tcp]
    for _ in range(cycles):
        mcc, tcp = rates_after_cut(mcc, w, delta, beta)
        grow = (w - mcc - tcp) / 2
        mcc, tcp = mcc + grow, tcp + grow
        ratios.append(mcc / tcp)
    return ratios


def feedback_volume(v: float, p: float, duration: float, switch_rate: float, n: int,
                    rtt_min: float) -> float:
    """Eq. (13): expected CI(mu)s in a session with Poisson MCB switching at ``switch_rate``."""
    return switch_rate * duration * v * p * (1 / switch_rate + (n - 1) * rtt_min)


# ---- Not in the paper: the lab's reading of sec. III-A.6 (docs/ormcc.md, "beta") ----

def unequal_rtt_ratio(beta: float, rtt_tcp: float, rtt_cr: float) -> float:
    """ORMCC/TCP long-run rate ratio when both cut at the same losses but ramp differently.

    AIMD with synchronised losses: a flow that grows by ``a`` per second and keeps
    ``b`` of its rate at a cut peaks at X = a T / (1 - b) for a loss period T and
    averages X (1 + b) / 2. TCP grows by s/RTT_tcp² and keeps 1/2; ORMCC grows by
    s/RTT_cr² (RTT_cr is measured by CIs, i.e. with a full queue, sec. III-A.6) and
    keeps about beta. The ratio of the averages is
    (RTT_tcp/RTT_cr)² · (1 + beta) / (3 (1 - beta)).
    """
    return (rtt_tcp / rtt_cr) ** 2 * (1.0 + beta) / (3.0 * (1.0 - beta))


def unequal_rtt_friendly_beta(rtt_tcp: float, rtt_cr: float) -> float:
    """The beta that makes :func:`unequal_rtt_ratio` 1: (3 - r²)/(3 + r²), r = RTT_tcp/RTT_cr."""
    r2 = (rtt_tcp / rtt_cr) ** 2
    return (3.0 - r2) / (3.0 + r2)
