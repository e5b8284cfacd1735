"""A ``measure`` whose paper gives no number: no ``paper:``, reported, judged by a range only.

The ORMCC paper describes PGMCC's and TFMCC's Fig. 4 ratios without a number; their
rows carry no paper value. Such a row loads, shows no paper value and no verdict (or the
verdict of its ``within`` range alone), and refuses a relative tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from pydantic import TypeAdapter
from synthetic_runs import rows, write_run

from mcclab.analysis import index
from mcclab.analysis.report import build_report
from mcclab.analysis.results import load_run
from mcclab.analysis.summary import NO_PAPER, judge, margin, shown_verdict, summarise
from mcclab.analysis.sweep import load_sweep
from mcclab.analysis.sweep_report import _trials
from mcclab.analysis.trials import trials_table
from mcclab.experiment.loader import resolve
from mcclab.model.loader import SpecError
from mcclab.model.plugins import get_sweep_figure
from mcclab.model.quantities import MeasureRef, Reference, accepted_band

REPO = Path(__file__).resolve().parents[2]
REFERENCE = TypeAdapter(Reference)

# Multicast at 0.9 Mbit/s against TCP at 1 Mbit/s at one receiver: a ratio of 0.9.
RATIO = {"kind": "measure", "measure": "ormcc.leaf_ratio",
         "args": {"numerator": "m", "flows": ["t"], "statistic": "mean"},
         "source": "Fig. 4(b): no value in the text"}


def _ref(label: str, **extra: object) -> dict:
    return {**RATIO, "label": label, **extra}


def _run(folder: Path, references: list[dict]) -> Path:
    data = rows("m", "multicast", "h1", 0.9e6, range(1, 61))
    data += rows("t", "tcp", "h1", 1.0e6, range(1, 61))
    return write_run(folder, data, references=references)


# ---------------------------------------------------------------- the model


def test_measure_loads_without_paper_and_dumps_null_that_loads_again():
    ref = REFERENCE.validate_python(_ref("r"))
    assert isinstance(ref, MeasureRef) and ref.paper is None
    dumped = ref.model_dump(mode="json")
    assert dumped["paper"] is None
    assert REFERENCE.validate_python(dumped).paper is None


def test_other_kinds_still_need_a_paper_value():
    """Only a measure may leave it out: the built-in kinds come with the paper's number."""
    with pytest.raises(ValueError, match="paper"):
        REFERENCE.validate_python({"kind": "ratio", "label": "r", "numerator": "m",
                                   "denominator": "t"})


def _spec_file(tmp_path: Path, reference: dict) -> Path:
    path = tmp_path / "nopaper.yaml"
    path.write_text(yaml.safe_dump({
        "name": "nopaper", "topology": str(REPO / "topologies" / "dumbbell.yaml"),
        "duration": "20s",
        "flows": [{"name": "m", "type": "tcp", "sender": "s1", "receiver": "d1"},
                  {"name": "t", "type": "tcp", "sender": "s2", "receiver": "d2"}],
        "references": [reference]}, sort_keys=False))
    return path


def test_spec_without_paper_resolves(tmp_path):
    exp = resolve(str(_spec_file(tmp_path, _ref("r", within=[0.7, 1.3]))), "paper").experiment
    assert (exp.references[0].paper, exp.references[0].within) == (None, (0.7, 1.3))


def test_tolerance_without_paper_is_refused_naming_file_and_field(tmp_path):
    path = _spec_file(tmp_path, _ref("r", tolerance="10%"))
    with pytest.raises(SpecError) as info:
        resolve(str(path), "paper")
    assert info.value.path == str(path)
    hits = [why for field, why in info.value.problems if field == "references[0].tolerance"]
    assert hits and "needs a paper value" in hits[0], str(info.value)


def test_band_without_paper_is_the_range_alone():
    assert accepted_band(None, None, None) is None
    assert accepted_band(None, None, (0.7, 1.3)) == (0.7, 1.3)
    assert accepted_band(None, 0.1, None) is None  # nothing to be relative to
    assert judge(0.9, None, None, None) == "n/a"
    assert judge(0.9, None, None, (0.7, 1.3)) == "pass"
    assert judge(0.6, None, None, (0.7, 1.3)) == "fail"
    assert margin(1.0, None, None, (0.7, 1.3)) == pytest.approx(1.0)
    assert margin(1.0, None, None, None) is None


# ---------------------------------------------------------------- the analysis


@pytest.fixture
def run_folder(tmp_path):
    return _run(tmp_path / "results" / "nopaper" / "run1", [
        _ref("reported"),
        _ref("inside", within=[0.7, 1.3]),
        _ref("outside", within=[1.0, 1.3]),
        _ref("with paper", paper=1.0, within=[0.7, 1.3]),
    ])


def test_summary_reports_without_paper_and_judges_only_by_the_range(run_folder):
    found = {q.label: q for q in summarise(load_run(run_folder)).quantities}
    reported = found["reported"]
    assert reported.paper is None and reported.measured == pytest.approx(0.9)
    assert (reported.verdict, reported.margin, shown_verdict(reported)) == ("n/a", None, NO_PAPER)
    assert "reported only" in reported.note and "paper's value" not in reported.note
    assert (found["inside"].verdict, shown_verdict(found["inside"])) == ("pass", "pass")
    assert found["inside"].margin == pytest.approx(0.0 + (0.9 - 0.7) / 0.3)
    assert found["outside"].verdict == "fail" and "outside [1, 1.3]" in found["outside"].note
    assert shown_verdict(found["with paper"]) == "pass"
    assert summarise(load_run(run_folder)).counts() == {"pass": 2, "fail": 1, "n/a": 1,
                                                        "error": 0}


def test_report_shows_no_paper_column_and_no_verdict(run_folder):
    page = build_report(run_folder).read_text()
    row = next(r for r in page.split("<tr>") if ">reported<" in r)
    cells = row.split("<td class='num'>")
    assert cells[1].startswith("–</td>")  # the paper column
    assert NO_PAPER in row and "v-pass" not in row and "v-fail" not in row
    with_paper = next(r for r in page.split("<tr>") if ">with paper<" in r)
    assert NO_PAPER not in with_paper
    data = yaml.safe_load((run_folder / "summary.json").read_text())
    assert [q["paper"] for q in data["quantities"]] == [None, None, None, 1.0]


def test_index_lists_the_range_judged_row_and_leaves_the_reported_one_out(run_folder):
    [entry] = index.load_entries([run_folder])
    assert {r.label: r.paper for r in entry.rows} == {"inside": None, "outside": None,
                                                      "with paper": 1.0}
    assert entry.reported == 1
    inside = next(r for r in entry.rows if r.label == "inside")
    assert inside.verdict == "pass" and inside.margin == pytest.approx(2 / 3)
    page = index.render([entry], run_folder.parents[1])
    assert ">inside<" in page


def test_trials_judge_the_mean_by_the_range_and_show_no_paper(tmp_path):
    """Two seeds of one run: the mean is judged by 'within' alone, or not at all."""
    sweep_dir = tmp_path / "results" / "nopaper" / "sweep-1"
    references = [_ref("reported"), _ref("inside", within=[0.7, 1.3])]
    names = []
    for seed in (1, 2):
        _run(sweep_dir / f"seed{seed}", references)
        names.append({"dir": f"seed{seed}", "set": {"seed": seed}, "status": "complete"})
    (sweep_dir / "sweep.json").write_text(json.dumps({
        "experiment": "nopaper", "sweep": "trials", "status": "complete", "profile": "quick",
        "over": {"seed": [1, 2]}, "started": "2026-11-22T00:00:00+00:00", "planned": 2,
        "runs": names}))
    sweep = load_sweep(sweep_dir)
    assert sweep.notes == [] and len(sweep.points) == 2
    table = trials_table(sweep).set_index("label")
    assert table.loc["inside", "verdict"] == "pass"
    assert table.loc["reported", "verdict"] == "n/a"
    assert pd.isna(table.loc["reported", "paper"])
    shown = {r["label"]: r for r in _trials(sweep)["rows"]}
    assert shown["reported"]["verdict"] == NO_PAPER and shown["reported"]["paper"] == "–"
    assert shown["inside"]["verdict"] == "pass"
    # The sweep figures draw no paper line rather than fail on the missing value.
    figures = tmp_path / "figures"
    for name, args in (("generic.trials_quantity", {}), ("generic.sweep_quantity",
                                                         {"x": "seed"})):
        paths = get_sweep_figure(name).fn(sweep, figures, label="reported", **args)
        assert paths and all(p.stat().st_size > 1000 for p in paths)
