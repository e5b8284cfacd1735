"""Checks of lab 05 (ORMCC's congestion representative as TCP flows come and go).

Every checked answer is compared with the student's own newest run of
``clr-tracking`` (``ctx.latest_run``), read with ``mcclab.analysis.results.load_run``,
``agents.ormcc.measures`` (the CR each second, from the sender's
``cr_id``/``cr_valid`` and the receivers' ``rid`` gauges in ``tables/protocol.csv``)
and ``mcclab.analysis.metrics``:
- the CR of a period: the node that was the valid CR in most of the period's
  seconds; a node within 0.15 of that share is accepted too, because two
  receivers can take turns almost evenly (docs/ormcc.md, Table I's fourth period)
  and a student reading the figure cannot tell 7 seconds from 6;
- a throughput within 10 % (10 kbit/s at least): the window's edges and
  rounding move a 13-second mean by a few %;
- a count of congestion indications within 10 % or 1 (a running counter sampled
  once a second).
"""

from __future__ import annotations

import math

from agents.ormcc import measures as om
from mcclab.analysis import metrics
from mcclab.analysis.results import Run
from mcclab.labs.checks import LabContext, Verdict, check
from mcclab.labs.helpers import answer_number as _number
from mcclab.labs.helpers import list_answer, newest_run, within

LAB = 5
EXPERIMENT = "clr-tracking"
FLOW = "multi"
STEP = 2
# Table I's five periods, shortened to 18 s; each is judged after its first 5 s,
# the time the CR needs to move (the paper's own table leaves that out too).
PERIODS = [(5.0, 18.0), (23.0, 36.0), (41.0, 54.0), (59.0, 72.0), (77.0, 90.0)]
NEAR_TIE = 0.15
RATE_REL, RATE_MIN_KBIT = 0.10, 10.0
COUNT_REL, COUNT_MIN = 0.10, 1.0


def _run(ctx: LabContext) -> tuple[Run | None, Verdict | None]:
    """The newest run of the lab's experiment, loaded, or the verdict saying why not."""
    return newest_run(ctx, LAB, EXPERIMENT, STEP, name_in_unreadable=False)


def cr_shares(run: Run, start: float, end: float) -> dict[str, float]:
    """Each node's share of the seconds in (start, end] in which it was the valid CR."""
    series = om.cr_nodes(run, FLOW)
    window = series[(series.index > start) & (series.index <= end)]
    if window.empty:
        return {}
    counts = window[window != ""].value_counts()
    return {str(node): float(n) / len(window) for node, n in counts.items()}


@check("q1")
def cr_per_period(ctx: LabContext) -> Verdict:
    """The CR in each of the five periods."""
    raw, verdict = list_answer(ctx, "q1", {len(PERIODS)},
                               "write the CR of each period as q1: [h?, h?, h?, h?, h?] "
                               "in answers.yaml",
                               f"of {len(PERIODS)} receivers, one per period, like "
                               "[h1, h2, h3, h2, h1]")
    if verdict:
        return verdict
    run, verdict = _run(ctx)
    if verdict:
        return verdict
    if om.cr_nodes(run, FLOW).empty:
        return Verdict.failed(f"your run {run.path.name} has no CR gauges (cr_id) in "
                              f"tables/protocol.csv: run step {STEP} again")
    wrong = []
    for k, ((start, end), answer) in enumerate(zip(PERIODS, raw, strict=True), start=1):
        shares = cr_shares(run, start, end)
        best = max(shares.values(), default=0.0)
        name = str(answer).strip()
        mine = shares.get(name, 0.0)
        if best == 0.0 or mine <= 0.0 or mine < best - NEAR_TIE:
            seen = ", ".join(f"{n} {s:.0%}" for n, s in
                             sorted(shares.items(), key=lambda kv: -kv[1])) or "no valid CR"
            wrong.append(f"period {k} ({start:g}-{end:g} s): you wrote {name}, your run had "
                         f"{seen} of the seconds")
    if wrong:
        return Verdict.failed(
            "; ".join(wrong) + ". In tables/protocol.csv the sender's cr_id (with cr_valid = "
            "1) names the CR by its rid; each receiver's rid row tells which node has that "
            "id. The report's ORMCC tracking figure shows the same")
    return Verdict.passed("the CR of every period matches your run")


@check("q2")
def idle_receiver_rate(ctx: LabContext) -> Verdict:
    """h4's mean ORMCC throughput in periods 1 and 3 (kbit/s)."""
    raw, verdict = list_answer(ctx, "q2", {2},
                               "write h4's mean ORMCC throughput in period 1 and in period 3 "
                               "(kbit/s) as q2: [p1, p3]",
                               "of two rates [p1, p3] in kbit/s")
    if verdict:
        return verdict
    run, verdict = _run(ctx)
    if verdict:
        return verdict
    wrong = []
    for label, (start, end), value in (("period 1", PERIODS[0], raw[0]),
                                       ("period 3", PERIODS[2], raw[1])):
        measured = metrics.throughput(run.per_second, FLOW, (start, end), "h4") / 1e3
        answer = _number(value)
        if math.isnan(measured):
            return Verdict.failed(f"your run {run.path.name} has no rows of flow multi at h4: "
                                  f"run step {STEP} again")
        if answer is None or not within(answer, measured, RATE_REL, RATE_MIN_KBIT):
            wrong.append(f"{label} ({start:g} < t <= {end:g}): yours {value!r}, your run's "
                         f"{measured:.0f} kbit/s")
    if wrong:
        return Verdict.failed("; ".join(wrong) + ". Average throughput_bps of flow multi, node "
                              "h4 over those rows of tables/per_second.csv, divided by 1000")
    return Verdict.passed("both rates match your run")


@check("q3")
def idle_receiver_cis(ctx: LabContext) -> Verdict:
    """How many congestion indications h4 sent in the whole run."""
    raw = ctx.answer("q3")
    if raw is None:
        return Verdict.pending("write how many CIs h4 sent (the last value of its ci_sent "
                               "counter) as q3")
    answer = _number(raw)
    if answer is None:
        return Verdict.failed(f"q3: {raw!r} is not a number")
    run, verdict = _run(ctx)
    if verdict:
        return verdict
    sent = om.counter_delta(run, FLOW, "ci_sent")
    if "h4" not in sent.index:
        return Verdict.failed(f"your run {run.path.name} has no ci_sent counter for h4: "
                              f"run step {STEP} again")
    measured = float(sent["h4"])
    if within(answer, measured, COUNT_REL, COUNT_MIN):
        return Verdict.passed(f"{answer:g} (your run: {measured:g})")
    return Verdict.failed(f"your value {answer:g} differs from your run's {measured:g}: the "
                          "last value of the rows with flow multi, node h4, name ci_sent in "
                          "tables/protocol.csv")
