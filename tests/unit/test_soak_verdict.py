"""The soak's judges (bench/soak.py): what counts as a lost sample and as growth."""

from __future__ import annotations

import csv
import gzip
import os
from pathlib import Path

from bench.soak import fd_growth, growth, lost_samples, sample_process

FIELDS = ["time", "metric", "instance", "node", "value"]


def write_metrics(path: Path, rows: list[tuple[float, str, str, str, str]]) -> Path:
    with gzip.open(path, "wt", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIELDS)
        writer.writerows(rows)
    return path


def test_lost_samples_counts_failures_and_missing_rounds_after_the_first_answer(tmp_path):
    rows = []
    # agent a: not listening at 0 and 1 s (start-up), then a failed scrape at 6 s
    for t in range(11):
        rows.append((100.0 + t, "up", "a:9464", "h1", "0" if t in (0, 1, 6) else "1"))
        if t not in (0, 1, 6):
            rows.append((100.0 + t, "mcc_x", "a:9464", "h1", "1"))
    # agent b: answers every scrape it got, but the rounds at 4 and 5 s have no row
    for t in range(11):
        if t not in (4, 5):
            rows.append((100.0 + t, "up", "b:9464", "h2", "1"))
            rows.append((100.0 + t, "mcc_x", "b:9464", "h2", "1"))
    # the exporter answers every scrape; one route's series is absent from 3 to 7 s
    for t in range(11):
        rows.append((100.0 + t, "up", "e:9463", "", "1"))
        if not 3 <= t <= 7:
            rows.append((100.0 + t, "mcc_route", "e:9463", "r0", "5"))
    got = lost_samples(write_metrics(tmp_path / "m.csv.gz", rows))
    assert got == {"targets": 3, "scrapes": 31, "failed_before_first_answer": 2, "lost": 3,
                   "series_pauses": 3}  # a's 6 s, b's 4-5 s; a and b's series, the route


def test_lost_samples_with_every_scrape_answered_loses_nothing(tmp_path):
    rows = [(100.0 + t, "up", "a:9464", "h1", "1") for t in range(5)]
    got = lost_samples(write_metrics(tmp_path / "m.csv.gz", rows))
    assert got["lost"] == 0 and got["targets"] == 1 and got["scrapes"] == 5


def test_growth_leaves_database_descriptors_out_of_the_judged_count():
    rows = []
    for t in range(10):
        # Prometheus: 7 other descriptors throughout, its database's files 4 -> 10
        rows.append({"t": float(t), "kind": "prometheus", "rss_kb": 1000, "fds": 11 + (t // 5) * 6,
                     "db_fds": 4 + (t // 5) * 6})
        # a leaking process: 10 -> 20 descriptors, none into a database
        rows.append({"t": float(t), "kind": "leaky", "rss_kb": 1000, "fds": 10 + (t // 5) * 10,
                     "db_fds": 0})
    got = growth(rows, settle=0.0, end=9.0)
    prom, leaky = got["prometheus"], got["leaky"]
    assert (prom["fds_start"], prom["fds_end"], prom["fds_growth"]) == (7, 7, 0.0)
    assert (prom["db_fds_start"], prom["db_fds_end"]) == (4, 10)
    assert fd_growth(prom) == 0.0
    assert fd_growth(leaky) == 1.0  # 10 -> 20: judged


def test_sample_process_counts_files_open_in_the_database(tmp_path):
    database = tmp_path / "tsdb"
    (database / "block").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    with (database / "block" / "index").open("w"), outside.open("w"):
        rss, fds, anon, in_db = sample_process(os.getpid(), database)
        assert in_db == 1 and fds > in_db and rss > 0 and anon > 0
        assert sample_process(os.getpid())[3] == 0  # no database: nothing counted
