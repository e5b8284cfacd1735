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
``max(1, SHARE * its counted seconds)`` seconds.

Agents that ran in one agent host (``agents.host``; ``run.json``'s ``agents.hosts``)
share one event loop, so they fall behind together: the host is judged as one unit.
Its second is counted when any of its agents should run then, and stalled when any of
them is stalled in it; the host's worst timer is its agents' worst. Its agents are
still listed one by one, but only the host counts towards the verdict. The thresholds are far from
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
    host: str | None = Field(None, description="the agent host it ran in (null: its own "
                             "process)")


class HostStalls(BaseModel):
    """One agent host's seconds in the window, judged as one unit."""

    host: str
    agents: int = Field(description="agents the host ran")
    seconds: int = Field(description="window seconds in which one of its agents should run")
    stalled: int = Field(description="of those, seconds in which one of its agents stalled")
    worst_late_ms: float | None = Field(description="its agents' latest timer in the window")


class Stalls(BaseModel):
    """``summary.json``'s ``agent_stalls``: whether the machine kept up with the agents."""

    overloaded: bool
    late_ms: float = LATE_MS
    silent_s: float = SILENT_S
    agents: list[AgentStalls]
    hosts: list[HostStalls] = Field(default_factory=list)


def allowed(seconds: int) -> int:
    """How many stalled seconds an agent may have before the run counts as overloaded."""
    return max(1, math.floor(SHARE * seconds))


Seconds = dict[int, tuple[bool, float | None]]  # k -> (stalled, worst timer in it)


def _agent(rows: pd.DataFrame, window: Window, host: str | None = None
           ) -> tuple[AgentStalls, Seconds]:
    """One agent's stalls from its rows, and its counted seconds one by one."""
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
    seconds: Seconds = {}
    for k in range(int(math.floor(start)) + 1, int(math.floor(end + 1e-9)) + 1):
        if k - 1 < begin or (stop is not None and k > stop):
            continue
        lo, hi = bisect.bisect_right(times, k - 1), bisect.bisect_right(times, k)
        in_second = [x for x in late[lo:hi] if isinstance(x, float) and not math.isnan(x)]
        silent = k - (times[hi - 1] if hi else planned) > SILENT_S
        seconds[k] = (silent or any(x >= LATE_MS for x in in_second),
                      max(in_second) if in_second else None)
    began = first("start")
    return AgentStalls(flow=str(rows["flow"].iloc[0]), node=str(rows["node"].iloc[0]),
                       role=str(rows["role"].iloc[0]), seconds=len(seconds),
                       stalled=sum(bad for bad, _ in seconds.values()),
                       worst_late_ms=_worst(w for _, w in seconds.values()),
                       start_delay_s=None if began is None else round(began - planned, 3),
                       host=host), seconds


def _worst(values: Any) -> float | None:
    """The largest of the values that are not None (None if there is none)."""
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _host(name: str, members: list[Seconds]) -> HostStalls:
    """A host's seconds: the union of its agents', stalled when any of them is."""
    union: dict[int, list[tuple[bool, float | None]]] = {}
    for seconds in members:
        for k, value in seconds.items():
            union.setdefault(k, []).append(value)
    return HostStalls(host=name, agents=len(members), seconds=len(union),
                      stalled=sum(any(bad for bad, _ in v) for v in union.values()),
                      worst_late_ms=_worst(w for v in union.values() for _, w in v))


def agent_hosts(run_dir: Path) -> dict[tuple[str, str, str], str]:
    """(flow, node, role) -> agent host, from ``run.json``'s ``agents`` (empty for a run
    whose agents ran one per process, or an unreadable record)."""
    try:
        record = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    hosts = (record.get("agents") or {}).get("hosts") or {}
    return {(a["flow"], a["node"], a["role"]): name
            for name, members in hosts.items() for a in members}


def assess(agents: pd.DataFrame, window: Window,
           hosts: dict[tuple[str, str, str], str] | None = None) -> Stalls | None:
    """The agents' stalls over ``window``; None for a run without an agents table.

    ``hosts`` maps (flow, node, role) to the agent host that ran the agent
    (:func:`agent_hosts`); those agents are judged by their host.
    """
    if agents.empty:
        return None
    hosts = hosts or {}
    out: list[AgentStalls] = []
    members: dict[str, list[Seconds]] = {}
    for key, rows in agents.groupby(["flow", "node", "role"], sort=True):
        host = hosts.get(tuple(str(k) for k in key))  # type: ignore[arg-type]
        agent, seconds = _agent(rows, window, host)
        out.append(agent)
        if host is not None:
            members.setdefault(host, []).append(seconds)
    units = [_host(name, seconds) for name, seconds in sorted(members.items())]
    over = any(h.stalled > allowed(h.seconds) for h in units) or any(
        a.stalled > allowed(a.seconds) for a in out if a.host is None)
    return Stalls(overloaded=over, agents=out, hosts=units)


def describe(stalls: Stalls) -> str:
    """One sentence for people on an overloaded run: who stalled, how often, how badly."""
    hosts = [h for h in stalls.hosts if h.stalled > allowed(h.seconds)]
    if hosts:
        return _describe_hosts(stalls, hosts)
    bad = [a for a in stalls.agents if a.stalled > allowed(a.seconds) and a.host is None]
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


def _describe_hosts(stalls: Stalls, hosts: list[HostStalls]) -> str:
    """The sentence when agent hosts fell behind: which, for how long, how late."""
    parts = []
    for h in sorted(hosts, key=lambda h: (-h.stalled, h.host)):
        late = ("" if h.worst_late_ms is None
                else f", timers up to {h.worst_late_ms / 1000:.1f} s late")
        parts.append(f"{h.host} ({h.agents} agents) stalled in {h.stalled} of {h.seconds} "
                     f"s{late}")
    alone = [a for a in stalls.agents if a.host is None and a.stalled > allowed(a.seconds)]
    also = f"; and {len(alone)} agents in their own processes" if alone else ""
    return (f"The machine did not keep up with the agents: {len(hosts)} of "
            f"{len(stalls.hosts)} agent hosts fell behind (a second with a timer "
            f"{stalls.late_ms:g} ms or more late, or no record for over {stalls.silent_s:g} s, "
            f"in more than {SHARE:.0%} of their seconds): {'; '.join(parts)}{also}. The "
            f"measured values describe the loaded machine, not the protocol: run fewer or "
            f"slower flows, more hosts, or on more cores.")


def is_overloaded(stalls: Stalls | None) -> bool:
    """Whether a run's stall check says it was overloaded (False: kept up, or unknown)."""
    return stalls is not None and stalls.overloaded


def sentence(stalls: Stalls | None) -> str:
    """The overload sentence (:func:`describe`) of an overloaded run, "" otherwise."""
    return describe(stalls) if is_overloaded(stalls) else ""


def warning_for(summary: dict[str, Any]) -> str | None:
    """The overload sentence of a ``summary.json``'s content, or None (kept up, or unknown)."""
    data = summary.get("agent_stalls")
    return (sentence(Stalls.model_validate(data)) or None) if data else None


def warning_in(summary_path: Path) -> str | None:
    """As :func:`warning_for`, from a written ``summary.json`` (None if it is unreadable)."""
    try:
        return warning_for(json.loads(summary_path.read_text()))
    except (OSError, ValueError):
        return None
