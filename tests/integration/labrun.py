"""`python -m mcclab ...` run from a test, and stopped as a user would stop it.

``subprocess.run`` answers an exception in the waiting test (its timeout, Ctrl-C,
the CI watchdog's SIGTERM turned into a test failure by tests/conftest.py) with
SIGKILL to the child: a runner killed that way leaves its lab behind, and every
later run on the machine refuses to start until someone runs `mcclab clean`. Here
the runner gets SIGTERM first (it tears its lab down, as on Ctrl-C) and SIGKILL
only if it has not ended after ``STOP_GRACE`` seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

MCCLAB = [sys.executable, "-m", "mcclab"]
STOP_GRACE = 120.0  # s: a teardown of the largest test lab takes well under a minute


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the runner, wait for its teardown, then SIGKILL its session if needed."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.communicate(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def run_mcclab(args: list[str], timeout: float, cwd: Path | None = None
               ) -> subprocess.CompletedProcess[str]:
    """Run ``mcclab ARGS`` to the end, capturing its output; stop it cleanly if interrupted."""
    proc = subprocess.Popen(MCCLAB + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        stop(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
