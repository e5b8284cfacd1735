"""A short SIGKILL campaign (bench/crash.py): `mcclab run` killed at three points of a run,
then `mcclab clean` leaves nothing of that lab, of any kind; `make bench-crash` runs 20."""

from __future__ import annotations

import os
import random

import pytest

from bench.crash import trial

pytestmark = [pytest.mark.root, pytest.mark.timeout(420)]
LOCK_WAIT = float(os.environ.get("MCCLAB_TEST_LOCK_WAIT", "1800"))


@pytest.mark.parametrize("point", ["bring-up", "mid-run", "teardown"])
def test_sigkill_then_clean_leaves_nothing(point):
    row = trial(point, random.Random(point), "ormcc-smoke", ("duration=12s", "warmup=3s"))
    assert row["killed_after"] is not None, f"the run never reached {point}: {row}"
    assert row["clean_rc"] == 0, row["clean_out"]
    assert row["leftovers"] == [], row


def test_sigkill_of_agent_hosts_and_the_run_then_clean_leaves_nothing():
    # Agent hosts (agents.host) killed outright mid-run, then their runner: `mcclab clean`
    # must find and remove everything of the lab as it does for per-agent processes.
    row = trial("mid-run", random.Random("host"), "ormcc-smoke",
                ("duration=12s", "warmup=3s", "agents.mode=host"), kill_first="agent host",
                timeout=LOCK_WAIT)  # queued behind other labs as long as conftest allows
    assert row["killed_after"] is not None, f"the run never reached mid-run: {row}"
    assert row["plan"].get("killed_first"), row
    assert row["clean_rc"] == 0, row["clean_out"]
    assert row["leftovers"] == [], row
