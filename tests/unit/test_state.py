"""The lab record: persistence, process identity, teardown escalation, what `mcclab clean` takes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mcclab import state as st
from mcclab.cli import app
from mcclab.lab import leftover_problem
from mcclab.state import (
    LabState,
    TrackedProcess,
    kill_groups,
    plan_clean,
    proc_start_time,
    proc_stat_fields,
    same_process,
)


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private STATE_ROOT, so nothing touches /run/mcclab."""
    monkeypatch.setattr(st, "STATE_ROOT", tmp_path)
    return tmp_path


def on_disk(state: LabState) -> dict:
    """The state.json a crash would leave."""
    return json.loads((state.path / "state.json").read_text())


# --- persistence ----------------------------------------------------------------------------

def test_save_and_load_round_trip(state_root):
    lab = LabState(lab_id="chain3-1")
    lab.add_netns("mcl-h1")
    lab.add_root_iface("mclctl")
    lab.add_dir(state_root / "chain3-1" / "nodes")
    lab.set_cgroup(Path("/sys/fs/cgroup/mcclab/chain3-1"))
    lab.add_process(os.getpid(), "me", stop_signal=signal.SIGKILL)
    lab.status = "up"
    lab.save()
    back = LabState.load(lab.path)
    assert back == lab
    assert back.owner_pid == os.getpid() and back.owner_start == proc_start_time(os.getpid())
    assert back.processes[0] == TrackedProcess(os.getpid(), proc_start_time(os.getpid()), "me",
                                               int(signal.SIGKILL))
    assert st.all_states() == [back]


def test_an_old_record_without_the_newer_fields_still_loads(state_root):
    old = state_root / "old-lab"
    old.mkdir()
    (old / "state.json").write_text(json.dumps({
        "lab_id": "old-lab", "created": 1.0, "owner_pid": os.getpid(), "netns": ["mcl-a"],
        "root_ifaces": [], "processes": [{"pid": 1, "start_time": 5, "what": "x"}],
        "dirs": [], "status": "up"}))
    lab = LabState.load(old)
    assert lab.owner_start is None and lab.cgroup is None
    assert lab.processes == [TrackedProcess(1, 5, "x")]
    # Without a start time the pid alone decides: this test process is alive.
    assert lab.owner_alive()
    # A record with no owner at all names none (not the process that reads it).
    del_owner = json.loads((old / "state.json").read_text())
    del del_owner["owner_pid"]
    (old / "state.json").write_text(json.dumps(del_owner))
    assert LabState.load(old).owner_pid == 0
    assert not LabState.load(old).owner_alive()


def test_an_unreadable_record_is_skipped(state_root):
    (state_root / "bad").mkdir()
    (state_root / "bad" / "state.json").write_text('{"lab_id": "bad", "surprise": 1}')
    (state_root / "torn").mkdir()
    (state_root / "torn" / "state.json").write_text('{"lab_id": ')
    assert st.all_states() == []


def test_every_add_is_on_disk_before_it_returns(state_root):
    lab = LabState(lab_id="rec")
    lab.add_netns("mcl-r1")
    assert on_disk(lab)["netns"] == ["mcl-r1"]
    lab.add_root_iface("mclc-r1")
    assert on_disk(lab)["root_ifaces"] == ["mclc-r1"]
    lab.add_dir(state_root / "rec" / "x")
    assert on_disk(lab)["dirs"] == [str(state_root / "rec" / "x")]
    lab.set_cgroup(Path("/cg/mcclab/rec"))
    assert on_disk(lab)["cgroup"] == "/cg/mcclab/rec"
    lab.add_process(os.getpid(), "p")
    assert on_disk(lab)["processes"][0]["pid"] == os.getpid()


class FakeNode:
    """What Mininet's addHost/addSwitch returns, enough for the backend."""

    def __init__(self, pid: int):
        self.pid = pid

    def start(self, _controllers: list) -> None:
        """A LinuxBridge switch's start."""


class FakeMininet:
    """Checks, at the moment a node is created, that the lab record already names it."""

    def __init__(self, lab: LabState):
        self.lab = lab
        self.seen: list[str] = []

    def addHost(self, name: str, **_kw: object) -> FakeNode:  # noqa: N802 - Mininet's name
        assert f"mcl-{name}" in on_disk(self.lab)["netns"]
        self.seen.append(name)
        return FakeNode(os.getpid())

    def addSwitch(self, name: str, **_kw: object) -> FakeNode:  # noqa: N802 - Mininet's name
        assert name in on_disk(self.lab)["root_ifaces"]
        self.seen.append(name)
        return FakeNode(os.getpid())


def test_the_backend_records_a_namespace_and_a_bridge_before_mininet_makes_them(state_root):
    pytest.importorskip("mininet.node", reason="Debian's mininet package is not installed")
    from mcclab.execute import Runner
    from mcclab.net.mininet_backend import MininetBackend

    lab = LabState(lab_id="backend")
    backend = MininetBackend(Runner(dry_run=True), lab)
    fake = FakeMininet(lab)
    backend._net = fake
    backend.add_node("h1")
    backend.add_lan("lan1")
    assert fake.seen == ["h1", "mclb-lan1"]
    # Each shell is recorded, to be ended with SIGKILL (an interactive shell ignores SIGTERM).
    assert [p.what for p in lab.processes] == ["shell h1", "shell mclb-lan1"]
    assert {p.stop_signal for p in lab.processes} == {int(signal.SIGKILL)}


# --- process identity -----------------------------------------------------------------------

def test_same_process_checks_start_time_and_state():
    fields = ["S", "1"] + ["0"] * 17 + ["1234"]
    assert same_process(fields, 1234)
    assert not same_process(fields, 1235)  # a recycled pid started later
    assert same_process(fields, None)  # an old record: the pid alone
    assert not same_process(["Z"] + fields[1:], 1234)
    assert not same_process(None, 1234)


def test_a_tracked_process_with_a_recycled_pid_or_a_zombie_is_not_alive():
    child = subprocess.Popen(["sleep", "30"])
    try:
        start = proc_start_time(child.pid)
        assert start is not None
        assert TrackedProcess(child.pid, start, "sleep").alive()
        # The same pid with another start time is another process.
        assert not TrackedProcess(child.pid, start - 1, "sleep").alive()
        child.kill()
        deadline = time.monotonic() + 5
        while proc_stat_fields(child.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        # Exited but not reaped: the pid still exists, as a zombie.
        assert proc_stat_fields(child.pid)[0] == "Z"
        assert not TrackedProcess(child.pid, start, "sleep").alive()
    finally:
        child.kill()
        child.wait()
    assert not TrackedProcess(child.pid, start, "sleep").alive()


STUBBORN = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:  # a member of the same group, ignoring SIGTERM too
    time.sleep(300)
    os._exit(0)
print("ready", flush=True)
time.sleep(300)
"""


def test_kill_groups_escalates_to_sigkill_for_a_group_that_ignores_sigterm():
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    members = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
               .read_text().split()]
    assert len(members) == 1
    tracked = TrackedProcess(proc.pid, proc_start_time(proc.pid), "stubborn")
    other = TrackedProcess(members[0], proc_start_time(members[0]), "member")
    try:
        start = time.monotonic()
        kill_groups([tracked], grace=0.5)
        took = time.monotonic() - start
        assert not tracked.alive()
        # The grace ran out first (SIGTERM was ignored), then SIGKILL ended the group.
        assert 0.5 <= took < 3.0
        deadline = time.monotonic() + 5
        while other.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not other.alive()
    finally:
        for pid in (proc.pid, members[0]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.stdout.close()


def test_kill_groups_needs_no_sigkill_for_a_process_that_honours_sigterm():
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    tracked = TrackedProcess(proc.pid, proc_start_time(proc.pid), "sleep")
    start = time.monotonic()
    kill_groups([tracked], grace=5.0)
    assert time.monotonic() - start < 2.0
    assert not tracked.alive()


# --- who owns a lab -------------------------------------------------------------------------

def test_owner_alive_tells_a_live_owner_from_a_recycled_pid_and_a_dead_one():
    me = os.getpid()
    assert LabState(lab_id="a").owner_alive()  # built by this process
    assert not LabState(lab_id="a", owner_pid=me, owner_start=proc_start_time(me) - 1
                        ).owner_alive()
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert not LabState(lab_id="a", owner_pid=dead.pid, owner_start=None).owner_alive()
    assert not LabState(lab_id="a", owner_pid=0, owner_start=None).owner_alive()


# --- what `mcclab clean` removes ------------------------------------------------------------

def lab(lab_id: str, netns: list[str], ifaces: list[str], cg: str | None = None) -> LabState:
    """A record (its owner is decided by the test's ``alive`` function)."""
    return LabState(lab_id=lab_id, owner_pid=1000, netns=netns, root_ifaces=ifaces, cgroup=cg)


LIVE = lab("live", ["mcl-h1", "mcl-r1"], ["mclctl", "mclc-h1"], "/cg/mcclab/live")
DEAD = lab("dead", ["mcl-h2"], ["mclc-h2"], "/cg/mcclab/dead")
PRESENT = {"netns": ["mcl-h1", "mcl-r1", "mcl-h2", "mcl-stray"],
           "interfaces": ["mclctl", "mclc-h1", "mclc-h2", "mclc-stray"],
           "cgroups": ["/cg/mcclab/live", "/cg/mcclab/dead", "/cg/mcclab/gone-record"]}


def alive(state: LabState) -> bool:
    """Test double: only the lab called 'live' has a running owner."""
    return state.lab_id == "live"


def test_plain_clean_removes_dead_labs_and_strays_and_keeps_labs_in_use():
    plan = plan_clean([LIVE, DEAD], PRESENT, alive)
    assert [s.lab_id for s in plan.remove] == ["dead"]
    assert [s.lab_id for s in plan.keep] == ["live"]
    # Strays are what no record names; the live lab's resources are never among them.
    assert plan.stray_netns == ["mcl-stray"]
    assert plan.stray_ifaces == ["mclc-stray"]
    assert plan.stray_cgroups == ["/cg/mcclab/gone-record"]


def test_clean_all_removes_labs_in_use_too():
    plan = plan_clean([LIVE, DEAD], PRESENT, alive, everything=True)
    assert [s.lab_id for s in plan.remove] == ["live", "dead"]
    assert plan.keep == []
    assert plan.stray_netns == ["mcl-stray"]


def test_clean_of_one_lab_touches_no_other_lab_and_sweeps_no_stray():
    # A test or script cleans up only the lab it started: another engineer's crashed
    # lab (dead owner) and the strays stay for their own `mcclab clean`.
    plan = plan_clean([LIVE, DEAD], PRESENT, alive, only="dead")
    assert [s.lab_id for s in plan.remove] == ["dead"] and plan.keep == []
    assert plan.stray_netns == plan.stray_ifaces == plan.stray_cgroups == []
    plan = plan_clean([LIVE, DEAD], PRESENT, alive, only="live")
    assert plan.remove == [] and [s.lab_id for s in plan.keep] == ["live"]
    plan = plan_clean([LIVE, DEAD], PRESENT, alive, everything=True, only="live")
    assert [s.lab_id for s in plan.remove] == ["live"]
    assert plan_clean([LIVE, DEAD], PRESENT, alive, only="other").remove == []


def test_with_nothing_recorded_everything_present_is_stray():
    plan = plan_clean([], PRESENT, alive)
    assert plan.remove == [] and plan.keep == []
    assert plan.stray_netns == PRESENT["netns"]
    assert plan.stray_cgroups == PRESENT["cgroups"]


class Calls:
    """Records what clean() did instead of doing it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, states: list[LabState]):
        self.log: list[tuple[str, str]] = []
        monkeypatch.setattr(st, "leftovers", lambda: {k: PRESENT[k] for k in
                                                      ("netns", "interfaces")})
        monkeypatch.setattr(st, "lab_cgroups", lambda: PRESENT["cgroups"])
        monkeypatch.setattr(st, "all_states", lambda: states)
        monkeypatch.setattr(LabState, "owner_alive", alive)
        monkeypatch.setattr(st, "destroy", lambda s: self.log.append(("destroy", s.lab_id)))
        monkeypatch.setattr(st, "stop_owner",
                            lambda s, _t: self.log.append(("stop", s.lab_id)) or True)
        monkeypatch.setattr(st, "_remove_netns", lambda n: self.log.append(("netns", n)))
        monkeypatch.setattr(st, "_quiet", lambda *a: self.log.append(("quiet", " ".join(a))))
        monkeypatch.setattr(st.cgroup, "kill", lambda p: self.log.append(("cgroup", str(p))))


def test_clean_destroys_only_dead_labs_and_sweeps_strays(monkeypatch):
    calls = Calls(monkeypatch, [LIVE, DEAD])
    plan = st.clean()
    assert calls.log == [("destroy", "dead"), ("netns", "mcl-stray"),
                         ("quiet", "ip link del mclc-stray"),
                         ("cgroup", "/cg/mcclab/gone-record")]
    assert plan.stopped == []


def test_clean_of_one_lab_destroys_that_lab_only(monkeypatch):
    calls = Calls(monkeypatch, [LIVE, DEAD])
    st.clean(only="dead")
    assert calls.log == [("destroy", "dead")]
    calls.log.clear()
    st.clean(everything=True, only="live")
    assert calls.log == [("stop", "live"), ("destroy", "live")]


def test_what_clean_could_not_remove_is_reported_cgroups_included(monkeypatch):
    # After a clean, anything of a removed lab still on the machine is named, an empty
    # cgroup the kernel would not rmdir in time too; the live lab's are not.
    monkeypatch.setattr(st, "leftovers", lambda: {"netns": ["mcl-h1"],
                                                  "interfaces": ["mclc-h1"]})
    monkeypatch.setattr(st, "lab_cgroups", lambda: ["/cg/mcclab/live", "/cg/mcclab/dead"])
    plan = st.CleanPlan(remove=[DEAD], keep=[LIVE], stray_netns=[], stray_ifaces=[],
                        stray_cgroups=[])
    assert st.still_present(plan) == {"netns": [], "interfaces": [],
                                      "cgroups": ["/cg/mcclab/dead"]}
    assert st.still_present(plan, only="dead") == {"netns": [], "interfaces": [],
                                                   "cgroups": ["/cg/mcclab/dead"]}
    monkeypatch.setattr(st, "lab_cgroups", lambda: ["/cg/mcclab/live"])
    assert st.still_present(plan)["cgroups"] == []


def test_clean_fails_when_a_cgroup_is_left(monkeypatch, tmp_path):
    plan = st.CleanPlan(remove=[DEAD], keep=[], stray_netns=[], stray_ifaces=[],
                        stray_cgroups=[])
    monkeypatch.setattr(st, "clean", lambda everything=False, only=None: plan)
    monkeypatch.setattr(st, "still_present", lambda _plan, only=None: {
        "netns": [], "interfaces": [], "cgroups": ["/cg/mcclab/dead"]})
    result = CliRunner().invoke(app, ["clean", "--results", str(tmp_path)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "/cg/mcclab/dead" in result.output


def test_clean_all_stops_a_live_owner_before_destroying_its_lab(monkeypatch):
    calls = Calls(monkeypatch, [LIVE, DEAD])
    plan = st.clean(everything=True)
    assert calls.log[:3] == [("stop", "live"), ("destroy", "live"), ("destroy", "dead")]
    assert plan.stopped == ["live"]


def test_destroy_kills_the_recorded_cgroup_after_the_recorded_groups(monkeypatch, state_root):
    log: list[str] = []
    monkeypatch.setattr(st, "kill_groups", lambda procs: log.append(f"groups {len(procs)}"))
    monkeypatch.setattr(st.cgroup, "kill", lambda p: log.append(f"cgroup {p}"))
    monkeypatch.setattr(st, "_remove_netns", lambda n: log.append(f"netns {n}"))
    monkeypatch.setattr(st, "_quiet", lambda *a: log.append(" ".join(a)))
    dead = LabState(lab_id="dead", owner_pid=0, netns=["mcl-h2"], root_ifaces=["mclc-h2"],
                    cgroup="/cg/mcclab/dead")
    dead.save()
    st.destroy(dead)
    assert log == ["groups 0", "cgroup /cg/mcclab/dead", "netns mcl-h2", "ip link del mclc-h2"]
    assert not dead.path.exists()


def test_stop_owner_sends_sigterm_and_waits_for_the_owner_to_exit(tmp_path):
    said = tmp_path / "said"
    owner = subprocess.Popen([sys.executable, "-c", (
        "import signal, sys, time\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(said)!r}, 'w').write('TERM'), "
        "sys.exit(0)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None and owner.stdout.readline() == "ready\n"
    state = LabState(lab_id="x", owner_pid=owner.pid, owner_start=proc_start_time(owner.pid))
    start = time.monotonic()
    assert st.stop_owner(state, timeout=10.0)
    assert time.monotonic() - start < 5.0
    assert said.read_text() == "TERM"
    assert not state.owner_alive()
    owner.stdout.close()
    with contextlib.suppress(ChildProcessError):
        owner.wait(timeout=1)


# --- what the user is told ------------------------------------------------------------------

def test_preflight_names_who_holds_a_live_lab_and_sends_a_dead_one_to_clean():
    rest = {"netns": ["mcl-h1"], "interfaces": ["mclctl"]}
    held = LabState(lab_id="chain3-1", owner_pid=os.getpid())
    live_msg = leftover_problem(rest, [held])
    assert live_msg is not None
    assert "chain3-1" in live_msg and f"pid {os.getpid()}" in live_msg
    assert "mcclab clean" not in live_msg
    dead_msg = leftover_problem(rest, [])
    assert dead_msg is not None and "run 'mcclab clean'" in dead_msg
    assert leftover_problem({"netns": [], "interfaces": []}, [held]) is None


def test_clean_all_without_a_terminal_or_yes_refuses_and_removes_nothing(monkeypatch,
                                                                          tmp_path):
    called: list[bool] = []
    monkeypatch.setattr(st, "clean", lambda everything=False, only=None: called.append(everything))
    monkeypatch.setattr("mcclab.lab.live_labs", lambda: [LabState(lab_id="chain3-1",
                                                                  owner_pid=4321)])
    result = CliRunner().invoke(app, ["clean", "--all", "--results", str(tmp_path)],
                                input="y\n")
    assert result.exit_code == 2
    assert "--yes" in result.output and "chain3-1" in result.output
    assert called == []


def test_clean_reports_what_it_removed_and_what_it_left(monkeypatch, tmp_path):
    # A run whose runner is gone, in this test's own results folder (never the
    # repository's: a unit test must not rewrite a user's runs).
    killed = tmp_path / "exp" / "20261127-000000-dead"
    killed.mkdir(parents=True)
    (killed / "run.json").write_text(json.dumps(
        {"status": "running", "runner_pid": os.getpid(), "runner_start_time": -1}))
    plan = st.CleanPlan(remove=[DEAD], keep=[LIVE], stray_netns=["mcl-stray"], stray_ifaces=[],
                        stray_cgroups=["/sys/fs/cgroup/mcclab/a-1", "/sys/fs/cgroup/mcclab/b-2"])
    called: list[bool] = []
    monkeypatch.setattr(st, "clean",
                        lambda everything=False, only=None: called.append(everything) or plan)
    monkeypatch.setattr(st, "still_present", lambda _plan, only=None: {
        "netns": [], "interfaces": [], "cgroups": []})
    result = CliRunner().invoke(app, ["clean", "--results", str(tmp_path)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    # The CLI's console takes its width from COLUMNS when mcclab.cli is imported, and
    # pytest-xdist's workers set it (80): the output is read with its wrapping undone.
    said = " ".join(result.output.split())
    assert f"marked killed (its runner is gone): {killed}" in result.output.replace("\n", "")
    assert json.loads((killed / "run.json").read_text())["status"] == "killed"
    assert called == [False]
    assert "removed lab dead (owner pid 1000, dead)" in said
    assert "left lab live alone: its owner pid 1000 is alive" in said
    assert ("removed 1 lab(s), swept 1 stray namespace(s), 0 stray interface(s) and "
            "2 stray cgroup(s)") in said
    result = CliRunner().invoke(app, ["clean", "--all", "--yes", "--results", str(tmp_path)])
    assert result.exit_code == 0 and called == [False, True]
