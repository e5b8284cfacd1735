"""The results folder's contract: its file names, its tables' columns and the agents' logs.

The runner (:mod:`mcclab.experiment`) writes a run's folder and the analysis
(:mod:`mcclab.analysis`) reads it back, possibly years later and with a newer
version; both take the names and columns from here, so the two sides cannot
drift apart. ``docs/results.md`` describes the contract for people.

This module depends on nothing else in mcclab: a writer and a reader can both
import it without importing each other.
"""

from __future__ import annotations

import json
from pathlib import Path

RUN_JSON = "run.json"
SPEC_YAML = "spec.yaml"
ENV_JSON = "env.json"
TABLES = "tables"
LOGS = "logs"
SWEEP_JSON = "sweep.json"
"""A sweep folder's record of its runs (``results/<experiment>/sweep-<id>/``)."""

PER_SECOND_CSV = Path(TABLES) / "per_second.csv"
LINKS_CSV = Path(TABLES) / "links.csv"
PROTOCOL_CSV = Path(TABLES) / "protocol.csv"
AGENTS_CSV = Path(TABLES) / "agents.csv"

PER_SECOND_COLUMNS = ["t", "flow", "kind", "node", "throughput_bps", "packets", "lost", "level"]
"""``tables/per_second.csv``: one row per second, flow and receiving node."""
LINK_COLUMNS = ["t", "link", "src", "dst", "pkts_out", "bytes_out",
                "drops_queue", "drops_loss", "qlen_pkts"]
"""``tables/links.csv``: one row per second and link direction (extra columns allowed)."""
PROTOCOL_COLUMNS = ["t", "flow", "node", "role", "name", "value"]
"""``tables/protocol.csv``: one row per second, agent and protocol gauge."""
AGENT_COLUMNS = ["t", "flow", "node", "role", "event", "timer_late_max_ms"]
"""``tables/agents.csv``: one row per agent event (schedule, start, stats, stop)."""

TEXT_COLUMNS = frozenset({"flow", "kind", "node", "link", "src", "dst", "role", "name", "event"})
"""Columns read as text exactly (a node called ``NA`` stays ``"NA"``); the rest are numbers."""
# No subscription level for TCP, no loss count where the receiver cannot see
# sequence numbers, no gauge value or lateness in a schedule row.
OPTIONAL_NUMBER_COLUMNS = frozenset({"level", "lost", "value", "timer_late_max_ms"})
"""Number columns whose cells may be empty."""


def event_records(log: Path) -> list[dict]:
    """The JSON records of an agent's event log (``logs/*.jsonl``).

    Lines cut short by a kill, and lines that are not JSON objects, are skipped;
    a missing log has no records.
    """
    if not log.exists():
        return []
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out
