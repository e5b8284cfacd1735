"""The checks of labs 03-06 on synthetic results folders whose right answers are known.

Each lab's checks are loaded through the catalogue (as ``mcclab lab check`` does)
and graded with ``mcclab.labs.grade.run_checks`` against a work folder laid out
as the framework lays it out: ``<work>/runs/<experiment>/<run-id>/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from synthetic_runs import rows, write_run

from mcclab.labs import catalogue
from mcclab.labs.checks import LabContext
from mcclab.labs.grade import run_checks
from mcclab.resultsdir import PROTOCOL_COLUMNS

REPO = Path(__file__).resolve().parents[2]


def grade(lab: str, work: Path, answers: dict) -> dict[str, tuple[str, str]]:
    """question id -> (status, message) for ``answers`` against the runs in ``work``."""
    entry = catalogue.find(lab, REPO / "labs", REPO)
    checks = catalogue.load_checks(entry)
    ctx = LabContext(lab_dir=entry.dir, work_dir=work, answers=answers)
    return {r.id: (r.status, r.message) for r in run_checks(entry.spec, checks, ctx)}


def run_folder(work: Path, experiment: str, run_id: str = "20261126-120000-aaaa") -> Path:
    return work / "runs" / experiment / run_id


def write_protocol(folder: Path, records: list[dict]) -> None:
    pd.DataFrame(records, columns=PROTOCOL_COLUMNS).to_csv(
        folder / "tables" / "protocol.csv", index=False
    )


def checked(results: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {q: s for q, (s, _) in results.items() if s != "unchecked"}


# ---- lab 03 ------------------------------------------------------------------------

SECONDS = range(1, 41)


def lab03_work(tmp_path: Path, long_run: bool = True) -> Path:
    work = tmp_path / "work"
    cbr = rows("cbr", "multicast", "d1", 2.4e6, SECONDS, loss=0.05)  # 300 pkt/s, 16 lost
    write_run(
        run_folder(work, "cbr-tcp"),
        cbr + rows("tcp", "tcp", "d2", 0.6e6, SECONDS),
        duration_s=40,
        warmup_s=10,
    )
    specs = [("webrc-tcp", 1.6e6, 1.4e6)] + ([("webrc-tcp-long", 1.2e6, 1.8e6)] if long_run else [])
    for exp, webrc, tcp in specs:
        data = rows("webrc", "multicast", "d1", webrc, range(1, 91), 1024, loss=0.01)
        write_run(
            run_folder(work, exp),
            data + rows("tcp", "tcp", "d2", tcp, range(1, 91)),
            duration_s=90,
            warmup_s=45,
        )
    return work


LAB03_RIGHT = {"q1": 0.8, "q2": 600, "q3": 0.05, "q4": 0.53, "q5": 0.01, "q6": 0.4}


def test_lab03_right_answers_pass(tmp_path):
    results = grade("03", lab03_work(tmp_path), LAB03_RIGHT)
    assert set(checked(results).values()) == {"pass"}, results
    assert results["q7"][0] == results["q8"][0] == "unchecked"


def test_lab03_wrong_answers_say_what_is_wrong(tmp_path):
    work = lab03_work(tmp_path)
    answers = {**LAB03_RIGHT, "q1": 0.5, "q2": 600000, "q4": 0.6, "q6": "forty"}
    results = grade("03", work, answers)
    assert results["q1"][0] == "fail" and "0.80" in results["q1"][1]
    assert "per_second.csv" in results["q1"][1] and "10 < t <= 40" in results["q1"][1]
    assert results["q2"][0] == "fail" and "divide by 1000" in results["q2"][1]
    assert results["q4"][0] == "fail" and "0.53" in results["q4"][1]
    assert results["q6"][0] == "fail" and "not a number" in results["q6"][1]
    assert results["q3"][0] == results["q5"][0] == "pass"


def test_lab03_tolerances_are_the_stated_ones(tmp_path):
    work = lab03_work(tmp_path)
    inside = {**LAB03_RIGHT, "q1": 0.775, "q2": 545, "q3": 0.060, "q4": "56 %"}
    assert set(checked(grade("03", work, inside)).values()) == {"pass"}
    outside = {**LAB03_RIGHT, "q1": 0.765, "q2": 535, "q3": 0.062, "q4": 0.57}
    results = checked(grade("03", work, outside))
    assert [q for q, s in results.items() if s == "fail"] == ["q1", "q2", "q3", "q4"]


def test_lab03_left_out_step_and_empty_answers_are_pending(tmp_path):
    work = lab03_work(tmp_path, long_run=False)
    results = grade("03", work, {**LAB03_RIGHT, "q5": None})
    assert results["q6"][0] == "pending" and "step 6" in results["q6"][1]
    assert results["q5"][0] == "pending" and "answers.yaml" in results["q5"][1]
    assert results["q1"][0] == "pass"


def test_lab03_an_interrupted_run_fails_and_asks_for_the_step_again(tmp_path):
    work = lab03_work(tmp_path)
    info = run_folder(work, "cbr-tcp") / "run.json"
    info.write_text(json.dumps({**json.loads(info.read_text()), "status": "interrupted"}))
    status, message = grade("03", work, LAB03_RIGHT)["q1"]
    assert status == "fail" and "interrupted" in message and "step 2" in message


# ---- lab 04 ------------------------------------------------------------------------


def level_rows(node: str, levels: list[int], bps: float) -> list[dict]:
    out = []
    for t, level in enumerate(levels, start=1):
        out += rows("rlc", "multicast", node, bps, [t], 256, level=level)
    return out


def lab04_work(tmp_path: Path, deaf_run: bool = True) -> Path:
    work = tmp_path / "work"
    climb = [1] * 3 + [2] * 4 + [3] * 5 + [4] * 8 + [5] * 10 + [6] * 40  # 70 s
    for exp, n8_rate, n8_dec in (("rlc-layers", 300e3, 4), ("rlc-deaf", 150e3, 11)):
        if exp == "rlc-deaf" and not deaf_run:
            continue
        folder = run_folder(work, exp)
        data = (
            level_rows("n5", climb, 900e3)
            + level_rows("n8", [5] * 70, n8_rate)
            + level_rows("n9", [3] * 60 + [4] * 2 + [3] * 8, 80e3)
        )
        write_run(folder, data, duration_s=70, warmup_s=30)
        write_protocol(
            folder,
            [
                {
                    "t": t,
                    "flow": "rlc",
                    "node": "n8",
                    "role": "receiver",
                    "name": "deaf_periods",
                    "value": min(t // 6, n8_dec),
                }
                for t in range(1, 71)
            ],
        )
    return work


LAB04_RIGHT = {
    "q1": {"n5": 900, "n8": 300, "n9": 80},
    "q2": [4, 8, 13, 21],
    "q3": 4,
    "q4": 4,
    "q5": 11,
    "q6": 150,
}


def test_lab04_right_answers_pass(tmp_path):
    results = grade("04", lab04_work(tmp_path), LAB04_RIGHT)
    assert set(checked(results).values()) == {"pass"}, results


def test_lab04_wrong_answers_say_what_is_wrong(tmp_path):
    answers = {
        **LAB04_RIGHT,
        "q1": {"n5": 900, "n8": 500, "n9": 80},
        "q2": [4, 8, 16, 21],
        "q3": 3,
        "q5": 4,
    }
    results = grade("04", lab04_work(tmp_path), answers)
    assert results["q1"][0] == "fail" and "n8: yours 500, your run's 300" in results["q1"][1]
    assert results["q2"][0] == "fail" and "4 layers" in results["q2"][1]
    assert "t = 13" in results["q2"][1] and "3 layers" not in results["q2"][1]
    assert results["q3"][0] == "fail" and "your run's 4" in results["q3"][1]
    assert results["q5"][0] == "fail" and "deaf_periods" in results["q5"][1]
    # a time off by one second (the sampling step) still passes
    assert (
        grade("04", lab04_work(tmp_path / "b"), {**LAB04_RIGHT, "q2": [5, 7, 13, 22]})["q2"][0]
        == "pass"
    )


def test_lab04_left_out_step_is_pending(tmp_path):
    results = grade("04", lab04_work(tmp_path, deaf_run=False), LAB04_RIGHT)
    assert results["q5"][0] == results["q6"][0] == "pending"
    assert "step 5" in results["q5"][1] and "rlc-deaf" in results["q6"][1]
    assert results["q4"][0] == "pass"


# ---- lab 05 ------------------------------------------------------------------------

# the CR each second (1..90): h1, h2 from 21 s, h3 from 39 s, h2 from 57 s, then a near
# tie in period 5 (77-90 s): h1 7 of 13 seconds, h4 6
CR = ["h1"] * 20 + ["h2"] * 18 + ["h3"] * 18 + ["h2"] * 20 + ["h1", "h4"] * 6 + ["h1", "h1"]
RID = {"h1": 11, "h2": 12, "h3": 13, "h4": 14}


def lab05_work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    folder = run_folder(work, "clr-tracking")
    h4 = [800e3 if t <= 36 else 400e3 for t in range(1, 91)]
    write_run(folder, rows("multi", "multicast", "h4", h4, range(1, 91)), duration_s=90, warmup_s=0)
    proto = []
    for t, node in enumerate(CR, start=1):
        who = {"t": t, "flow": "multi", "role": "sender", "node": "src"}
        proto += [
            {**who, "name": "cr_id", "value": RID[node]},
            {**who, "name": "cr_valid", "value": 1},
        ]
        proto += [
            {"t": t, "flow": "multi", "role": "receiver", "node": n, "name": "rid", "value": rid}
            for n, rid in RID.items()
        ]
        proto.append(
            {
                "t": t,
                "flow": "multi",
                "role": "receiver",
                "node": "h4",
                "name": "ci_sent",
                "value": 3 if t > 80 else 0,
            }
        )
    write_protocol(folder, proto)
    return work


LAB05_RIGHT = {"q1": ["h1", "h2", "h3", "h2", "h1"], "q2": [800, 400], "q3": 3}


def test_lab05_right_answers_and_near_ties_pass(tmp_path):
    work = lab05_work(tmp_path)
    assert set(checked(grade("05", work, LAB05_RIGHT)).values()) == {"pass"}
    tie = {**LAB05_RIGHT, "q1": ["h1", "h2", "h3", "h2", "h4"]}
    assert grade("05", work, tie)["q1"][0] == "pass"


def test_lab05_wrong_answers_say_what_is_wrong(tmp_path):
    answers = {"q1": ["h1", "h2", "h2", "h2", "h1"], "q2": [800, 800], "q3": 30}
    results = grade("05", lab05_work(tmp_path), answers)
    status, message = results["q1"]
    assert status == "fail" and "period 3 (41-54 s): you wrote h2" in message
    assert "h3 100%" in message and "period 2" not in message
    assert results["q2"][0] == "fail" and "period 3" in results["q2"][1]
    assert "period 1" not in results["q2"][1]
    assert results["q3"][0] == "fail" and "ci_sent" in results["q3"][1]


def test_lab05_no_run_is_pending(tmp_path):
    results = grade("05", tmp_path / "empty", LAB05_RIGHT)
    assert {s for s, _ in checked_results(results)} == {"pending"}
    assert all("step 2" in m for _, m in checked_results(results))


def checked_results(results: dict[str, tuple[str, str]]) -> list[tuple[str, str]]:
    return [v for v in results.values() if v[0] != "unchecked"]


# ---- lab 06 ------------------------------------------------------------------------


def write_log(folder: Path, flow: str, joins: int, leaves: int) -> None:
    records = [{"t": 100.0 + i, "event": "join", "channel": i} for i in range(joins)]
    records += [{"t": 200.0 + i, "event": "leave", "channel": i} for i in range(leaves)]
    records.append({"t": 300.0, "event": "stats"})
    (folder / "logs" / f"{flow}-receiver-d1.jsonl").write_text(
        "\n".join(json.dumps(r, separators=(",", ":")) for r in records) + "\n"
    )


def lab06_work(tmp_path: Path, rlc_run: bool = True) -> Path:
    work = tmp_path / "work"
    stair = run_folder(work, "stair-fine")
    units = [2] * 15 + [3, 4, 5, 6, 4, 5, 6, 3, 4, 5] * 3 + [6] * 5  # 50 s
    data = []
    for t, u in enumerate(units, start=1):
        data += rows("stair", "multicast", "d1", 1.2e6, [t], 512, level=u)
    write_run(stair, data, duration_s=50, warmup_s=15)
    write_log(stair, "stair", 40, 70)
    if rlc_run:
        rlc = run_folder(work, "rlc-doubling")
        levels = [3] * 15 + ([5] * 6 + [6] * 1) * 5  # 50 s: 5 layers 30 s, 6 layers 5 s
        data = []
        for t, level in enumerate(levels, start=1):
            data += rows("rlc", "multicast", "d1", 1.0e6, [t], 256, level=level)
        write_run(rlc, data, duration_s=50, warmup_s=15)
        write_log(rlc, "rlc", 12, 6)
    return work


LAB06_RIGHT = {"q1": 1200, "q2": [3, 6], "q3": [40, 70], "q4": 1000, "q5": [5, 6], "q6": [12, 6]}


def test_lab06_right_answers_pass(tmp_path):
    results = grade("06", lab06_work(tmp_path), LAB06_RIGHT)
    assert set(checked(results).values()) == {"pass"}, results


def test_lab06_wrong_answers_say_what_is_wrong(tmp_path):
    answers = {**LAB06_RIGHT, "q2": [2, 6], "q3": [40, 50], "q5": [3, 5], "q6": "12 6"}
    results = grade("06", lab06_work(tmp_path), answers)
    assert results["q2"][0] == "fail" and "15 < t <= 50" in results["q2"][1]
    assert results["q3"][0] == "fail" and "leaves: yours 50, your run's 70" in results["q3"][1]
    assert "joins" not in results["q3"][1].split(".")[0]
    assert results["q5"][0] == "fail" and "5: 86%" in results["q5"][1]
    assert results["q6"][0] == "fail" and "[joins, leaves]" in results["q6"][1]


def test_lab06_left_out_step_is_pending(tmp_path):
    results = grade("06", lab06_work(tmp_path, rlc_run=False), LAB06_RIGHT)
    for q in ("q4", "q5", "q6"):
        assert results[q][0] == "pending" and "step 4" in results[q][1], results[q]
    assert results["q1"][0] == "pass"


@pytest.mark.parametrize("lab", ["03", "04", "05", "06"])
def test_example_answers_list_every_checked_question_and_instructor_answers_parse(lab):
    entry = catalogue.find(lab, REPO / "labs", REPO)
    import yaml

    example = yaml.safe_load((entry.dir / "answers.example.yaml").read_text())
    wanted = [q.id for q in entry.spec.questions if q.checked]
    assert list(example) == wanted and all(v is None for v in example.values())
    solutions = yaml.safe_load((entry.dir / "instructor" / "answers.yaml").read_text())
    assert set(wanted) <= set(solutions)
    assert (entry.dir / "instructor" / "solutions.md").is_file()


def test_a_run_still_going_is_pending_not_failed(tmp_path):
    work = lab06_work(tmp_path)
    info = run_folder(work, "stair-fine") / "run.json"
    info.write_text(json.dumps({**json.loads(info.read_text()), "status": "running"}))
    status, message = grade("06", work, LAB06_RIGHT)["q1"]
    assert status == "pending" and "still running" in message
