"""``mcclab reproduce``: the plan as data, checked before anything runs, and its runner."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from dataclasses import replace

import pytest

from mcclab.model.loader import SpecError
from mcclab.reproduce import Step, execute, paper_experiments, plan, resume_plan, write_index


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


def test_a_failed_index_gives_the_command_that_rebuilds_it_instead_of_a_traceback(tmp_path):
    from jinja2 import TemplateRuntimeError

    def broken(results, profile, experiments):
        raise TemplateRuntimeError("No filter named 'minutes'")

    page, why = write_index(tmp_path, "quick", ["default"], broken)
    assert page is None
    assert "TemplateRuntimeError: No filter named 'minutes'" in why
    assert why.endswith(f"rebuild it with: mcclab index --results {tmp_path} --profile quick")
    built = []
    page, why = write_index(tmp_path, "paper", ["default"],
                            lambda r, p, e: built.append((p, e)) or r / "index.html")
    assert (page, why, built) == (tmp_path / "index.html", "", [("paper", ["default"])])


LOADED = textwrap.dedent("""
    import json, sys, pathlib
    results, exp, stalled = sys.argv[1], sys.argv[2], sys.argv[3:]
    for k, flag in enumerate(stalled):
        folder = pathlib.Path(results) / exp / f"run-{k}"
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({"experiment": exp, "status": "complete"}))
        agent = {"flow": "m", "node": "r1", "role": "receiver", "seconds": 100,
                 "stalled": 50 if flag == "1" else 0, "worst_late_ms": 900.0,
                 "start_delay_s": 0.5}
        (folder / "summary.json").write_text(json.dumps({"agent_stalls": {
            "overloaded": flag == "1", "agents": [agent]}}))
""")


def test_each_step_says_how_many_of_its_runs_ran_overloaded(tmp_path):
    results, record = tmp_path / "results", tmp_path / "record"
    results.mkdir()
    record.mkdir()

    def step(exp: str, *stalled: str) -> Step:
        return Step(exp, "run", [sys.executable, "-c", LOADED, str(results), exp, *stalled],
                    len(stalled), 1.0)

    outcomes = execute([step("kept", "0"), step("loaded", "1"), step("some", "0", "1", "1")],
                       results, record)
    assert [o.overloaded for o in outcomes] == [0, 1, 2]
    saved = json.loads((record / "reproduce.json").read_text())
    assert [s["overloaded"] for s in saved["steps"]] == [0, 1, 2]


# ---- a reproduction in several sittings -------------------------------------------


def test_resume_keeps_complete_steps_resumes_sweeps_and_runs_the_rest(tmp_path):
    results, record = tmp_path / "results", tmp_path / "record"
    results.mkdir()
    record.mkdir()
    steps = plan("paper", ["default", "ormcc-table2-n6", "stair-fig9", "webrc-fig4"], results,
                 command=["mcclab"])
    # the first sitting: default complete, Table II's sweep stopped at its 4th trial,
    # stair-fig9 failed, webrc-fig4's sweep never got a folder (Ctrl-C as it started)
    sweep = results / "ormcc-table2-n6" / "sweep-20261127-000000-abcd"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"status": "interrupted"}))
    first = {"started": "2026-11-27T00:00:00+00:00", "status": "interrupted",
             "profile": "paper", "results": str(results), "steps": [
                 {"experiment": "default", "kind": "run", "argv": steps[0].argv,
                  "exit_code": 0, "folders": [str(results / "default" / "r1")],
                  "status": "complete", "elapsed_s": 60.0, "log": "logs/01-default.log"},
                 {"experiment": "ormcc-table2-n6", "kind": "trials", "argv": steps[1].argv,
                  "exit_code": 130, "folders": [str(sweep)], "status": "interrupted",
                  "elapsed_s": 99.0, "log": "logs/02-ormcc-table2-n6.log"},
                 {"experiment": "stair-fig9", "kind": "run", "argv": steps[2].argv,
                  "exit_code": 1, "folders": [], "status": "failed", "elapsed_s": 5.0,
                  "log": "logs/03-stair-fig9.log"},
                 {"experiment": "webrc-fig4", "kind": "trials", "argv": steps[3].argv,
                  "exit_code": None, "folders": [], "status": "not run", "elapsed_s": 0.0,
                  "log": ""}]}
    (record / "reproduce.json").write_text(json.dumps(first))
    profile, where, again, earlier = resume_plan(record, command=["mcclab"])
    assert (profile, where) == ("paper", results)
    assert [s.argv for s in again][0] == steps[0].argv
    assert again[1].argv == ["mcclab", "sweep", "--resume", str(sweep), "--wait", "0"]
    assert again[1].resumes == str(sweep)
    assert again[2].argv == steps[2].argv and again[3].argv == steps[3].argv
    # the second sitting, with fake commands: each writes a run, the sweep's resume
    # completes its sweep
    (record / "logs").mkdir()
    (record / "logs" / "02-ormcc-table2-n6.log").write_text("first sitting\n")
    fakes = [
        again[0],
        replace(again[1], argv=[sys.executable, "-c", (
            f"import json, pathlib; p = pathlib.Path({str(sweep / 'sweep.json')!r}); "
            "p.write_text(json.dumps({'status': 'complete'}))")]),
        replace(again[2], argv=[sys.executable, "-c", FAKE, str(results), "stair-fig9",
                                "complete", "0"]),
        replace(again[3], argv=[sys.executable, "-c", FAKE, str(results), "webrc-fig4",
                                "complete", "0"]),
    ]
    seen: list[str] = []
    outcomes = execute(fakes, results, record, lambda k, s, o: seen.append(s.experiment),
                       profile="paper", earlier=earlier)
    # default was not run again; the others were, once each
    assert "default" not in seen
    assert [o.status for o in outcomes] == ["complete"] * 4
    assert outcomes[0].elapsed_s == 60.0 and outcomes[0].log == "logs/01-default.log"
    assert outcomes[1].folders == [str(sweep)]
    saved = json.loads((record / "reproduce.json").read_text())
    assert saved["status"] == "complete" and saved["started"] == first["started"]
    assert saved["sittings"][0] == first["started"] and len(saved["sittings"]) == 2
    assert [s["status"] for s in saved["superseded"]] == ["interrupted", "failed"]
    # the first sitting's log of the resumed step is kept beside the new one
    assert (record / "logs" / "02-ormcc-table2-n6.log").read_text() == "first sitting\n"
    assert saved["steps"][1]["log"] == "logs/02-ormcc-table2-n6.2.log"
    # nothing left: planning again finds every step complete
    _, _, _, last = resume_plan(record, command=["mcclab"])
    assert all(s["status"] == "complete" for s in last["steps"])


def test_resume_of_an_older_record_reads_profile_and_results_from_its_commands(tmp_path):
    steps = plan("quick", ["default"], tmp_path / "r", command=["mcclab"])
    (tmp_path / "reproduce.json").write_text(json.dumps({"steps": [
        {"experiment": "default", "kind": "run", "argv": steps[0].argv, "status": "failed"}]}))
    profile, results, again, _ = resume_plan(tmp_path, command=["mcclab"])
    assert (profile, results, again[0].argv) == ("quick", tmp_path / "r", steps[0].argv)
    (tmp_path / "reproduce.json").write_text("{")
    with pytest.raises(ValueError, match="not a readable reproduction record"):
        resume_plan(tmp_path)


def test_cli_resume_refuses_other_choices_and_a_missing_record(tmp_path):
    from typer.testing import CliRunner

    from mcclab.cli import app

    invoke = CliRunner().invoke
    for extra in (["--profile", "paper"], ["-e", "default"]):
        out = invoke(app, ["reproduce", "--resume", str(tmp_path), *extra])
        assert out.exit_code == 2 and "--resume takes the profile" in out.output
    out = invoke(app, ["reproduce", "--resume", str(tmp_path)])
    assert out.exit_code == 2 and "cannot resume" in out.output
    steps = plan("quick", ["default", "stair-fig9"], tmp_path / "r", command=["mcclab"])
    (tmp_path / "reproduce.json").write_text(json.dumps({"steps": [
        {"experiment": "default", "kind": "run", "argv": steps[0].argv, "status": "complete"},
        {"experiment": "stair-fig9", "kind": "run", "argv": steps[1].argv,
         "status": "failed"}]}))
    out = invoke(app, ["reproduce", "--resume", str(tmp_path), "--dry-run"],
                 env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "1 complete before, 1 to go" in out.output
    assert re.search(r"default .* complete before", out.output)
    assert re.search(r"stair-fig9 .* min", out.output)


def test_cli_names_overloaded_steps_and_the_rebuild_line_when_the_index_fails(
        tmp_path, monkeypatch):
    import os
    import signal

    from typer.testing import CliRunner

    import mcclab.analysis.index
    import mcclab.reproduce
    from mcclab.cli import app
    from mcclab.reproduce import Outcome

    def fake_execute(steps, results, record, on_step, **_):
        outcomes = []
        for k, (step, loaded) in enumerate(zip(steps, (0, 1), strict=True), start=1):
            on_step(k, step, None)
            outcome = Outcome(step.experiment, step.kind, step.argv, 0, [], "complete", 60.0,
                              "", loaded)
            on_step(k, step, outcome)
            outcomes.append(outcome)
        return outcomes

    def broken(*_):
        raise OSError("No space left on device")

    monkeypatch.setattr(mcclab.reproduce, "execute", fake_execute)
    monkeypatch.setattr(mcclab.analysis.index, "build_index", broken)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # leave pytest's handlers alone
    results = tmp_path / "results"
    out = CliRunner().invoke(app, ["reproduce", "-e", "default", "-e", "stair-fig9",
                                   "--results", str(results)], env={"COLUMNS": "300"})
    text = " ".join(out.output.split())
    assert out.exit_code == 1, out.output
    assert "complete default (1.0 min)" in text and "default (1.0 min), overloaded" not in text
    assert "complete stair-fig9 (1.0 min), overloaded" in text
    assert re.search(r"overloaded \(their agents stalled.*\): stair-fig9", text)
    assert "OSError: No space left on device" in text
    assert f"rebuild it with: mcclab index --results {results.resolve()} --profile quick" in text
