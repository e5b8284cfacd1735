"""The whole-run on/off UDP source and its sink: the send schedule, and a run on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcclab.experiment.tables import agent_series
from mcclab.traffic.udp_onoff import read_schedule, send_offsets


def test_send_offsets_follow_the_rate_inside_each_period_only():
    periods = [(0.0, 1.0), (2.5, 2.62), (4.0, 4.0401)]
    rate, size = 200e3, 1000  # one datagram every 40 ms
    times = list(send_offsets(periods, rate, size))
    per_period = [[t for t in times if a <= t < b] for a, b in periods]
    assert [len(p) for p in per_period] == [25, 3, 2]  # ceil(length / 40 ms)
    assert sum(map(len, per_period)) == len(times)  # nothing outside a period
    assert per_period[0][0] == 0.0 and per_period[1][0] == 2.5  # each period starts at once
    gaps = {round(b - a, 9) for a, b in zip(per_period[0], per_period[0][1:], strict=False)}
    assert gaps == {0.04}
    # over a long period the bytes sent match the rate to one datagram
    long = list(send_offsets([(0.0, 100.0)], rate, size))
    assert abs(len(long) * size * 8 - rate * 100) <= size * 8


def test_a_period_shorter_than_one_gap_still_sends_one_datagram():
    assert list(send_offsets([(1.0, 1.001)], 200e3, 1000)) == [1.0]


@pytest.mark.parametrize("periods", [[[0, 2], [1, 3]], [[2, 1]], [[-1, 1]]])
def test_read_schedule_refuses_overlapping_reversed_or_negative_periods(tmp_path, periods):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"periods": periods}))
    with pytest.raises(ValueError, match="ordered, disjoint"):
        read_schedule(str(path))


def _free_udp_port() -> int:
    """A UDP port nobody holds on loopback right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_source_and_sink_on_loopback_count_every_datagram(tmp_path):
    port = _free_udp_port()
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"periods": [[0, 0.3], [0.8, 1.05]]}))
    tool = [sys.executable, "-m", "mcclab.traffic.udp_onoff"]
    sink_log, source_log = tmp_path / "sink.jsonl", tmp_path / "source.jsonl"
    sink = subprocess.Popen([*tool, "recv", "--bind", "127.0.0.1", "--port", str(port),
                             "--log", str(sink_log)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        subprocess.run([*tool, "send", "--dest", "127.0.0.1", "--port", str(port),
                        "--rate", "400000", "--size", "500", "--schedule", str(schedule),
                        "--log", str(source_log)], check=True, timeout=30)
        expected = 30 + 25  # 10 ms apart over 0.3 s and 0.25 s
        done = [json.loads(line) for line in source_log.read_text().splitlines()][-1]
        assert done["event"] == "done" and done["sent"] == expected
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the sink reports once a second
            stats = [json.loads(line) for line in sink_log.read_text().splitlines()]
            if stats[-1]["total_rx_packets"] == expected:
                break
            time.sleep(0.1)
    finally:
        os.killpg(sink.pid, signal.SIGTERM)
        sink.wait(timeout=10)
    last = [json.loads(line) for line in sink_log.read_text().splitlines()][-1]
    assert last["total_rx_packets"] == expected and last["total_lost"] == 0
    assert last["total_rx_bytes"] == expected * 500
    series = agent_series(sink_log, "o", "d", "onoff")
    assert series.kind == "onoff" and series.bytes[-1] == expected * 500


def test_sink_counts_a_gap_in_the_sequence_as_loss(tmp_path):
    port = _free_udp_port()
    log = tmp_path / "sink.jsonl"
    sink = subprocess.Popen([sys.executable, "-m", "mcclab.traffic.udp_onoff", "recv", "--bind",
                             "127.0.0.1", "--port", str(port), "--log", str(log)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for seq in (0, 1, 4, 5):  # 2 and 3 never sent: lost on the way
                s.sendto(struct.pack("!Q", seq) + bytes(92), ("127.0.0.1", port))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            last = json.loads(log.read_text().splitlines()[-1])
            if last["total_rx_packets"] == 4:
                break
            time.sleep(0.1)
    finally:
        os.killpg(sink.pid, signal.SIGTERM)
        sink.wait(timeout=10)
    last = json.loads(Path(log).read_text().splitlines()[-1])
    assert (last["total_rx_packets"], last["total_lost"], last["total_rx_bytes"]) == (4, 2, 400)


def test_a_source_started_late_keeps_the_runs_schedule(tmp_path):
    # Time 0 was 0.5 s ago and the schedule's origin is 0.2 s into the run: of the
    # 0.3-s on-period (30 datagrams 10 ms apart) at origin + 0.0 .. 0.3, only the
    # ones due after the start are sent, none in a burst, and the second period on time.
    port = _free_udp_port()
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"origin_s": 0.2, "periods": [[0, 0.3], [0.6, 0.8]]}))
    log = tmp_path / "source.jsonl"
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", port))
    t0 = time.monotonic() - 0.5
    try:
        subprocess.run([sys.executable, "-m", "mcclab.traffic.udp_onoff", "send", "--dest",
                        "127.0.0.1", "--port", str(port), "--rate", "400000", "--size", "500",
                        "--schedule", str(schedule), "--log", str(log), "--t0", repr(t0)],
                       check=True, timeout=30)
    finally:
        sock.close()
    start, done = (json.loads(line) for line in log.read_text().splitlines())
    assert start["origin"] == pytest.approx(t0 + 0.2)
    late = start["t"] - (t0 + 0.2)  # how far into the first period the source began
    assert 0.3 <= late < 0.3 + 0.3  # this Python's start-up
    assert done["skipped"] >= 29  # at least the datagrams due before 0.29
    assert done["sent"] + done["skipped"] == 30 + 20
    assert done["sent"] >= 20  # the second period whole
    assert done["t"] == pytest.approx(t0 + 0.2 + 0.8, abs=0.1)
