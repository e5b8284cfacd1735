"""Machine-readable (``--json``) output of ``mcclab check``, ``report`` and ``compare``.

Each function returns plain data (dicts, lists, numbers, strings) holding what the
command prints for people, so a script or an autograder reads the same facts
without parsing a Rich table. Values are in SI units (seconds, bit/s, fractions)
as in ``summary.json``; the tables format them for reading.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcclab.resultsdir import SWEEP_JSON


def emit(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout (plain print: no Rich markup or wrapping)."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()


# -- mcclab check ---------------------------------------------------------------------------

def reach_rows(report: Any, others: list[str], joiners: dict[str, Any], groups: list[str],
               ssm_group: str, backend: str, tolerance: float = 0.15) -> list[dict[str, Any]]:
    """One verdict per host and group of a reach check (``mcclab.probes.reach.ReachReport``).

    A joined host must get the group at the sending rate within ``tolerance``; a
    host that did not join must get nothing, except under smcroute, which routes
    statically and never prunes.
    """
    rows = []
    for host in others:
        for group in groups:
            member = host in joiners
            got = report.at(host, group)
            if member:
                ok = report.full_rate(host, group, tolerance)
            else:
                ok = got == 0 or backend == "smcroute"
            rows.append({"host": host, "group": group, "ssm": group == ssm_group,
                         "joined": member, "join_latency_s": report.latency.get((host, group)),
                         "packets": got, "ok": ok})
    return rows


def check_record(topology: str, sender: str, backend: str, report: Any,
                 rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``mcclab check --json``: the check's setting and its per-host verdicts."""
    return {"topology": topology, "sender": sender, "routing": backend,
            "rate_pps": report.rate_pps, "window_s": report.window_s,
            "ok": all(r["ok"] for r in rows), "hosts": rows}


# -- mcclab report ---------------------------------------------------------------------------

def report_record(folder: Path) -> dict[str, Any]:
    """Rebuild one run's or sweep's report; return its page and the summary it computed.

    A run's record holds its ``summary.json`` as written; a sweep's holds its
    ``sweep.json`` (the runs and their statuses). Raises what the rebuild raises
    (RunError, SpecError) for an unreadable folder.
    """
    from mcclab.analysis.report import build_report
    from mcclab.analysis.sweep_report import build_sweep_report

    if (folder / SWEEP_JSON).is_file():
        page = build_sweep_report(folder)
        return {"folder": str(folder), "kind": "sweep", "report": str(page),
                "sweep": json.loads((folder / SWEEP_JSON).read_text())}
    page = build_report(folder)
    summary = json.loads((page.parent / "summary.json").read_text())
    return {"folder": str(folder), "kind": "run", "report": str(page), "summary": summary}


# -- mcclab compare ---------------------------------------------------------------------------

def compare_record(folders: list[Path], out: Path | None = None) -> dict[str, Any]:
    """Re-analyse runs and lay them side by side: one entry per reference quantity.

    Quantities match by label and kind, as in the table; a run without one has
    null there. The overlay figure is written as for the table, and its paths
    are listed.
    """
    from mcclab.analysis.compare import default_output, overlay_figure
    from mcclab.analysis.results import load_run
    from mcclab.analysis.summary import summarise

    runs = [load_run(f) for f in folders]
    summaries = [summarise(r) for r in runs]
    figures = overlay_figure(runs, out or default_output(runs))
    # The experiment is in the name only when runs of several experiments are compared.
    mixed = len({r.info.experiment for r in runs}) > 1
    names = [f"{r.info.experiment}/{r.info.run_id}" if mixed else r.info.run_id for r in runs]
    keys: list[tuple[str, str]] = []
    for summary in summaries:
        keys += [(q.label, q.kind) for q in summary.quantities if (q.label, q.kind) not in keys]
    quantities = []
    for label, kind in keys:
        found = [next((q for q in s.quantities if (q.label, q.kind) == (label, kind)), None)
                 for s in summaries]
        first = next(q for q in found if q is not None)
        quantities.append({
            "label": label, "kind": kind, "unit": first.unit, "paper": first.paper,
            # Different experiments may hold the same label with different paper values.
            "papers_differ": len({q.paper for q in found if q is not None}) > 1,
            "tolerance": first.tolerance, "within": first.within,
            "runs": {name: None if q is None else {"measured": q.measured, "verdict": q.verdict,
                                                   "margin": q.margin}
                     for name, q in zip(names, found, strict=True)}})
    return {"runs": [{"name": name, "path": str(r.path), "experiment": r.info.experiment,
                      "run_id": r.info.run_id, "profile": r.info.profile,
                      "status": r.info.status} for name, r in zip(names, runs, strict=True)],
            "quantities": quantities, "figures": [str(p) for p in figures]}
