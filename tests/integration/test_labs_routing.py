"""Labs 1 and 2 played by a scripted student on a real network.

Each test starts the lab with ``mcclab lab start`` (its network held by a
detached ``mcclab up``), follows the handout's steps with the same commands a
student types (``mcclab exec``, ``mcclab capture``, ``mcclab link``), writes the
instructor's answers, and runs ``mcclab lab check --json``: every checked
question must pass. Then a wrong answer, and the student's work with a step left
out, must each fail exactly the matching check, with a message that says what is
wrong. The captures must hold the expected IGMP and PIM messages, counted with
tshark's own dissectors (independent of mcclab's decoder). Finally
``mcclab lab reset`` must stop the network it started, and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from tshark_support import tshark_count

from mcclab.labs.catalogue import find
from mcclab.labs.live import read_record
from mcclab.state import all_states

pytestmark = pytest.mark.root

MCCLAB = [sys.executable, "-m", "mcclab"]
LOCK_WAIT = os.environ.get("MCCLAB_TEST_LOCK_WAIT", "1800")


def mcclab(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run an mcclab command as a student would, output captured."""
    proc = subprocess.run(
        [*MCCLAB, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    if check:
        assert proc.returncode == 0, f"mcclab {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc


class Student:
    """One student's session in a lab: background commands, captures, answers, checks."""

    def __init__(self, lab: int, results: Path):
        self.lab, self.results = lab, results
        self.entry = find(lab)
        self.work = self.entry.work_dir(results)
        self.background: list[subprocess.Popen] = []

    def start(self) -> str:
        out = mcclab(
            "lab",
            "start",
            str(self.lab),
            "--results",
            str(self.results),
            "--wait",
            LOCK_WAIT,
            timeout=float(LOCK_WAIT) + 180,
        ).stdout
        assert "network up" in out, out
        return out

    def run(self, node: str, *argv: str) -> subprocess.Popen:
        """A long command in a node (a receiver, a sender), in its own process group."""
        proc = subprocess.Popen(
            [*MCCLAB, "exec", node, "--", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.background.append(proc)
        return proc

    def mcast(self, node: str, *words: str) -> subprocess.Popen:
        """The lab's multicast sender or receiver in a node (python -m mcclab.probes.mcast)."""
        return self.run(node, "python", "-m", "mcclab.probes.mcast", *words)

    def interrupt(self, proc: subprocess.Popen) -> str:
        """Ctrl-C for a background command; its output."""
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
        return out

    def capture(self, target: str, filter_: str, seconds: float, during) -> Path:  # noqa: ANN001
        """``mcclab capture`` for ``seconds``; ``during()`` runs once it listens."""
        before = set(self.captures())
        proc = subprocess.Popen(
            [
                *MCCLAB,
                "capture",
                target,
                "--filter",
                filter_,
                "--seconds",
                str(seconds),
                "--results",
                str(self.results),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        lines = []
        for line in proc.stdout:  # the first line says it listens
            lines.append(line)
            if line.startswith("capturing"):
                break
        assert lines and lines[-1].startswith("capturing"), "".join(lines)
        during()
        out, _ = proc.communicate(timeout=seconds + 60)
        assert proc.returncode == 0, "".join(lines) + out
        new = sorted(set(self.captures()) - before)
        assert len(new) == 1, (new, out)
        return new[0]

    def captures(self) -> list[Path]:
        return sorted((self.work / "captures").glob("*.pcap"))

    def vtysh(self, node: str, command: str) -> str:
        return mcclab("exec", node, "--", "vtysh", "-c", command).stdout

    def answer(self, answers: dict) -> None:
        (self.work / "answers.yaml").write_text(yaml.safe_dump(answers))

    def check(self, results: Path | None = None) -> dict[str, dict]:
        out = mcclab(
            "lab", "check", str(self.lab), "--json", "--results", str(results or self.results)
        ).stdout
        doc = json.loads(out)
        assert doc["lab"] == self.lab and doc["slug"] == self.entry.spec.slug
        return {r["id"]: r for r in doc["results"]} | {"_doc": doc}

    def stop(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(10)
        mcclab("lab", "reset", str(self.lab), "--results", str(self.results), check=False)


def all_pass(results: dict) -> list[str]:
    """Checked questions that do not pass, with their messages."""
    return [
        f"{k}: {v['status']}: {v['message']}"
        for k, v in results.items()
        if k != "_doc" and v["status"] not in ("pass", "unchecked")
    ]


def instructor_answers(lab: int) -> dict:
    return yaml.safe_load((find(lab).dir / "instructor" / "answers.yaml").read_text())


def without(results: Path, work: Path, pcap: Path, copy: Path) -> Path:
    """A copy of the student's results with one capture left out (a step not done)."""
    target = copy / "labs" / work.name
    shutil.copytree(work, target, ignore=shutil.ignore_patterns("live.json"))
    (target / "captures" / pcap.name).unlink()
    return copy


def owner_gone(student: Student, pid: int) -> bool:
    return not any(s.owner_pid == pid for s in all_states())


@pytest.mark.timeout(420)
def test_lab1_igmp_pim_scripted_student(tmp_path):
    student = Student(1, tmp_path / "results")
    try:
        out = student.start()
        assert "Step 1" in out and "mcclab lab start 1" in out
        pid = read_record(student.work).pid
        assert (student.work / "answers.yaml").read_text().startswith("# Lab 1")
        # Step 2: neighbours and RP, as the student reads them.
        assert student.vtysh("r2", "show ip pim neighbor").count("10.0.") >= 2
        assert "10.0.2.2" in student.vtysh("r2", "show ip pim rp-info")
        # Step 3: h2a joins while r2-h2a is captured.
        recv: list[subprocess.Popen] = []
        join_pcap = student.capture(
            "r2-h2a",
            "igmp",
            6,
            lambda: recv.append(
                student.mcast(
                    "h2a",
                    "recv",
                    "--groups",
                    "239.1.1.1",
                    "--hold",
                    "--timeout",
                    "600",
                )
            ),
        )
        # Step 4: the shared tree.
        assert "239.1.1.1" in student.vtysh("r2", "show ip mroute")
        # Step 5: the source starts while r2-r3 is captured: Registers to the RP on r3,
        # the RP's (S,G) join through r2, and r2's (S,G,rpt) prune back to the RP.
        spt_pcap = student.capture(
            "r2-r3",
            "pim",
            10,
            lambda: student.mcast(
                "src", "send", "--groups", "239.1.1.1", "--rate", "20", "--duration", "600"
            ),
        )
        mroute = student.vtysh("r2", "show ip mroute")
        assert "10.0.0.1" in mroute and "r2-eth0" in mroute, mroute
        # Step 6: h2a leaves while r2-h2a is captured.
        leave_pcap = student.capture(
            "r2-h2a", "igmp", 8, lambda: (time.sleep(1), student.interrupt(recv[0]))
        )
        # The messages on the wire, counted by tshark.
        assert (
            tshark_count(
                join_pcap, "igmp.type == 0x22 && igmp.maddr == 239.1.1.1 && igmp.record_type == 4"
            )
            >= 1
        )
        assert tshark_count(spt_pcap, "pim.type == 1") >= 1  # Register
        assert tshark_count(spt_pcap, "pim.type == 2") >= 1  # Register-Stop
        assert tshark_count(spt_pcap, "pim.type == 3 && pim.numjoins > 0") >= 1
        assert (
            tshark_count(spt_pcap, "pim.type == 3 && pim.numprunes > 0 && ip.src == 10.0.2.1") >= 1
        )
        assert tshark_count(leave_pcap, "igmp.type == 0x22 && igmp.record_type == 3") >= 1
        assert tshark_count(leave_pcap, "igmp.type == 0x11 && igmp.maddr == 239.1.1.1") >= 2
        # Every check passes with the right answers.
        answers = instructor_answers(1)
        student.answer(answers)
        results = student.check()
        assert not all_pass(results), all_pass(results)
        assert results["_doc"]["passed"] == results["_doc"]["total"] == 7
        assert results["q8"]["status"] == "unchecked"
        # A wrong answer fails its check, saying what is wrong.
        student.answer({**answers, "q2": "r3", "q4": "r1"})
        wrong = student.check()
        assert wrong["q2"]["status"] == "fail" and "RP's name" in wrong["q2"]["message"]
        assert wrong["q4"]["status"] == "fail" and "towards the source" in wrong["q4"]["message"]
        assert [k for k, v in wrong.items() if k != "_doc" and v["status"] == "fail"] == [
            "q2",
            "q4",
        ]
        student.answer(answers)
        # Step 5 left out: no Register, no (S,G,rpt) prune in the captures.
        skipped = student.check(
            without(student.results, student.work, spt_pcap, tmp_path / "skipped")
        )
        assert skipped["q5"]["status"] == skipped["q6"]["status"] == "fail", skipped
        assert "no PIM Register" in skipped["q5"]["message"]
        assert "no (S,G,rpt) prune from r2" in skipped["q6"]["message"]
        assert not all_pass({k: v for k, v in skipped.items() if k not in ("q5", "q6")})
        # A wrong reading of the capture fails q7.
        student.answer({**answers, "q7": 5})
        assert "not what your capture shows" in student.check()["q7"]["message"]
    finally:
        student.stop()
    assert owner_gone(student, pid)
    assert not (student.work / "live.json").exists()


@pytest.mark.timeout(420)
def test_lab2_asm_ssm_scripted_student(tmp_path):
    student = Student(2, tmp_path / "results")
    try:
        student.start()
        pid = read_record(student.work).pid
        assert "dev r4-eth1" in mcclab("exec", "r4", "--", "ip", "route", "get", "10.0.2.2").stdout
        assert "dev r4-eth0" in mcclab("exec", "r4", "--", "ip", "route", "get", "10.0.0.1").stdout
        student.mcast(
            "src",
            "send",
            "--groups",
            "239.2.2.2,232.2.2.2",
            "--rate",
            "20",
            "--duration",
            "600",
        )
        # Step 3: ASM join; the (*,G) comes from r3's side.
        asm = student.mcast(
            "h4",
            "recv",
            "--groups",
            "239.2.2.2",
            "--hold",
            "--timeout",
            "600",
        )
        deadline = time.monotonic() + 30
        while "239.2.2.2" not in student.vtysh("r4", "show ip mroute"):
            assert time.monotonic() < deadline, "r4 never made the (*,G) entry"
            time.sleep(1)
        student.interrupt(asm)
        # Step 4: an SSM group without a source gets nothing.
        out = mcclab(
            "exec",
            "h4",
            "--",
            "python",
            "-m",
            "mcclab.probes.mcast",
            "recv",
            "--groups",
            "232.2.2.2",
            "--timeout",
            "5",
            timeout=60,
        ).stdout
        assert json.loads(out.strip().splitlines()[-1])["packets"] == 0
        # Step 5: the channel join, captured.
        recv: list[subprocess.Popen] = []
        join_pcap = student.capture(
            "r4-h4",
            "igmp",
            6,
            lambda: recv.append(
                student.mcast(
                    "h4",
                    "recv",
                    "--groups",
                    "232.2.2.2",
                    "--source",
                    "10.0.0.1",
                    "--hold",
                    "--timeout",
                    "600",
                )
            ),
        )
        # Step 6: r2-r4 goes down while r3-r4 is captured: r4 joins through r3.
        down_pcap = student.capture("r3-r4", "pim", 8, lambda: mcclab("link", "r2", "r4", "down"))
        assert "links down now: none" in mcclab("link", "r2", "r4", "up").stdout
        assert (
            tshark_count(
                join_pcap,
                "igmp.type == 0x22 && igmp.maddr == 232.2.2.2 && "
                "igmp.record_type == 5 && igmp.saddr == 10.0.0.1",
            )
            >= 1
        )
        assert (
            tshark_count(down_pcap, "pim.type == 3 && pim.numjoins > 0 && pim.group == 232.2.2.2")
            >= 1
        )
        answers = instructor_answers(2)
        student.answer(answers)
        results = student.check()
        assert not all_pass(results), all_pass(results)
        assert results["_doc"]["passed"] == results["_doc"]["total"] == 7
        student.answer({**answers, "q2": "r3", "q7": "yes"})
        wrong = student.check()
        assert wrong["q2"]["status"] == "fail" and "not r3" in wrong["q2"]["message"]
        assert wrong["q7"]["status"] == "fail" and "route to the RP" in wrong["q7"]["message"]
        student.answer(answers)
        skipped = student.check(
            without(student.results, student.work, down_pcap, tmp_path / "skipped")
        )
        assert skipped["q6"]["status"] == "fail"
        assert "mcclab link r2 r4 down" in skipped["q6"]["message"]
    finally:
        student.stop()
    assert owner_gone(student, pid)


CAPTURE_RUN = """\
name: capture-run
description: CBR multicast from src to h2n1 and h3n1 on chain3, captured (test-only).
reference: "none (lab acceptance test)"
topology: topologies/chain3.yaml
duration: 10s
warmup: 1s
flows:
  - name: cbr
    type: multicast
    protocol: cbr
    sender: src
    receivers: [h2n1, h3n1]
    params: {rate: 200kbit, packet_size: 500B}
captures:
  - {on: r2-r3, filter: pim}
  - {on: h3n1, filter: igmp}
profiles:
  quick: {scaling: "as written", set: {}}
  paper: {}
"""


@pytest.mark.timeout(300)
def test_experiment_captures_and_report_timeline(tmp_path):
    spec = tmp_path / "capture-run.yaml"
    spec.write_text(CAPTURE_RUN)
    mcclab(
        "run",
        str(spec),
        "--profile",
        "quick",
        "--results",
        str(tmp_path / "results"),
        "--wait",
        LOCK_WAIT,
        timeout=float(LOCK_WAIT) + 240,
    )
    (run,) = (tmp_path / "results" / "capture-run").iterdir()
    folder = run / "captures"
    index = json.loads((folder / "captures.json").read_text())
    assert [(c["on"], c["filter"]) for c in index] == [("r2-r3", "pim"), ("h3n1", "igmp")]
    pim, igmp = (folder / c["file"] for c in index)
    # r3 joins the group towards the RP (r1), or the source, through r2: a join on r2-r3.
    assert tshark_count(pim, "pim.type == 3 && pim.numjoins > 0") >= 1
    # h3n1's join of the flow's group, and the leave at the end of its receiver.
    assert (
        tshark_count(igmp, "igmp.type == 0x22 && (igmp.record_type == 4 || igmp.record_type == 5)")
        >= 1
    )
    page = (run / "report.html").read_text()
    assert "Captures: IGMP and PIM timeline" in page
    assert "join (" in page and ("TO_EX" in page or "ALLOW" in page)
