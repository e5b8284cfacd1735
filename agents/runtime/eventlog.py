"""The agent's event log: one JSON object per line, flushed at least once a second.

Every record has ``t`` (the runtime clock: CLOCK_MONOTONIC, shared by every
namespace of a lab, or simulated time), ``event``, ``node`` and ``role``.
"""

from __future__ import annotations

import json
import time
from typing import Any, TextIO

_RESERVED = frozenset({"t", "event", "node", "role", "unix"})


class EventLog:
    """Appends records to a text stream; the runtime calls :meth:`flush` every second."""

    def __init__(self, stream: TextIO, node: str, role: str, wall_clock: bool = True):
        self.stream = stream
        self.node = node
        self.role = role
        self.wall_clock = wall_clock
        self.records = 0

    def write(self, now: float, event: str, /, **fields: Any) -> None:
        record: dict[str, Any] = {"t": round(now, 6), "event": event, "node": self.node,
                                  "role": self.role}
        if self.wall_clock:
            record["unix"] = round(time.time(), 6)
        for key, value in fields.items():  # a core's field never hides a reserved one
            record[f"{key}_" if key in _RESERVED else key] = value
        self.stream.write(json.dumps(record, default=str, separators=(",", ":")) + "\n")
        self.records += 1

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()
        self.stream.close()
