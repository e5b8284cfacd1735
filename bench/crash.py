"""SIGKILL campaign: kill `mcclab run` at random points, clean up, and look for leftovers.

    python bench/crash.py [--trials 20] [--seed 1] [--points bring-up mid-run ...]

Each trial starts `mcclab run` on a short experiment (``ormcc-smoke`` cut to 20 s by
default), waits until the run reaches the trial's kill point and SIGKILLs the runner
alone, as a crash or the OOM killer would, so that everything it started is orphaned.
Then it runs `mcclab clean` and checks that nothing of that lab is left, of every kind:

- network namespaces and root-namespace interfaces the lab recorded;
- processes, found three ways: by network-namespace inode (any process whose
  ``/proc/PID/ns/net`` is one of the lab's namespaces, their inodes read while the lab
  was up), by the lab's cgroup, and by a command line naming the lab's folder (the
  root-namespace exporter, Prometheus and fork server);
- mounts naming the lab's namespaces or folder;
- the lab's cgroup directory, its folder under /run/mcclab and every folder it
  recorded (the run's Prometheus database, on disk);
- the run's record: its ``run.json`` must no longer say ``running``.

The kill points are read from what the run leaves on disk, so no hook in the runner is
needed: ``bring-up`` (the lab's record says ``creating`` and holds k of its namespaces,
k drawn at random), ``monitoring`` (the exporter or Prometheus is recorded, no flow
yet), ``mid-run`` (a random time into the flows), ``export`` (the flows are gone and
Prometheus still runs: the series are being exported), ``teardown`` (the lab's logs
were copied into the run folder: ``lab.down`` is next) and ``analysis`` (``run.json``
is final, the report is not written yet). A trial whose run ends before its point is
reached counts as missed, not as clean.

Each trial's run must itself reach its kill point, which shows that the cleanup before
it left a machine a lab can use; after the last trial one more run must complete.
Prints one row per trial and the totals. Needs root. About 40 s a trial.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mcclab.state import STATE_ROOT, proc_stat_fields, same_process

REPO = Path(__file__).resolve().parent.parent
POINTS = ("bring-up", "monitoring", "mid-run", "export", "teardown", "analysis")
EXPERIMENT = "ormcc-smoke"
SETTINGS = ("duration=20s", "warmup=5s")
POLL = 0.02


@dataclass
class Watch:
    """What a running trial has shown so far (read from disk, never from the runner)."""

    results: Path
    run_dir: Path | None = None
    state_dir: Path | None = None
    state: dict = field(default_factory=dict)
    netns_inodes: dict[str, int] = field(default_factory=dict)
    flows_seen_at: float | None = None

    def refresh(self) -> None:
        """Find the run folder and the lab's record, and remember the namespaces' inodes."""
        if self.run_dir is None:
            runs = [p for p in self.results.glob("*/*") if (p / "run.json").is_file()]
            if runs:
                self.run_dir = runs[0]
                lab_id = f"{self.run_dir.parent.name}-{self.run_dir.name}"
                self.state_dir = STATE_ROOT / lab_id
        if self.state_dir is not None:
            with contextlib.suppress(OSError, ValueError):
                self.state = json.loads((self.state_dir / "state.json").read_text())
        for ns in self.state.get("netns", []):
            if ns not in self.netns_inodes:
                with contextlib.suppress(OSError):
                    self.netns_inodes[ns] = os.stat(f"/run/netns/{ns}").st_ino

    def processes(self, what: str) -> list[dict]:
        """Recorded processes whose description starts with ``what``."""
        return [p for p in self.state.get("processes", []) if p.get("what", "").startswith(what)]

    def status(self) -> str | None:
        """The run record's status, if there is one."""
        if self.run_dir is None:
            return None
        try:
            return json.loads((self.run_dir / "run.json").read_text()).get("status")
        except (OSError, ValueError):
            return None


def _alive(proc: dict) -> bool:
    """Whether a recorded process (pid and start time) still runs."""
    return same_process(proc_stat_fields(proc["pid"]), proc.get("start_time"))


def reached(point: str, watch: Watch, rng: random.Random, plan: dict) -> bool:
    """Whether the run is at ``point`` now (``plan`` keeps this trial's random draws)."""
    state = watch.state
    if point == "bring-up":
        want = plan.setdefault("netns", rng.randint(1, 6))
        return state.get("status") == "creating" and len(state.get("netns", [])) >= want
    if point == "monitoring":
        return bool(watch.processes("monitoring")) and not watch.processes("flow")
    if point == "mid-run":
        if watch.processes("flow") and watch.flows_seen_at is None:
            watch.flows_seen_at = time.monotonic()
        delay = plan.setdefault("delay", rng.uniform(1.0, 15.0))
        return (watch.flows_seen_at is not None
                and time.monotonic() - watch.flows_seen_at >= delay)
    if point == "export":
        flows = watch.processes("flow")
        return (bool(flows) and not any(_alive(p) for p in flows)
                and any(_alive(p) for p in watch.processes("monitoring prometheus")))
    if point == "teardown":
        return watch.run_dir is not None and (watch.run_dir / "logs" / "lab-commands.log").exists()
    if point == "analysis":
        return watch.status() not in (None, "running") and watch.run_dir is not None \
            and not (watch.run_dir / "report.html").exists()
    raise ValueError(f"unknown kill point {point!r}")


def mcclab(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """Run the mcclab command line of this checkout."""
    return subprocess.run([sys.executable, "-m", "mcclab", *args], cwd=REPO, text=True,
                          capture_output=True, **kwargs)


def start_run(results: Path, experiment: str, settings: tuple[str, ...], wait: float = 900.0
              ) -> subprocess.Popen:
    """`mcclab run` in its own session, queued behind any other lab on this machine for up
    to ``wait`` seconds."""
    argv = [sys.executable, "-m", "mcclab", "run", experiment, "--profile", "quick",
            "--results", str(results), "--wait", f"{wait:.0f}"]
    for item in settings:
        argv += ["--set", item]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def leftovers(watch: Watch) -> list[str]:
    """Everything of the watched lab that is still there, one line each."""
    found = []
    state = watch.state
    lab_dir = str(watch.state_dir) if watch.state_dir else "/nonexistent"
    ns_now = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True
                                ).stdout.split())
    found += [f"netns {ns}" for ns in state.get("netns", []) if ns in ns_now]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in links.splitlines()}
    found += [f"interface {i}" for i in state.get("root_ifaces", []) if i in names]
    inodes = set(watch.netns_inodes.values())
    run_dir = str(watch.run_dir) if watch.run_dir else "/nonexistent"
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            ino = os.stat(pid_dir / "ns" / "net").st_ino
            cmdline = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if not same_process(proc_stat_fields(int(pid_dir.name)), None):
            continue  # gone, or a zombie
        if ino in inodes:
            found.append(f"process {pid_dir.name} in a lab namespace: {cmdline[:80]}")
        elif lab_dir in cmdline or run_dir in cmdline:
            found.append(f"process {pid_dir.name} naming the lab: {cmdline[:80]}")
    cgroup = next((v for k, v in state.items() if "cgroup" in k and isinstance(v, str) and v),
                  None)
    if cgroup and Path(cgroup).exists():
        procs = (Path(cgroup) / "cgroup.procs").read_text().split() \
            if (Path(cgroup) / "cgroup.procs").exists() else []
        found.append(f"cgroup {cgroup} ({len(procs)} processes)")
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    wanted = [f"/run/netns/{ns}" for ns in state.get("netns", [])] + [lab_dir]
    found += [f"mount {line.split()[4]}" for line in mounts
              if any(line.split()[4] == w or line.split()[4].startswith(w + "/")
                     for w in wanted)]
    if watch.state_dir is not None and watch.state_dir.exists():
        found.append(f"folder {watch.state_dir}")
    found += [f"folder {d}" for d in state.get("dirs", []) if Path(d).exists()]  # the TSDB's
    if watch.status() == "running":
        found.append("run.json still says running")
    return found


def trial(point: str, rng: random.Random, experiment: str, settings: tuple[str, ...],
          timeout: float = 600.0, kill_first: str = "") -> dict:
    """One trial: run, kill at ``point``, clean, look for leftovers.

    ``kill_first``: SIGKILL the lab's recorded processes whose description starts with it
    (e.g. ``agent host``) just before the runner."""
    results = Path(tempfile.mkdtemp(prefix="mcclab-crash-"))
    watch = Watch(results)
    plan: dict = {}
    proc = start_run(results, experiment, settings, wait=max(900.0, timeout))
    started = time.monotonic()
    killed_after = None
    try:
        while time.monotonic() - started < timeout:
            watch.refresh()
            if reached(point, watch, rng, plan):
                if kill_first:
                    for victim in watch.processes(kill_first):
                        if _alive(victim):
                            os.kill(victim["pid"], signal.SIGKILL)
                            plan.setdefault("killed_first", []).append(victim["what"])
                os.kill(proc.pid, signal.SIGKILL)
                killed_after = time.monotonic() - started
                break
            if proc.poll() is not None:
                break
            time.sleep(POLL)
        watch.refresh()
    finally:
        if proc.poll() is None and killed_after is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
    watch.refresh()
    # Only this trial's lab: another lab on the machine, even a crashed one, is not ours.
    if watch.state_dir is not None:
        cleaned = mcclab("clean", "--results", str(results), "--lab", watch.state_dir.name,
                         timeout=300)
    else:
        cleaned = subprocess.CompletedProcess([], 0, "the run recorded no lab", "")
    watch.refresh()
    rest = leftovers(watch) if killed_after is not None else []
    return {"point": point, "killed_after": killed_after, "clean_rc": cleaned.returncode,
            "clean_out": (cleaned.stdout + cleaned.stderr).strip()[-300:],
            "leftovers": rest, "run_dir": str(watch.run_dir), "plan": plan,
            "status_after": watch.status()}


def campaign(trials: int, seed: int, points: tuple[str, ...] = POINTS,
             experiment: str = EXPERIMENT, settings: tuple[str, ...] = SETTINGS,
             report: Callable[[dict], None] = lambda row: None) -> list[dict]:
    """``trials`` trials, cycling through ``points`` in a shuffled order drawn from ``seed``."""
    rng = random.Random(seed)
    order = [points[i % len(points)] for i in range(trials)]
    rng.shuffle(order)
    rows = []
    for number, point in enumerate(order, 1):
        row = trial(point, rng, experiment, settings)
        row["trial"] = number
        rows.append(row)
        report(row)
    return rows


def _print_row(row: dict) -> None:
    verdict = ("missed" if row["killed_after"] is None
               else "clean" if not row["leftovers"] and row["clean_rc"] == 0 else "LEFT")
    when = f"{row['killed_after']:6.1f} s" if row["killed_after"] is not None else "     -  "
    print(f"{row['trial']:>5}  {row['point']:<11} {when}  {verdict:<7} "
          f"{row['status_after'] or '-':<12} {'; '.join(row['leftovers'])[:90]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--points", nargs="+", choices=POINTS, default=list(POINTS))
    parser.add_argument("--experiment", default=EXPERIMENT)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/crash.py needs root (it builds labs)", file=sys.stderr)
        return 2
    print(f"SIGKILL campaign: {args.trials} trials of `mcclab run {args.experiment}` "
          f"({' '.join(SETTINGS)}), seed {args.seed}")
    print("trial  point       killed at  verdict status after clean, leftovers")
    began = time.monotonic()
    rows = campaign(args.trials, args.seed, tuple(args.points), args.experiment,
                    report=_print_row)
    killed = [r for r in rows if r["killed_after"] is not None]
    clean = [r for r in killed if not r["leftovers"] and r["clean_rc"] == 0]
    print(f"clean: {len(clean)} of {len(killed)} killed trials "
          f"({len(rows) - len(killed)} missed their point); {time.monotonic() - began:.0f} s")
    results = Path(tempfile.mkdtemp(prefix="mcclab-crash-final-"))
    final = start_run(results, args.experiment, SETTINGS)
    final.wait(timeout=900)
    status = next((json.loads(p.read_text())["status"]
                   for p in results.glob("*/*/run.json")), None)
    print(f"the run after the campaign: {status} (exit {final.returncode})")
    return 0 if len(clean) == len(rows) and status == "complete" else 1


if __name__ == "__main__":
    sys.exit(main())
