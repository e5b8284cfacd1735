"""Did the agents get the CPU? Their stalls over the measurement window (``agents.csv``).

A protocol agent that is not scheduled does not read, send or decide on time:
WEBRC's start-up detectors, ORMCC's feedback and STAIR's probes all misread a
stalled process as the network. On a machine that cannot keep up (the link
emulators run realtime and take what they need first) a run then measures the
machine, not the protocol, and its verdicts must say so.

From ``tables/agents.csv`` (rows per agent: the planned start and stop, its
``start`` event, each once-a-second ``stats`` record with how late its timers
ran, its ``stop``), each whole second ``(k - 1, k]`` of the window is counted
for each agent that should be running then (from ``GRACE_S`` after its planned
start, which covers the interpreter's start-up, to its planned stop). The
second is **stalled** when

* a stats record written in it says a timer ran ``LATE_MS`` or more late, or
* the agent wrote no record for more than ``SILENT_S`` before its end (not
  started yet, stalled whole, or exited).

The run is **overloaded** when some agent is stalled in more than
``max(1, SHARE * its counted seconds)`` seconds. The thresholds are far from
what a working run shows here (timers at most 5-15 ms late, a record every
1.0 s) and well below the protocols' own time scales (WEBRC's 0.5 s epoch,
RTTs of 30-200 ms).
"""

from __future__ import annotations

import bisect
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field

from mcclab.analysis.metrics import Window

LATE_MS = 100.0
SILENT_S = 2.0
GRACE_S = 3.0
SHARE = 0.02


class AgentStalls(BaseModel):
    """One agent's seconds in the window and how many of them were stalled."""

    flow: str
    node: str
    role: str
    seconds: int = Field(description="window seconds in which the agent should have run")
    stalled: int = Field(description="of those, seconds with a late timer or no record")
    worst_late_ms: float | None = Field(description="the latest timer in the window")
    start_delay_s: float | None = Field(
        description="its start event after its planned start (null: it never logged one)")


class Stalls(BaseModel):
    """``summary.json``'s ``agent_stalls``: whether the machine kept up with the agents."""

    overloaded: bool
    late_ms: float = LATE_MS
    silent_s: float = SILENT_S
    agents: list[AgentStalls]


def allowed(seconds: int) -> int:
    """How many stalled seconds an agent may have before the run counts as overloaded."""
    return max(1, math.floor(SHARE * seconds))


def _agent(rows: pd.DataFrame, window: Window) -> AgentStalls:
    """One agent's stalls from its rows."""
    def first(event: str) -> float | None:
        """The time of the agent's first row of this event."""
        times = rows.loc[rows["event"] == event, "t"]
        return float(times.min()) if len(times) else None

    planned = first("planned_start") or 0.0
    begin = planned + GRACE_S
    stop = first("planned_stop")
    stats = rows[rows["event"] == "stats"].sort_values("t")
    times = stats["t"].to_list()
    late = stats["timer_late_max_ms"].to_list()
    start, end = window
    counted = stalled = 0
    worst: float | None = None
    for k in range(int(math.floor(start)) + 1, int(math.floor(end + 1e-9)) + 1):
        if k - 1 < begin or (stop is not None and k > stop):
            continue
        counted += 1
        lo, hi = bisect.bisect_right(times, k - 1), bisect.bisect_right(times, k)
        in_second = [x for x in late[lo:hi] if isinstance(x, float) and not math.isnan(x)]
        if in_second:
            worst = max([worst or 0.0, *in_second])
        silent = k - (times[hi - 1] if hi else planned) > SILENT_S
        if silent or any(x >= LATE_MS for x in in_second):
            stalled += 1
    began = first("start")
    return AgentStalls(flow=str(rows["flow"].iloc[0]), node=str(rows["node"].iloc[0]),
                       role=str(rows["role"].iloc[0]), seconds=counted, stalled=stalled,
                       worst_late_ms=worst,
                       start_delay_s=None if began is None else round(began - planned, 3))


def assess(agents: pd.DataFrame, window: Window) -> Stalls | None:
    """The agents' stalls over ``window``; None for a run without an agents table."""
    if agents.empty:
        return None
    out = [_agent(rows, window) for _, rows in agents.groupby(["flow", "node", "role"],
                                                              sort=True)]
    return Stalls(overloaded=any(a.stalled > allowed(a.seconds) for a in out), agents=out)


def describe(stalls: Stalls) -> str:
    """One sentence for people on an overloaded run: who stalled, how often, how badly."""
    bad = [a for a in stalls.agents if a.stalled > allowed(a.seconds)]
    worst = max(bad, key=lambda a: a.stalled)
    late = (f"; timers up to {worst.worst_late_ms / 1000:.1f} s late"
            if worst.worst_late_ms is not None and worst.worst_late_ms >= LATE_MS else "")
    if worst.start_delay_s is None:
        late += "; it never started"
    elif worst.start_delay_s > GRACE_S:
        late += f"; it started {worst.start_delay_s:.1f} s after its planned start"
    return (f"The machine did not keep up with the agents: {len(bad)} of "
            f"{len(stalls.agents)} stalled (timers {stalls.late_ms:g} ms or more late, "
            f"or no record for over {stalls.silent_s:g} s) in more than "
            f"{SHARE:.0%} of their seconds; worst {worst.flow} {worst.role} at "
            f"{worst.node}, {worst.stalled} of {worst.seconds} s{late}. The measured values "
            f"describe the loaded machine, not the protocol: run fewer or slower "
            f"flows, or on more cores.")


def warning_for(summary: dict[str, Any]) -> str | None:
    """The overload sentence of a ``summary.json``'s content, or None (kept up, or unknown)."""
    data = summary.get("agent_stalls")
    if not data:
        return None
    stalls = Stalls.model_validate(data)
    return describe(stalls) if stalls.overloaded else None


def warning_in(summary_path: Path) -> str | None:
    """As :func:`warning_for`, from a written ``summary.json`` (None if it is unreadable)."""
    try:
        return warning_for(json.loads(summary_path.read_text()))
    except (OSError, ValueError):
        return None
