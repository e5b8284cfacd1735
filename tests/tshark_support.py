"""Counting packets of a capture with tshark's own dissectors, for tests that compare
mcclab's decoder or a lab's traffic with an independent reading.

Lives in tests/ (on sys.path through tests/conftest.py) so unit and integration tests
share it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def tshark_count(pcap: Path, display_filter: str) -> int:
    """Packets of ``pcap`` matching a tshark display filter."""
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-n",
            "-Y",
            display_filter,
            "-T",
            "fields",
            "-e",
            "frame.number",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return len(out.split())
