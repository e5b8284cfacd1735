"""SIGINT and SIGTERM at every phase of `mcclab run`, and a second signal during teardown.

    python bench/signals.py [--signals SIGINT SIGTERM] [--phases bring-up ...]

Each case runs the test-only experiment ``tests/integration/signals-run.yaml``
(a CBR multicast flow and a TCP flow across one router) and signals the runner
in one phase:

* ``bring-up``, ``monitoring``, ``export``, ``teardown``, ``analysis``: the
  runner is started with ``MCCLAB_TEST_PAUSE_AT=<phase>`` and signalled when it
  prints that it waits there (``mcclab.experiment.runner``, ``PAUSE_ENV``);
* ``running``: signalled once the CBR receiver has logged three seconds;
* ``teardown-2nd``: signalled in mid-run, then again (with the other signal) when
  it has reached teardown; the lab is destroyed after that second signal.

After the runner exits it checks that the lab is gone (its state folder, its
recorded processes, its cgroup, and those of its namespaces and root
interfaces that no other lab claims: another lab may be up on this machine),
that ``run.json`` says ``interrupted`` with the phase, that the tables and logs
written up to then are kept (for a signal once flows ran), and that
``mcclab report`` builds from the folder. It prints one table row per case.
Needs root; each case queues for the machine-wide lab lock (``--wait``).
About 7 min for the full matrix (14 cases) on two cores when no other lab waits.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mcclab.experiment.runner import PAUSE_ENV, PAUSE_MARK
from mcclab.state import STATE_ROOT, all_states, leftovers, proc_stat_fields, same_process

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "tests" / "integration" / "signals-run.yaml"
EXPERIMENT = "signals-run"
MCCLAB = [sys.executable, "-m", "mcclab"]
PAUSED = ("bring-up", "monitoring", "export", "teardown", "analysis")
PHASES = ("bring-up", "monitoring", "running", "export", "teardown", "analysis", "teardown-2nd")
# Once flows ran, these are written whatever stopped the run.
TABLES = ("tables/per_second.csv", "tables/protocol.csv", "tables/links.csv",
          "tables/metrics.csv.gz", "logs/cbr-sender-src.jsonl", "logs/cbr-receiver-h1.jsonl",
          "logs/tcp-server-h1.txt")
AFTER_START = ("running", "export", "teardown", "analysis", "teardown-2nd")


@dataclass
class Outcome:
    """What one case left behind."""

    signal: str
    phase: str
    exit_code: int | None = None
    status: str = ""
    recorded_phase: str | None = None
    signals: list[dict[str, str]] = field(default_factory=list)
    lab_left: list[str] = field(default_factory=list)  # what of the lab is still there
    missing: list[str] = field(default_factory=list)  # tables and logs that should be kept
    report_built: bool = False
    exit_seconds: float = 0.0  # from the first signal to the runner's exit
    run_dir: Path | None = None
    output: str = ""

    @property
    def lab_gone(self) -> bool:
        return not self.lab_left

    @property
    def ok(self) -> bool:
        """Every check of the case passed."""
        expected = "running" if self.phase == "teardown-2nd" else self.phase
        return (self.exit_code == 1 and self.status == "interrupted"
                and self.recorded_phase == expected and self.lab_gone and not self.missing
                and self.report_built)


class Runner:
    """One `mcclab run` in the background, its stdout read line by line."""

    def __init__(self, results: Path, pause: str | None, wait: float, sets: list[str]):
        env = dict(os.environ)
        env.pop(PAUSE_ENV, None)
        if pause:
            env[PAUSE_ENV] = pause
        argv = MCCLAB + ["run", str(SPEC), "--profile", "quick", "--results", str(results),
                         "--wait", str(wait)]
        for item in sets:
            argv += ["--set", item]
        self.results = results
        self.err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - read until the end
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     env=env, cwd=REPO, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.lab: dict = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def output(self) -> str:
        """Everything printed so far (stdout, then stderr)."""
        self.err.seek(0)
        return "".join(self.seen) + self.err.read()

    def run_dir(self) -> Path | None:
        runs = sorted((self.results / EXPERIMENT).glob("2*"))
        return runs[0] if runs else None

    def lab_id(self) -> str | None:
        run = self.run_dir()
        return f"{EXPERIMENT}-{run.name}" if run else None

    def note_lab(self) -> None:
        """Remember what the lab has recorded so far (read again at every poll)."""
        lab_id = self.lab_id()
        if lab_id is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.lab = json.loads((STATE_ROOT / lab_id / "state.json").read_text())

    def wait_until(self, predicate, timeout: float, what: str) -> None:  # noqa: ANN001
        """Poll ``predicate`` (and the lab's record) until true; raise with the output."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while not self.lines.empty():
                self.seen.append(self.lines.get())
            self.note_lab()
            if predicate():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.proc.poll() == 1 and "no run was started" in self.output():
            raise Refused(self.output()[-1000:])
        raise RuntimeError(f"never saw {what}:\n{self.output()[-3000:]}")

    def paused_at(self, phase: str) -> bool:
        return any(line.strip() == f"{PAUSE_MARK} {phase}" for line in self.seen)

    def receiver_seconds(self) -> int:
        run = self.run_dir()
        log = run / "logs" / "cbr-receiver-h1.jsonl" if run else None
        try:
            return log.read_text().count('"stats"') if log else 0
        except OSError:
            return 0

    def signal(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)

    def finish(self, timeout: float = 120.0) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
        time.sleep(0.1)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return code


def lab_left(lab: dict) -> list[str]:
    """What of a lab (its state.json content) is still there.

    Namespace and interface names are shared by every lab on the machine (one at a
    time): a name another live lab has recorded is that lab's, not a leftover.
    """
    if not lab:
        return ["the lab's record was never seen"]
    left = []
    lab_id = lab["lab_id"]
    if (STATE_ROOT / lab_id).exists():
        left.append(f"{STATE_ROOT / lab_id}")
    for proc in lab.get("processes", []):
        if same_process(proc_stat_fields(proc["pid"]), proc["start_time"]):
            left.append(f"process {proc['pid']} ({proc['what']})")
    if lab.get("cgroup") and Path(lab["cgroup"]).exists():
        left.append(f"cgroup {lab['cgroup']}")
    others = [s for s in all_states() if s.lab_id != lab_id]
    claimed_ns = {n for s in others for n in s.netns}
    claimed_if = {i for s in others for i in s.root_ifaces}
    now = leftovers()
    left += [f"netns {n}" for n in lab.get("netns", [])
             if n in now["netns"] and n not in claimed_ns]
    left += [f"interface {i}" for i in lab.get("root_ifaces", [])
             if i in now["interfaces"] and i not in claimed_if]
    return left


def clean_up(runner: Runner, left: list[str] | None = None) -> None:
    """`mcclab clean --lab` for this case's own lab, if it left anything (no other
    lab is touched). ``left``: what :func:`lab_left` found just now, if it ran."""
    lab_id = runner.lab.get("lab_id") or runner.lab_id()
    if not lab_id:
        return
    if (STATE_ROOT / lab_id).exists() or (
            runner.lab and (left if left is not None else lab_left(runner.lab))):
        subprocess.run(MCCLAB + ["clean", "--lab", lab_id], capture_output=True,
                       text=True, timeout=300, cwd=REPO, check=False)


def report_builds(run: Path) -> bool:
    """`mcclab report RUN` succeeds and writes report.html from the folder alone."""
    page = run / "report.html"
    page.unlink(missing_ok=True)
    out = subprocess.run(MCCLAB + ["report", str(run)], capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    return out.returncode == 0 and page.is_file()


class Refused(RuntimeError):
    """The lab refused to start (another lab's crash leftovers, say): not this case's fault."""


def run_case(sig: signal.Signals, phase: str, results: Path, wait: float = 900.0,
             expect_tables: tuple[str, ...] = TABLES,
             while_paused=lambda runner: None) -> Outcome:  # noqa: ANN001
    """Run the experiment, signal it with ``sig`` in ``phase``, and check what it left.

    A run the lab refuses (on a shared machine, another lab's leftovers waiting for
    `mcclab clean`) is tried again every 10 s within ``wait`` seconds.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            return _run_case(sig, phase, results, wait, expect_tables, while_paused)
        except Refused:
            if time.monotonic() > deadline:
                raise
            time.sleep(10)


def _run_case(sig: signal.Signals, phase: str, results: Path, wait: float,
              expect_tables: tuple[str, ...], while_paused) -> Outcome:  # noqa: ANN001
    """One attempt of :func:`run_case`."""
    pause = "teardown" if phase == "teardown-2nd" else phase if phase in PAUSED else None
    # A case that stops the run before it ends needs no more than a few seconds of it.
    sets = ["duration=8s"] if phase in ("export", "teardown", "analysis") else []
    runner = Runner(results, pause, wait, sets)
    outcome = Outcome(sig.name, phase)
    try:
        if pause and phase != "teardown-2nd":
            runner.wait_until(lambda: runner.paused_at(pause), wait + 120, f"the {pause} pause")
            while_paused(runner)
        else:
            runner.wait_until(lambda: runner.receiver_seconds() >= 3, wait + 120,
                              "three seconds of CBR reception")
        runner.note_lab()
        runner.signal(sig)
        signalled = time.monotonic()
        if phase == "teardown-2nd":
            runner.wait_until(lambda: runner.paused_at("teardown"), 120, "the teardown pause")
            # Not a third one: teardown of this lab takes tenths of a second, so a
            # later signal may find the record final and the runner's handler gone.
            runner.signal(signal.SIGINT if sig == signal.SIGTERM else signal.SIGTERM)
        outcome.exit_code = runner.finish()
        outcome.exit_seconds = round(time.monotonic() - signalled, 1)
    finally:
        # An exception here (the test's timeout, Ctrl-C): stop the runner as a user
        # would, and remove what it left, so later labs on the machine can start.
        if runner.proc.poll() is None:
            runner.signal(signal.SIGTERM)
            runner.finish(timeout=60.0)
            clean_up(runner)
    outcome.output = runner.output()
    outcome.lab_left = lab_left(runner.lab)
    if outcome.lab_left:
        # recorded as a failure above; the leftovers must not refuse the next case
        clean_up(runner, outcome.lab_left)
    run = outcome.run_dir = runner.run_dir()
    if run is None or not (run / "run.json").is_file():
        outcome.status = "no folder"
        return outcome
    record = json.loads((run / "run.json").read_text())
    outcome.status = record["status"]
    outcome.recorded_phase = record.get("interrupted_phase")
    outcome.signals = record.get("signals", [])
    if phase in AFTER_START:
        outcome.missing = [name for name in expect_tables if not (run / name).is_file()]
    outcome.report_built = report_builds(run)
    return outcome


def table(outcomes: list[Outcome]) -> str:
    """The outcomes as a Markdown table."""
    head = ("| signal | phase | exit code | status | recorded phase | lab gone | tables kept "
            "| report built | s to exit |\n|---|---|---|---|---|---|---|---|---|")
    rows = []
    for o in outcomes:
        kept = "n/a" if o.phase not in AFTER_START else (
            "yes" if not o.missing else "missing " + ", ".join(o.missing))
        gone = "yes" if o.lab_gone else "NO: " + ", ".join(o.lab_left)
        phases = " > ".join(s["phase"] for s in o.signals) or "-"
        rows.append(f"| {o.signal} | {o.phase} | {o.exit_code} | {o.status} | "
                    f"{o.recorded_phase} ({phases}) | {gone} | {kept} | "
                    f"{'yes' if o.report_built else 'NO'} | {o.exit_seconds:g} |")
    return "\n".join([head, *rows])


def main() -> int:
    """Run the matrix and print the table; exit 1 if any case failed a check."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signals", nargs="+", default=["SIGINT", "SIGTERM"])
    parser.add_argument("--phases", nargs="+", default=list(PHASES), choices=PHASES)
    parser.add_argument("--wait", type=float, default=1800.0,
                        help="seconds each run may wait for another lab")
    args = parser.parse_args()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="mcclab-signals-") as tmp:
        for phase in args.phases:
            for name in args.signals:
                results = Path(tmp) / f"{phase}-{name}"
                outcome = run_case(signal.Signals[name], phase, results,
                                   args.wait)
                print(table([outcome]).splitlines()[-1], flush=True)
                outcomes.append(outcome)
    print()
    print(table(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
