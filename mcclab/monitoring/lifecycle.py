"""Carrying out a monitoring plan: write its files, start its process, wait until it answers.

Starting and waiting are apart (:func:`launch`, :func:`wait_ready`), so a process
can be started early and waited for only when the run needs it.

Every process is started with ``mcclab.processes.spawn``: in its own process
group, recorded in the lab state, so ``mcclab clean`` ends it after a crash.
Readiness waits are stretched by ``MCCLAB_TIMEOUT_SCALE`` (a slow CPU, such as
the VM check's emulated guest, starts the exporter's Python far slower).
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from mcclab.monitoring import prometheus as prom
from mcclab.monitoring.plan import ProcessPlan
from mcclab.processes import spawn
from mcclab.slowdown import ENV as SCALE_ENV
from mcclab.slowdown import scaled
from mcclab.state import LabState, TrackedProcess

READY_TIMEOUT = 15.0


def write_atomically(path: Path, text: str) -> None:
    """Write a file so that a reader (Prometheus watches its target files) never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_files(files: Mapping[Path, str]) -> None:
    """Write every file of a plan."""
    for path, text in files.items():
        write_atomically(path, text)


def wait_ready(check: Callable[[], bool], procs: list[TrackedProcess], what: str,
               log: Path) -> None:
    """Poll ``check()`` until true; raise if a process died or time ran out.

    The timeout is READY_TIMEOUT times ``MCCLAB_TIMEOUT_SCALE``.
    """
    timeout = scaled(READY_TIMEOUT)
    deadline = time.monotonic() + timeout
    while not check():
        if any(not p.alive() for p in procs):
            tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
            raise RuntimeError(f"{what} exited during start-up: {tail.strip()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within {timeout:g}s (log: {log}); on a slow "
                               f"machine set {SCALE_ENV} to stretch this wait")
        time.sleep(0.1)


def answers(url: str, timeout: float = 1.0) -> bool:
    """True when an HTTP GET of ``url`` succeeds within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False


def launch(state: LabState, plan: ProcessPlan, started: list[TrackedProcess]) -> TrackedProcess:
    """Write the plan's files and start its command, without waiting for it.

    The process is appended to ``started`` as soon as it runs, so the caller can
    stop it whatever happens next.
    """
    write_files(plan.files)
    proc = spawn(state, plan.cmd, plan.log, plan.what)
    started.append(proc)
    return proc


def first_scrape(url: str, run: str, timeout: float) -> bool:
    """Wait until Prometheus at ``url`` has stored a successful scrape of the run's exporter.

    Only a successful one counts: Prometheus may start before the exporter and record
    its failed scrapes (``up`` 0) meanwhile.
    """
    deadline = time.monotonic() + timeout
    query = {"query": f'up{{run="{run}", component="exporter"}} == 1'}
    while time.monotonic() < deadline:
        try:
            if prom.api(url, "/api/v1/query", query, timeout=2.0)["result"]:
                return True
        except (OSError, RuntimeError, ValueError):
            pass
        time.sleep(0.2)
    return False
