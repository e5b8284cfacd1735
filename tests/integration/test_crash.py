"""A short SIGKILL campaign (bench/crash.py): `mcclab run` killed at three points of a run,
then `mcclab clean` leaves nothing of that lab, of any kind; `make bench-crash` runs 20."""

from __future__ import annotations

import random

import pytest

from bench.crash import trial

pytestmark = [pytest.mark.root, pytest.mark.timeout(420)]


@pytest.mark.parametrize("point", ["bring-up", "mid-run", "teardown"])
def test_sigkill_then_clean_leaves_nothing(point):
    row = trial(point, random.Random(point), "ormcc-smoke", ("duration=12s", "warmup=3s"))
    assert row["killed_after"] is not None, f"the run never reached {point}: {row}"
    assert row["clean_rc"] == 0, row["clean_out"]
    assert row["leftovers"] == [], row
