"""Sweeps: the product of values, the sweep folder (with a fake runner), report and Ctrl-C."""

from __future__ import annotations

import fcntl
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from rich.console import Console
from synthetic_runs import agent_rows, rows, write_run

from mcclab import cli
from mcclab.analysis.protocols.generic import trials_quantity
from mcclab.analysis.rebuild import report_command
from mcclab.analysis.sweep import load_sweep
from mcclab.analysis.sweep_report import build_sweep_report
from mcclab.analysis.trials import STAT_COLUMNS, read_trials
from mcclab.experiment.loader import resolve
from mcclab.experiment.runner import RunOptions, new_run_dir
from mcclab.experiment.spec import SweepSpec
from mcclab.experiment.sweep import (
    LOCK_FILE,
    ResumeError,
    SweepOptions,
    plan,
    resume_sweep,
    run_sweep,
)
from mcclab.model.loader import SpecError
from mcclab.model.units import parse_rate

SPEC = {
    "name": "sw", "topology": "topologies/dumbbell.yaml", "duration": "20s", "warmup": "2s",
    "flows": [{"name": "cbr", "type": "multicast", "protocol": "cbr", "sender": "s1",
               "receivers": ["d1"], "params": {"rate": "100kbit"}},
              {"name": "tcp{i}", "count": 1, "type": "tcp", "sender": "s2", "receiver": "d2"}],
    "references": [{"kind": "throughput", "label": "CBR throughput", "flow": "cbr",
                    "paper": "150kbit", "tolerance": "40%"}],
    "sweeps": {"rate": {
        "description": "CBR rate against run length",
        "over": {"flows.cbr.params.rate": ["100kbit", "200kbit", "400kbit"],
                 "duration": ["10s", "20s"]},
        "figures": [{"figure": "generic.sweep_quantity",
                     "args": {"label": "CBR throughput", "by": "duration"}}]},
        "count": {"over": {"flows.tcp{i}.count": [1, 3]}},
        "trials": {"over": {"flows.cbr.params.rate": ["100kbit", "400kbit"], "seed": [1, 2, 3]}},
        "seeds": {"over": {"seed": [1, 2, 3, 4]},
                  "figures": [{"figure": "generic.trials_quantity",
                               "args": {"label": "CBR throughput"}}]},
        "hosts": {"over": {"flows.cbr.sender": ["s1", "s9"]}}},
    "profiles": {"quick": {"set": {"warmup": "1s"}}},
}


@pytest.fixture
def spec(tmp_path):
    """The sweep spec as a file."""
    path = tmp_path / "sw.yaml"
    path.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    return str(path)


class FakeRunner:
    """Writes a synthetic run where CBR gets its configured rate; can stop or fail on cue."""

    def __init__(self, stop_at: int | None = None,
                 raise_at: dict[int, BaseException] | None = None):
        self.calls: list[dict] = []
        self.stop_at, self.raise_at = stop_at, raise_at or {}

    def __call__(self, res, options: RunOptions) -> Path:
        exp = res.experiment
        self.calls.append({"duration": exp.duration, "rate": exp.flows[0].params["rate"],
                           "flows": [f.name for f in exp.flows], "warmup": exp.warmup})
        folder = new_run_dir(options.results, exp.name)
        options.started(folder)
        k = len(self.calls)
        if k in self.raise_at:
            raise self.raise_at[k]
        seconds = range(1, int(exp.duration) + 1)
        # each seed after the first adds 10 % (trials must differ to be averaged)
        rate = parse_rate(exp.flows[0].params["rate"]) * (1 + 0.1 * (exp.seed - 1))
        data = rows("cbr", "multicast", "d1", rate, seconds)
        status = "interrupted" if k == self.stop_at else "complete"
        # The receiver starts on time at the lower rates and 5 s late at 400 kbit/s,
        # which the sweep must show as an overloaded run.
        late = 5.0 if exp.flows[0].params["rate"] == "400kbit" else 0.0
        agents = agent_rows("cbr", "d1", "receiver", [(t + late + 0.05, 1.0) for t in seconds])
        write_run(folder, data, spec=exp.model_dump(mode="json"), duration_s=exp.duration,
                  warmup_s=exp.warmup, status=status, profile=res.profile, agents=agents)
        (folder / "report.html").write_text("<!DOCTYPE html><title>run</title>")
        return folder


def sweep_options(tmp_path, runner, sets=()):
    """Options that put results under tmp_path and record progress."""
    progress: list[tuple[int, int, dict]] = []
    options = SweepOptions(run=RunOptions(results=tmp_path / "results"),
                           progress=lambda k, n, p: progress.append((k, n, p)),
                           execute=runner, sets=list(sets), report=build_sweep_report)
    return options, progress


def test_points_are_the_product_first_key_slowest():
    spec = SweepSpec(over={"a": [1, 2], "b": ["x", "y", "z"]})
    assert spec.points() == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"},
                             {"a": 2, "b": "x"}, {"a": 2, "b": "y"}, {"a": 2, "b": "z"}]
    assert SweepSpec(over={"a": [5]}).points() == [{"a": 5}]


def test_bad_sweeps_are_rejected_at_load(tmp_path):
    for sweeps, field in [({"s": {"over": {}}}, "sweeps.s.over"),
                          ({"s": {"over": {"duration": []}}}, "sweeps.s.over.duration"),
                          ({"s": {"over": {"duration": ["5s"]},
                                  "figures": [{"figure": "generic.nope"}]}},
                           "sweeps.s.figures[0].figure"),
                          ({"s": {"over": {"duration": ["5s"]},
                                  "figures": [{"figure": "generic.rates"}]}},
                           "sweeps.s.figures[0].figure")]:
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump({**SPEC, "sweeps": sweeps}))
        with pytest.raises(SpecError) as info:
            resolve(str(path))
        assert field in [f for f, _ in info.value.problems], str(info.value)


def test_plan_resolves_every_point_first(spec):
    base, points = plan(spec, "count", "paper", [])
    assert [p for p, _ in points] == [{"flows.tcp{i}.count": 1}, {"flows.tcp{i}.count": 3}]
    assert [f.name for f in points[1][1].experiment.flows] == ["cbr", "tcp1", "tcp2", "tcp3"]
    with pytest.raises(SpecError, match="no sweep 'nope'; known: count, hosts, rate, seeds, "
                                        "trials"):
        plan(spec, "nope", "paper", [])
    # three TCP flows from s2 are fine; a point naming a host that does not exist is not
    with pytest.raises(SpecError, match=r"sweeps.hosts at flows.cbr.sender=s9: flows\[0\]: "
                                        "unknown node 's9'"):
        plan(spec, "hosts", "paper", [])


def test_a_point_refused_under_a_profile_says_what_the_profile_set(tmp_path):
    # The quick profile cuts the run to 5 s: the point whose warm-up is 8 s is refused,
    # and the error keeps the line saying the values were resolved with that profile.
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "sweeps": {"warm": {"over": {"warmup": ["1s", "8s"]}}},
                                    "profiles": {"quick": {"set": {"duration": "5s"}}}}))
    assert len(plan(str(path), "warm", "paper", [])[1]) == 2
    with pytest.raises(SpecError) as info:
        plan(str(path), "warm", "quick", [])
    assert "sweeps.warm at warmup=8s: warmup" in str(info.value)
    assert "profile 'quick'" in info.value.note


def test_sweep_writes_folder_csv_figures_and_report(tmp_path, spec):
    runner = FakeRunner()
    options, progress = sweep_options(tmp_path, runner, sets=["warmup=3s"])
    folder = run_sweep(spec, "rate", "quick", options)
    assert folder.parent == tmp_path / "results" / "sw" and folder.name.startswith("sweep-")
    # the command line's --set applies to every run, the point's values last
    assert [(c["rate"], c["duration"], c["warmup"]) for c in runner.calls] == [
        (r, d, 3.0) for r in ("100kbit", "200kbit", "400kbit") for d in (10.0, 20.0)]
    assert [(k, n) for k, n, _ in progress] == [(k, 6) for k in range(1, 7)]
    record = json.loads((folder / "sweep.json").read_text())
    assert (record["experiment"], record["sweep"], record["profile"], record["status"]) == (
        "sw", "rate", "quick", "complete")
    assert record["over"] == SPEC["sweeps"]["rate"]["over"] and record["planned"] == 6
    assert record["set"] == ["warmup=3s"]
    assert [r["set"] for r in record["runs"]] == [p for _, _, p in progress]
    assert all(r["status"] == "complete" for r in record["runs"])
    assert all((folder / r["dir"] / "run.json").is_file() for r in record["runs"])
    table = pd.read_csv(folder / "sweep.csv")
    assert list(table.columns) == ["flows.cbr.params.rate", "duration", "run", "status",
                                   "overloaded", "label", "kind", "unit", "paper", "measured",
                                   "verdict"]
    assert len(table) == 6
    assert list(table["overloaded"]) == [False] * 4 + [True] * 2
    # CBR gets its configured rate; paper 150 kbit/s ±40 % passes 100 and 200 only
    assert list(table["measured"]) == [1e5, 1e5, 2e5, 2e5, 4e5, 4e5]
    assert list(table["verdict"]) == ["pass"] * 4 + ["fail"] * 2
    assert (folder / "figures" / "sweep-cbr-throughput.svg").is_file()
    page = (folder / "report.html").read_text()
    assert "sw: sweep rate" in page and "CBR rate against run length" in page
    assert page.count("<tr>") == 7 and "<script" not in page and "<svg" in page
    assert page.count("overloaded: the agents stalled") == 2
    # each run links to its own report (the fake runner writes a placeholder page)
    for run in record["runs"]:
        assert f"href='{run['dir']}/report.html'" in page


def test_loader_reads_only_listed_runs_and_notes_missing_ones(tmp_path, spec):
    folder = run_sweep(spec, "rate", "quick", sweep_options(tmp_path, FakeRunner())[0])
    record = json.loads((folder / "sweep.json").read_text())
    gone = folder / record["runs"][0]["dir"]
    for path in sorted(gone.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    gone.rmdir()
    new_run_dir(tmp_path / "results", "sw")  # an unrelated run next to it is ignored
    sweep = load_sweep(folder)
    assert len(sweep.points) == 6 and sweep.points[0].run is None
    assert any("cannot be read" in n for n in sweep.notes)
    assert sweep.quantity("CBR throughput")["measured"].tolist() == [1e5, 2e5, 2e5, 4e5, 4e5]
    report_command([folder])  # rebuilds the sweep's report, does not exit
    assert "cannot be read" in (folder / "report.html").read_text()


def test_interrupted_run_stops_the_sweep(tmp_path, spec):
    runner = FakeRunner(stop_at=2)
    folder = run_sweep(spec, "rate", "paper", sweep_options(tmp_path, runner)[0])
    record = json.loads((folder / "sweep.json").read_text())
    assert len(runner.calls) == 2 and record["status"] == "interrupted"
    assert [r["status"] for r in record["runs"]] == ["complete", "interrupted"]
    page = (folder / "report.html").read_text()
    assert "This sweep was interrupted" in page and "2 of 6 runs" in page


def test_a_hostile_error_is_escaped_in_the_sweep_report(tmp_path, spec):
    runner = FakeRunner(raise_at={1: RuntimeError("<script>alert(1)</script>")})
    folder = run_sweep(spec, "rate", "quick", sweep_options(tmp_path, runner)[0])
    page = (folder / "report.html").read_text()
    assert "<script" not in page
    assert ("<div class='why'>RuntimeError: &lt;script&gt;alert(1)&lt;/script&gt;</div>"
            in page)


def test_ctrl_c_inside_a_run_and_failures(tmp_path, spec):
    runner = FakeRunner(raise_at={2: RuntimeError("lab broke"), 3: KeyboardInterrupt()})
    folder = run_sweep(spec, "rate", "paper", sweep_options(tmp_path, runner)[0])
    record = json.loads((folder / "sweep.json").read_text())
    # a failing run is recorded and the sweep goes on; Ctrl-C stops it
    assert len(runner.calls) == 3 and record["status"] == "interrupted"
    statuses = [(r["status"], r["error"]) for r in record["runs"]]
    assert statuses == [("complete", None), ("failed", "RuntimeError: lab broke"),
                        ("interrupted", "stopped by Ctrl-C")]
    assert all(r["dir"] for r in record["runs"])  # the folders the runner had created
    table = pd.read_csv(folder / "sweep.csv")
    assert list(table["status"]) == ["complete", "failed", "interrupted"]
    assert table["label"].isna().tolist() == [False, True, True]


def test_trials_average_over_the_seeds_and_judge_the_mean(tmp_path, spec, monkeypatch):
    runner = FakeRunner(raise_at={2: RuntimeError("lab broke")})
    folder = run_sweep(spec, "trials", "quick", sweep_options(tmp_path, runner)[0])
    table = pd.read_csv(folder / "trials.csv")
    assert list(table.columns) == ["flows.cbr.params.rate", *STAT_COLUMNS]
    slow, fast = table.to_dict("records")
    # 100 kbit/s: seeds 1 and 3 (seed 2 failed) give 100 and 120 kbit/s
    assert (slow["flows.cbr.params.rate"], slow["runs"], slow["missing"]) == ("100kbit", 2, 1)
    assert (slow["mean"], slow["min"], slow["max"]) == pytest.approx((110e3, 100e3, 120e3))
    assert slow["sd"] == pytest.approx(20e3 / math.sqrt(2))
    # the criterion (150 kbit/s ± 40 %) applies to the mean: 110 passes, 440 fails
    assert (slow["verdict"], slow["overloaded"]) == ("pass", 0)
    assert (fast["runs"], fast["mean"], fast["verdict"]) == (3, pytest.approx(440e3), "fail")
    assert fast["overloaded"] == 3  # its receiver starts 5 s late in every run
    page = (folder / "report.html").read_text()
    assert "Over the trials" in page and "2, 1 missing" in page and "3, 3 overloaded" in page
    assert read_trials(folder).equals(table)
    # the closing table of `mcclab sweep`
    monkeypatch.setattr(cli, "console", Console(record=True, width=200))
    cli._print_trials(folder)
    printed = cli.console.export_text()
    assert "Over the trials" in printed
    assert re.search(r"100kbit .*CBR throughput .* 2 .*110 kbit/s .* pass", printed), printed
    assert re.search(r"400kbit .*CBR throughput .* 3 .*440 kbit/s .* fail", printed), printed
    # a quantity without a criterion has the verdict "n/a", which pandas reads as NaN
    table.loc[0, "verdict"] = "n/a"
    table.to_csv(folder / "trials.csv", index=False)
    assert read_trials(folder)["verdict"].tolist() == ["n/a", "fail"]
    cli._print_trials(folder)
    assert re.search(r"100kbit .*110 kbit/s .* n/a", cli.console.export_text()), printed


def test_a_sweep_over_anything_else_has_no_trials(tmp_path, spec):
    folder = run_sweep(spec, "count", "quick", sweep_options(tmp_path, FakeRunner())[0])
    assert not (folder / "trials.csv").exists() and read_trials(folder) is None
    assert "Over the trials" not in (folder / "report.html").read_text()


def test_trials_figure_shows_each_run_and_the_mean(tmp_path, spec):
    folder = run_sweep(spec, "seeds", "quick", sweep_options(tmp_path, FakeRunner())[0])
    svg = (folder / "figures" / "trials-cbr-throughput.svg").read_text()
    assert "mean of 4" in svg and "sd" in svg and "paper" in svg
    stats = read_trials(folder).iloc[0]
    assert stats["mean"] == pytest.approx(115e3) and stats["verdict"] == "pass"
    # on a sweep over more than the seed the figure refuses, and says why
    with pytest.raises(ValueError, match="sweep over 'seed' alone"):
        trials_quantity(load_sweep(run_sweep(
            spec, "trials", "quick", sweep_options(tmp_path, FakeRunner())[0])),
            tmp_path, label="CBR throughput")


# ---- a sweep in several sittings: --limit, then --resume ---------------------------


def test_limit_leaves_a_partial_sweep_and_resume_runs_the_rest(tmp_path, spec):
    runner = FakeRunner()
    options, progress = sweep_options(tmp_path, runner, sets=["warmup=3s"])
    # a limit that covers every point is no limit: the sweep is complete
    options.limit = 4
    folder = run_sweep(spec, "seeds", "quick", options)
    record = json.loads((folder / "sweep.json").read_text())
    assert (record["status"], record["planned"], len(record["runs"])) == ("complete", 4, 4)
    options.limit = 3
    folder = run_sweep(spec, "rate", "quick", options)
    record = json.loads((folder / "sweep.json").read_text())
    assert (record["status"], len(record["runs"])) == ("partial", 3)
    page = (folder / "report.html").read_text()
    assert "This sweep is partial" in page and "3 of 6 runs" in page
    assert read_trials(folder) is None
    # resuming takes the record's --set, not the options': warm-up 3 s, not 7
    runner.calls.clear()
    progress.clear()
    options.sets, options.limit = ["warmup=7s"], 2
    assert resume_sweep(folder, options) == folder
    record = json.loads((folder / "sweep.json").read_text())
    assert (record["status"], len(record["runs"])) == ("partial", 5)
    assert [c["warmup"] for c in runner.calls] == [3.0, 3.0]
    assert [k for k, _, _ in progress] == [4, 5]
    options.limit = None
    resume_sweep(folder, options)
    record = json.loads((folder / "sweep.json").read_text())
    assert record["status"] == "complete" and "This sweep is" not in (
        folder / "report.html").read_text()
    # every point once, in the plan's order, each with its own run folder
    assert [r["set"] for r in record["runs"]] == [p for p, _ in plan(spec, "rate", "quick", [])[1]]
    assert len({r["dir"] for r in record["runs"]}) == 6 and "superseded" not in record
    assert [k for k, _, _ in progress] == [4, 5, 6]
    # nothing left: a resume runs nothing and the sweep stays complete
    runner.calls.clear()
    resume_sweep(folder, options)
    assert runner.calls == [] and json.loads((folder / "sweep.json").read_text())["status"] == \
        "complete"


def test_resume_runs_again_what_did_not_complete_and_keeps_the_first_attempts(tmp_path, spec):
    runner = FakeRunner(raise_at={2: RuntimeError("lab broke")}, stop_at=4)
    options, _ = sweep_options(tmp_path, runner)
    folder = run_sweep(spec, "seeds", "quick", options)
    first = json.loads((folder / "sweep.json").read_text())
    assert first["status"] == "interrupted"
    assert [r["status"] for r in first["runs"]] == ["complete", "failed", "complete",
                                                    "interrupted"]
    runner.calls.clear()
    runner.raise_at, runner.stop_at = {}, None
    resume_sweep(folder, options)
    record = json.loads((folder / "sweep.json").read_text())
    assert record["status"] == "complete" and len(runner.calls) == 2
    assert [r["status"] for r in record["runs"]] == ["complete"] * 4
    # the complete runs of the first sitting are kept as they were
    assert [record["runs"][i]["dir"] for i in (0, 2)] == [first["runs"][i]["dir"] for i in (0, 2)]
    # the failed and the interrupted run stay recorded, their folders untouched
    assert record["superseded"] == [first["runs"][1], first["runs"][3]]
    assert all((folder / r["dir"]).is_dir() for r in record["superseded"])
    assert load_sweep(folder).info.superseded[0].status == "failed"
    # the trials now average four runs (seeds 1-4: 100, 110, 120, 130 kbit/s)
    stats = read_trials(folder).iloc[0]
    assert (stats["runs"], stats["missing"]) == (4, 0)
    assert stats["mean"] == pytest.approx(115e3)


def test_a_killed_sweep_resumes_and_a_running_one_does_not(tmp_path, spec):
    options, _ = sweep_options(tmp_path, FakeRunner())
    options.limit = 1
    folder = run_sweep(spec, "seeds", "quick", options)
    # as a SIGKILL leaves it: the record still says running
    record = json.loads((folder / "sweep.json").read_text())
    (folder / "sweep.json").write_text(json.dumps({**record, "status": "running"}))
    with open(folder / LOCK_FILE) as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live sweep process holds this
        with pytest.raises(ResumeError, match="another process is running this sweep"):
            resume_sweep(folder, options)
    options.limit = None
    resume_sweep(folder, options)
    assert json.loads((folder / "sweep.json").read_text())["status"] == "complete"


def test_resume_refuses_a_sweep_its_spec_no_longer_plans(tmp_path, spec):
    options, _ = sweep_options(tmp_path, FakeRunner())
    options.limit = 2
    folder = run_sweep(spec, "seeds", "quick", options)
    changed = {**SPEC, "sweeps": {**SPEC["sweeps"], "seeds": {"over": {"seed": [1, 2, 3]}}}}
    Path(spec).write_text(yaml.safe_dump(changed, sort_keys=False))
    with pytest.raises(ResumeError, match="now has 3 points and this sweep planned 4"):
        resume_sweep(folder, options)
    moved = {**SPEC, "sweeps": {**SPEC["sweeps"], "seeds": {"over": {"seed": [5, 6, 7, 8]}}}}
    Path(spec).write_text(yaml.safe_dump(moved, sort_keys=False))
    with pytest.raises(ResumeError, match=r"no longer has the point \{'seed': 1\}"):
        resume_sweep(folder, options)
    (folder / "sweep.json").write_text("{")
    with pytest.raises(ResumeError, match="not a readable sweep record"):
        resume_sweep(folder, options)


def test_cli_limit_and_resume(tmp_path, spec, monkeypatch):
    from typer.testing import CliRunner

    import mcclab.experiment.runner

    monkeypatch.setattr(mcclab.experiment.runner, "execute", FakeRunner())
    invoke = CliRunner().invoke
    results = tmp_path / "results"
    out = invoke(cli.app, ["sweep", spec, "--sweep", "seeds", "--limit", "2",
                           "--results", str(results)])
    assert out.exit_code == 0, out.output
    (folder,) = (results / "sw").glob("sweep-*")
    assert "sweep partial: 2 of 4 runs" in out.output
    # on one line, however long the path, so that it can be pasted back
    assert f"go on with: mcclab sweep --resume {folder}\n" in out.output
    for wrong in (["sw.yaml", "--resume", str(folder)],
                  ["--sweep", "seeds", "--resume", str(folder)],
                  ["--resume", str(folder), "--set", "warmup=2s"], ["--sweep", "seeds"],
                  ["--resume", str(folder), "--results", str(tmp_path / "elsewhere")]):
        bad = invoke(cli.app, ["sweep", *wrong])
        assert bad.exit_code == 2, (wrong, bad.output)
    out = invoke(cli.app, ["sweep", "--resume", str(folder)])
    assert out.exit_code == 0 and "sweep complete: 4 of 4 runs (4 complete)" in out.output
    assert "go on with" not in out.output
    assert len(list((results / "sw").glob("sweep-*"))) == 1
    out = invoke(cli.app, ["sweep", "--resume", str(tmp_path)])
    assert out.exit_code == 2 and "cannot resume" in out.output


def test_preview_shows_each_point_its_estimate_and_what_is_complete(tmp_path, spec):
    from mcclab.experiment.estimate import BRINGUP_FIXED_S, BRINGUP_PER_NODE_S
    from mcclab.experiment.sweep import preview, preview_resume

    planned = preview(spec, "rate", "quick", [])
    assert [(p.k, p.n) for p in planned] == [(k, 6) for k in range(1, 7)]
    assert [p.point for p in planned] == SweepSpec(**SPEC["sweeps"]["rate"]).points()
    assert not any(p.complete for p in planned)
    nodes = len(resolve(spec, "quick").topology.nodes)
    # each point's own duration (10 s or 20 s) plus the bring-up allowance
    for p in planned:
        seconds = float(p.point["duration"].rstrip("s"))
        assert p.estimate_s == pytest.approx(seconds + BRINGUP_FIXED_S
                                             + BRINGUP_PER_NODE_S * nodes)
    options, _ = sweep_options(tmp_path, FakeRunner())
    options.limit = 2
    folder = run_sweep(spec, "seeds", "quick", options)
    shown = preview_resume(folder)
    assert [p.complete for p in shown] == [True, True, False, False]
    assert [p.point for p in shown] == [{"seed": s} for s in (1, 2, 3, 4)]
    # a point whose run was interrupted is recorded, and still to run
    options, _ = sweep_options(tmp_path, FakeRunner(stop_at=2))
    folder = run_sweep(spec, "seeds", "quick", options)
    assert [r["status"] for r in json.loads((folder / "sweep.json").read_text())["runs"]] \
        == ["complete", "interrupted"]
    assert [p.complete for p in preview_resume(folder)] == [True, False, False, False]


def test_a_sweep_whose_lock_is_held_runs_elsewhere(tmp_path, spec):
    from mcclab.experiment.sweep import running_elsewhere

    options, _ = sweep_options(tmp_path, FakeRunner())
    options.limit = 1
    folder = run_sweep(spec, "seeds", "quick", options)
    assert not running_elsewhere(folder)
    with open(folder / LOCK_FILE) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert running_elsewhere(folder)
    assert not running_elsewhere(folder)


def test_cli_dry_run_runs_nothing_and_a_run_says_how_long_is_left(tmp_path, spec,
                                                                   monkeypatch):
    from typer.testing import CliRunner

    import mcclab.experiment.runner

    runner = FakeRunner()
    monkeypatch.setattr(mcclab.experiment.runner, "execute", runner)
    invoke = CliRunner().invoke
    results = tmp_path / "results"
    out = invoke(cli.app, ["sweep", spec, "--sweep", "seeds", "--dry-run", "--limit", "3",
                           "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert runner.calls == [] and not (results / "sw").exists()
    from mcclab.experiment.estimate import BRINGUP_FIXED_S, BRINGUP_PER_NODE_S

    one = 20 + BRINGUP_FIXED_S + BRINGUP_PER_NODE_S * len(resolve(spec, "quick").topology.nodes)
    assert f"4 points, 0 complete; 3 to run now, about {3 * one / 60:.0f} min (1 left " \
        "for a resume)" in out.output
    assert "run 4 of 4: seed=4  ~" in out.output and "(beyond --limit)" in out.output
    out = invoke(cli.app, ["sweep", spec, "--sweep", "seeds", "--limit", "2",
                           "--results", str(results)])
    assert out.exit_code == 0, out.output
    assert f"run 1 of 4: seed=1 (about {2 * one / 60:.0f} min left)" in out.output
    assert f"run 2 of 4: seed=2 (about {one / 60:.0f} min left)" in out.output
    (folder,) = (results / "sw").glob("sweep-*")
    out = invoke(cli.app, ["sweep", "--resume", str(folder), "--dry-run"])
    assert out.exit_code == 0, out.output
    assert "4 points, 2 complete; 2 to run now" in out.output
    assert "run 2 of 4: seed=2  complete" in out.output
    assert len(runner.calls) == 2
