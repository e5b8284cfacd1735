"""The classroom labs in the Vagrant VM, typed as a student types them (``--labs``).

docs/teaching.md tells a student to ``vagrant ssh``, become root, put the venv on
``PATH``, ``cd /vagrant`` and run ``mcclab lab ...``; the check sends each of those
command lines through ``vagrant ssh -c`` from the host. Per lab: ``lab start`` (a
live lab's network comes up; an experiment lab only creates its answers file),
``lab run`` for each of the lab's experiments, ``lab handout``, ``lab check --json``
twice (with the student's starting file ``answers.example.yaml``, and with the
instructor's ``answers.yaml`` as a scripted student), then ``lab reset``.

The example answers are blank: every checked question must come back ``pending``
("write ..."), which proves the template and the checks load, nothing more. The
instructor's answers make every check read the student's network, captures or
runs; their values come from a reference run, so a ``fail`` that compares the
value with this run's measurement is expected under emulation. What fails the
step is a verdict saying the lab itself did not run: no run, a run that is not
complete or cannot be read, a run without the rows the check needs, or an
``error`` (a check that raised).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from mcclab.labs.catalogue import find
from mcclab.labs.model import experiment_key

VENV_BIN = "/opt/mcclab/venv/bin"
GUEST_REPO = "/vagrant"

# Verdict messages that mean the lab's run or network is missing or broken (the
# messages of mcclab.labs.helpers.newest_run and of the labs' checks.py).
_NOT_RUN = re.compile(
    r"no run of \S+ yet|cannot be read|not complete|still running"
    r"|\byour run \S+ (of \S+ )?has no\b")
# A pending verdict asking for an answer the file leaves blank.
_NO_ANSWER = re.compile(r"^write\b")


@dataclass(frozen=True)
class LabStep:
    """One student command of a lab: a label for the logs and mcclab's arguments."""

    label: str
    args: tuple[str, ...]
    timeout: float

    @property
    def title(self) -> str:
        """The command as the summary shows it (an answers file by its owner)."""
        words = list(self.args)
        if "--answers" in words:
            i = words.index("--answers")
            owner = "instructor" if "instructor" in words[i + 1] else "example"
            words[i:i + 2] = [f"({owner} answers)"]
        return "mcclab " + " ".join(words)


def parse_labs(text: str) -> list[int]:
    """``"1,3"`` -> ``[1, 3]`` (order kept, duplicates dropped); empty text: no labs."""
    labs: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise ValueError(f"--labs takes lab numbers like 1,3; got {part!r}")
        if int(part) not in labs:
            labs.append(int(part))
    return labs


def student_shell(args: tuple[str, ...] | list[str], timeout_scale: int) -> str:
    """The guest command line for ``mcclab ARGS`` as docs/teaching.md has students type it.

    ``sudo -i`` (labs build namespaces), the venv on PATH, ``cd /vagrant``; the
    readiness waits stretched by ``MCCLAB_TIMEOUT_SCALE`` as for ``make experiment``.
    """
    inner = (f"export PATH={VENV_BIN}:$PATH MCCLAB_TIMEOUT_SCALE={int(timeout_scale)}; "
             f"cd {GUEST_REPO} && mcclab {shlex.join(args)}")
    return f"sudo -i bash -c {shlex.quote(inner)}"


def vagrant_ssh_argv(command: str) -> list[str]:
    """``vagrant ssh -c COMMAND`` (run in the checkout, in the check's namespace)."""
    return ["vagrant", "ssh", "-c", command]


def copy_back_argv() -> tuple[list[str], list[str]]:
    """docs/teaching.md's copy of the labs' work folders to the host: the guest's tar
    (through ``vagrant ssh -c``) and the host's untar, to be piped."""
    return (vagrant_ssh_argv(f"sudo tar -C {GUEST_REPO} -cf - results/labs"), ["tar", "-xf", "-"])


def lab_steps(number: int, labs_root: Path, repo: Path) -> tuple[str, list[LabStep]]:
    """The lab's folder name and its student commands, in order.

    ``labs_root``/``repo`` are the host's copy of the checkout (the same files the
    guest has in /vagrant); answers paths are relative to /vagrant.
    """
    entry = find(number, labs_root, repo)
    n = str(entry.spec.id)
    rel = Path("labs") / entry.name
    steps = [LabStep("start", ("lab", "start", n, "--timeout", "900"), 1800)]
    for name in entry.spec.experiments:
        key = experiment_key(name)
        steps.append(LabStep(f"run {key}", ("lab", "run", n, key), 3600))
    steps.append(LabStep("handout", ("lab", "handout", n), 600))
    steps.append(LabStep("check example", ("lab", "check", n, "--json", "--answers",
                                           str(rel / "answers.example.yaml")), 600))
    steps.append(LabStep("check instructor", ("lab", "check", n, "--json", "--answers",
                                              str(rel / "instructor" / "answers.yaml")), 600))
    steps.append(LabStep("reset", ("lab", "reset", n), 600))
    return entry.name, steps


def classify(result: dict[str, object]) -> str:
    """What one question's verdict says about the lab in the VM.

    ``pass``; ``unchecked`` (discussion); ``no-answer`` (pending: the answer is
    blank); ``not-run`` (the run or network is missing or broken); ``broken`` (the
    check raised); ``step-skipped`` (pending on a step the check does not script,
    e.g. a capture); ``answer`` (fail: the answer differs from this run's value).
    """
    status = str(result.get("status", ""))
    message = str(result.get("message", ""))
    if status in ("pass", "unchecked"):
        return status
    if status == "error":
        return "broken"
    if _NOT_RUN.search(message):
        return "not-run"
    if status == "pending":
        return "no-answer" if _NO_ANSWER.search(message) else "step-skipped"
    return "answer"


def json_document(output: str) -> dict[str, object] | None:
    """The ``lab check --json`` document in the command's output (Vagrant may add lines):
    the first JSON object, starting at a line's start, that has ``results``."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^\{", output, re.MULTILINE):
        try:
            doc, _ = decoder.raw_decode(output, m.start())
        except ValueError:
            continue
        if isinstance(doc, dict) and "results" in doc:
            return doc
    return None


def check_verdict(doc: dict[str, object] | None, *, example: bool) -> tuple[bool, str]:
    """(ok, note) for one ``lab check --json`` document.

    With the example answers (blank) every checked question must be pending:
    ``no-answer``, or ``step-skipped`` where a check wants a capture before it looks
    at the answer; with the instructor's, none may be ``not-run`` or ``broken``.
    """
    if doc is None:
        return False, "no JSON document"
    results = [r for r in doc.get("results", []) if isinstance(r, dict)]  # type: ignore[union-attr]
    kinds: dict[str, list[str]] = {}
    for r in results:
        kinds.setdefault(classify(r), []).append(str(r.get("id")))
    note = f"{doc.get('passed')}/{doc.get('total')} pass; " + ", ".join(
        f"{k} {','.join(v)}" for k, v in sorted(kinds.items()))
    if example:
        ok = all(k in ("no-answer", "step-skipped", "unchecked") for k in kinds)
    else:
        ok = not kinds.get("not-run") and not kinds.get("broken")
    return ok, note
