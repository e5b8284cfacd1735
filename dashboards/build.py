"""Build every dashboard, write its JSON, check the committed JSON, list its queries.

The overview and network dashboards live here; each protocol's comes from its own
package (:func:`dashboards.protocols.builders`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from dashboards import network, overview, protocols

OUT = Path(__file__).resolve().parent / "json"
BUILDERS: dict[str, Callable[[], db.Dashboard]] = {
    "mcclab-overview": overview.build,
    "mcclab-network": network.build,
    **protocols.builders(),
}


def render(board: db.Dashboard) -> str:
    """A dashboard's JSON, stable (sorted keys) so the committed files diff cleanly."""
    return json.dumps(board.build(), cls=JSONEncoder, sort_keys=True, indent=2) + "\n"


def generated() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {f"{uid}.json": render(build()) for uid, build in BUILDERS.items()}


def stale(out: Path = OUT) -> list[str]:
    """Files in ``out`` that are missing, differ from the code, or belong to no dashboard."""
    want = generated()
    have = {p.name for p in out.glob("*.json")} if out.is_dir() else set()
    bad = [name for name, text in want.items()
           if not (out / name).is_file() or (out / name).read_text() != text]
    return sorted(bad + sorted(have - set(want)))


def write(out: Path = OUT) -> list[str]:
    """Write every dashboard and remove JSON files of dashboards that no longer exist."""
    out.mkdir(parents=True, exist_ok=True)
    want = generated()
    for name, text in want.items():
        (out / name).write_text(text)
    for path in out.glob("*.json"):
        if path.name not in want:
            path.unlink()
    return sorted(want)


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel of a dashboard's JSON, including those inside rows."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def queries(board: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(panel title, refId, PromQL) of every target of every panel."""
    for panel in panels(board):
        for target in panel.get("targets", []):
            if "expr" in target:
                yield panel.get("title", ""), target.get("refId", ""), target["expr"]


def main(args: list[str] | None = None) -> int:
    """Write the JSON, or with --check report (exit 1) files that do not match the code."""
    parser = argparse.ArgumentParser(prog="python -m dashboards")
    parser.add_argument("--check", action="store_true",
                        help="fail if dashboards/json differs from the code")
    opts = parser.parse_args(args)
    if opts.check:
        bad = stale()
        for name in bad:
            print(f"dashboards/json/{name} does not match the code: run 'make dashboards'")
        return 1 if bad else 0
    for name in write():
        print(f"wrote dashboards/json/{name}")
    return 0
