"""The on/off host: its sources send what ``udp_onoff send`` sends, when it sends it; its
sinks write the records ``udp_onoff recv`` writes; a run in host mode plans one host."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.runtime.loop import EventLoop
from agents.sim import SimLoop
from mcclab.experiment.launch import plan_launches
from mcclab.experiment.loader import resolve
from mcclab.model.addressing import plan_addresses
from mcclab.traffic import onoff_host, udp_onoff
from mcclab.traffic.onoff_host import OnOffHost, OnOffPlan


class FakeNamespaces:
    """Records which namespace each socket was made in (the host's setns seam)."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.entered: list[str | None] = []

    @contextlib.contextmanager
    def inside(self, path: str | None) -> Iterator[None]:
        self.entered.append(path)
        self.current = path
        try:
            yield
        finally:
            self.current = None


class RecordingSocket:
    """A UDP socket that notes (time, payload) of every send."""

    def __init__(self, clock, made_in: str | None, sent: list):
        self.clock, self.made_in, self.sent = clock, made_in, sent
        self.peer = None
        self.closed = False

    def connect(self, peer) -> None:
        self.peer = peer

    def setblocking(self, flag: bool) -> None:
        pass

    def send(self, data) -> int:
        self.sent.append((self.clock(), bytes(data)))
        return len(data)

    def close(self) -> None:
        self.closed = True


def fake_socket_module(clock, spaces: FakeNamespaces | None, made: list):
    """Stands for the ``socket`` module of udp_onoff / onoff_host: sockets that record."""
    def make(*_args):
        sock = RecordingSocket(clock, spaces.current if spaces else None, [])
        made.append(sock)
        return sock
    return SimpleNamespace(socket=make, AF_INET=socket.AF_INET, SOCK_DGRAM=socket.SOCK_DGRAM)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


RATE, SIZE = 400_000.0, 500  # a datagram every 10 ms
T0 = 1000.0
SCHEDULE = {"origin_s": 0.2, "periods": [[0, 0.3], [0.6, 0.8]]}


def run_command_source(tmp_path: Path, monkeypatch, began: float) -> tuple[list, list]:
    """``udp_onoff.send`` on a fake clock started at ``began``: its sends and its log."""
    clock = SimpleNamespace(now=began)
    fake_time = SimpleNamespace(monotonic=lambda: clock.now,
                                sleep=lambda s: setattr(clock, "now", clock.now + s))
    made: list[RecordingSocket] = []
    monkeypatch.setattr(udp_onoff, "time", fake_time)
    monkeypatch.setattr(udp_onoff, "socket", fake_socket_module(lambda: clock.now, None, made))
    schedule, log = tmp_path / "cmd.onoff.json", tmp_path / "cmd-source.jsonl"
    schedule.write_text(json.dumps(SCHEDULE))
    assert udp_onoff.send("10.0.0.2", 5202, RATE, SIZE, str(schedule), str(log), T0) == 0
    (sock,) = made
    return sock.sent, records(log)


def run_host_source(tmp_path: Path, monkeypatch, began: float
                    ) -> tuple[list, list, FakeNamespaces, RecordingSocket]:
    """The host with one source, on a simulated loop whose host starts at ``began``."""
    loop = SimLoop(began)
    spaces = FakeNamespaces()
    made: list[RecordingSocket] = []
    monkeypatch.setattr(onoff_host, "socket", fake_socket_module(loop.now, spaces, made))
    schedule, log = tmp_path / "o.onoff.json", tmp_path / "o-source-s1.jsonl"
    schedule.write_text(json.dumps(SCHEDULE))
    plan = OnOffPlan.model_validate({"name": "h", "sources": [{
        "flow": "o", "node": "s1", "netns": "/run/netns/mcl-s1", "dest": "10.0.0.2",
        "port": 5202, "rate_bps": RATE, "size": SIZE, "schedule": str(schedule),
        "log": str(log)}]})
    host = OnOffHost(plan, loop, spaces)
    host.open()
    host.schedule(T0)
    loop.run(T0 + 5)
    host.stop()
    (sock,) = made
    return sock.sent, records(log), spaces, sock


def assert_same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for (ta, da), (tb, db) in zip(a, b, strict=True):
        assert ta == pytest.approx(tb, abs=1e-9) and da == db


@pytest.mark.parametrize("late", [0.0, 0.155])
def test_host_source_sends_what_the_command_sends_when_it_sends_it(tmp_path, monkeypatch, late):
    began = T0 + SCHEDULE["origin_s"] + late
    cmd_sent, cmd_log = run_command_source(tmp_path, monkeypatch, began)
    host_sent, host_log, spaces, sock = run_host_source(tmp_path, monkeypatch, began)
    assert_same(host_sent, cmd_sent)
    assert [list(r) for r in host_log] == [list(r) for r in cmd_log]  # same keys, same order
    for h, c in zip(host_log, cmd_log, strict=True):
        assert h == pytest.approx(c, abs=1e-9)
    # the figures themselves, from the schedule by hand: 30 + 20 datagrams 10 ms apart;
    # started 0.155 s into the first period, the 15 due before 0.145 are skipped and the
    # one due at 0.15 goes at once
    skipped = 15 if late else 0
    assert host_log[-1] == pytest.approx({"event": "done", "t": T0 + 0.2 + 0.79,
                                          "sent": 50 - skipped, "send_errors": 0,
                                          "skipped": skipped})
    assert host_sent[0][0] == pytest.approx(began)
    assert [struct.unpack_from("!Q", d)[0] for _, d in host_sent] == list(range(50 - skipped))
    assert host_sent[-1][0] == pytest.approx(T0 + 0.2 + 0.79)
    # its socket was made inside its node's namespace, connected to the sink, closed at the end
    assert sock.made_in == "/run/netns/mcl-s1" and sock.peer == ("10.0.0.2", 5202)
    assert sock.closed


def test_a_source_not_yet_due_when_the_host_stops_writes_nothing(tmp_path, monkeypatch):
    loop = SimLoop(T0)
    made: list[RecordingSocket] = []
    monkeypatch.setattr(onoff_host, "socket", fake_socket_module(loop.now, None, made))
    schedule, log = tmp_path / "o.onoff.json", tmp_path / "o-source.jsonl"
    schedule.write_text(json.dumps(SCHEDULE))
    plan = OnOffPlan.model_validate({"name": "h", "sources": [{
        "flow": "o", "node": "s1", "dest": "10.0.0.2", "port": 5202, "rate_bps": RATE,
        "size": SIZE, "schedule": str(schedule), "log": str(log)}]})
    host = OnOffHost(plan, loop)
    host.open()
    host.schedule(T0)
    loop.run(T0 + 0.1)  # before the origin (0.2 s): no process would have started yet
    host.stop()
    assert not log.exists() and made[0].sent == [] and made[0].closed


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _feed(port: int) -> None:
    """Sequence numbers 0, 1, 4, 5 (2 and 3 lost) and a datagram too short to count."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for seq in (0, 1, 4, 5):
            s.sendto(struct.pack("!Q", seq) + bytes(92), ("127.0.0.1", port))
        s.sendto(b"abc", ("127.0.0.1", port))


def test_host_sink_writes_the_records_of_the_command_on_loopback(tmp_path):
    # the command, in its own process
    cmd_port, cmd_log = _port(), tmp_path / "cmd-sink.jsonl"
    sink = subprocess.Popen([sys.executable, "-m", "mcclab.traffic.udp_onoff", "recv",
                             "--bind", "127.0.0.1", "--port", str(cmd_port), "--log",
                             str(cmd_log)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    # the host, here, its socket "in" a node's namespace through the seam
    host_port, host_log = _port(), tmp_path / "o-sink-d1.jsonl"
    plan = OnOffPlan.model_validate({"name": "h", "sinks": [{
        "flow": "o", "node": "d1", "netns": "/run/netns/mcl-d1", "bind": "127.0.0.1",
        "port": host_port, "log": str(host_log)}]})
    loop = EventLoop()
    spaces = FakeNamespaces()
    host = OnOffHost(plan, loop, spaces)
    try:
        host.open()
        assert spaces.entered == ["/run/netns/mcl-d1"]
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        _feed(cmd_port)
        _feed(host_port)
        loop.run(loop.now() + 1.3)  # the first record at once, the next a second later
        time.sleep(max(0.0, 1.3 - (time.monotonic() - records(cmd_log)[0]["t"])))
    finally:
        host.stop()
        loop.close()
        os.killpg(sink.pid, signal.SIGTERM)
        sink.wait(timeout=10)
    got, want = records(host_log), records(cmd_log)
    assert len(got) == len(want) == 3  # at the start, a second later, at the stop
    assert [list(r) for r in got] == [list(r) for r in want]
    counts = ("event", "total_rx_bytes", "total_rx_packets", "total_lost")
    assert [[r[k] for k in counts] for r in got] == [[r[k] for k in counts] for r in want]
    assert [got[-1][k] for k in counts] == ["stats", 400, 4, 2]
    assert got[1]["t"] - got[0]["t"] == pytest.approx(1.0, abs=0.05)
    assert got[1]["throughput_bps"] == pytest.approx(400 * 8 / (got[1]["t"] - got[0]["t"]))


def test_host_sources_reach_host_sinks_on_loopback_and_stop_on_sigterm(tmp_path):
    """The command line end to end: two flows, SIGTERM mid-run, every log flushed."""
    ports = [_port(), _port()]
    sched = tmp_path / "s.onoff.json"
    sched.write_text(json.dumps({"origin_s": 0.0, "periods": [[0, 0.2], [0.4, 30]]}))
    plan = {"name": "onoff-host",
            "sinks": [{"flow": f"o{i}", "node": "d", "bind": "127.0.0.1", "port": p,
                       "log": str(tmp_path / f"o{i}-sink.jsonl")} for i, p in enumerate(ports)],
            "sources": [{"flow": f"o{i}", "node": "s", "dest": "127.0.0.1", "port": p,
                         "rate_bps": 200_000, "size": 100, "schedule": str(sched),
                         "log": str(tmp_path / f"o{i}-source.jsonl")}
                        for i, p in enumerate(ports)]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    host = subprocess.Popen([sys.executable, "-m", "mcclab.traffic.onoff_host", "--plan",
                             str(tmp_path / "plan.json")], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert host.stdout is not None
    ready = json.loads(host.stdout.readline())
    assert (ready["event"], ready["sinks"], ready["sources"]) == ("ready", 2, 2)
    time.sleep(1.5)
    os.killpg(host.pid, signal.SIGTERM)
    assert host.wait(timeout=10) == 0
    for i in range(2):
        start, done = records(tmp_path / f"o{i}-source.jsonl")
        assert (start["event"], done["event"]) == ("start", "done")
        assert done["sent"] > 40 and done["send_errors"] == 0  # 250 datagrams/s while on
        last = records(tmp_path / f"o{i}-sink.jsonl")[-1]
        assert last["event"] == "stats" and last["t"] >= done["t"]
        assert (last["total_rx_packets"], last["total_lost"]) == (done["sent"], 0)


def test_plans_refuse_a_log_used_twice_and_an_empty_host(tmp_path, capsys):
    sink = {"flow": "o", "node": "d", "bind": "10.0.0.2", "port": 5202, "log": "x.jsonl"}
    with pytest.raises(ValueError, match=r"sinks\[1\].log"):
        OnOffPlan.model_validate({"name": "h", "sinks": [sink, {**sink, "port": 5203}]})
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"name": "h"}))
    assert onoff_host.main(["--plan", str(path)]) == 2
    assert "no sinks and no sources" in capsys.readouterr().err


def test_host_mode_plans_one_onoff_host_that_names_every_flow():
    res = resolve("ormcc-table2", sets=["agents.mode=host"])
    addresses = plan_addresses(res.topology)
    run = Path("/tmp/run")
    lp = plan_launches(res.experiment, addresses, run, python="py", cores=2)
    (host,) = [x for x in lp.launches if x.argv[2:3] == ("mcclab.traffic.onoff_host",)]
    assert (host.role, host.start, host.host) == ("host", 0.0, None)
    plan = OnOffPlan.model_validate_json(lp.files[host.argv[host.argv.index("--plan") + 1]])
    sinks = [x for x in lp.launches if x.role == "sink"]
    sources = [x for x in lp.launches if x.role == "source"]
    udp = [f for f in res.experiment.flows if getattr(f, "carrier", None) == "udp"]
    assert len(udp) == 168  # two on every link of the 84-link tree
    # every flow has a sink; one with no on-period has no source
    assert len(sinks) == len(udp) and len(udp) - 5 <= len(sources) <= len(udp)
    # every one is the host's, keeps its log and command, and stands in the plan
    assert {x.host for x in sinks + sources} == {host.flow}
    assert [(s.flow, s.node, str(s.log)) for s in plan.sinks] == [
        (x.flow, x.node, x.log) for x in sinks]
    assert [(s.flow, s.node, str(s.log)) for s in plan.sources] == [
        (x.flow, x.node, x.log) for x in sources]
    for entry, launch in zip(plan.sources, sources, strict=True):
        arg = dict(zip(launch.argv[4::2], launch.argv[5::2], strict=True))
        assert entry.netns == f"/run/netns/mcl-{launch.node}"
        assert (entry.dest, entry.port, entry.rate_bps, entry.size) == (
            arg["--dest"], int(arg["--port"]), float(arg["--rate"]), int(arg["--size"]))
        assert str(entry.schedule) in lp.files
    for entry, launch in zip(plan.sinks, sinks, strict=True):
        assert (entry.bind, entry.port) == (launch.argv[5], int(launch.argv[7]))
    assert lp.agents["onoff"] == {"host": host.flow, "sinks": len(udp),
                                  "sources": len(sources)}
    # in process mode, each sink and source is a process of its own
    lp = plan_launches(resolve("ormcc-table2").experiment, addresses, run, python="py")
    assert all(x.role != "host" for x in lp.launches)
    assert {x.host for x in lp.launches if x.role in ("sink", "source")} == {None}
    assert "onoff" not in lp.agents


def test_a_host_mode_run_without_agents_records_host_mode(tmp_path):
    """run.json's ``agents`` says what was asked for, also with only on/off flows."""
    spec = tmp_path / "onoff-only.yaml"
    spec.write_text("""name: onoff-only
description: one UDP on/off flow, no agents
topology: topologies/dumbbell.yaml
duration: 10s
flows:
  - {name: bg, type: onoff, carrier: udp, sender: s2, receiver: d2, rate: 1Mbit,
     packet_size: 500B, on_period: {distribution: exponential, mean: 2s},
     off_period: {distribution: exponential, mean: 2s}}
""")
    res = resolve(str(spec), sets=["agents.mode=host"])
    lp = plan_launches(res.experiment, plan_addresses(res.topology), Path("/tmp/run"),
                       python="py")
    assert lp.agents["mode"] == "host" and lp.agents["hosts"] == {}
    assert lp.agents["onoff"]["sinks"] == 1
