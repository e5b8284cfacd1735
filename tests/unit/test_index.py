"""results/index.html: the newest run or trials sweep per experiment, judged from its folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from synthetic_runs import agent_rows, rows, write_run

from mcclab.analysis.index import build_index, load_entries, newest, paper_of

REF = {"kind": "throughput", "label": "steady throughput", "source": "Fig. 4: 2 Mbit/s",
       "flow": "m", "node": "r1", "paper": "2Mbit", "tolerance": "10%"}


def run(results: Path, experiment: str, run_id: str, bps: float, *, protocol: str = "webrc",
        started: str = "2026-11-21T20:15:00+00:00", profile: str = "quick",
        label: str | None = None, report: bool = True, late: float | None = None) -> Path:
    """A synthetic run whose flow m reaches r1 at ``bps`` for 60 s (measured from 10 s);
    with ``late``, r1's receiver agent records its seconds, starting ``late`` s late."""
    folder = results / experiment / run_id
    ref = {**REF, "label": label or REF["label"]}
    agents = None if late is None else agent_rows(
        "m", "r1", "receiver", [(t + late + 0.05, 2.0) for t in range(1, 61)])
    write_run(folder, rows("m", "multicast", "r1", bps, range(1, 61)), references=[ref],
              flows=[{"name": "m", "type": "multicast", "protocol": protocol}],
              profile=profile, agents=agents)
    info = json.loads((folder / "run.json").read_text())
    info.update(experiment=experiment, started=started)
    (folder / "run.json").write_text(json.dumps(info))
    if report:
        (folder / "report.html").write_text("<!doctype html><title>run</title>")
    return folder


def trials(results: Path, experiment: str, rates: list[float],
           late: list[float | None] | None = None) -> Path:
    """A trials sweep over seeds whose runs measure the given rates (their agents
    ``late`` s late, as :func:`run`)."""
    sweep = results / experiment / "sweep-20261122-000000-aaaa"
    sweep.mkdir(parents=True)
    listed = []
    for seed, bps in enumerate(rates, start=1):
        folder = run(results, experiment, f"20261122-0000{seed:02d}-t{seed}", bps,
                     started=f"2026-11-22T00:00:{seed:02d}+00:00", profile="paper",
                     late=None if late is None else late[seed - 1])
        listed.append({"dir": f"../{folder.name}", "set": {"seed": seed}, "status": "complete"})
    (sweep / "sweep.json").write_text(json.dumps({
        "experiment": experiment, "sweep": "trials", "profile": "paper",
        "over": {"seed": list(range(1, len(rates) + 1))}, "status": "complete",
        "started": "2026-11-22T00:00:00+00:00", "planned": len(rates), "runs": listed}))
    (sweep / "report.html").write_text("<!doctype html><title>sweep</title>")
    return sweep


def test_paper_from_the_protocols():
    assert paper_of(["", "webrc"]) == "webrc"
    assert paper_of(["rlc"]) == "rlc"
    assert paper_of(["cbr"]) == "other"
    # a baseline the ORMCC paper compares with: its protocol names no paper, its name does
    assert paper_of(["pgmcc"], "ormcc-fig4-pgmcc") == "ormcc"
    assert paper_of(["tfmcc"], "tfmcc-alone") == "other"
    assert paper_of(["stair"], "ormcc-odd") == "stair"  # the protocol comes first


def test_newest_run_per_experiment_and_the_rows(tmp_path):
    results = tmp_path / "results"
    run(results, "webrc-a", "20261121-100000-old1", 1.0e6, started="2026-11-21T10:00:00+00:00")
    new = run(results, "webrc-a", "20261121-110000-new1", 2.1e6,
              started="2026-11-21T11:00:00+00:00")
    run(results, "rlc-b", "20261121-100000-rlc1", 1.0e6, protocol="rlc")
    picked = newest(results)
    assert new in picked and len(picked) == 2
    entries = {e.experiment: e for e in load_entries(picked)}
    row = entries["webrc-a"].rows[0]
    assert row.mean == pytest.approx(2.1e6)
    assert row.verdict == "pass" and row.margin == pytest.approx(0.5)
    assert not row.marginal
    assert entries["rlc-b"].rows[0].verdict == "fail"
    assert (entries["webrc-a"].paper, entries["rlc-b"].paper) == ("webrc", "rlc")


def test_trials_are_averaged_and_their_runs_are_not_picked_alone(tmp_path):
    results = tmp_path / "results"
    sweep = trials(results, "webrc-t", [1.5e6, 2.0e6, 2.5e6])
    picked = newest(results, profile="paper")
    assert picked == [sweep]
    (entry,) = load_entries(picked)
    row = entry.rows[0]
    assert entry.kind == "trials"
    assert row.runs == 3 and row.mean == pytest.approx(2.0e6)
    assert row.sd == pytest.approx(0.5e6)
    assert row.verdict == "pass"  # the mean is judged, as the paper judged its mean
    # only the quick profile: no trials of it, so nothing
    assert newest(results, profile="quick") == []


def test_index_page_groups_by_paper_links_reports_and_escapes(tmp_path):
    results = tmp_path / "results"
    run(results, "webrc-a", "20261121-110000-a", 2.19e6, label="<b>rate</b>")
    run(results, "stair-c", "20261121-110000-c", 2.0e6, protocol="stair", report=False)
    page = build_index(results).read_text()
    assert page.index("WEBRC") < page.index("STAIR")
    assert 'href="webrc-a/20261121-110000-a/report.html"' in page
    assert "stair-c/20261121-110000-c/report.html" not in page  # no report, no link
    assert "&lt;b&gt;rate&lt;/b&gt;" in page and "<b>rate</b>" not in page
    # 2.19 against 2 +- 10 %: a pass 0.01 from the edge of a 0.2-wide half band: marginal
    assert re.search(r"v-pass[^<]*>pass</span><span class=\"marginal\">marginal", page)
    assert "2 pass, 0 fail" in page.replace("\n", " ")


def test_the_newest_complete_run_is_shown_and_a_newer_failure_named(tmp_path):
    results = tmp_path / "results"
    good = run(results, "webrc-a", "20261121-100000-good", 2.0e6,
               started="2026-11-21T10:00:00+00:00")
    bad = run(results, "webrc-a", "20261121-110000-bad1", 0.5e6,
              started="2026-11-21T11:00:00+00:00")
    info = json.loads((bad / "run.json").read_text())
    (bad / "run.json").write_text(json.dumps({**info, "status": "killed"}))
    (entry,) = load_entries(newest(results))
    assert entry.folder == good and entry.rows[0].verdict == "pass"
    page = build_index(results).read_text()
    assert "newer, not complete: 20261121-110000-bad1 (killed)" in page
    # with no complete run at all, the newest is shown as it is
    (good / "run.json").write_text(json.dumps({**info, "status": "failed"}))
    assert newest(results) == [bad]


def test_quantities_without_a_criterion_are_counted_not_tabled(tmp_path):
    results = tmp_path / "results"
    folder = results / "webrc-r" / "20261121-110000-r"
    reported = {**REF, "label": "reported only"}
    del reported["tolerance"]
    write_run(folder, rows("m", "multicast", "r1", 2.0e6, range(1, 61)),
              references=[REF, reported],
              flows=[{"name": "m", "type": "multicast", "protocol": "webrc"}])
    (entry,) = load_entries(newest(results))
    assert [r.label for r in entry.rows] == ["steady throughput"] and entry.reported == 1
    assert "and 1 reported without a criterion" in build_index(results).read_text()


def test_a_partial_trials_sweep_is_a_result_that_says_how_many_trials_it_holds(tmp_path):
    results = tmp_path / "results"
    older = run(results, "webrc-t", "20261121-100000-one", 1.0e6, profile="paper",
                started="2026-11-21T10:00:00+00:00")
    sweep = trials(results, "webrc-t", [1.5e6, 2.0e6, 2.5e6])
    info = json.loads((sweep / "sweep.json").read_text())
    (sweep / "sweep.json").write_text(json.dumps({**info, "status": "partial", "planned": 8}))
    assert newest(results, profile="paper") == [sweep]
    (entry,) = load_entries(newest(results, profile="paper"))
    assert entry.rows[0].runs == 3 and entry.rows[0].mean == pytest.approx(2.0e6)
    assert "the sweep is partial: 3 of 8 runs were done" in entry.note
    # the runs column counts out of the planned trials; a single run's shows its count
    page = build_index(results, "paper").read_text()
    assert '<td class="num">3 of 8</td>' in page and "paper · trials · partial" in page
    # an interrupted one is not: the older single run is shown, the sweep named
    (sweep / "sweep.json").write_text(json.dumps({**info, "status": "interrupted"}))
    assert newest(results, profile="paper") == [older]


def _phases(folder: Path, phases: dict | None) -> None:
    """Give a synthetic run the phase times a real run records (or none, as older runs)."""
    info = json.loads((folder / "run.json").read_text())
    info.pop("phase_s", None)
    if phases is not None:
        info["phase_s"] = phases
    (folder / "run.json").write_text(json.dumps(info))


def test_each_result_says_how_long_its_runs_took_from_their_records(tmp_path):
    results = tmp_path / "results"
    one = run(results, "webrc-a", "20261121-110000-a", 2.0e6)
    _phases(one, {"bring-up": 20.0, "running": 150.0, "export": 4.0, "analysis": 6.0})
    untimed = run(results, "rlc-b", "20261121-110000-b", 1.0e6, protocol="rlc")
    _phases(untimed, None)
    sweep = trials(results, "webrc-t", [1.5e6, 2.0e6, 2.5e6])
    for k, point in enumerate(json.loads((sweep / "sweep.json").read_text())["runs"]):
        _phases((sweep / point["dir"]).resolve(), {"bring-up": 10.0, "running": 50.0 + 6 * k})
    entries = {e.experiment: e for e in load_entries(newest(results))}
    assert entries["webrc-a"].took_s == pytest.approx(180.0)
    assert entries["rlc-b"].took_s is None
    (trial_entry,) = load_entries(newest(results, profile="paper"))
    assert trial_entry.took_s == pytest.approx(3 * 60.0 + 0 + 6 + 12)
    page = " ".join(build_index(results, "quick").read_text().split())
    assert "quick · run · complete · took 3.0 min" in page
    # the page's total and each paper's count only what recorded a time, and say what did not
    assert "Their runs took 3 min on the machine that ran them" in page
    assert "1 experiment(s) recorded no time" in page
    paper = " ".join(build_index(results, "paper").read_text().split())
    assert "paper · trials · complete · took 3.3 min" in paper


def test_a_result_whose_agents_stalled_is_marked_overloaded_and_its_failures_counted(tmp_path):
    results = tmp_path / "results"
    run(results, "webrc-a", "20261121-110000-a", 2.0e6, late=0.0)
    run(results, "webrc-b", "20261121-110000-b", 1.0e6, late=30.0)  # a fail, overloaded
    run(results, "webrc-c", "20261121-110000-c", 1.0e6, late=0.0)  # a fail, kept up
    run(results, "webrc-d", "20261121-110000-d", 1.0e6)  # no agents table: unknown
    entries = {e.experiment: e for e in load_entries(newest(results))}
    assert not entries["webrc-a"].overloaded and not entries["webrc-c"].overloaded
    assert not entries["webrc-d"].overloaded
    assert re.search(r"it started 3\d\.\d s after its planned start", entries["webrc-b"].overloaded)
    page = " ".join(build_index(results, "quick").read_text().split())
    assert page.count('<span class="overloaded">overloaded</span>') == 1
    assert ("1 experiment(s) ran overloaded: their agents did not get the CPU on time, so "
            "their 1 failure(s) may describe the machine rather than the protocol") in page
    # a trials sweep says how many of its trials ran overloaded
    trials(results, "webrc-t", [1.5e6, 2.0e6, 2.5e6], late=[0.0, 30.0, None])
    (sweep,) = load_entries(newest(results, profile="paper"))
    assert sweep.overloaded.startswith("1 of its 3 trials ran overloaded")


def test_a_run_with_only_reported_values_is_not_shown_as_having_no_results(tmp_path):
    # A baseline (PGMCC, TFMCC) reports values that are read beside ORMCC's, with no
    # criterion of its own; a run that cannot be read has no results at all.
    results = tmp_path / "results"
    reported = {**REF, "label": "reported only"}
    del reported["tolerance"]
    write_run(results / "ormcc-b" / "20261121-110000-b",
              rows("m", "multicast", "r1", 2.0e6, range(1, 61)), references=[reported],
              flows=[{"name": "m", "type": "multicast", "protocol": "ormcc"}])
    broken = run(results, "webrc-x", "20261121-110000-x", 2.0e6)
    (broken / "spec.yaml").write_text("flows: [")
    page = " ".join(build_index(results).read_text().split())
    assert "no criterion of its own: 1 value(s) reported" in page
    assert re.search(r"no results: cannot be read", page)
