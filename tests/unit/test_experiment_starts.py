"""mcclab.experiment.starts: every launch begins on time however slow the runner starts them."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

import pytest

from mcclab.experiment.starts import (
    LATE,
    Gate,
    Starter,
    StartRecord,
    armed_argv,
    boot_clock,
    read_marks,
    split,
)


@dataclass(frozen=True)
class L:
    role: str
    start: float


class FakeClock:
    """Monotonic seconds that only move when the machine (the test) says so."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _fig4(n: int, planned: float = 0.0) -> list[L]:
    """ormcc-fig4-n<n>: per leaf an iperf3 server and client and two ORMCC flows'
    agents, plus the multi-receiver flow: everything planned at ``planned``."""
    out = [L("server", 0.0) for _ in range(n)]
    out += [L("receiver", planned) for _ in range(2 * n)]
    out += [L("sender", planned) for _ in range(n + 1)]
    out += [L("client", planned) for _ in range(n)]
    return out


def _run(launches: list[L], cost: float, seconds: float = 10.0) -> tuple[Starter, dict[int, float]]:
    """Drive a Starter on a fake clock where every process the runner starts (or arms)
    costs it ``cost`` seconds, as on a loaded machine; returns when each launch began
    (run clock). An armed launch begins its delay after the gate opened."""
    clock = FakeClock()
    began: dict[int, float] = {}
    armed: dict[int, float] = {}
    opened: list[float] = []

    def start_many(indices: list[int]) -> None:
        clock.t += cost * len(indices)

    def arm(i: int, delay: float) -> None:
        clock.t += cost
        armed[i] = delay

    def start(i: int) -> None:
        clock.t += cost
        began[i] = clock.t

    starter = Starter(launches, clock, start_many, arm, lambda: opened.append(clock.t), start)
    t0 = starter.begin()
    assert opened == [t0]  # the gate opens with the clock
    while clock.t - t0 < seconds:  # the runner's loop, 50 ms a turn
        starter.due()
        clock.t += 0.05
    runs = {i: at - t0 for i, at in began.items()}
    runs.update({i: delay for i, delay in armed.items()})  # gate at t0, then the delay
    return starter, runs


def test_iperf3_clients_begin_on_time_when_every_start_costs_the_runner_seconds():
    launches = _fig4(64)
    # Serial starts cost ~2 s each once the agents ran (ormcc-fig4-n64 on two cores).
    starter, began = _run(launches, cost=2.0, seconds=5.0)
    clients = [i for i, launch in enumerate(launches) if launch.role == "client"]
    assert len(clients) == 64
    for i in clients:
        assert began[i] - launches[i].start <= LATE, (i, began[i])
        assert starter.record.starts[i].how == "armed"
    servers = [i for i, launch in enumerate(launches) if launch.role == "server"]
    assert all(starter.record.starts[i].how == "before-clock" for i in servers)
    assert all(i not in starter.timed for i in servers + clients)


def test_armed_clients_keep_later_planned_times():
    launches = [L("server", 0.0), L("client", 0.0), L("client", 25.0), L("client", 60.5)]
    _starter, began = _run(launches, cost=3.0, seconds=1.0)
    assert [began[i] for i in (1, 2, 3)] == [0.0, 25.0, 60.5]


def test_timed_launches_start_in_order_when_due():
    launches = [L("receiver", 0.0), L("sender", 2.0), L("receiver", 1.0)]
    starter, began = _run(launches, cost=0.01, seconds=3.0)
    assert began[0] < began[2] < began[1]
    assert 2.0 <= began[1] <= 2.1
    assert starter.record.starts[1].how == "timed"
    assert starter.record.worst() == pytest.approx(max(began[i] - launches[i].start
                                                       for i in range(3)))


def test_begin_takes_only_the_given_launches_in_the_given_order():
    launches = [L("server", 0.0), L("client", 0.0), L("receiver", 0.0), L("sender", 0.0),
                L("receiver", 0.0)]
    clock = FakeClock()
    started: list[int] = []
    starter = Starter(launches, clock, lambda ix: started.extend(ix), lambda i, d: None,
                      lambda: None, started.append)
    starter.begin([0, 1, 3, 2])  # launch 4 belongs to someone else (an agent host)
    starter.due()
    assert started == [0, 3, 2]


def test_split_by_role_and_time():
    launches = [L("client", 5.0), L("server", 0.0), L("sink", 0.0), L("server", 3.0),
                L("source", 1.0)]
    assert split(launches) == ([1], [0], [2, 4, 3])


def test_record_lags_and_late_starts(tmp_path):
    record = StartRecord(boot_t0=100.0)
    record.note(0, 0.0, "before-clock", 0.0)
    record.note(1, 5.0, "armed")
    record.note(2, 0.0, "timed", 1.5)
    record.note(3, 7.0, "armed")
    record.take_marks({"1": 105.2, "x": 1.0, "9": 3.0})
    assert record.starts[1].lag == pytest.approx(0.2)
    assert [s.index for s in record.late()] == [2, 3]  # 1.5 s late, never began
    assert record.worst() == pytest.approx(1.5)
    record.write(tmp_path / "starts.csv", lambda i: {"flow": f"f{i}", "role": "r",
                                                      "node": "n"})
    lines = (tmp_path / "starts.csv").read_text().splitlines()
    assert lines[0] == "flow,role,node,how,planned_s,began_s,lag_s,test_began_s"
    assert "f1,r,n,armed,5.0,5.2,0.2," in lines


def test_an_armed_wrapper_waits_for_the_gate_then_its_delay(tmp_path):
    marks = tmp_path / "marks.txt"
    out = tmp_path / "out.txt"
    gate = Gate()
    argv = armed_argv(["sh", "-c", "echo ran"], 0.3, "7", marks)
    with out.open("wb") as fh:
        proc = subprocess.Popen(argv, stdin=gate.read_fd, stdout=fh, start_new_session=True)
    try:
        time.sleep(0.5)
        assert proc.poll() is None and not marks.exists()  # held by the gate
        opened = boot_clock()
        gate.release()
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
    began = read_marks(marks)["7"]
    assert 0.3 - 0.02 <= began - opened <= 0.3 + 0.3, began - opened
    assert out.read_text() == "ran\n"


def test_due_hands_the_loop_back_between_slow_starts():
    # 193 agents due at 0, each start costing 0.8 s: the loop must get its turn (to
    # sample links, watch iperf3) every start or so, not after all of them.
    launches = [L("receiver", 0.0) for _ in range(193)]
    clock = FakeClock()

    def start(_i: int) -> None:
        clock.t += 0.8

    starter = Starter(launches, clock, lambda ix: None, lambda i, d: None, lambda: None, start)
    starter.begin()
    turns = 0
    while starter.due():
        turns += 1
    assert turns >= 190 and not starter.timed
