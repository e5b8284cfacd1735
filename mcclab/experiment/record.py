"""Who is running a run: the runner's identity in run.json, and runs whose runner died.

A runner killed with SIGKILL (or by a power cut) cannot write its final record,
so its ``run.json`` keeps saying ``running``. The runner therefore records its
pid, the kernel's start time of that pid (field 22 of ``/proc/PID/stat``) and
the boot id; :func:`mark_killed_runs` later finds records whose runner is gone
(no such pid, a pid reused by another process, or another boot) and marks them
``killed``. A record without these fields (written before they existed) is left
as it is: nothing tells whether its runner still runs.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcclab.jsonfile import write_json_atomic
from mcclab.state import proc_start_time

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot's id (pids and start times only mean something within one boot)."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


def runner_identity(pid: int | None = None) -> dict[str, Any]:
    """The run.json fields naming the runner process: pid, its start time, the boot."""
    pid = os.getpid() if pid is None else pid
    return {"runner_pid": pid, "runner_start_time": proc_start_time(pid),
            "runner_boot_id": boot_id()}


def runner_alive(record: dict[str, Any]) -> bool | None:
    """Whether the runner named in a run.json still runs; None when the record does not say."""
    pid, start = record.get("runner_pid"), record.get("runner_start_time")
    if not isinstance(pid, int) or not isinstance(start, int):
        return None
    recorded_boot = record.get("runner_boot_id")
    if recorded_boot and recorded_boot != boot_id():
        return False
    # A recycled pid belongs to a process that started at another time.
    return proc_start_time(pid) == start


def mark_killed_runs(results_root: Path) -> list[Path]:
    """Mark ``killed`` every run under ``results_root`` whose record says ``running`` but
    whose runner is dead; return their folders.

    Run folders are ``results_root/<experiment>/<run-id>/``. The record keeps every
    other key; ``killed_found`` is when the dead runner was noticed (ISO time, UTC).
    Runs whose runner is alive, and records that do not name their runner, are left
    alone.
    """
    marked = []
    if not results_root.is_dir():
        return marked
    for path in sorted(results_root.glob("*/*/run.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("status") != "running":
            continue
        if runner_alive(record) is not False:
            continue
        record["status"] = "killed"
        record["killed_found"] = datetime.now(UTC).isoformat()
        with contextlib.suppress(OSError):
            write_json_atomic(path, record)
            marked.append(path.parent)
    return marked
