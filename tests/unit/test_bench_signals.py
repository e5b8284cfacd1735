"""bench/signals.py (and tests/integration/test_signals.py) clean up after their own labs.

A case stopped by an exception (its test's timeout) used to SIGKILL the runner,
leaving its lab for every later lab on the machine to refuse. Checked here with a
stand-in runner: no lab is made.
"""

from __future__ import annotations

import signal
import subprocess

import pytest

from bench import signals


class StandIn:
    """A runner whose lab is recorded and whose wait for a pause times out."""

    def __init__(self, results, pause, wait, sets):  # noqa: ANN001 - Runner's signature
        self.lab = {"lab_id": "signals-run-20261128-000000-abcd", "netns": [],
                    "root_ifaces": [], "processes": []}
        self.sent: list[int] = []
        self.running = True
        self.proc = self

    def poll(self):  # noqa: ANN201 - the Popen stand-in
        return None if self.running else -15

    def wait_until(self, predicate, timeout, what):  # noqa: ANN001
        raise TimeoutError(f"the test's timeout, waiting for {what}")

    def signal(self, sig: int) -> None:
        self.sent.append(sig)

    def finish(self, timeout: float = 120.0) -> int:
        self.running = False
        return 1

    def lab_id(self) -> str:
        return self.lab["lab_id"]

    def note_lab(self) -> None:
        pass


@pytest.fixture
def cleans(monkeypatch, tmp_path):
    """Record `mcclab clean` calls; the state root is a temporary folder."""
    calls: list[list[str]] = []
    real = subprocess.run

    def run(argv, **kwargs):  # noqa: ANN001, ANN003
        if argv[:len(signals.MCCLAB)] != signals.MCCLAB:
            return real(argv, **kwargs)  # `ip netns list` and the like, read-only
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(signals, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(signals.subprocess, "run", run)
    return calls


def test_an_interrupted_case_stops_its_runner_gently_and_cleans_its_own_lab(
        monkeypatch, tmp_path, cleans):
    made: list[StandIn] = []

    def runner(*args):  # noqa: ANN002
        made.append(StandIn(*args))
        return made[-1]

    monkeypatch.setattr(signals, "Runner", runner)
    (tmp_path / "signals-run-20261128-000000-abcd").mkdir()  # the lab's state is left
    with pytest.raises(TimeoutError):
        signals.run_case(signal.SIGINT, "analysis", tmp_path / "results", wait=0)
    assert made[0].sent == [signal.SIGTERM]  # not SIGKILL first: its teardown runs
    assert cleans == [signals.MCCLAB + ["clean", "--lab", "signals-run-20261128-000000-abcd"]]


def test_clean_up_touches_nothing_when_the_lab_is_gone(cleans):
    runner = StandIn(None, None, 0, [])
    signals.clean_up(runner)
    assert cleans == []
