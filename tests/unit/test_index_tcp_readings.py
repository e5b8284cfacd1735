"""results/index.html: Linux's default TCP as a second reading beside each verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from synthetic_runs import rows, write_run

from mcclab.analysis.index import build_index, load_entries, role_of, select

REF = {"kind": "throughput", "label": "steady throughput", "source": "Fig. 9: 2 Mbit/s",
       "flow": "m", "node": "r1", "paper": "2Mbit", "tolerance": "10%"}


def run(results: Path, experiment: str, run_id: str, bps: float, model: str | None, *,
        started: str, profile: str = "quick", status: str = "complete") -> Path:
    """A synthetic run of ``experiment`` under TCP ``model`` whose flow m reaches r1 at ``bps``."""
    folder = results / experiment / run_id
    write_run(folder, rows("m", "multicast", "r1", bps, range(1, 61)), references=[REF],
              flows=[{"name": "m", "type": "multicast", "protocol": "webrc"}],
              profile=profile, status=status, spec={"tcp": {"model": model}} if model else None)
    info = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**info, "experiment": experiment,
                                                 "started": started}))
    (folder / "report.html").write_text("<!doctype html><title>run</title>")
    return folder


def readings_sweep(results: Path, experiment: str, runs: list[Path], models: list[str]) -> Path:
    """A ``tcp-readings`` sweep over tcp.model listing ``runs``."""
    sweep = results / experiment / "sweep-20261126-120000-abcd"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({
        "experiment": experiment, "sweep": "tcp-readings", "profile": "quick",
        "over": {"tcp.model": models}, "status": "complete",
        "started": "2026-11-26T12:00:00+00:00", "planned": len(runs),
        "runs": [{"dir": f"../{r.name}", "set": {"tcp.model": m}, "status": "complete"}
                 for r, m in zip(runs, models, strict=True)]}))
    return sweep


def entries(results: Path):
    picked = select(results)
    return {e.experiment: e for e in load_entries([f for f, _ in picked], dict(picked),
                                                  select(results, role="reading"))}


def test_roles_from_the_models_file():
    assert role_of(None) == "verdict"
    assert role_of("webrc") == "verdict" and role_of("stair") == "verdict"
    assert role_of("linux-reno") == "reading"
    assert role_of("linux-cubic") == "other"
    assert role_of("a-model-of-a-newer-mcclab") == "verdict"


def test_a_newer_linux_run_is_the_reading_not_the_verdict(tmp_path):
    results = tmp_path / "results"
    paper = run(results, "default", "20261126-100000-papr", 2.1e6, "webrc",
                started="2026-11-26T10:00:00+00:00")
    linux = run(results, "default", "20261126-110000-linx", 1.5e6, "linux-reno",
                started="2026-11-26T11:00:00+00:00")
    run(results, "default", "20261126-120000-cubc", 0.2e6, "linux-cubic",
        started="2026-11-26T12:00:00+00:00")  # exploration: neither verdict nor reading
    entry = entries(results)["default"]
    assert entry.folder == paper and entry.tcp_model == "webrc"
    assert entry.reading is not None and entry.reading.folder == linux
    (row,) = entry.rows
    assert row.verdict == "pass" and row.mean == pytest.approx(2.1e6)
    assert row.linux == pytest.approx(1.5e6) and row.linux_inside is False

    page = build_index(results).read_text()
    assert "Linux TCP (second reading)" in page
    assert 'href="default/20261126-110000-linx/report.html"' in page
    cell = re.search(r'<td class="num linux">([^<]*)<div class="why">(\w+) the band', page)
    assert cell and cell.groups() == ("1.5 Mbit/s", "outside")
    assert "cubc" not in page
    # the verdict's counts are the paper model's alone
    assert "1 pass, 0 fail" in page.replace("\n", " ")


def test_a_tcp_readings_sweep_gives_both(tmp_path):
    results = tmp_path / "results"
    paper = run(results, "webrc-fig9b", "20261126-120001-papr", 1.95e6, "webrc",
                started="2026-11-26T12:00:01+00:00")
    linux = run(results, "webrc-fig9b", "20261126-120500-linx", 1.9e6, "linux-reno",
                started="2026-11-26T12:05:00+00:00")
    readings_sweep(results, "webrc-fig9b", [paper, linux], ["webrc", "linux-reno"])
    entry = entries(results)["webrc-fig9b"]
    assert entry.folder == paper and entry.reading.folder == linux
    assert entry.rows[0].linux == pytest.approx(1.9e6) and entry.rows[0].linux_inside is True


def test_runs_of_other_sweeps_stay_with_their_sweep(tmp_path):
    results = tmp_path / "results"
    point = run(results, "default", "20261126-120001-pnt1", 2.0e6, "linux-reno",
                started="2026-11-26T12:00:01+00:00")
    sweep = results / "default" / "sweep-20261126-120000-cccc"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({
        "experiment": "default", "sweep": "tcp-cc", "profile": "quick",
        "over": {"tcp.model": ["linux-reno"], "flows.tcp.cc": ["reno"]}, "status": "complete",
        "runs": [{"dir": f"../{point.name}", "set": {}, "status": "complete"}]}))
    assert select(results, role="reading") == []


def test_only_a_linux_run_gives_an_entry_without_verdicts(tmp_path):
    results = tmp_path / "results"
    run(results, "stair-fig9", "20261126-110000-linx", 1.0e6, "linux-reno",
        started="2026-11-26T11:00:00+00:00")
    entry = entries(results)["stair-fig9"]
    assert entry.rows == [] and "only Linux's default TCP" in entry.note
    page = build_index(results).read_text()
    assert "never the verdict" in page and "0 results" in page


def test_a_verdict_without_a_reading_says_so_and_no_tcp_no_column(tmp_path):
    results = tmp_path / "results"
    run(results, "default", "20261126-100000-papr", 2.0e6, "webrc",
        started="2026-11-26T10:00:00+00:00")
    page = build_index(results).read_text()
    assert "no Linux TCP reading yet" in page and ">not run<" in page
    other = tmp_path / "other"
    run(other, "webrc-fig6", "20261126-100000-util", 2.0e6, None,
        started="2026-11-26T10:00:00+00:00")
    page = build_index(other).read_text()
    assert "Linux TCP (second reading)" not in page and "not run" not in page


def test_an_interrupted_reading_is_shown_with_its_status_when_none_completed(tmp_path):
    results = tmp_path / "results"
    run(results, "default", "20261126-100000-papr", 2.0e6, "webrc",
        started="2026-11-26T10:00:00+00:00")
    run(results, "default", "20261126-110000-linx", 1.0e6, "linux-reno",
        started="2026-11-26T11:00:00+00:00", status="interrupted")
    entry = entries(results)["default"]
    assert entry.reading.status == "interrupted"
    assert "· interrupted" in build_index(results).read_text()
