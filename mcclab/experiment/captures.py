"""Captures an experiment names in its spec (``captures:``), taken during the run.

Each capture is a tcpdump in a node's namespace started through ``Lab.spawn``,
so it is recorded in the lab's state like every process of the run and ended
by the run's teardown (SIGTERM: tcpdump closes the file; ``-U`` has written
every packet as it came). The pcaps go to ``<run>/captures/`` with
``captures.json`` naming each file's target, filter and start time; the report
reads them back (``mcclab.analysis.captures``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from mcclab.capture import CaptureError, Target, bpf, parse_target, tcpdump_argv, wait_listening
from mcclab.experiment.spec import Experiment
from mcclab.model.addressing import plan_addresses
from mcclab.model.topology import Topology

INDEX = "captures.json"


def target_problems(exp: Experiment, topo: Topology) -> list[tuple[str, str]]:
    """(field, reason) for each capture whose target the topology lacks."""
    if not exp.captures:
        return []
    plan = plan_addresses(topo)
    problems = []
    for i, cap in enumerate(exp.captures):
        try:
            parse_target(topo, plan, cap.on)
        except CaptureError as exc:
            problems.append((f"captures[{i}].on", str(exc)))
    return problems


def file_name(i: int, target: Target, filter_name: str) -> str:
    """A capture's pcap name: its index, target and filter (when a plain name)."""
    tag = filter_name if filter_name.isalnum() else "bpf"
    return f"{i:02d}-{target.label}-{tag}.pcap"


def start_captures(lab, exp: Experiment, run_dir: Path, ready_timeout: float = 10.0) -> list[Path]:  # noqa: ANN001 - lab: mcclab.lab.Lab (no import cycle)
    """Start every capture of ``exp`` and wait until each listens; returns the pcaps."""
    if not exp.captures:
        return []
    folder = run_dir / "captures"
    folder.mkdir(exist_ok=True)
    index, paths = [], []
    for i, cap in enumerate(exp.captures):
        target = parse_target(lab.topo, lab.plan, cap.on)
        path = folder / file_name(i, target, cap.filter)
        argv = tcpdump_argv(target, bpf(cap.filter, lab.topo.addressing.control), path)
        proc, log = lab.spawn(target.node, argv, f"capture-{i:02d}")
        wait_listening(log, proc.alive, ready_timeout)
        index.append(
            {
                "file": path.name,
                "on": cap.on,
                "node": target.node,
                "iface": target.iface,
                "filter": cap.filter,
                "started": time.time(),
            }
        )
        paths.append(path)
    (folder / INDEX).write_text(json.dumps(index, indent=1))
    return paths
