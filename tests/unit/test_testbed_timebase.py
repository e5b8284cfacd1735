"""Times crossing between the controller's clock and a host's: the run's ``--t0`` out to a
host, armed starts' marks back, with the sign of the offset pinned by a host far ahead."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcclab.experiment.starts import StartRecord, armed_argv
from mcclab.testbed.timebase import (
    Translation,
    armed_marks,
    marks_to_controller,
    program,
    to_host_argv,
)

AHEAD = 12345.6  # a host booted 3.4 hours before the controller


def test_t0_moves_onto_a_host_clock_ahead():
    argv = ["python", "-m", "agents.host", "--plan", "p.json", "--t0", "100.250000"]
    out, moved = to_host_argv(argv, AHEAD)
    assert out[:5] == argv[:5] and out[5] == "--t0"
    # the host's clock reads AHEAD more at the same instant
    assert float(out[6]) == pytest.approx(100.25 + AHEAD, abs=1e-6)
    assert moved == [("--t0", 100.25, pytest.approx(100.25 + AHEAD))]


def test_t0_moves_onto_a_host_clock_behind_and_in_either_spelling():
    out, moved = to_host_argv(["x", "--t0=20000.5", "--rate", "100"], -AHEAD)
    assert out == ["x", f"--t0={20000.5 - AHEAD:.6f}", "--rate", "100"]
    assert len(moved) == 1


def test_other_words_and_odd_values_stay():
    argv = ["iperf3", "-c", "10.0.0.1", "-t", "30", "--t0"]  # a trailing flag, no value
    assert to_host_argv(argv, AHEAD) == (argv, [])
    assert to_host_argv(["x", "--t0", "soon"], AHEAD) == (["x", "--t0", "soon"], [])
    # a zero offset (stand-ins on one kernel) changes nothing but the number's format
    assert to_host_argv(["x", "--t0", "5"], 0.0)[0] == ["x", "--t0", "5.000000"]


def test_program_names():
    assert program(["/opt/venv/bin/python", "-m", "agents.host", "--t0", "1"]) == "agents.host"
    assert program(["/usr/bin/iperf3", "-c", "x"]) == "iperf3"
    assert program([]) == ""


def test_armed_marks_finds_the_wrappers_file():
    argv = armed_argv(("iperf3", "-c", "10.0.0.1"), 5.0, "3", Path("/run/logs/armed.txt"))
    assert armed_marks(argv) == "/run/logs/armed.txt"
    assert armed_marks(("sh", "-c", "echo", "mcclab-armed")) is None
    assert armed_marks(("iperf3", "-s")) is None


def test_marks_move_back_from_a_host_ahead():
    text = f"3 {1000.0 + AHEAD:.2f}\n7 {1002.5 + AHEAD:.2f}\ngarbage\n"
    out, moved = marks_to_controller(text, AHEAD)
    lines = out.splitlines()
    assert moved == 2 and lines[2] == "garbage" and out.endswith("\n")
    assert lines[0].split()[0] == "3" and float(lines[0].split()[1]) == pytest.approx(1000.0)
    assert float(lines[1].split()[1]) == pytest.approx(1002.5)


def test_starts_csv_lags_are_right_across_clocks():
    # The controller's boot clock read 500.0 at the run's t0. A client armed for 5 s on a
    # host whose boot clock is AHEAD seconds ahead began 0.2 s late: its mark says
    # 505.2 + AHEAD. Translated back, its lag is 0.2 s, not AHEAD + 0.2.
    record = StartRecord(boot_t0=500.0)
    record.note(0, 5.0, "armed")
    text, _ = marks_to_controller(f"0 {505.2 + AHEAD:.2f}\n", AHEAD)
    record.take_marks({k: float(v) for k, v in (ln.split() for ln in text.splitlines())})
    assert record.starts[0].lag == pytest.approx(0.2, abs=1e-6)


def test_translation_record_leaves_out_what_does_not_apply():
    sent = Translation("s1", "to-host", "monotonic", "--t0 of agents.host", AHEAD, 4e-5,
                       controller_s=1.0, host_s=1.0 + AHEAD)
    assert sent.record() == {"node": "s1", "direction": "to-host", "clock": "monotonic",
                             "what": "--t0 of agents.host", "offset_s": AHEAD,
                             "uncertainty_s": 4e-5, "controller_s": 1.0,
                             "host_s": 1.0 + AHEAD}
    back = Translation("s1", "to-controller", "boottime", "logs/a.txt", AHEAD, 4e-5, values=2)
    assert "controller_s" not in back.record() and back.record()["values"] == 2
