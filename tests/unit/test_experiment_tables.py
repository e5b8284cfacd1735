"""Per-second tables from raw logs, on captured samples."""

from __future__ import annotations

import json

import pytest

from mcclab.experiment.runner import IperfWatch
from mcclab.experiment.tables import (
    agent_series,
    iperf_intervals,
    iperf_series,
    latest_interval_ends,
    per_second,
    protocol_table,
)

IPERF_SERVER = """-----------------------------------------------------------
Server listening on 5202 (test #1)
-----------------------------------------------------------
Accepted connection from 10.0.1.2, port 41234
[  5] local 10.0.4.2 port 5202 connected to 10.0.1.2 port 41236
[ ID] Interval           Transfer     Bitrate
[  5]   0.00-1.00   sec   250 KBytes  2000 Kbits/sec
[  5]   1.00-2.00   sec   250 KBytes  2000 Kbits/sec
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate
[  5]   0.00-2.00   sec   500 KBytes  2000 Kbits/sec                  receiver
Accepted connection from 10.0.1.2, port 41240
[  5] local 10.0.4.2 port 5202 connected to 10.0.1.2 port 41242
[  5]   0.00-1.00   sec   122 KBytes  1000 Kbits/sec  0.012 ms  2/127 (1.6%)
"""


def test_iperf_server_report_becomes_cumulative_series(tmp_path):
    log = tmp_path / "server.txt"
    log.write_text(IPERF_SERVER)
    s = iperf_series(log, "t", "tcp", "d2", test_starts=[100.0, 103.0])
    assert s.at(101.0)[0] == 250_000 and s.at(102.0)[0] == 500_000
    assert s.at(102.5)[0] == 500_000  # flat between tests
    assert s.at(104.0)[0] == 625_000 and s.at(104.0)[2] == 2  # UDP lost count
    table = per_second([s], t0=100.0, seconds=4)
    assert list(table["throughput_bps"]) == [2e6, 2e6, 0.0, 1e6]


def test_agent_stats_records_are_resampled_on_experiment_seconds(tmp_path):
    log = tmp_path / "r.jsonl"
    records = [{"t": 11.0 + k, "event": "stats", "total_rx_bytes": 125_000 * k,
                "total_rx_packets": 125 * k, "total_lost": k} for k in range(6)]
    for rec in records[1:]:  # the core's gauges ride on the stats records from t = 12 s
        rec["core"] = {"subscription_level": 3}
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n{truncated")
    s = agent_series(log, "m", "d1")
    table = per_second([s], t0=10.0, seconds=5)
    # Before the agent's first record nothing was received; then 1 Mbit/s.
    assert table["throughput_bps"].iloc[0] == 0.0
    assert list(table["throughput_bps"].iloc[1:4]) == [1e6, 1e6, 1e6]
    assert table["level"].iloc[1] == 3.0 and table["level"].iloc[0] == ""


def test_protocol_table_holds_each_cores_last_gauges_per_second(tmp_path):
    log = tmp_path / "r.jsonl"
    records = [{"t": 10.5 + k, "event": "stats", "core": {"artt_seconds": 0.1 * k, "nwc": k}}
               for k in range(4)]
    records.insert(1, {"t": 11.0, "event": "join", "channel": 1})
    records[-1]["core"]["bad"] = "text"  # only numbers make rows
    records[-1]["timer_late_max_ms"] = 12.5  # the runtime's, beside the core's gauges
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    table = protocol_table([(log, "w", "r1", "receiver"), (tmp_path / "none", "w", "s", "sender")],
                           t0=10.0, seconds=5)
    artt = table[table["name"] == "artt_seconds"]
    # second k holds the record at or before 10 + k: 10.5 -> t1, 11.5 -> t2, ...
    assert list(artt["t"]) == [1, 2, 3, 4, 5]
    assert [round(v, 3) for v in artt["value"]] == [0.0, 0.1, 0.2, 0.3, 0.3]
    assert set(table["node"]) == {"r1"} and set(table["role"]) == {"receiver"}
    assert "bad" not in set(table["name"])
    late = table[table["name"] == "timer_late_max_ms"]
    assert list(late["t"]) == [4, 5] and set(late["value"]) == {12.5}  # from 13.5 s


def test_latest_interval_ends_follow_each_test(tmp_path):
    text = (
        "Server listening on 5201\n"
        "Accepted connection from 10.0.0.1, port 40000\n"
        "[  5]   0.00-1.00   sec   100 KBytes   819 Kbits/sec\n"
        "[  5]   1.00-2.00   sec   100 KBytes   819 Kbits/sec\n"
        "- - - - - - - - -\n"
        "[  5]   0.00-2.00   sec   200 KBytes   819 Kbits/sec   receiver\n"
        "Accepted connection from 10.0.0.1, port 40002\n"
        "[  5]   0.00-1.00   sec   100 KBytes   819 Kbits/sec\n"
    )
    assert latest_interval_ends(text) == [2.0, 1.0]
    assert latest_interval_ends("Server listening on 5201\n") == []


def test_iperf_watch_places_a_late_test_where_it_began(tmp_path):
    log = tmp_path / "server.txt"
    log.write_text("Accepted connection from 10.0.0.1, port 40000\n")
    watch = IperfWatch(log)
    watch.poll(20.3)
    assert watch.starts == []
    # The client was due at 20 s; its first report appears at 22.6 s: it began at 21.6 s.
    with log.open("a") as fh:
        fh.write("[  5]   0.00-1.00   sec   100 KBytes   819 Kbits/sec\n")
    watch.poll(22.6)
    watch.poll(22.65)  # no new line: nothing changes
    with log.open("a") as fh:
        fh.write("[  5]   1.00-2.00   sec   100 KBytes   819 Kbits/sec\n")
    watch.poll(23.6)
    assert watch.starts == [pytest.approx(21.6)]


def test_iperf_watch_counts_the_tests_of_a_rewritten_log_anew(tmp_path):
    log = tmp_path / "server.txt"
    report = "[  5]   {:.2f}-{:.2f}   sec   100 KBytes   819 Kbits/sec\n"
    log.write_text("Accepted connection from 10.0.0.1, port 40000\n"
                   + "".join(report.format(k, k + 1) for k in range(3))
                   + "- - - - - - - - -\n" + report.format(0, 3).rstrip() + "   receiver\n"
                   + "Accepted connection from 10.0.0.1, port 40002\n" + report.format(0, 1))
    watch = IperfWatch(log)
    watch.poll(30.0)
    assert watch.ends == [3.0, 1.0] and watch.starts == [27.0, 29.0]
    # The server's log is written anew, shorter: one test, its first report at 40 s.
    log.write_text("Accepted connection from 10.0.0.1, port 40004\n" + report.format(0, 1))
    watch.poll(40.0)
    assert watch.ends == [1.0] and watch.starts == [pytest.approx(39.0)]
    # and it goes on from there as any log
    with log.open("a") as fh:
        fh.write(report.format(1, 2))
    watch.poll(41.0)
    assert watch.ends == [2.0] and watch.starts == [pytest.approx(39.0)]


def test_link_samples_are_written_as_they_come_and_read_back_as_one_table(tmp_path):
    # Rows appended second by second read back as the table a DataFrame of all of them
    # would have written, and each second is on disk as soon as it was appended (a
    # runner killed mid-run keeps its table up to there).
    import io

    import pandas as pd

    from mcclab.experiment.tables import CsvAppender

    def second(t: int) -> list[dict]:
        return [{"t": t, "link": f"r0-h{i}", "pkts_out": 10 * t + i, "bytes_out": 1e4 * t,
                 "queue_pkts": 0.5 * i, "drops": None if i else 0} for i in range(3)]

    path = tmp_path / "tables" / "links.csv"
    table = CsvAppender(path)
    table.append([])
    assert not path.exists()  # no columns yet: nothing written
    for t in range(1, 4):
        table.append(second(t))
        assert len(pd.read_csv(path)) == 3 * t
    table.close()
    everything = [row for t in range(1, 4) for row in second(t)]
    whole = pd.DataFrame(everything).to_csv(index=False)  # how links.csv was written before
    pd.testing.assert_frame_equal(pd.read_csv(path), pd.read_csv(io.StringIO(whole)))
    assert table.rows == 9


def test_a_log_follower_reads_only_what_was_appended_and_waits_for_whole_lines(tmp_path):
    # The runner and the exporter look at every iperf3 log once a second: re-reading
    # each whole log cost more the longer the run. The follower reads on from where
    # it stopped, so what was there before is never read again.
    from mcclab.experiment.tables import IperfFollower, LogFollower

    log = tmp_path / "server.txt"
    follower = LogFollower(log)
    assert follower.new_lines() == []  # not there yet
    log.write_text("Accepted connection from 10.0.0.1, port 40000\n[  5]   0.00-1.0")
    assert follower.new_lines() == ["Accepted connection from 10.0.0.1, port 40000"]
    # the first line changed in place (same length): already read, so not seen again
    log.write_text("Accepted connection from 10.9.9.9, port 40000\n[  5]   0.00-1.00   sec   "
                   "100 KBytes   819 Kbits/sec\n")
    assert follower.new_lines() == ["[  5]   0.00-1.00   sec   100 KBytes   819 Kbits/sec"]
    assert follower.new_lines() == []
    log.write_text("Server listening on 5201\n")  # shorter: a new file, read from its start
    assert follower.new_lines() == ["Server listening on 5201"] and follower.restarted

    # parsed piece by piece, a log gives what one parse of all of it gives
    text = ("Server listening on 5201\nAccepted connection from 10.0.0.1, port 40000\n"
            "[  5]   0.00-1.00   sec   100 KBytes   819 Kbits/sec\n"
            "[  5]   1.00-2.00   sec   100 KBytes   819 Kbits/sec\n- - - - - - - - -\n"
            "[  5]   0.00-2.00   sec   200 KBytes   819 Kbits/sec   receiver\n"
            "Accepted connection from 10.0.0.1, port 40002\n"
            "[  5]   0.00-1.00   sec   50.0 KBytes   410 Kbits/sec\n")
    piecewise = tmp_path / "piecewise.txt"
    reports = IperfFollower(piecewise)
    got = []
    for cut in range(0, len(text) + 1, 7):
        piecewise.write_text(text[:cut])
        got += reports.new_intervals()
    piecewise.write_text(text)
    got += reports.new_intervals()
    assert got == iperf_intervals(text) and len([g for g in got if g is not None]) == 3
