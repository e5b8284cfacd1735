"""The API a lab's ``checks.py`` is written against.

A check is a function of a :class:`LabContext` returning a :class:`Verdict`,
marked with ``@check("q1")`` for the question it grades::

    from mcclab.labs.checks import LabContext, Verdict, check

    @check("q1")
    def rp_address(ctx: LabContext) -> Verdict:
        if ctx.answer("q1") is None:
            return Verdict.pending("write your answer to q1 in answers.yaml")
        ...

A student's mistake is a ``failed`` verdict in words the student understands,
never an exception; an exception is reported as ``error`` (a bug in the check).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["pass", "fail", "pending", "error", "unchecked"]
CHECK_ATTR = "__mcclab_check__"
CheckFn = Callable[["LabContext"], "Verdict"]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: a status and a message for the student."""

    status: Status
    message: str = ""

    @classmethod
    def passed(cls, message: str = "") -> Verdict:
        """The answer or the step is right."""
        return cls("pass", message)

    @classmethod
    def failed(cls, message: str) -> Verdict:
        """Wrong: ``message`` says what is wrong."""
        return cls("fail", message)

    @classmethod
    def pending(cls, message: str) -> Verdict:
        """Cannot be checked yet: ``message`` says what to do first."""
        return cls("pending", message)


def check(question: str) -> Callable[[CheckFn], CheckFn]:
    """Mark a function as the check of ``question`` (its id in lab.yaml)."""

    def mark(fn: CheckFn) -> CheckFn:
        setattr(fn, CHECK_ATTR, question)
        return fn

    return mark


def check_id(obj: object) -> str | None:
    """The question a function was marked to check, or None."""
    qid = getattr(obj, CHECK_ATTR, None) if callable(obj) else None
    return qid if isinstance(qid, str) else None


@dataclass
class LiveLab:
    """What a check needs to reach a running lab: how to run commands in a node and
    where each router's vtysh socket is (``mcclab.labs.live`` fills it in)."""

    lab_id: str
    routing_backend: str
    state_dir: Path

    def netns(self, node: str) -> str:
        """The node's network namespace."""
        from mcclab.net.node_config import netns_name

        return netns_name(node)

    def vtysh_argv(self, node: str, command: str) -> list[str]:
        """vtysh against ``node``'s pimd (FRR backends only)."""
        from mcclab.routing.frr import BUILDS

        build = BUILDS.get(self.routing_backend)
        if build is None:
            raise RuntimeError(f"routing backend {self.routing_backend!r} has no vtysh")
        vty = self.state_dir / "nodes" / node / "frr"
        return [build.vtysh, "--vty_socket", str(vty), "-d", "pimd", "-c", command]


@dataclass
class LabContext:
    """Everything a check may look at: the lab's files, the student's work and the live lab."""

    lab_dir: Path
    work_dir: Path
    answers: dict[str, Any] = field(default_factory=dict)
    live_lab: LiveLab | None = None
    runner: Callable[..., subprocess.CompletedProcess] = subprocess.run

    @property
    def live(self) -> bool:
        """Whether the lab's network is up."""
        return self.live_lab is not None

    def answer(self, qid: str) -> Any:
        """The student's answer to ``qid``; None when missing or left empty."""
        value = self.answers.get(qid)
        return None if value == "" else value

    def runs(self, experiment: str) -> list[Path]:
        """Result folders of ``experiment`` run from this lab, newest first.

        ``experiment`` is its name as lab.yaml lists it (``./experiments/x.yaml`` or ``x``).
        """
        from mcclab.labs.model import experiment_key

        folder = self.work_dir / "runs" / experiment_key(experiment)
        if not folder.is_dir():
            return []
        found = [p for p in folder.iterdir() if (p / "run.json").is_file()]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def latest_run(self, experiment: str, status: str | None = None) -> Path | None:
        """The newest run of ``experiment`` (with run.json's ``status`` if given), or None."""
        for run in self.runs(experiment):
            if status is None or _run_status(run) == status:
                return run
        return None

    def _need_live(self) -> LiveLab:
        if self.live_lab is None:
            raise RuntimeError("the lab's network is not up")
        return self.live_lab

    def exec(self, node: str, argv: list[str], timeout: float = 10) -> subprocess.CompletedProcess:
        """Run ``argv`` in ``node``'s namespace (the lab must be up); never raises on exit code."""
        live = self._need_live()
        return self.runner(
            ["ip", "netns", "exec", live.netns(node), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def vtysh(self, node: str, command: str, timeout: float = 10) -> str:
        """FRR's vtysh output for ``command`` on router ``node`` ('' if it failed)."""
        live = self._need_live()
        out = self.runner(
            ["ip", "netns", "exec", live.netns(node), *live.vtysh_argv(node, command)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return out.stdout if out.returncode == 0 else ""

    def vtysh_json(self, node: str, command: str) -> Any:
        """vtysh output of a ``... json`` command, parsed (None if not JSON)."""
        try:
            return json.loads(self.vtysh(node, command) or "null")
        except ValueError:
            return None

    def captures(self) -> list[Path]:
        """The lab's pcaps (work_dir/captures/*.pcap), oldest first."""
        folder = self.work_dir / "captures"
        return (
            sorted(folder.glob("*.pcap"), key=lambda p: p.stat().st_mtime)
            if folder.is_dir()
            else []
        )


def _run_status(run: Path) -> str | None:
    """The status in a run's run.json (None if unreadable)."""
    try:
        return json.loads((run / "run.json").read_text()).get("status")
    except (OSError, ValueError):
        return None
