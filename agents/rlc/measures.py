"""RLC measurements from a results folder: Table 1's indexes, Fig. 3's points, Fig. 7's sync.

Everything reads only the run folder (:class:`~mcclab.analysis.results.Run`):
the per-second table, the protocol gauges (``tables/protocol.csv``: the RLC
receivers' cumulative counters ``rx_packets``, ``lost_packets``,
``loss_events``), the link counters and, for Fig. 7, the receivers' event logs
(``rlc_level`` records: the exact times of every level change).

Definitions (paper sec. 4.4, Table 1), over the measurement window:

* throughput of an instance: its receiver's received payload rate (bit/s);
* fairness index: Jain's index over the instances' throughputs;
* router loss rate: queue drops over arrivals at the bottleneck direction;
* perceived loss rate: packets lost on the joined layers over packets expected
  there (a left layer's losses no longer count), averaged over instances;
* burst loss rate: loss events (losses within t_D of an event's first loss count
  once) over packets expected, averaged over instances;
* bandwidth exploitation: the instances' aggregate rate on the wire (payload + 28
  bytes of IP/UDP per packet, as ns counts whole packets) over the capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mcclab.analysis.metrics import IP_UDP, in_window, jain_index, throughput, window_seconds
from mcclab.analysis.results import Run
from mcclab.model.units import parse_duration
from mcclab.resultsdir import event_records


@dataclass(frozen=True)
class Instance:
    """One RLC instance (flow, receiver) over the window."""

    flow: str
    node: str
    throughput_bps: float  # payload
    wire_bps: float
    received: float
    lost: float
    loss_events: float

    @property
    def perceived_loss(self) -> float:
        """Lost over expected on the joined layers."""
        expected = self.received + self.lost
        return self.lost / expected if expected else math.nan

    @property
    def burst_loss(self) -> float:
        """Loss events over expected packets."""
        expected = self.received + self.lost
        return self.loss_events / expected if expected else math.nan


def rlc_flows(run: Run) -> list[str]:
    """The run's multicast flows that use the rlc protocol (spec order)."""
    flows = []
    for f in run.spec.flows:
        extra = getattr(f, "model_extra", None) or {}
        protocol = getattr(f, "protocol", None) or extra.get("protocol")
        if f.type == "multicast" and protocol in (None, "rlc"):
            flows.append(f.name)
    known = set(run.protocol["flow"]) if not run.protocol.empty else set()
    return [f for f in flows if f in known] or sorted(known)


def _gauge_delta(proto: pd.DataFrame, name: str, window: tuple[float, float]) -> float:
    """Increase of a cumulative gauge over the window (from the last value at its start)."""
    rows = proto[proto["name"] == name].sort_values("t")
    if rows.empty:
        return math.nan
    start, end = window
    before = rows[rows["t"] <= start]
    upto = rows[rows["t"] <= end]
    first = float(before["value"].iloc[-1]) if len(before) else 0.0
    last = float(upto["value"].iloc[-1]) if len(upto) else first
    return last - first


def instances(run: Run, packet_size: int = 256) -> list[Instance]:
    """Every (RLC flow, receiver) of the run, measured over the window."""
    window = run.window
    out = []
    proto = run.protocol
    for flow in rlc_flows(run):
        rows = proto[(proto["flow"] == flow) & (proto["role"] == "receiver")]
        for node in sorted(rows["node"].unique()):
            mine = rows[rows["node"] == node]
            tput = throughput(run.per_second, flow, window, node)
            secs = len(window_seconds(window))
            pkts = in_window(run.per_second[(run.per_second["flow"] == flow)
                                            & (run.per_second["node"] == node)], window)
            wire = float(pkts["packets"].sum()) * (packet_size + IP_UDP) * 8 / secs \
                if secs else math.nan
            out.append(Instance(flow, node, tput, wire,
                                _gauge_delta(mine, "rx_packets", window),
                                _gauge_delta(mine, "lost_packets", window),
                                _gauge_delta(mine, "loss_events", window)))
    return out


def router_loss(run: Run, src: str, dst: str) -> float:
    """Queue drops over arrivals on the link direction ``src -> dst`` over the window."""
    if run.links is None:
        return math.nan
    rows = run.links[(run.links["src"] == src) & (run.links["dst"] == dst)].sort_values("t")
    start, end = run.window
    a = rows[rows["t"] <= start]
    b = rows[rows["t"] <= end]
    if b.empty:
        return math.nan
    first = a.iloc[-1] if len(a) else None
    last = b.iloc[-1]

    def delta(col: str) -> float:
        return float(last[col]) - (float(first[col]) if first is not None else 0.0)

    drops = delta("drops_queue")
    arrived = delta("pkts_out") + drops + delta("drops_loss")
    return drops / arrived if arrived > 0 else math.nan


def table1_row(run: Run, capacity_bps: float, bottleneck: tuple[str, str] = ("n1", "n2"),
               packet_size: int = 256) -> dict[str, float]:
    """Table 1's five indexes (and the instance count) for one run."""
    inst = instances(run, packet_size)
    rates = [i.throughput_bps for i in inst]
    return {
        "instances": len(inst),
        "fairness": jain_index(rates),
        "router_loss": router_loss(run, *bottleneck),
        "perceived_loss": float(np.nanmean([i.perceived_loss for i in inst])) if inst
        else math.nan,
        "burst_loss": float(np.nanmean([i.burst_loss for i in inst])) if inst else math.nan,
        "exploitation": sum(i.wire_bps for i in inst) / capacity_bps,
        "exploitation_payload": sum(rates) / capacity_bps,
    }


# ---- Fig. 7: subscription traces and synchronisation --------------------------------


def _log_records(run: Run, flow: str, role: str, node: str) -> list[dict]:
    """One agent's event-log records (lines cut by a kill are skipped)."""
    return event_records(run.path / "logs" / f"{flow}-{role}-{node}.jsonl")


def clock_offset(run: Run, flow: str) -> float:
    """Agent clock (CLOCK_MONOTONIC) minus experiment time, from the sender's start record.

    The sender is launched at its flow's start; its ``start`` record follows the
    interpreter's start-up, so experiment times derived from it are late by that
    (a few hundred ms). Only plots use this; durations never need it.
    """
    start = 0.0
    for f in run.spec.flows:
        if f.name == flow:
            start = parse_duration((getattr(f, "model_extra", None) or {}).get("start") or "0s")
    senders = [p.name.split("-sender-")[1][:-6]
               for p in (run.path / "logs").glob(f"{flow}-sender-*.jsonl")]
    for node in senders:
        for rec in _log_records(run, flow, "sender", node):
            if rec.get("event") == "start":
                return float(rec["t"]) - start
    return 0.0


def level_trace(run: Run, flow: str, node: str) -> list[tuple[float, int]]:
    """(agent clock, paper level) at every level change of one receiver, from its event log."""
    return [(float(r["t"]), int(r["level"])) for r in _log_records(run, flow, "receiver", node)
            if r.get("event") == "rlc_level"]


def trace_end(run: Run, flow: str, node: str) -> float:
    """The agent-clock time of a receiver's last record (its stop)."""
    recs = _log_records(run, flow, "receiver", node)
    return float(recs[-1]["t"]) if recs else math.nan


def level_at(trace: list[tuple[float, int]], t: float) -> int | None:
    """The level in force at time ``t`` (None before the first record)."""
    value = None
    for when, level in trace:
        if when > t:
            break
        value = level
    return value


def sync_stats(traces: dict[str, list[tuple[float, int]]], end: float,
               step: float = 0.05) -> dict[str, float]:
    """Convergence and synchrony of receivers sharing a bottleneck.

    ``converged_at``: the first time, after every receiver has started, from which
    all are at the same level for at least one level-0 SP interval' worth of the
    grid (a momentary crossing is not convergence). ``in_sync``: the fraction of
    the time from ``converged_at`` to ``end`` during which all levels are equal
    (sampled every ``step`` seconds). ``common_level``: the level held together
    longest after convergence.
    """
    if not traces or any(not tr for tr in traces.values()):
        return {"converged_at": math.nan, "in_sync": math.nan, "common_level": math.nan,
                "last_start": math.nan}
    last_start = max(tr[0][0] for tr in traces.values())
    grid = np.arange(last_start, end, step)
    equal = []
    levels_when_equal = []
    for t in grid:
        levels = {level_at(tr, t) for tr in traces.values()}
        same = len(levels) == 1
        equal.append(same)
        levels_when_equal.append(next(iter(levels)) if same else None)
    equal_arr = np.array(equal)
    hold = max(1, int(1.0 / step))
    converged = None
    for k in range(len(grid)):
        if equal_arr[k:k + hold].all() and k + hold <= len(grid):
            converged = k
            break
    if converged is None:
        return {"converged_at": math.nan, "in_sync": 0.0, "common_level": math.nan,
                "last_start": last_start}
    after = equal_arr[converged:]
    common = pd.Series([lv for lv in levels_when_equal[converged:] if lv is not None])
    return {"converged_at": float(grid[converged]), "in_sync": float(after.mean()),
            "common_level": float(common.mode().iloc[0]) if len(common) else math.nan,
            "last_start": last_start}
