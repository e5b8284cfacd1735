"""The report's capture section: the IGMP and PIM messages of the run's captures, in time.

Reads only ``<run>/captures/`` (pcaps and captures.json written during the run).
Hellos and general queries repeat all run long and are counted, not listed.
The section's HTML is ``templates/captures.html.j2``, included by the run's report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcclab.analysis.page import render_page
from mcclab.capture import counts, read_pcap, timeline

MAX_LINES = 200  # per capture: a page, not a dump; the pcap holds the rest


def capture_timelines(run_dir: Path) -> list[dict[str, Any]] | None:
    """Per capture: where and what it captured, its tally and timeline (None: no captures).

    A capture that cannot be read is an entry with its file and ``error``.
    """
    folder = run_dir / "captures"
    if not folder.is_dir():
        return None
    try:
        index = json.loads((folder / "captures.json").read_text())
    except (OSError, ValueError):
        index = [
            {"file": p.name, "on": p.stem, "filter": "?"} for p in sorted(folder.glob("*.pcap"))
        ]
    out: list[dict[str, Any]] = []
    for entry in index:
        pcap = folder / entry["file"]
        try:
            messages = read_pcap(pcap)
        except (OSError, ValueError) as exc:
            out.append({"file": entry["file"], "error": str(exc)})
            continue
        tally = ", ".join(f"{k} {v}" for k, v in sorted(counts(messages).items()) if v) or "none"
        lines = timeline(messages, entry.get("started"))
        out.append({"file": entry["file"], "on": entry["on"], "filter": entry["filter"],
                    "tally": tally,
                    "lines": [(f"{t:.3f}", text) for t, text in lines[:MAX_LINES]],
                    "more": max(0, len(lines) - MAX_LINES)})
    return out


def capture_section(run_dir: Path) -> str:
    """HTML: one timeline per capture ('' when the run took none)."""
    captures = capture_timelines(run_dir)
    return "" if captures is None else render_page("captures.html.j2", captures=captures)
