"""Synthetic results folders for the tests (unit and integration), and for trying the report.

They follow the contract in ``docs/results.md`` (names and columns from
:mod:`mcclab.resultsdir`), so they double as an executable example of it for
whoever writes a runner. Tests import this module by name (``tests/`` is on the
path, as for ``tshark_support``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from mcclab.resultsdir import (
    AGENT_COLUMNS,
    AGENTS_CSV,
    ENV_JSON,
    LINK_COLUMNS,
    LINKS_CSV,
    LOGS,
    PER_SECOND_COLUMNS,
    PER_SECOND_CSV,
    RUN_JSON,
    SPEC_YAML,
    TABLES,
)


def rows(flow: str, kind: str, node: str, bps: float | Iterable[float], seconds: Iterable[int],
         packet_bytes: int = 1000, loss: float = 0.0, level: float | None = None) -> list[dict]:
    """Per-second rows of one flow at one node: a constant rate or one rate per second."""
    seconds = list(seconds)
    rates = [float(bps)] * len(seconds) if isinstance(bps, int | float) else list(bps)
    out = []
    for t, rate in zip(seconds, rates, strict=True):
        packets = round(rate / 8 / packet_bytes)
        lost = round(packets * loss / (1 - loss)) if loss < 1 else 0
        out.append({"t": t, "flow": flow, "kind": kind, "node": node, "throughput_bps": rate,
                    "packets": packets, "lost": lost, "level": "" if level is None else level})
    return out


def agent_rows(flow: str, node: str, role: str, records: Iterable[tuple[float, float]], *,
               planned_start: float = 0.0, planned_stop: float | None = None) -> list[dict]:
    """``agents.csv`` rows of one agent: its schedule, its start (a second before its first
    record) and its (time, timer lateness ms) stats records."""
    records = list(records)
    who = {"flow": flow, "node": node, "role": role}
    out = [{"t": planned_start, **who, "event": "planned_start", "timer_late_max_ms": None}]
    if planned_stop is not None:
        out.append({"t": planned_stop, **who, "event": "planned_stop", "timer_late_max_ms": None})
    if records:
        out.append({"t": records[0][0] - 1.0, **who, "event": "start", "timer_late_max_ms": None})
    return out + [{"t": t, **who, "event": "stats", "timer_late_max_ms": late}
                  for t, late in records]


def write_run(
    folder: Path,
    per_second: list[dict] | None,
    *,
    references: list[dict] | None = None,
    flows: list[dict] | None = None,
    status: str = "complete",
    duration_s: float = 60.0,
    warmup_s: float = 10.0,
    elapsed_s: float | None = None,
    error: str | None = None,
    links: list[dict] | None = None,
    agents: list[dict] | None = None,
    env: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    scaling: str = "",
    profile: str = "quick",
) -> Path:
    """Write a results folder; ``None`` for ``per_second`` leaves the table out."""
    folder.mkdir(parents=True, exist_ok=True)
    experiment = folder.parent.name or "synthetic"
    info = {
        "experiment": experiment, "run_id": folder.name, "profile": profile, "status": status,
        "started": "2026-11-21T20:15:00+00:00", "ended": "2026-11-21T20:16:00+00:00",
        "duration_s": duration_s, "warmup_s": warmup_s,
        "elapsed_s": duration_s if elapsed_s is None else elapsed_s,
        "error": error, "scaling": scaling,
    }
    (folder / RUN_JSON).write_text(json.dumps(info, indent=2))
    if flows is None:
        seen: dict[str, str] = {}
        for row in per_second or []:
            seen.setdefault(row["flow"], row["kind"])
        flows = [{"name": name, "type": kind} for name, kind in seen.items()]
    document = {"name": experiment, "description": "A synthetic run.",
                "reference": "Synthetic, Fig. 0", "flows": flows,
                "references": references or []}
    document.update(spec or {})
    (folder / SPEC_YAML).write_text(yaml.safe_dump(document, sort_keys=False))
    (folder / ENV_JSON).write_text(json.dumps(env or {
        "kernel": "6.1.0-synthetic", "python": "3.11", "git_sha": "0" * 40,
        "backends": {"routing": "frr", "links": "kernel"}}, indent=2))
    (folder / TABLES).mkdir(exist_ok=True)
    if per_second is not None:
        pd.DataFrame(per_second, columns=PER_SECOND_COLUMNS).to_csv(
            folder / PER_SECOND_CSV, index=False)
    if links is not None:
        pd.DataFrame(links, columns=LINK_COLUMNS).to_csv(folder / LINKS_CSV, index=False)
    if agents is not None:
        pd.DataFrame(agents, columns=AGENT_COLUMNS).to_csv(folder / AGENTS_CSV, index=False)
    (folder / LOGS).mkdir(exist_ok=True)
    return folder


def demo_run(folder: Path, status: str = "complete", elapsed_s: float | None = None) -> Path:
    """A WEBRC-versus-TCP-like run on a 3.2 Mbit/s bottleneck, with links and references.

    Two multicast receivers and one TCP flow share the link after second 20;
    the references exercise every kind and both kinds of criterion.
    """
    duration = 120
    seconds = range(1, duration + 1)

    def wave(t: int, phase: float) -> float:
        """A ±10 % ripple with a 10-s period, like WEBRC's waves."""
        return 0.1 * math.sin(2 * math.pi * t / 10 + phase)

    def webrc(t: int, p: float) -> float:
        """WEBRC alone ramps up to the link; after TCP arrives, half of it."""
        return min(3.2e6, 0.3e6 * t) if t < 20 else 1.6e6 * (1 + wave(t, p))

    def tcp(t: int) -> float:
        """TCP starts at 20 s and saw-tooths around 1.45 Mbit/s."""
        return 0.0 if t < 20 else 1.45e6 * (1 + 0.08 * ((t % 7) - 3) / 3)

    data: list[dict] = []
    for node, phase in (("r1", 0.0), ("r2", 0.4)):
        for t in seconds:
            data += rows("webrc", "multicast", node, webrc(t, phase), [t], 1024, 0.01,
                         level=min(8, 1 + t // 4 if t < 20 else 6 + (t // 5) % 2))
    data += [r for t in seconds for r in rows("tcp", "tcp", "r3", tcp(t), [t], 1448)]
    end = duration if elapsed_s is None else int(elapsed_s)
    data = [r for r in data if r["t"] <= end]
    links = []
    sent = 0.0
    for t in range(0, end + 1):
        sent += (webrc(t, 0) + tcp(t)) / 8 if t else 0
        links.append({"t": t, "link": "r1-r2", "src": "r1", "dst": "r2",
                      "pkts_out": int(sent / 1200), "bytes_out": int(sent),
                      "drops_queue": int(t * 1.5), "drops_loss": 0,
                      "qlen_pkts": 0 if t < 20 else 20 + 15 * math.sin(t / 3)})
    references = [
        {"kind": "throughput", "label": "WEBRC throughput", "flow": "webrc", "paper": "1.6Mbit",
         "tolerance": "10%", "source": "Fig. 9"},
        {"kind": "share", "label": "WEBRC share", "flow": "webrc", "of_flows": ["webrc", "tcp"],
         "paper": 0.5, "within": [0.4, 0.6], "source": "Fig. 9"},
        {"kind": "utilisation", "label": "link utilisation", "flows": ["webrc", "tcp"],
         "capacity": "3.2Mbit", "paper": 0.995, "tolerance": "5%", "source": "§5.2"},
        {"kind": "fairness", "label": "Jain's index", "flows": ["webrc", "tcp"],
         "paper": 0.99, "within": [0.95, 1.0], "source": "RLC Table 1"},
        {"kind": "loss", "label": "WEBRC loss", "flow": "webrc", "node": "r1", "paper": 0.0,
         "within": [0.0, 0.005], "source": "Fig. 7"},
        {"kind": "ratio", "label": "WEBRC / TCP", "numerator": "webrc", "denominator": "tcp",
         "paper": 1.0, "tolerance": "15%", "source": "Fig. 9"},
    ]
    flows = [{"name": "webrc", "type": "multicast", "protocol": "webrc"},
             {"name": "tcp", "type": "tcp"}]
    spec = {"name": "webrc-fig9",
            "description": "One WEBRC session and one TCP session share a 3.2 Mbit/s link; "
                           "each has 0.1 s RTT and the routers buffer 40 packets.",
            "reference": "WEBRC (SIGCOMM 2002), Fig. 9"}
    error = None if status == "complete" else "interrupted by Ctrl-C"
    return write_run(folder, data, references=references, flows=flows, status=status,
                     duration_s=duration, warmup_s=30, elapsed_s=elapsed_s, error=error,
                     links=links, spec=spec, scaling="quick: durations divided by 2.5")
