"""Checks of lab 04 (layered multicast with RLC).

Every checked answer is compared with the value measured from the student's own
newest run (``ctx.latest_run``), read with ``mcclab.analysis.results.load_run``
and ``mcclab.analysis.metrics``:
- throughputs over the measurement window (rows of ``tables/per_second.csv``
  with warm-up < t <= duration), within 10 % (5 kbit/s at least): where the
  window starts and rounding move a mean by 1-2 %, the rest is room for reading;
- subscription levels from the ``level`` column of ``tables/per_second.csv``
  (layers joined, sampled once a second): times within 1 s (the sampling step),
  levels exactly (they are whole numbers read from the same column);
- decrease counts from the receivers' ``deaf_periods`` gauge in
  ``tables/protocol.csv`` (the RLC core's running count of loss-triggered
  decreases, each of which leaves the top layer and starts a deaf period; its
  last value): within 10 % or 1, whichever is larger (the gauge is sampled once a
  second, the last sample may miss a decrease at the very end).
"""

from __future__ import annotations

import math

import pandas as pd

from mcclab.analysis import metrics
from mcclab.analysis.results import Run
from mcclab.labs.checks import LabContext, Verdict, check
from mcclab.labs.helpers import answer_and_run, list_answer, newest_run, within
from mcclab.labs.helpers import answer_number as _number

LAB = 4
FLOW = "rlc"
RECEIVERS = ("n5", "n8", "n9")
STEPS = {"rlc-layers": 2, "rlc-deaf": 5}
CLIMB = (2, 3, 4, 5)  # q2: the layer counts whose first time is asked
RATE_REL, RATE_MIN_KBIT = 0.10, 5.0
TIME_TOL = 1.0
DECREASES_REL, DECREASES_MIN = 0.10, 1.0


# ---- helpers (answers and runs) --------------------------------------------------


def _answer_run(ctx: LabContext, qid: str, what: str,
                experiment: str) -> tuple[float | None, Run | None, Verdict | None]:
    """The answer to ``qid`` as a number and the newest run of ``experiment``, or the
    verdict to return instead."""
    return answer_and_run(ctx, qid, what, LAB, experiment, STEPS[experiment])


def _run(ctx: LabContext, experiment: str) -> tuple[Run | None, Verdict | None]:
    """The newest run of ``experiment``, loaded, or the verdict saying why there is none."""
    return newest_run(ctx, LAB, experiment, STEPS[experiment])


def _rate_kbit(run: Run, node: str) -> float:
    """Mean RLC throughput (kbit/s) at ``node`` over the measurement window."""
    return metrics.throughput(run.per_second, FLOW, run.window, node) / 1e3


def _levels(run: Run, node: str) -> pd.Series:
    """The ``level`` column of ``node``'s RLC rows, indexed by ``t``."""
    table = run.per_second
    rows = table[(table["flow"] == FLOW) & (table["node"] == node)].dropna(subset=["level"])
    return rows.set_index("t")["level"].sort_index()


def _decreases(run: Run, node: str) -> float:
    """The last value of ``node``'s running ``deaf_periods`` count (nan if it has none)."""
    p = run.protocol
    rows = p[(p["flow"] == FLOW) & (p["node"] == node) & (p["name"] == "deaf_periods")]
    return float(rows.sort_values("t")["value"].iloc[-1]) if not rows.empty else math.nan


def _within_rate(answer: float, measured: float) -> bool:
    return within(answer, measured, RATE_REL, RATE_MIN_KBIT)


# ---- the questions ---------------------------------------------------------------


@check("q1")
def receiver_rates(ctx: LabContext) -> Verdict:
    """Mean throughput at n5, n8 and n9 (kbit/s) in the rlc-layers run."""
    raw = ctx.answer("q1")
    if raw is None:
        return Verdict.pending("write the mean throughput of n5, n8 and n9 in kbit/s as "
                               "q1: {n5: ..., n8: ..., n9: ...} in answers.yaml")
    if not isinstance(raw, dict):
        return Verdict.failed(f"q1 must map each receiver to a rate, like "
                              f"{{n5: 900, n8: 300, n9: 80}}; got {raw!r}")
    run, verdict = _run(ctx, "rlc-layers")
    if verdict:
        return verdict
    wrong, missing = [], []
    for node in RECEIVERS:
        value = _number(raw.get(node))
        if value is None:
            missing.append(node)
            continue
        measured = _rate_kbit(run, node)
        if not _within_rate(value, measured):
            wrong.append(f"{node}: yours {value:g}, your run's {measured:.0f}")
    if missing:
        return Verdict.failed(f"q1 has no number for {', '.join(missing)} (kbit/s)")
    if wrong:
        start, end = run.window
        return Verdict.failed(
            "more than 10 % off (kbit/s): " + "; ".join(wrong) + f". Average throughput_bps "
            f"of flow rlc at each node over {start:g} < t <= {end:g} in "
            f"{run.path.name}/tables/per_second.csv and divide by 1000")
    return Verdict.passed("all three rates match your run")


@check("q2")
def climb_times(ctx: LabContext) -> Verdict:
    """First times n5's level column reached 2, 3, 4 and 5 layers (rlc-layers run)."""
    raw, verdict = list_answer(ctx, "q2", {len(CLIMB)},
                               "write the first times (t, s) at which n5's level column "
                               "reached 2, 3, 4 and 5 layers as q2: [t2, t3, t4, t5]",
                               f"of {len(CLIMB)} times [t2, t3, t4, t5]")
    if verdict:
        return verdict
    run, verdict = _run(ctx, "rlc-layers")
    if verdict:
        return verdict
    levels = _levels(run, "n5")
    wrong = []
    for layers, value in zip(CLIMB, raw, strict=True):
        reached = levels[levels >= layers]
        measured = float(reached.index[0]) if not reached.empty else None
        answer = _number(value)
        if measured is None:
            if value is not None:
                wrong.append(f"{layers} layers: n5 never reached them in your run (write null)")
        elif answer is None or abs(answer - measured) > TIME_TOL:
            wrong.append(f"{layers} layers: yours {value!r}, your run's t = {measured:g}")
    if wrong:
        return Verdict.failed("; ".join(wrong) + ". Find the first row of flow rlc, node n5 "
                              f"in {run.path.name}/tables/per_second.csv whose level is at "
                              "least that many layers (within 1 s)")
    return Verdict.passed("the climb matches your run")


@check("q3")
def n9_top_level(ctx: LabContext) -> Verdict:
    """The highest level column value of n9 in the rlc-layers run."""
    answer, run, verdict = _answer_run(ctx, "q3", "the highest number of layers n9 held",
                                       "rlc-layers")
    if verdict:
        return verdict
    levels = _levels(run, "n9")
    if levels.empty:
        return Verdict.failed(f"your run {run.path.name} has no level for n9: run step 2 again")
    measured = int(levels.max())
    if answer == measured:
        return Verdict.passed(f"{measured} layers")
    return Verdict.failed(f"your value {answer:g} is not your run's {measured}: the largest "
                          "value of the level column of flow rlc, node n9 in "
                          f"{run.path.name}/tables/per_second.csv (the whole run)")


def _decreases_check(ctx: LabContext, qid: str, experiment: str) -> Verdict:
    answer, run, verdict = _answer_run(ctx, qid, "how many times n8 decreased in the "
                                       f"{experiment} run", experiment)
    if verdict:
        return verdict
    measured = _decreases(run, "n8")
    if math.isnan(measured):
        return Verdict.failed(f"your run {run.path.name} has no deaf_periods gauge for n8 in "
                              f"tables/protocol.csv: run step {STEPS[experiment]} again")
    if within(answer, measured, DECREASES_REL, DECREASES_MIN):
        return Verdict.passed(f"{answer:g} (your run: {measured:g})")
    return Verdict.failed(f"your value {answer:g} differs from your run's {measured:g}: in "
                          f"{run.path.name}/tables/protocol.csv take the last value of the "
                          "rows with flow rlc, node n8, name deaf_periods (a running count)")


@check("q4")
def decreases_deaf_3s(ctx: LabContext) -> Verdict:
    """n8's decreases with a 3-s deaf period."""
    return _decreases_check(ctx, "q4", "rlc-layers")


@check("q5")
def decreases_deaf_short(ctx: LabContext) -> Verdict:
    """n8's decreases with a 0.5-s deaf period."""
    return _decreases_check(ctx, "q5", "rlc-deaf")


@check("q6")
def n8_rate_deaf_short(ctx: LabContext) -> Verdict:
    """n8's mean throughput (kbit/s) with a 0.5-s deaf period."""
    answer, run, verdict = _answer_run(ctx, "q6", "n8's mean throughput in kbit/s in the "
                                       "rlc-deaf run", "rlc-deaf")
    if verdict:
        return verdict
    measured = _rate_kbit(run, "n8")
    if _within_rate(answer, measured):
        return Verdict.passed(f"{answer:g} kbit/s (your run: {measured:.0f})")
    start, end = run.window
    return Verdict.failed(f"your value {answer:g} kbit/s differs from your run's "
                          f"{measured:.0f} by more than 10 %: average throughput_bps of flow "
                          f"rlc, node n8 over {start:g} < t <= {end:g} in "
                          f"{run.path.name}/tables/per_second.csv, divided by 1000")
