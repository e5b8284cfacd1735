"""``--json`` on ``mcclab check``, ``report`` and ``compare``: what they print, as data.

``check`` needs a lab: here its two lab steps (bring-up and the reach probe) are
replaced by fakes that answer as a lab would, so the JSON and the exit status are
checked against known packet counts without building a network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from synthetic_runs import demo_run, rows, write_run
from typer.testing import CliRunner

import mcclab.cli
import mcclab.probes.reach
from mcclab.probes.reach import ASM_GROUP, SSM_GROUP, ReachReport

REPO = Path(__file__).resolve().parents[2]
STAR = REPO / "topologies" / "star4.yaml"
runner = CliRunner()


# -- check ------------------------------------------------------------------------------------

class _Routers:
    def ready_summary(self) -> str:
        return "fake: ready"


class _FakeLab:
    routers = _Routers()
    link_backend = "fake"
    downs = 0

    def down(self) -> None:
        _FakeLab.downs += 1


def _fake_lab(monkeypatch, leak: int = 0, slow: str | None = None) -> dict:
    """Replace bring-up and the probe: joined hosts get full rate (``slow``: a third of it),
    the first host that did not join sees ``leak`` packets of each group."""
    seen: dict = {}

    def reach(lab, source, joiners, join_timeout):  # noqa: ANN001, ANN202
        seen.update(source=source, joiners=joiners)
        report = ReachReport(window_s=2.0, rate_pps=200.0)
        hosts = mcclab.cli.load_topology(STAR).names("host")
        outsiders = [h for h in hosts if h != source and h not in joiners]
        for host in hosts:
            report.iface_node[f"{host}-eth0"] = host
            for group in (ASM_GROUP, SSM_GROUP):
                if host in joiners:
                    got = 400 // (3 if host == slow else 1)
                    report.latency[(host, group)] = 0.012
                else:
                    got = leak if outsiders and host == outsiders[0] else 0
                report.arrived[(f"{host}-eth0", group)] = got
        return report

    monkeypatch.setattr(mcclab.cli, "_bring_up", lambda topo, timeout, wait: _FakeLab())
    monkeypatch.setattr(mcclab.probes.reach, "reach", reach)
    return seen


def test_check_json_lists_every_host_and_group(monkeypatch):
    seen = _fake_lab(monkeypatch)
    downs = _FakeLab.downs
    result = runner.invoke(mcclab.cli.app, ["check", str(STAR), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)  # stdout is the JSON alone: "ready" went to stderr
    assert "ready: routing" in result.stderr
    assert _FakeLab.downs == downs + 1
    others = [h for h in mcclab.cli.load_topology(STAR).names("host") if h != seen["source"]]
    assert record["sender"] == seen["source"] and record["ok"] is True
    assert (record["rate_pps"], record["window_s"]) == (200.0, 2.0)
    assert [(r["host"], r["group"]) for r in record["hosts"]] == [
        (h, g) for h in others for g in (ASM_GROUP, SSM_GROUP)]
    for row in record["hosts"]:
        assert row["joined"] == (row["host"] in seen["joiners"])
        assert row["ssm"] == (row["group"] == SSM_GROUP)
        assert row["packets"] == (400 if row["joined"] else 0)
        assert row["join_latency_s"] == (0.012 if row["joined"] else None)


@pytest.mark.parametrize("fault", ["leak", "slow"])
def test_check_json_marks_a_wrong_host_and_exits_1(monkeypatch, fault):
    hosts = mcclab.cli.load_topology(STAR).names("host")
    joined = [h for h in hosts if h != hosts[0]][::2]  # as the command picks them
    seen = _fake_lab(monkeypatch, leak=5 if fault == "leak" else 0,
                     slow=joined[0] if fault == "slow" else None)
    result = runner.invoke(mcclab.cli.app, ["check", str(STAR), "--json"])
    assert result.exit_code == 1
    record = json.loads(result.stdout)
    wrong = {r["host"] for r in record["hosts"] if not r["ok"]}
    expected = joined[0] if fault == "slow" else next(
        h for h in hosts if h != seen["source"] and h not in seen["joiners"])
    assert record["ok"] is False and wrong == {expected}


def test_check_table_uses_the_same_verdicts(monkeypatch):
    _fake_lab(monkeypatch, leak=5)
    result = runner.invoke(mcclab.cli.app, ["check", str(STAR)], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert result.stdout.count("WRONG") == 2  # the leaking host, in both groups


# -- report -----------------------------------------------------------------------------------

def test_report_json_is_the_summary_it_wrote(tmp_path):
    run = demo_run(tmp_path / "webrc-fig9" / "run1")
    missing = tmp_path / "webrc-fig9" / "gone"
    result = runner.invoke(mcclab.cli.app, ["report", "--json", str(run), str(missing)])
    assert result.exit_code == 2  # one folder could not be read
    assert str(missing) in result.stderr
    [record] = json.loads(result.stdout)
    assert record["kind"] == "run" and record["report"] == str(run / "report.html")
    assert record["summary"] == json.loads((run / "summary.json").read_text())
    assert (run / "report.html").is_file()
    verdicts = {q["label"]: q["verdict"] for q in record["summary"]["quantities"]}
    assert verdicts["WEBRC throughput"] == "pass" and len(verdicts) == 6


# -- compare ----------------------------------------------------------------------------------

def test_compare_json_matches_each_runs_summary(tmp_path):
    root = tmp_path / "webrc-fig9"
    runs = [demo_run(root / "run1"), demo_run(root / "run2", status="interrupted",
                                                elapsed_s=71.4)]
    result = runner.invoke(mcclab.cli.app, ["compare", "--json", *map(str, runs)])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert [(r["name"], r["status"]) for r in record["runs"]] == [
        ("run1", "complete"), ("run2", "interrupted")]
    assert all(Path(p).is_file() for p in record["figures"])
    by_label = {q["label"]: q for q in record["quantities"]}
    assert len(by_label) == 6
    throughput = by_label["WEBRC throughput"]
    assert (throughput["paper"], throughput["tolerance"], throughput["unit"]) == (
        1.6e6, 0.1, "bit/s")
    for run in runs:  # the same analysis as `mcclab report`
        runner.invoke(mcclab.cli.app, ["report", str(run)])
        summary = json.loads((run / "summary.json").read_text())
        for q in summary["quantities"]:
            assert by_label[q["label"]]["runs"][run.name] == {
                "measured": q["measured"], "verdict": q["verdict"], "margin": q["margin"]}


def test_compare_json_across_experiments_has_nulls_where_a_run_lacks_a_quantity(tmp_path):
    one = demo_run(tmp_path / "webrc-fig9" / "run1")
    other = write_run(tmp_path / "other" / "x1", rows("m", "multicast", "r1", 1e6, range(1, 61)),
                      references=[{"kind": "throughput", "label": "WEBRC throughput",
                                   "flow": "m", "paper": "1Mbit", "tolerance": "10%"}])
    result = runner.invoke(mcclab.cli.app, ["compare", "--json", str(one), str(other)])
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    by_label = {q["label"]: q for q in record["quantities"]}
    assert by_label["WEBRC throughput"]["papers_differ"] is True
    assert by_label["WEBRC share"]["runs"] == {
        "webrc-fig9/run1": by_label["WEBRC share"]["runs"]["webrc-fig9/run1"], "other/x1": None}
    assert by_label["WEBRC throughput"]["runs"]["other/x1"]["verdict"] == "pass"


def test_compare_json_refuses_an_unreadable_folder(tmp_path):
    result = runner.invoke(mcclab.cli.app, ["compare", "--json", str(tmp_path / "none")])
    assert result.exit_code == 2 and result.stdout == ""


def test_report_json_of_a_sweep_is_its_record(tmp_path):
    from mcclab.analysis.sweep_report import build_sweep_report
    from mcclab.experiment.runner import RunOptions, new_run_dir
    from mcclab.experiment.sweep import SweepOptions, run_sweep

    spec = tmp_path / "sw.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "sw", "topology": "topologies/dumbbell.yaml", "duration": "10s",
        "flows": [{"name": "cbr", "type": "multicast", "protocol": "cbr", "sender": "s1",
                   "receivers": ["d1"], "params": {"rate": "100kbit"}}],
        "sweeps": {"seeds": {"over": {"seed": [1, 2]}}}}))

    def execute(res, options: RunOptions) -> Path:  # a run as the runner leaves it, no lab
        folder = new_run_dir(options.results, res.experiment.name)
        options.started(folder)
        write_run(folder, rows("cbr", "multicast", "d1", 1e5, range(1, 11)), duration_s=10.0,
                  warmup_s=0.0, spec=res.experiment.model_dump(mode="json"))
        return folder

    folder = run_sweep(str(spec), "seeds", "paper", SweepOptions(
        run=RunOptions(results=tmp_path / "results"), execute=execute,
        report=build_sweep_report))
    result = runner.invoke(mcclab.cli.app, ["report", "--json", str(folder)])
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert record["kind"] == "sweep" and record["report"] == str(folder / "report.html")
    assert record["sweep"] == json.loads((folder / "sweep.json").read_text())
    assert [r["status"] for r in record["sweep"]["runs"]] == ["complete", "complete"]
