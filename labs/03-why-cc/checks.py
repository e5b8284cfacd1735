"""Checks of lab 03 (why multicast needs congestion control).

Every checked answer is compared with the value measured from the student's own
newest run of the experiment (``ctx.latest_run``), read with the analysis' own
readers (``mcclab.analysis.results.load_run``, ``mcclab.analysis.metrics``) over
the run's measurement window: the rows of ``tables/per_second.csv`` with
warm-up < t <= duration.

Tolerances (the same for every student, stated in the handout):
- a share (a fraction of the total throughput) within 0.03 of the measured one:
  where the window starts (t = warmup or warmup + 1) and rounding to two digits
  move a share by less than 0.01, reading it off a figure by about 0.02;
- a rate within 10 % of the measured one (20 kbit/s at least, for a starved flow);
- a loss rate within 20 % of the measured one, or 0.0005 (rounding to three
  decimals): it is a ratio of small counts, and the window's edges change it by a
  few %.
"""

from __future__ import annotations

import math

from mcclab.analysis import metrics
from mcclab.analysis.results import Run
from mcclab.labs.checks import LabContext, Verdict, check
from mcclab.labs.helpers import answer_and_run, within

LAB = 3
# experiment -> the handout step that runs it
STEPS = {"cbr-tcp": 2, "webrc-tcp": 4, "webrc-tcp-long": 6}
SHARE_TOL = 0.03
RATE_REL, RATE_MIN_KBIT = 0.10, 20.0
LOSS_REL, LOSS_MIN = 0.20, 0.0005


# ---- helpers (answers and runs) --------------------------------------------------


def _answer_run(ctx: LabContext, qid: str, what: str,
                experiment: str) -> tuple[float | None, Run | None, Verdict | None]:
    """The answer to ``qid`` as a number ("41 %" reads as 0.41) and the newest run of
    ``experiment``, or the verdict to return instead."""
    return answer_and_run(ctx, qid, what, LAB, experiment, STEPS[experiment], percent=True)


def _rate(run: Run, flow: str, node: str) -> float:
    """Mean throughput (bit/s) of ``flow`` at ``node`` over the measurement window."""
    return metrics.throughput(run.per_second, flow, run.window, node)


def _share(run: Run, flow: str, node: str, other: str, other_node: str) -> float:
    """``flow``'s share of the two flows' total throughput."""
    mine, theirs = _rate(run, flow, node), _rate(run, other, other_node)
    total = mine + theirs
    return mine / total if total > 0 else math.nan


def _as_fraction(value: float) -> float:
    """A share written as a percentage (62) is read as a fraction (0.62)."""
    return value / 100 if 1 < value <= 100 else value


def _compare_share(ctx: LabContext, qid: str, experiment: str, flow: str) -> Verdict:
    answer, run, verdict = _answer_run(ctx, qid, f"{flow}'s share of the total throughput "
                                       "(a fraction, e.g. 0.55)", experiment)
    if verdict:
        return verdict
    measured = _share(run, flow, "d1", "tcp", "d2")
    if math.isnan(measured):
        return Verdict.failed(f"your run {run.path.name} of {experiment} has no throughput "
                              "for the flows: look at its report for what went wrong and "
                              f"run step {STEPS[experiment]} again")
    answer = _as_fraction(answer)
    if abs(answer - measured) <= SHARE_TOL:
        return Verdict.passed(f"{answer:.2f} (your run: {measured:.3f})")
    start, end = run.window
    return Verdict.failed(
        f"your value {answer:.2f} differs from your run's {measured:.2f} by more than "
        f"{SHARE_TOL}: in {run.path.name}/tables/per_second.csv average throughput_bps of "
        f"flow {flow} (node d1) and of flow tcp (node d2) over the rows with "
        f"{start:g} < t <= {end:g}, then divide {flow}'s mean by the sum")


def _loss_check(ctx: LabContext, qid: str, experiment: str, flow: str, name: str) -> Verdict:
    """The ``flow`` receiver's (at d1) loss rate in ``experiment``; ``name`` is how the
    handout calls the flow."""
    answer, run, verdict = _answer_run(ctx, qid, f"the {name} receiver's loss rate "
                                       "(a fraction)", experiment)
    if verdict:
        return verdict
    measured = metrics.flow_loss(run.per_second, flow, run.window, "d1")
    if math.isnan(measured):
        return Verdict.failed(f"your run {run.path.name} has no loss counts for flow {flow}: "
                              f"run step {STEPS[experiment]} again")
    answer = _as_fraction(answer)
    if within(answer, measured, LOSS_REL, LOSS_MIN):
        return Verdict.passed(f"{answer:.3f} (your run: {measured:.4f})")
    start, end = run.window
    return Verdict.failed(
        f"your value {answer:.4f} differs from your run's {measured:.4f}: loss rate = "
        f"sum(lost) / (sum(packets) + sum(lost)) over the rows of flow {flow} with "
        f"{start:g} < t <= {end:g} in tables/per_second.csv")


# ---- the questions ---------------------------------------------------------------


@check("q1")
def cbr_share(ctx: LabContext) -> Verdict:
    """CBR's share of the bottleneck throughput against TCP."""
    return _compare_share(ctx, "q1", "cbr-tcp", "cbr")


@check("q2")
def tcp_rate_under_cbr(ctx: LabContext) -> Verdict:
    """TCP's mean throughput (kbit/s) next to the CBR flow."""
    answer, run, verdict = _answer_run(ctx, "q2", "TCP's mean throughput in kbit/s",
                                       "cbr-tcp")
    if verdict:
        return verdict
    measured = _rate(run, "tcp", "d2") / 1e3
    if math.isnan(measured):
        return Verdict.failed(f"your run {run.path.name} has no rows of flow tcp: run step 2 "
                              "again")
    allowed = max(RATE_REL * measured, RATE_MIN_KBIT)
    if abs(answer - measured) <= allowed:
        return Verdict.passed(f"{answer:g} kbit/s (your run: {measured:.0f} kbit/s)")
    hint = " (the column is in bit/s: divide by 1000)" if abs(answer / 1e3 - measured) \
        <= allowed else ""
    start, end = run.window
    return Verdict.failed(
        f"your value {answer:g} kbit/s differs from your run's {measured:.0f} kbit/s by more "
        f"than 10 %{hint}: average throughput_bps of flow tcp in tables/per_second.csv over "
        f"{start:g} < t <= {end:g}")


@check("q3")
def cbr_loss(ctx: LabContext) -> Verdict:
    """The CBR receiver's packet loss rate."""
    return _loss_check(ctx, "q3", "cbr-tcp", "cbr", "CBR")


@check("q4")
def webrc_share(ctx: LabContext) -> Verdict:
    """WEBRC's share against TCP at RTT 0.1 s, 40 packets."""
    return _compare_share(ctx, "q4", "webrc-tcp", "webrc")


@check("q5")
def webrc_loss(ctx: LabContext) -> Verdict:
    """The WEBRC receiver's packet loss rate."""
    return _loss_check(ctx, "q5", "webrc-tcp", "webrc", "WEBRC")


@check("q6")
def webrc_share_long(ctx: LabContext) -> Verdict:
    """WEBRC's share against TCP at RTT 0.4 s, 100 packets."""
    return _compare_share(ctx, "q6", "webrc-tcp-long", "webrc")
