"""What the ``mcclab lab`` commands do, apart from printing (the CLI only formats)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcclab.labs import live
from mcclab.labs.catalogue import LabEntry, load_checks
from mcclab.labs.checks import LabContext
from mcclab.labs.grade import Result, answers_template, read_answers, run_checks

ANSWERS = "answers.yaml"


def context(lab: LabEntry, results: Path, answers: Path | None = None) -> LabContext:
    """The context the lab's checks see: its files, the student's answers, the live network."""
    work = lab.work_dir(results)
    return LabContext(
        lab_dir=lab.dir,
        work_dir=work,
        answers=read_answers(answers or work / ANSWERS),
        live_lab=live.find_live(work),
    )


def grade(lab: LabEntry, results: Path, answers: Path | None = None) -> list[Result]:
    """Every question of the lab, checked."""
    return run_checks(lab.spec, load_checks(lab), context(lab, results, answers))


def ensure_answers(lab: LabEntry, results: Path) -> Path:
    """The student's answers.yaml, created from answers.example.yaml if missing."""
    work = lab.work_dir(results)
    work.mkdir(parents=True, exist_ok=True)
    path = work / ANSWERS
    if not path.exists():
        path.write_text(answers_template(lab.spec, lab.dir / "answers.example.yaml"))
    return path


def topology_routing(lab: LabEntry) -> str:
    """The routing backend of the lab's topology."""
    from mcclab.model.loader import load_topology

    return load_topology(lab.topology).routing.backend


def first_step(handout: str) -> str:
    """The handout's first numbered step (a Markdown ``1.`` item and what follows it, up to
    the next item or heading), or '' if it has none."""
    lines = handout.splitlines()
    out: list[str] = []
    for line in lines:
        if not out:
            if re.match(r"^\s{0,3}1[.)]\s", line):
                out.append(line)
            continue
        if re.match(r"^\s{0,3}(\d+[.)]\s|#)", line):
            break
        out.append(line)
    return "\n".join(out).strip()


@dataclass
class Started:
    """What ``lab start`` did."""

    answers: Path
    live: live.LiveLab | None
    already: bool = False


def start(lab: LabEntry, results: Path, timeout: float = 90.0, wait: float = 0.0) -> Started:
    """Create the answers file and, for a live lab, bring its network up (if not up already).

    Raises ``live.StartError`` when the network does not come up.
    """
    answers = ensure_answers(lab, results)
    if not lab.spec.live:
        return Started(answers, None)
    work = lab.work_dir(results)
    running = live.find_live(work)
    if running is not None:
        return Started(answers, running, already=True)
    return Started(answers, live.start(lab.topology, topology_routing(lab), work, timeout, wait))


def reset(lab: LabEntry, results: Path, everything: bool = False) -> dict[str, Any]:
    """Stop this lab's network and clear its work folder, keeping answers.yaml unless
    ``everything``. Returns what was done."""
    work = lab.work_dir(results)
    stopped = live.stop(work)
    removed = []
    if work.is_dir():
        for item in sorted(work.iterdir()):
            if item.name == ANSWERS and not everything:
                continue
            removed.append(item.name)
            if item.is_dir():
                shutil.rmtree(item)
            else:
                item.unlink()
    return {"stopped": stopped, "removed": removed}
