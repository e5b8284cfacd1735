"""Clock offsets: the smallest round trip's midpoint, its uncertainty, and the record."""

from __future__ import annotations

import json
import sys

import pytest

from mcclab.testbed import clocks
from mcclab.testbed.clocks import (
    ClockOffset,
    Sample,
    offset_from,
    read_clocks,
    sample_over,
    write_clocks,
)
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.ssh import Ssh, SshError


def test_offset_uses_the_smallest_round_trip():
    samples = [
        # rtt 0.2: a reading skewed by a slow answer
        Sample(100.0, 10.0, 100.2, 10.2, 105.19, 50.19),
        # rtt 0.02: the midpoint is 100.51 (real) and 20.51 (monotonic)
        Sample(100.5, 20.5, 100.52, 20.52, 105.51, 60.51),
        Sample(101.0, 30.0, 101.05, 30.05, 106.0, 70.0),
    ]
    off = offset_from("d1", "root@h", samples)
    assert off.realtime_offset_s == pytest.approx(5.0)
    assert off.monotonic_offset_s == pytest.approx(40.0)
    assert off.rtt_s == pytest.approx(0.02)
    assert off.uncertainty_s == pytest.approx(0.01)
    assert off.samples == 3
    # any order: the choice is by round trip, not position
    assert offset_from("d1", "root@h", samples[::-1]) == off


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="d1: no clock samples"):
        offset_from("d1", "h", [])


def test_the_true_offset_lies_within_the_uncertainty(monkeypatch):
    # A host whose wall clock is 2.5 s ahead, whose monotonic clock is 12345.6 s ahead
    # (it booted that much earlier) and whose boot clock is 12345.6 + 40 s ahead (it
    # slept 40 s since), answering at some point inside each round trip.
    now = [1000.0]

    def ask() -> str:
        now[0] += 0.003  # the question travels
        mono = now[0] - 900.0 + 12345.6
        answer = f"{now[0] + 2.5!r} {mono!r} {mono + 40.0!r}"
        now[0] += 0.001
        return answer

    monkeypatch.setattr(clocks, "_clocks", lambda: (now[0], now[0] - 900.0, now[0] - 900.0))
    off = offset_from("x", "h", sample_over(ask, 5))
    assert off.rtt_s == pytest.approx(0.004)
    assert abs(off.realtime_offset_s - 2.5) <= off.uncertainty_s + 1e-9
    assert abs(off.monotonic_offset_s - 12345.6) <= off.uncertainty_s + 1e-9
    assert off.boottime_offset_s is not None
    assert abs(off.boottime_offset_s - 12385.6) <= off.uncertainty_s + 1e-9


def test_a_garbled_answer_is_refused():
    with pytest.raises(SshError, match="unexpected clock answer"):
        sample_over(lambda: "oops", 1)
    # an answer without the boot clock (an old reader) or with a word that is no number
    with pytest.raises(SshError, match="unexpected clock answer"):
        sample_over(lambda: "1.0 2.0", 1)
    with pytest.raises(SshError, match="unexpected clock answer"):
        sample_over(lambda: "1.0 2.0 x", 1)


def test_clocks_json_round_trip(tmp_path):
    offsets = {"d1": ClockOffset("d1", "root@h", 0.5, -0.25, 0.001, 0.002, 9, -0.2)}
    moved = [{"node": "d1", "direction": "to-host", "clock": "monotonic", "what": "--t0 of x",
              "offset_s": -0.25, "uncertainty_s": 0.001, "controller_s": 5.0, "host_s": 4.75}]
    path = write_clocks(tmp_path, offsets, moved)
    assert path.name == "clocks.json"
    assert read_clocks(tmp_path) == offsets
    assert json.loads(path.read_text())["translations"] == moved
    assert read_clocks(tmp_path / "none") == {}
    # a clocks.json without boot-clock offsets still reads
    old = {"hosts": {"d1": {"node": "d1", "host": "h", "realtime_offset_s": 0.0,
                            "monotonic_offset_s": 1.0, "uncertainty_s": 0.1, "rtt_s": 0.2,
                            "samples": 9}}}
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "clocks.json").write_text(json.dumps(old))
    assert read_clocks(tmp_path / "old")["d1"].boottime_offset_s is None


def test_measure_over_a_local_stand_in_client(tmp_path):
    # The 'ssh' runs the reader right here: the offset to our own clock is within the
    # uncertainty, which is half a (tiny) round trip.
    script = tmp_path / "fake_ssh.py"
    script.write_text("import os, sys\nargs = sys.argv[1:]\nrest = args[args.index('--') + 2:]"
                      "\nos.execvp('sh', ['sh', '-c', ' '.join(rest)])\n")
    inv = Inventory(source="i", format="emulab", hosts={"h": Host(address="x")},
                    ssh_command=(sys.executable, str(script)))
    off = clocks.measure(Ssh(inv, tmp_path), "h", count=5, python=sys.executable)
    assert off.samples == 5
    assert 0 < off.rtt_s < 0.5
    assert abs(off.realtime_offset_s) <= off.uncertainty_s + 0.002
    assert abs(off.monotonic_offset_s) <= off.uncertainty_s + 0.002
    assert off.boottime_offset_s is not None
    assert abs(off.boottime_offset_s) <= off.uncertainty_s + 0.002
