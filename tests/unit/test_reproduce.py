"""``mcclab reproduce``: the plan as data, checked before anything runs, and its runner."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from mcclab.model.loader import SpecError
from mcclab.reproduce import Step, execute, paper_experiments, plan


def test_paper_experiments_leave_out_lab_checks():
    names = paper_experiments()
    assert "default" in names and "webrc-fig4" in names and "stair-fig9" in names
    assert "ormcc-smoke" not in names  # its reference is a lab check


def test_quick_plan_is_one_run_each(tmp_path):
    steps = plan("quick", ["default", "ormcc-table2-n6"], tmp_path, command=["mcclab"])
    assert [s.kind for s in steps] == ["run", "run"]
    assert steps[0].argv == ["mcclab", "run", "default", "--profile", "quick", "--results",
                             str(tmp_path), "--wait", "0"]
    assert all(s.runs == 1 and s.estimate_s > 0 for s in steps)


def test_paper_plan_runs_the_papers_trials(tmp_path):
    steps = plan("paper", ["ormcc-table2-n6", "webrc-fig4", "ormcc-fig4-n24", "stair-fig10",
                           "stair-fig9"], tmp_path, command=["mcclab"])
    table2 = steps[0]
    assert table2.argv[:5] == ["mcclab", "sweep", "ormcc-table2-n6", "--sweep", "trials"]
    assert table2.estimate_s > 10 * 100
    # the number of trials each paper averaged over: Table II's 10 runs, WEBRC sec.
    # 5.1.1's eight trials, ORMCC sec. V-D's ten simulations, STAIR Fig. 10's 100 trials;
    # STAIR Fig. 9 is one run in the paper
    assert [(s.kind, s.runs) for s in steps] == [("trials", 10), ("trials", 8), ("trials", 10),
                                                 ("trials", 100), ("run", 1)]


def test_a_bad_experiment_stops_the_plan_before_anything_runs(tmp_path):
    with pytest.raises(SpecError):
        plan("quick", ["default", "no-such-experiment"], tmp_path)


FAKE = textwrap.dedent("""
    import json, sys, pathlib
    results, exp, status, code = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    folder = pathlib.Path(results) / exp / ("run-" + status)
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"experiment": exp, "status": status}))
    print("ran", exp)
    sys.exit(code)
""")


def test_execute_records_every_step_and_goes_on_after_a_failure(tmp_path):
    results, record = tmp_path / "results", tmp_path / "record"
    results.mkdir()
    record.mkdir()

    def step(exp: str, status: str, code: int) -> Step:
        return Step(exp, "run", [sys.executable, "-c", FAKE, str(results), exp, status,
                                 str(code)], 1, 1.0)

    nothing = Step("nothing", "run", [sys.executable, "-c", "raise SystemExit(3)"], 1, 1.0)
    seen = []
    outcomes = execute([step("a", "failed", 1), nothing, step("b", "complete", 0)], results,
                       record, lambda k, s, o: seen.append((k, s.experiment, o is None)))
    assert [o.status for o in outcomes] == ["failed", "no folder (exit 3)", "complete"]
    assert [o.exit_code for o in outcomes] == [1, 3, 0]
    assert outcomes[2].folders == [str(results / "b" / "run-complete")]
    assert seen == [(1, "a", True), (1, "a", False), (2, "nothing", True),
                    (2, "nothing", False), (3, "b", True), (3, "b", False)]
    saved = json.loads((record / "reproduce.json").read_text())
    assert saved["status"] == "complete" and len(saved["steps"]) == 3
    assert (record / saved["steps"][2]["log"]).read_text().strip() == "ran b"
