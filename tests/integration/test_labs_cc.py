"""Labs 03-06 end to end: each lab's experiments run once on real namespaces and
routers, then a scripted student answers from the results folder and is graded.

For each lab a module-scoped fixture runs every experiment the lab lists once
(``mcclab lab run N EXPERIMENT``, as the handouts say: the runs land where the
lab's checks read them, ``<results>/labs/NN-slug/runs/<experiment>/<run-id>/``). Then

- the scripted student reads the files the handout points to (``run.json``,
  ``tables/per_second.csv``, ``tables/protocol.csv``, the agents' event logs) with
  pandas, the way the handout says, and never calls the checks' own code; every
  checked question must pass;
- a wrong answer fails its check with a message that names the measured value
  and where to read it, and a left-out step (a work folder without one of the
  runs) leaves the matching checks pending with the step to do.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest
from labrun import run_mcclab

from mcclab.labs import catalogue
from mcclab.labs.checks import LabContext
from mcclab.labs.grade import run_checks

pytestmark = [pytest.mark.root]

REPO = Path(__file__).resolve().parents[2]
TIMES: dict[str, float] = {}


# ---- running a lab's experiments and grading --------------------------------------


def run_lab(lab: str, root: Path) -> tuple[Path, dict[str, Path]]:
    """Run each experiment of the lab once as a student does (`mcclab lab run`).

    Returns the lab's work folder (``<root>/labs/NN-slug``) and experiment -> its run.
    """
    entry = catalogue.find(lab, REPO / "labs", REPO)
    work = entry.work_dir(root)
    folders = {}
    for name in entry.spec.experiments:
        stem = Path(name).stem
        started = time.monotonic()
        out = run_mcclab(["lab", "run", lab, stem, "--results", str(root),
                          "--wait", "1800"], timeout=2400, cwd=REPO)
        TIMES[f"{lab}/{stem}"] = time.monotonic() - started
        runs = list((work / "runs" / stem).iterdir()) if (work / "runs" / stem).is_dir() else []
        assert len(runs) == 1, out.stdout[-3000:] + out.stderr[-3000:]
        (folder,) = runs
        # the checks read the run's tables; the exit code also covers the report
        status = json.loads((folder / "run.json").read_text())["status"]
        assert status == "complete", out.stdout[-3000:] + out.stderr[-3000:]
        folders[stem] = folder
    return work, folders


def grade(lab: str, work: Path, answers: dict) -> dict[str, tuple[str, str]]:
    """question id -> (status, message), as `mcclab lab check` grades them."""
    entry = catalogue.find(lab, REPO / "labs", REPO)
    ctx = LabContext(lab_dir=entry.dir, work_dir=work, answers=answers)
    results = run_checks(entry.spec, catalogue.load_checks(entry), ctx)
    return {r.id: (r.status, r.message) for r in results}


def failures(results: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    return {q: v for q, v in results.items() if v[0] not in ("pass", "unchecked")}


def without(work: Path, experiment: str, tmp: Path) -> Path:
    """A copy of the work folder without the runs of ``experiment`` (a left-out step)."""
    copy = tmp / "left-out"
    shutil.copytree(work / "runs", copy / "runs", ignore=shutil.ignore_patterns("*.pcap"),
                    symlinks=True)
    shutil.rmtree(copy / "runs" / experiment)
    return copy


@pytest.fixture(scope="module", autouse=True)
def report_times():
    yield
    if TIMES:
        print("\nlab run times (s): " + ", ".join(f"{k} {v:.0f}" for k, v in TIMES.items()))


# ---- what a student does with a results folder (pandas, as the handouts say) ------


def window(folder: Path) -> pd.DataFrame:
    """per_second.csv rows with warmup_s < t <= duration_s."""
    info = json.loads((folder / "run.json").read_text())
    table = pd.read_csv(folder / "tables" / "per_second.csv")
    return table[(table.t > info["warmup_s"]) & (table.t <= info["duration_s"])]


def mean_kbit(rows: pd.DataFrame, flow: str, node: str) -> float:
    return rows[(rows.flow == flow) & (rows.node == node)].throughput_bps.mean() / 1e3


def loss(rows: pd.DataFrame, flow: str, node: str) -> float:
    mine = rows[(rows.flow == flow) & (rows.node == node)]
    return mine.lost.sum() / (mine.packets.sum() + mine.lost.sum())


def protocol(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "tables" / "protocol.csv")


def last_counter(folder: Path, flow: str, node: str, name: str) -> float:
    p = protocol(folder)
    rows = p[(p.flow == flow) & (p.node == node) & (p.name == name)].sort_values("t")
    return float(rows.value.iloc[-1])


def count_events(log: Path, event: str) -> int:
    return sum(f'"event":"{event}"' in line for line in log.read_text().splitlines())


def share(rows: pd.DataFrame, flow: str) -> float:
    mine, tcp = mean_kbit(rows, flow, "d1"), mean_kbit(rows, "tcp", "d2")
    return round(mine / (mine + tcp), 2)


# ---- lab 03 ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab03(tmp_path_factory):
    return run_lab("03", tmp_path_factory.mktemp("lab03"))


def student03(runs: dict[str, Path]) -> dict:
    cbr, webrc, long = (window(runs[e]) for e in ("cbr-tcp", "webrc-tcp", "webrc-tcp-long"))
    return {"q1": share(cbr, "cbr"), "q2": round(mean_kbit(cbr, "tcp", "d2")),
            "q3": round(loss(cbr, "cbr", "d1"), 4), "q4": share(webrc, "webrc"),
            "q5": round(loss(webrc, "webrc", "d1"), 4), "q6": share(long, "webrc")}


@pytest.mark.timeout(600)  # three runs: 40 + 90 + 90 s plus bring-up (measured: see report)
def test_lab03_student_passes(lab03):
    work, runs = lab03
    answers = student03(runs)
    results = grade("03", work, answers)
    assert not failures(results), (answers, results)
    # the lesson itself: CBR takes more than its share, WEBRC less than CBR
    assert answers["q1"] > 0.6 and answers["q4"] < answers["q1"], answers


@pytest.mark.timeout(120)
def test_lab03_wrong_answer_and_left_out_step(lab03, tmp_path):
    work, runs = lab03
    answers = student03(runs)
    wrong = {**answers, "q1": round(answers["q1"] - 0.2, 2), "q2": answers["q2"] * 1000}
    results = grade("03", work, wrong)
    assert results["q1"][0] == "fail" and f"{answers['q1']:.2f}" in results["q1"][1]
    assert "tables/per_second.csv" in results["q1"][1]
    assert results["q2"][0] == "fail" and "divide by 1000" in results["q2"][1]
    left_out = grade("03", without(work, "webrc-tcp-long", tmp_path), answers)
    assert left_out["q6"][0] == "pending" and "step 6" in left_out["q6"][1]
    assert set(failures(left_out)) == {"q6"}


# ---- lab 04 ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab04(tmp_path_factory):
    return run_lab("04", tmp_path_factory.mktemp("lab04"))


def student04(runs: dict[str, Path]) -> dict:
    layers, deaf = runs["rlc-layers"], runs["rlc-deaf"]
    rows = window(layers)
    table = pd.read_csv(layers / "tables" / "per_second.csv")
    n5 = table[(table.flow == "rlc") & (table.node == "n5")].sort_values("t")
    n9 = table[(table.flow == "rlc") & (table.node == "n9")]
    climb = [float(n5[n5.level >= k].t.iloc[0]) if (n5.level >= k).any() else None
             for k in (2, 3, 4, 5)]
    return {"q1": {n: round(mean_kbit(rows, "rlc", n)) for n in ("n5", "n8", "n9")},
            "q2": climb, "q3": int(n9.level.max()),
            "q4": last_counter(layers, "rlc", "n8", "deaf_periods"),
            "q5": last_counter(deaf, "rlc", "n8", "deaf_periods"),
            "q6": round(mean_kbit(window(deaf), "rlc", "n8"))}


@pytest.mark.timeout(480)  # two runs of 70 s plus bring-up
def test_lab04_student_passes(lab04):
    work, runs = lab04
    answers = student04(runs)
    results = grade("04", work, answers)
    assert not failures(results), (answers, results)
    # multi-rate: the faster the bottleneck, the more the receiver gets
    rates = answers["q1"]
    assert rates["n5"] > rates["n8"] > rates["n9"], rates


@pytest.mark.timeout(120)
def test_lab04_wrong_answer_and_left_out_step(lab04, tmp_path):
    work, runs = lab04
    answers = student04(runs)
    wrong = {**answers, "q3": answers["q3"] + 2,
             "q1": {**answers["q1"], "n9": answers["q1"]["n9"] * 3}}
    results = grade("04", work, wrong)
    assert results["q3"][0] == "fail" and f"your run's {answers['q3']}" in results["q3"][1]
    assert results["q1"][0] == "fail" and "n9: yours" in results["q1"][1]
    assert "n5:" not in results["q1"][1]
    left_out = grade("04", without(work, "rlc-deaf", tmp_path), answers)
    assert set(failures(left_out)) == {"q5", "q6"}
    assert all(s == "pending" and "step 5" in m for s, m in failures(left_out).values())


# ---- lab 05 ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab05(tmp_path_factory):
    return run_lab("05", tmp_path_factory.mktemp("lab05"))


PERIODS = [(5, 18), (23, 36), (41, 54), (59, 72), (77, 90)]


def student05(runs: dict[str, Path]) -> dict:
    folder = runs["clr-tracking"]
    p = protocol(folder)
    p = p[p.flow == "multi"]
    rid = {int(v): n for n, v in p[p.name == "rid"].groupby("node").value.last().items()}
    sender = p[p.node == "src"].pivot_table(index="t", columns="name", values="value",
                                            aggfunc="last")
    cr = sender[sender.cr_valid >= 0.5].cr_id.map(lambda v: rid.get(int(v), "?"))
    crs = [cr[(cr.index > a) & (cr.index <= b)].mode().iloc[0] for a, b in PERIODS]
    table = pd.read_csv(folder / "tables" / "per_second.csv")
    h4 = table[(table.flow == "multi") & (table.node == "h4")]
    rates = [round(h4[(h4.t > a) & (h4.t <= b)].throughput_bps.mean() / 1e3)
             for a, b in (PERIODS[0], PERIODS[2])]
    return {"q1": crs, "q2": rates, "q3": last_counter(folder, "multi", "h4", "ci_sent")}


@pytest.mark.timeout(400)  # one run of 90 s with 11 TCP flows, plus bring-up
def test_lab05_student_passes(lab05):
    work, runs = lab05
    answers = student05(runs)
    results = grade("05", work, answers)
    assert not failures(results), (answers, results)


@pytest.mark.timeout(120)
def test_lab05_wrong_answer_and_left_out_step(lab05, tmp_path):
    work, runs = lab05
    answers = student05(runs)
    # a receiver that never was the CR in period 3: h4 has no cross traffic
    wrong = {**answers, "q1": answers["q1"][:2] + ["h4"] + answers["q1"][3:]}
    results = grade("05", work, wrong)
    assert results["q1"][0] == "fail" and "period 3 (41-54 s): you wrote h4" in results["q1"][1]
    assert "period 1" not in results["q1"][1]
    left_out = grade("05", without(work, "clr-tracking", tmp_path), answers)
    assert {s for s, _ in failures(left_out).values()} == {"pending"}
    assert set(failures(left_out)) == {"q1", "q2", "q3"}


# ---- lab 06 ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab06(tmp_path_factory):
    return run_lab("06", tmp_path_factory.mktemp("lab06"))


def student06(runs: dict[str, Path]) -> dict:
    stair, rlc = runs["stair-fine"], runs["rlc-doubling"]
    srows, rrows = window(stair), window(rlc)
    units = srows[(srows.flow == "stair") & (srows.node == "d1")].level
    levels = rrows[(rrows.flow == "rlc") & (rrows.node == "d1")].level.value_counts()
    slog, rlog = (f / "logs" / f"{n}-receiver-d1.jsonl" for f, n in ((stair, "stair"),
                                                                       (rlc, "rlc")))
    return {"q1": round(mean_kbit(srows, "stair", "d1")),
            "q2": [int(units.min()), int(units.max())],
            "q3": [count_events(slog, "join"), count_events(slog, "leave")],
            "q4": round(mean_kbit(rrows, "rlc", "d1")),
            "q5": [int(v) for v in levels.index[:2]],
            "q6": [count_events(rlog, "join"), count_events(rlog, "leave")]}


@pytest.mark.timeout(400)  # two runs of 50 s plus bring-up
def test_lab06_student_passes(lab06):
    work, runs = lab06
    answers = student06(runs)
    results = grade("06", work, answers)
    assert not failures(results), (answers, results)
    # fine grain costs group changes: STAIR joins and leaves more often than RLC
    assert sum(answers["q3"]) > sum(answers["q6"]), answers


@pytest.mark.timeout(120)
def test_lab06_wrong_answer_and_left_out_step(lab06, tmp_path):
    work, runs = lab06
    answers = student06(runs)
    joins, leaves = answers["q3"]
    wrong = {**answers, "q3": [joins, leaves + max(5, leaves)], "q4": answers["q4"] * 2}
    results = grade("06", work, wrong)
    assert results["q3"][0] == "fail" and f"your run's {leaves}" in results["q3"][1]
    assert results["q4"][0] == "fail" and "tables/per_second.csv" in results["q4"][1]
    left_out = grade("06", without(work, "rlc-doubling", tmp_path), answers)
    assert set(failures(left_out)) == {"q4", "q5", "q6"}
    assert all(s == "pending" and "step 4" in m for s, m in failures(left_out).values())

