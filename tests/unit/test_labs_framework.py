"""The labs framework: lab.yaml validation, check discovery, grading and the --json format."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mcclab.labs import catalogue
from mcclab.labs.actions import first_step
from mcclab.labs.checks import LabContext, Verdict, check, check_id
from mcclab.labs.grade import as_json, run_checks
from mcclab.model.loader import SpecError

LAB_YAML = """\
id: 7
slug: demo
title: A demo lab
level: intro
minutes: 30
topology: ./topology.yaml
questions:
  - {id: q1, text: first}
  - {id: q2, text: second}
  - {id: q3, text: talk about it, checked: false}
  - {id: q4, text: fourth}
"""

CHECKS = """\
from mcclab.labs.checks import Verdict, check

@check("q1")
def first(ctx):
    return Verdict.passed("right") if ctx.answer("q1") == 3 else Verdict.failed("q1 is 3")

@check("q2")
def second(ctx):
    raise KeyError("boom")

@check("q4")
def fourth(ctx):
    return Verdict.pending("run step 2 first")
"""


def make_lab(
    root: Path, lab_yaml: str = LAB_YAML, checks: str = CHECKS, folder: str = "07-demo"
) -> Path:
    lab = root / "labs" / folder
    lab.mkdir(parents=True)
    (lab / "lab.yaml").write_text(lab_yaml)
    (lab / "topology.yaml").write_text("name: t\n")
    (lab / "checks.py").write_text(checks)
    return lab


def entry(tmp_path: Path) -> catalogue.LabEntry:
    make_lab(tmp_path)
    return catalogue.find(7, tmp_path / "labs", tmp_path)


def test_discover_and_find_by_number_slug_or_folder(tmp_path):
    make_lab(tmp_path)
    labs = catalogue.discover(tmp_path / "labs", tmp_path)
    assert [lab.spec.slug for lab in labs] == ["demo"]
    for ref in (7, "07", "demo", "07-demo"):
        assert catalogue.find(ref, tmp_path / "labs", tmp_path).dir.name == "07-demo"
    with pytest.raises(SpecError, match="no such lab; known: 07-demo"):
        catalogue.find(8, tmp_path / "labs", tmp_path)


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        (("level: intro", "level: expert"), "level", "Input should be"),
        (("minutes: 30", "minutes: 30\ncolour: red"), "colour", "unknown key"),
        (
            ("  - {id: q2, text: second}", "  - {id: q2, text: second, weight: 2}"),
            "questions[1].weight",
            "unknown key",
        ),
        (
            ("  - {id: q4, text: fourth}", "  - {id: q1, text: fourth}"),
            "questions[3].id",
            "used twice",
        ),
        (("id: 7", "id: 8"), "id", "does not match the folder"),
        (("slug: demo", "slug: other"), "slug", "does not match the folder"),
        (("topology: ./topology.yaml", "topology: ./nothere.yaml"), "topology", "no such file"),
        (
            ("minutes: 30", "minutes: 30\nexperiments: [nosuch]"),
            "experiments[0]",
            "no such experiment",
        ),
    ],
)
def test_malformed_lab_yaml_names_file_and_field(tmp_path, change, field, reason):
    make_lab(tmp_path, LAB_YAML.replace(*change))
    with pytest.raises(SpecError) as info:
        catalogue.discover(tmp_path / "labs", tmp_path)
    text = str(info.value)
    assert text.startswith(str(tmp_path / "labs" / "07-demo" / "lab.yaml") + ": ")
    assert any(f == field and reason in r for f, r in info.value.problems), text


def test_checks_must_name_questions_of_the_lab(tmp_path):
    make_lab(tmp_path, checks=CHECKS + '\n@check("q9")\ndef extra(ctx):\n    return None\n')
    lab = catalogue.find(7, tmp_path / "labs", tmp_path)
    with pytest.raises(SpecError, match=r"checks.py: extra: checks question 'q9'"):
        catalogue.load_checks(lab)


def test_a_check_raising_is_an_error_and_others_still_run(tmp_path):
    lab = entry(tmp_path)
    checks = catalogue.load_checks(lab)
    assert sorted(checks) == ["q1", "q2", "q4"]
    ctx = LabContext(lab_dir=lab.dir, work_dir=tmp_path / "work", answers={"q1": 3})
    results = {r.id: r for r in run_checks(lab.spec, checks, ctx)}
    assert (results["q1"].status, results["q1"].message) == ("pass", "right")
    assert results["q2"].status == "error"
    assert "KeyError" in results["q2"].message and "boom" in results["q2"].message
    assert results["q3"].status == "unchecked"
    assert (results["q4"].status, results["q4"].message) == ("pending", "run step 2 first")


def test_missing_check_and_non_verdict_are_errors(tmp_path):
    lab = entry(tmp_path)
    ctx = LabContext(lab_dir=lab.dir, work_dir=tmp_path)
    results = run_checks(lab.spec, {"q1": lambda c: "yes"}, ctx)
    assert results[0].status == "error" and "not a Verdict" in results[0].message
    assert results[1].status == "error" and "no check for q2" in results[1].message


def test_json_format_is_pinned(tmp_path):
    lab = entry(tmp_path)
    ctx = LabContext(lab_dir=lab.dir, work_dir=tmp_path, answers={"q1": 2})
    doc = as_json(lab.spec, run_checks(lab.spec, catalogue.load_checks(lab), ctx))
    assert json.loads(json.dumps(doc)) == {
        "lab": 7,
        "slug": "demo",
        "results": [
            {"id": "q1", "status": "fail", "message": "q1 is 3"},
            {"id": "q2", "status": "error", "message": "the check failed: KeyError: 'boom'"},
            {
                "id": "q3",
                "status": "unchecked",
                "message": "discussion question: not checked automatically",
            },
            {"id": "q4", "status": "pending", "message": "run step 2 first"},
        ],
        "passed": 0,
        "total": 3,
    }


def test_verdicts_and_marks():
    @check("q5")
    def fn(ctx):
        return Verdict.passed()

    assert check_id(fn) == "q5" and check_id(print) is None
    assert Verdict.failed("x") == Verdict("fail", "x")
    assert Verdict.pending("y").status == "pending"


def test_context_answers_runs_and_captures(tmp_path):
    work = tmp_path / "work"
    for run_id, status in (
        ("20261126-100000-aaaa", "complete"),
        ("20261126-110000-bbbb", "failed"),
    ):
        folder = work / "runs" / "why-cc" / run_id
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({"status": status}))
    (work / "captures").mkdir()
    (work / "captures" / "a.pcap").write_bytes(b"")
    ctx = LabContext(lab_dir=tmp_path, work_dir=work, answers={"q1": "", "q2": 0})
    assert ctx.answer("q1") is None and ctx.answer("q2") == 0 and ctx.answer("q3") is None
    assert [p.name for p in ctx.runs("./experiments/why-cc.yaml")] == [
        "20261126-110000-bbbb",
        "20261126-100000-aaaa",
    ]
    assert ctx.latest_run("why-cc", status="complete").name == "20261126-100000-aaaa"
    assert ctx.latest_run("other") is None
    assert [p.name for p in ctx.captures()] == ["a.pcap"]
    assert not ctx.live
    with pytest.raises(RuntimeError, match="not up"):
        ctx.exec("r1", ["true"])


def test_first_step_of_a_handout():
    text = textwrap.dedent("""\
        # Lab
        ## Steps
        1. Start the lab:

           ```sh
           mcclab lab start 1
           ```
        2. Next.
        """)
    assert first_step(text).startswith("1. Start the lab:")
    assert "mcclab lab start 1" in first_step(text) and "Next" not in first_step(text)
    assert first_step("no steps") == ""


def test_the_shipped_labs_load_and_are_listed():
    labs = catalogue.discover()
    assert [lab.spec.id for lab in labs] == list(range(1, len(labs) + 1))
    readme = (catalogue.LABS / "README.md").read_text()
    for lab in labs:
        checks = catalogue.load_checks(lab)
        checked = {q.id for q in lab.spec.questions if q.checked}
        assert set(checks) == checked, lab.name
        assert f"[{lab.name}]({lab.name}/handout.md)" in readme, lab.name
        for name in (
            "handout.md",
            "answers.example.yaml",
            "instructor/solutions.md",
            "instructor/answers.yaml",
        ):
            assert (lab.dir / name).is_file(), f"{lab.name}/{name}"


def test_live_network_is_found_through_its_owner(tmp_path):
    import os

    from mcclab.labs import live
    from mcclab.state import LabState, proc_start_time

    work = tmp_path / "work"
    work.mkdir()
    assert live.find_live(work, lambda: []) is None
    record = live.LiveRecord(os.getpid(), proc_start_time(os.getpid()), "t.yaml", "frr10")
    (work / live.LIVE_FILE).write_text(json.dumps(record.__dict__))
    mine = LabState(lab_id="lab-a", status="up")  # owned by this (live) process
    other = LabState(lab_id="lab-b", status="up", owner_pid=1, owner_start=0)
    building = LabState(lab_id="lab-c", status="creating")
    assert live.find_live(work, lambda: [other]) is None
    assert live.find_live(work, lambda: [building]) is None
    found = live.find_live(work, lambda: [other, mine])
    assert found is not None and found.lab_id == "lab-a" and found.routing_backend == "frr10"
    argv = found.vtysh_argv("r2", "show ip mroute")
    assert argv[0].endswith("vtysh") and argv[-2:] == ["-c", "show ip mroute"]
    assert argv[2] == str(found.state_dir / "nodes" / "r2" / "frr")
    # A record whose owner has another start time (a recycled pid) is not this lab's.
    stale = live.LiveRecord(os.getpid(), -5, "t.yaml", "frr")
    (work / live.LIVE_FILE).write_text(json.dumps(stale.__dict__))
    assert live.find_live(work, lambda: [mine]) is None
    argv = live.up_argv(Path("/x/t.yaml"), 90, 5)
    assert argv[1:] == [
        "-m",
        "mcclab",
        "up",
        "/x/t.yaml",
        "--hold",
        "--timeout",
        "90",
        "--wait",
        "5",
    ]


def test_cli_list_and_check_json(tmp_path):
    from typer.testing import CliRunner

    from mcclab.cli import app

    runner = CliRunner()
    listed = runner.invoke(app, ["lab", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert rows[0] == {
        "id": 1,
        "slug": "igmp-pim",
        "title": "IGMP and PIM-SM on a chain",
        "level": "intro",
        "minutes": 60,
    }
    answers = tmp_path / "alice.yaml"
    answers.write_text("q1: r3\nq2: r3\nq3: 0\n")
    out = runner.invoke(
        app,
        [
            "lab",
            "check",
            "2",
            "--json",
            "--answers",
            str(answers),
            "--results",
            str(tmp_path / "results"),
        ],
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert set(doc) == {"lab", "slug", "results", "passed", "total"}
    status = {r["id"]: r["status"] for r in doc["results"]}
    assert status == {
        "q1": "pass",
        "q2": "fail",
        "q3": "pass",
        "q4": "pending",
        "q5": "pending",
        "q6": "pending",
        "q7": "pending",
        "q8": "unchecked",
    }
    assert (doc["passed"], doc["total"]) == (2, 7)
    bad = runner.invoke(
        app,
        [
            "lab",
            "check",
            "2",
            "--answers",
            str(tmp_path / "nope.yaml"),
            "--results",
            str(tmp_path / "results"),
        ],
    )
    assert bad.exit_code == 0  # a missing answers file is no answers: all pending
    answers.write_text("q1: [unclosed\n")
    broken = runner.invoke(app, ["lab", "check", "2", "--answers", str(answers)])
    assert broken.exit_code == 2 and "YAML syntax" in broken.output


def test_exec_points_vtysh_at_the_router(tmp_path):
    from mcclab.labs.cli import node_argv
    from mcclab.model.loader import load_topology
    from mcclab.state import LabState

    topo = load_topology(catalogue.REPO / "labs" / "01-igmp-pim" / "topology.yaml")
    state = LabState(lab_id="lab-x")
    argv = node_argv(state, topo, "r2", ["vtysh", "-c", "configure terminal", "-c", "x"])
    assert argv[:4] == ["ip", "netns", "exec", "mcl-r2"]
    assert argv[5:] == [
        "--vty_socket",
        str(state.path / "nodes" / "r2" / "frr"),
        "-c",
        "configure terminal",
        "-c",
        "x",
    ]
    # Hosts have no FRR, other commands pass through unchanged.
    assert node_argv(state, topo, "h2a", ["vtysh"]) == ["ip", "netns", "exec", "mcl-h2a", "vtysh"]
    assert node_argv(state, topo, "r2", ["ip", "route"])[4:] == ["ip", "route"]


def test_lab_run_runs_the_apps_run_command_into_the_work_folder(tmp_path, monkeypatch):
    # `mcclab lab run` hands the lab's experiment to the app's own `mcclab run` (found in
    # the command tree: mcclab.cli registers the lab commands, so no import back).
    import typer
    from typer.testing import CliRunner

    from mcclab.labs import cli as labs_cli

    calls = []
    app = typer.Typer()

    @app.command("run")
    def fake_run(experiment: str, profile: str = "paper",
                 set_: list[str] = typer.Option([], "--set"), results: Path = Path("results"),
                 wait: float = 0.0, fork: bool = True) -> None:
        calls.append({"experiment": experiment, "profile": profile, "set": list(set_),
                      "results": results, "wait": wait, "fork": fork})

    labs_cli.register(app)
    monkeypatch.setattr("mcclab.labs.live.stop", lambda work: None)
    out = CliRunner().invoke(app, ["lab", "run", "3", "cbr-tcp", "--set", "duration=5s",
                                   "--results", str(tmp_path), "--wait", "7"])
    assert out.exit_code == 0, out.output
    (call,) = calls
    assert call["experiment"].endswith("labs/03-why-cc/experiments/cbr-tcp.yaml")
    assert call["profile"] == "quick" and call["set"] == ["duration=5s"]
    assert call["results"] == tmp_path / "labs" / "03-why-cc" / "runs"
    assert call["wait"] == 7.0 and call["fork"] is True
