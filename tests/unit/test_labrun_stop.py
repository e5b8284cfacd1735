"""The integration tests' runner wrapper stops an interrupted run with SIGTERM first."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "labrun", Path(__file__).resolve().parents[1] / "integration" / "labrun.py")
labrun = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(labrun)

# A stand-in runner: on SIGTERM it "tears down" (writes a file) and exits 1.
CHILD = """
import signal, sys, time
from pathlib import Path
def down(*_):
    Path(sys.argv[1]).write_text("torn down")
    sys.exit(1)
signal.signal(signal.SIGTERM, down)
print("ready", flush=True)
time.sleep(60)
"""


def start(tmp_path: Path, code: str = CHILD) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "down")],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_an_interrupted_run_gets_sigterm_and_time_to_tear_down(tmp_path):
    proc = start(tmp_path)
    labrun.stop(proc)
    assert proc.returncode == 1 and (tmp_path / "down").read_text() == "torn down"


def test_a_runner_that_ignores_sigterm_is_killed_after_the_grace(tmp_path, monkeypatch):
    monkeypatch.setattr(labrun, "STOP_GRACE", 0.5)
    stubborn = CHILD.replace("signal.signal(signal.SIGTERM, down)",
                             "signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    proc = start(tmp_path, stubborn)
    began = time.monotonic()
    labrun.stop(proc)
    assert proc.returncode == -9 and time.monotonic() - began < 5
    assert not (tmp_path / "down").exists()


def test_run_mcclab_stops_the_run_when_the_wait_is_interrupted(tmp_path, monkeypatch):
    # The test's timeout (or Ctrl-C) interrupts the wait: the runner is stopped, not orphaned.
    monkeypatch.setattr(labrun, "MCCLAB", [sys.executable, "-c", CHILD, str(tmp_path / "down")])
    with pytest.raises(subprocess.TimeoutExpired):
        labrun.run_mcclab([], timeout=1.0)
    assert (tmp_path / "down").read_text() == "torn down"
