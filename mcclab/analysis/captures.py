"""The report's capture section: the IGMP and PIM messages of the run's captures, in time.

Reads only ``<run>/captures/`` (pcaps and captures.json written during the run).
Hellos and general queries repeat all run long and are counted, not listed.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from mcclab.capture import counts, read_pcap, timeline

MAX_LINES = 200  # per capture: a page, not a dump; the pcap holds the rest


def capture_section(run_dir: Path) -> str:
    """HTML: one timeline per capture ('' when the run took none)."""
    folder = run_dir / "captures"
    if not folder.is_dir():
        return ""
    try:
        index = json.loads((folder / "captures.json").read_text())
    except (OSError, ValueError):
        index = [
            {"file": p.name, "on": p.stem, "filter": "?"} for p in sorted(folder.glob("*.pcap"))
        ]
    parts = ["<h2>Captures: IGMP and PIM timeline</h2>"]
    for entry in index:
        pcap = folder / entry["file"]
        try:
            messages = read_pcap(pcap)
        except (OSError, ValueError) as exc:
            parts.append(f"<p>{escape(entry['file'])}: not readable ({escape(str(exc))})</p>")
            continue
        tally = ", ".join(f"{k} {v}" for k, v in sorted(counts(messages).items()) if v) or "none"
        lines = timeline(messages, entry.get("started"))
        rows = "".join(
            f"<tr><td>{t:.3f}</td><td><code>{escape(text)}</code></td></tr>"
            for t, text in lines[:MAX_LINES]
        )
        more = (
            f"<p>… {len(lines) - MAX_LINES} more in the pcap.</p>" if len(lines) > MAX_LINES else ""
        )
        parts.append(
            f"<h3>{escape(entry['on'])} ({escape(entry['filter'])})</h3>"
            f"<p>File <code>captures/{escape(entry['file'])}</code>; messages: "
            f"{escape(tally)}. Times are seconds from the start of the capture.</p>"
            + (
                f"<table><tr><th>t (s)</th><th>message</th></tr>{rows}</table>{more}"
                if rows
                else "<p>No join, leave, prune or register in this capture.</p>"
            )
        )
    return "\n".join(parts)
