"""Checks of lab 06 (fine-grained layering: STAIR against cumulative doubling).

Every checked answer is compared with the student's own newest runs of
``stair-fine`` and ``rlc-doubling`` (``ctx.latest_run``), read with
``mcclab.analysis.results.load_run``, ``mcclab.analysis.metrics`` and the agents'
event logs (``mcclab.resultsdir.event_records``):
- a mean throughput over the measurement window (warm-up < t <= duration in
  ``tables/per_second.csv``) within 10 % (10 kbit/s at least): the window's
  edges and rounding move it by 1-2 %;
- subscription levels from the ``level`` column of ``tables/per_second.csv``
  (STAIR: units of the base rate held; RLC: layers held), sampled once a second:
  exactly, since the student reads the same column; for "the two levels held
  most often" any level held in at least 15 % of the window's seconds is
  accepted, because a receiver oscillating between three levels has no clear
  runner-up;
- join and leave counts from the receiver's event log
  (``logs/<flow>-receiver-d1.jsonl``, records ``join`` and ``leave``) within 10 %
  or 2, whichever is larger (a student who counts by hand may miss one or two).
"""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd

from mcclab.analysis import metrics
from mcclab.analysis.results import Run
from mcclab.labs.checks import LabContext, Verdict, check
from mcclab.labs.helpers import answer_number as _number
from mcclab.labs.helpers import list_answer, newest_run, within
from mcclab.resultsdir import event_records

LAB = 6
NODE = "d1"
# experiment -> (flow, handout step)
EXPERIMENTS = {"stair-fine": ("stair", 2), "rlc-doubling": ("rlc", 4)}
RATE_REL, RATE_MIN_KBIT = 0.10, 10.0
OFTEN = 0.15
COUNT_REL, COUNT_MIN = 0.10, 2.0


def _run(ctx: LabContext, experiment: str) -> tuple[Run | None, Verdict | None]:
    """The newest run of ``experiment``, loaded, or the verdict saying why there is none."""
    return newest_run(ctx, LAB, experiment, EXPERIMENTS[experiment][1])


def _window_levels(run: Run, flow: str) -> pd.Series:
    """The ``level`` column of ``flow`` at d1 over the measurement window."""
    rows = metrics.in_window(run.per_second, run.window)
    rows = rows[(rows["flow"] == flow) & (rows["node"] == NODE)].dropna(subset=["level"])
    return rows["level"].astype(int)


def _run_levels(ctx: LabContext, experiment: str
                ) -> tuple[Run | None, pd.Series | None, Verdict | None]:
    """The newest run of ``experiment`` and its flow's levels at d1 over the measurement
    window (:func:`_window_levels`), or the verdict to return instead."""
    flow, step = EXPERIMENTS[experiment]
    run, verdict = _run(ctx, experiment)
    if verdict:
        return None, None, verdict
    levels = _window_levels(run, flow)
    if levels.empty:
        return None, None, Verdict.failed(f"your run {run.path.name} has no level for flow "
                                          f"{flow}: run step {step} again")
    return run, levels, None


def group_changes(run: Run, flow: str) -> tuple[int, int]:
    """(joins, leaves) recorded in the receiver's event log over the whole run."""
    records = event_records(run.path / "logs" / f"{flow}-receiver-{NODE}.jsonl")
    events = Counter(r.get("event") for r in records)
    return events["join"], events["leave"]


def _rate_check(ctx: LabContext, qid: str, experiment: str) -> Verdict:
    flow, step = EXPERIMENTS[experiment]
    raw = ctx.answer(qid)
    if raw is None:
        return Verdict.pending(f"write {flow}'s mean throughput at d1 in kbit/s as {qid}:")
    answer = _number(raw)
    if answer is None:
        return Verdict.failed(f"{qid}: {raw!r} is not a number (kbit/s)")
    run, verdict = _run(ctx, experiment)
    if verdict:
        return verdict
    measured = metrics.throughput(run.per_second, flow, run.window, NODE) / 1e3
    if math.isnan(measured):
        return Verdict.failed(f"your run {run.path.name} has no rows of flow {flow}: run "
                              f"step {step} again")
    if within(answer, measured, RATE_REL, RATE_MIN_KBIT):
        return Verdict.passed(f"{answer:g} kbit/s (your run: {measured:.0f})")
    start, end = run.window
    return Verdict.failed(f"your value {answer:g} kbit/s differs from your run's "
                          f"{measured:.0f} by more than 10 %: average throughput_bps of flow "
                          f"{flow}, node d1 over {start:g} < t <= {end:g} in "
                          f"{run.path.name}/tables/per_second.csv, divided by 1000")


def _changes_check(ctx: LabContext, qid: str, experiment: str) -> Verdict:
    flow, step = EXPERIMENTS[experiment]
    log = f"logs/{flow}-receiver-d1.jsonl"
    raw, verdict = list_answer(ctx, qid, {2}, f"write how many joins and leaves {log} "
                               f"records as {qid}: [joins, leaves]", "[joins, leaves]")
    if verdict:
        return verdict
    run, verdict = _run(ctx, experiment)
    if verdict:
        return verdict
    measured = group_changes(run, flow)
    if measured == (0, 0):
        return Verdict.failed(f"your run {run.path.name} has no join records in {log}: run "
                              f"step {step} again")
    wrong = []
    for what, value, count in zip(("joins", "leaves"), raw, measured, strict=True):
        answer = _number(value)
        if answer is None or not within(answer, count, COUNT_REL, COUNT_MIN):
            wrong.append(f"{what}: yours {value!r}, your run's {count}")
    if wrong:
        return Verdict.failed("; ".join(wrong) + f". Count the records with \"event\":\"join\" "
                              f"and \"event\":\"leave\" in {run.path.name}/{log}")
    return Verdict.passed(f"{measured[0]} joins, {measured[1]} leaves")


@check("q1")
def stair_rate(ctx: LabContext) -> Verdict:
    """STAIR's mean throughput (kbit/s)."""
    return _rate_check(ctx, "q1", "stair-fine")


@check("q2")
def stair_units(ctx: LabContext) -> Verdict:
    """The smallest and largest number of units STAIR held in the window."""
    raw, verdict = list_answer(ctx, "q2", {2},
                               "write the smallest and the largest value of STAIR's level "
                               "column in the measurement window as q2: [min, max]",
                               "[min, max]")
    if verdict:
        return verdict
    run, levels, verdict = _run_levels(ctx, "stair-fine")
    if verdict:
        return verdict
    measured = [int(levels.min()), int(levels.max())]
    if [_number(v) for v in raw] == [float(m) for m in measured]:
        return Verdict.passed(f"{measured[0]} to {measured[1]} units")
    start, end = run.window
    return Verdict.failed(f"your [min, max] {raw!r} is not your run's: take the smallest and "
                          f"largest level of flow stair, node d1 over {start:g} < t <= {end:g} "
                          f"in {run.path.name}/tables/per_second.csv")


@check("q3")
def stair_changes(ctx: LabContext) -> Verdict:
    """STAIR's joins and leaves."""
    return _changes_check(ctx, "q3", "stair-fine")


@check("q4")
def rlc_rate(ctx: LabContext) -> Verdict:
    """RLC's mean throughput (kbit/s)."""
    return _rate_check(ctx, "q4", "rlc-doubling")


@check("q5")
def rlc_levels(ctx: LabContext) -> Verdict:
    """The two RLC levels held most often in the window."""
    raw, verdict = list_answer(ctx, "q5", {1, 2},
                               "write the two values of RLC's level column seen most often in "
                               "the measurement window as q5: [a, b]",
                               "of two levels [a, b]")
    if verdict:
        return verdict
    run, levels, verdict = _run_levels(ctx, "rlc-doubling")
    if verdict:
        return verdict
    shares = levels.value_counts(normalize=True)
    answers = {int(a) for a in map(_number, raw) if a is not None and a == int(a)}
    top = {int(v) for v in shares.index[:2]}
    often = {int(v) for v, s in shares.items() if s >= OFTEN}
    # a run that held one level all along has no second one: [a] is then the answer
    right = answers == top or (len(answers) == 2 and answers <= often)
    if len(answers) == len(raw) and right:
        return Verdict.passed(f"levels {sorted(answers)}")
    seen = ", ".join(f"{int(v)}: {s:.0%}" for v, s in shares.items())
    return Verdict.failed(f"{raw!r} are not the two levels your run held most often "
                          f"(share of the window's seconds: {seen}); count the values of the "
                          "level column of flow rlc, node d1 in the measurement window of "
                          f"{run.path.name}/tables/per_second.csv")


@check("q6")
def rlc_changes(ctx: LabContext) -> Verdict:
    """RLC's joins and leaves."""
    return _changes_check(ctx, "q6", "rlc-doubling")
