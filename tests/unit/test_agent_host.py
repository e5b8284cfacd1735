"""The agent host: its plan, many agents on one (simulated) loop, the kept member sockets,
and how the runner splits a run's agents into hosts."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.host import AgentClock, Host, HostPlan, MergedMetrics, load_sessions
from agents.runtime.metrics import AgentMetrics
from agents.sim import SimLoop
from mcclab.experiment.launch import assign_hosts, plan_launches
from mcclab.experiment.loader import resolve
from mcclab.model.addressing import plan_addresses

SESSION = {"protocol": "cbr", "flow": "f", "session_id": 3, "source": "10.0.0.1", "ttl": 1,
           "channels": [{"group": "239.1.1.1", "port": 5500}],
           "params": {"rate": "80kbit", "packet_size": "1000B"}}  # 10 packets/s


def write_plan(tmp_path: Path, agents: list[dict], **extra) -> tuple[HostPlan, dict]:
    session = tmp_path / "s.json"
    session.write_text(json.dumps(SESSION))
    entries = [{"session": str(session), "log": str(tmp_path / f"{a['node']}.jsonl"), **a}
               for a in agents]
    plan = HostPlan.model_validate({"name": "h", "metrics": "127.0.0.1:9400",
                                    "agents": entries, **extra})
    return plan, load_sessions(plan)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class FakeNet:
    """Sends reach every port joined to the channel 5 ms later, on the simulated loop."""

    def __init__(self, loop: SimLoop):
        self.loop = loop
        self.ports: list[FakePort] = []

    def transport(self, hosted, clock, agent):
        port = FakePort(self, agent, clock)
        self.ports.append(port)
        return port


class FakePort:
    def __init__(self, net: FakeNet, agent, clock: AgentClock):
        # Arrivals go through the receiver's clock, as a real socket's reader does.
        self.net, self.agent, self.clock = net, agent, clock
        self.joined: set[int] = set()
        self.closed = False

    def send(self, channel, data):
        for port in self.net.ports:
            if channel in port.joined and not port.closed:
                port.clock.call_at(self.net.loop.now() + 0.005,
                                   lambda p=port: p.agent.deliver(data, channel))
        return True

    def join(self, channel):
        self.joined.add(channel)

    def leave(self, channel):
        self.joined.discard(channel)

    def send_feedback(self, to, data):
        return True

    def open(self):
        pass

    def close(self):
        self.closed = True
        self.joined.clear()


def test_plan_refuses_unknown_keys_bad_times_and_shared_logs(tmp_path):
    base = {"role": "receiver", "node": "r1"}
    with pytest.raises(ValidationError, match="extra"):
        write_plan(tmp_path, [{**base, "bogus": 1}])
    with pytest.raises(ValidationError, match="after start"):
        write_plan(tmp_path, [{**base, "start": 5.0, "stop": 5.0}])
    with pytest.raises(ValidationError, match="log"):
        write_plan(tmp_path, [base, {**base, "role": "sender"}])  # same log file
    with pytest.raises(ValidationError, match="control-net"):
        write_plan(tmp_path, [base], metrics="0.0.0.0:9400")
    with pytest.raises(ValidationError, match="at least 1"):
        HostPlan.model_validate({"name": "h", "agents": []})


def test_agents_share_one_loop_each_with_its_own_schedule_log_and_series(tmp_path):
    plan, sessions = write_plan(tmp_path, [
        {"role": "sender", "node": "s"},
        {"role": "receiver", "node": "r1"},
        {"role": "receiver", "node": "r2", "start": 2.0, "stop": 5.0},
    ])
    loop = SimLoop(start=100.0)
    net = FakeNet(loop)
    host = Host(plan, sessions, loop, transport=net.transport)
    host.schedule(origin=100.0)
    assert [h.state for h in host.agents] == ["running", "running", "pending"]
    loop.run(until=103.5)
    # r2 started at 102: its series are served with the others', each with its labels
    text = "\n".join(f"{s.name}{s.labels}={s.value}" for m in host.merged.collect()
                     for s in m.samples if s.name == "mcc_agent_packets_received_total")
    assert "'node': 'r1'" in text and "'node': 'r2'" in text
    loop.run(until=110.0)
    host.stop_all()
    assert [h.state for h in host.agents] == ["stopped"] * 3
    r1, r2 = records(tmp_path / "r1.jsonl"), records(tmp_path / "r2.jsonl")
    assert {r["node"] for r in r1} == {"r1"} and {r["node"] for r in r2} == {"r2"}
    assert r2[0]["event"] == "start" and r2[0]["t"] == pytest.approx(102.0)
    assert r2[-1]["event"] == "stop" and r2[-1]["t"] == pytest.approx(105.0)
    # 10 packets/s: r1 for 10 s, r2 for its 3 s (each packet 5 ms on the way)
    assert 98 <= r1[-1]["rx_packets"] <= 100 and 29 <= r2[-1]["rx_packets"] <= 31
    assert records(tmp_path / "s.jsonl")[-1]["tx_packets"] in (100, 101)
    assert host.merged.agents == []  # every stopped agent's series withdrawn


def test_a_failing_agent_stops_alone_and_logs_why(tmp_path):
    plan, sessions = write_plan(tmp_path, [
        {"role": "sender", "node": "s"}, {"role": "receiver", "node": "r1"},
        {"role": "receiver", "node": "r2"}])
    loop = SimLoop()
    net = FakeNet(loop)
    errors: list[str] = []
    host = Host(plan, sessions, loop, transport=net.transport, err=errors.append)
    host.schedule(origin=0.0)
    broken = host.agents[1]
    assert broken.agent is not None

    def boom(*_):
        raise ValueError("core bug")
    broken.agent.core.on_packet = boom
    loop.run(until=3.0)
    assert [h.state for h in host.agents] == ["running", "failed", "running"]
    assert any("core bug" in e for e in errors)
    r1 = records(tmp_path / "r1.jsonl")
    assert [r["event"] for r in r1][-2:] == ["leave", "stop"] or r1[-1]["event"] == "stop"
    assert any(r["event"] == "error" and "core bug" in r["error"] for r in r1)
    host.stop_all()
    assert records(tmp_path / "r2.jsonl")[-1]["rx_packets"] >= 28


def test_the_host_stops_its_loop_once_every_agent_has_stopped(tmp_path):
    plan, sessions = write_plan(tmp_path, [{"role": "receiver", "node": "r1", "stop": 2.0}])
    loop = SimLoop()
    host = Host(plan, sessions, loop, transport=FakeNet(loop).transport)
    host.schedule(origin=0.0)
    loop.run(until=60.0)
    assert loop.now() == pytest.approx(2.0)  # stopped at the agent's stop, not at 60 s


def test_agent_clock_passes_exceptions_to_its_agent_only():
    loop = SimLoop()
    seen: list[BaseException] = []
    clock = AgentClock(loop, seen.append)
    ran = []
    clock.call_at(1.0, lambda: 1 / 0)
    loop.call_at(2.0, lambda: ran.append(True))
    loop.run(until=3.0)
    assert isinstance(seen[0], ZeroDivisionError) and ran == [True]


def test_merged_metrics_serve_every_agents_family_once():
    merged = MergedMetrics()
    a = AgentMetrics("r1", "f", "cbr", "receiver")
    b = AgentMetrics("r2", "f", "cbr", "receiver")
    merged.agents += [a, b]
    families = list(merged.collect())
    names = [f.name for f in families]
    assert len(names) == len(set(names))
    received = next(f for f in families if f.name == "mcc_agent_packets_received")
    assert {s.labels["node"] for s in received.samples if s.name.endswith("_total")} == \
        {"r1", "r2"}


@pytest.mark.root
def test_a_leave_keeps_the_socket_and_a_join_needs_no_namespace_switch(tmp_path):
    from agents.runtime.host_transport import HostTransport, Namespaces
    from agents.runtime.loop import EventLoop
    from agents.runtime.session import Session

    session = Session.model_validate({**SESSION, "source": "127.0.0.1"})
    loop = EventLoop()
    spaces = Namespaces()
    got: list[bytes] = []
    # The host's own namespace as the node's: a real setns, traffic only on loopback.
    transport = HostTransport(loop, session, "127.0.0.1", lambda d, c, a: got.append(d),
                              namespaces=spaces, netns="/proc/self/ns/net")
    try:
        transport.join(0)
        assert spaces.switches == 1
        first = transport.members[0]
        transport.leave(0)
        assert transport.parked[0] is first and 0 not in transport.members
        transport.join(0)
        assert transport.members[0] is first and spaces.switches == 1
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            tx.sendto(b"x", ("239.1.1.1", 5500))
        loop.run(until=loop.now() + 0.2)
        assert got == [b"x"]
    finally:
        transport.close()
        loop.close()
        spaces.close()
    assert first.fileno() == -1 and not transport.parked


def test_runner_splits_agents_into_hosts_and_gives_each_one_endpoint():
    res = resolve("ormcc-fig4-n16", sets=["agents.mode=host", "agents.hosts=2"])
    plan = plan_addresses(res.topology)
    lp = plan_launches(res.experiment, plan, Path("/tmp/run"), python="py")
    agents = [launch for launch in lp.launches if launch.role in ("sender", "receiver")]
    hosts = [launch for launch in lp.launches if launch.role == "host"]
    assert len(hosts) == 2 and all(a.host in {"agent-host-1", "agent-host-2"} for a in agents)
    assert all("--metrics" not in a.argv for a in agents)
    assert all(h.argv[2] == "agents.host" and "--metrics" in h.argv for h in hosts)
    endpoints = {h.argv[h.argv.index("--metrics") + 1] for h in hosts}
    assert len(endpoints) == 2
    listed = sorted((a["flow"], a["role"], a["node"]) for members in lp.agents["hosts"].values()
                    for a in members)
    assert listed == sorted((a.flow, a.role, a.node) for a in agents)
    for h in hosts:
        file = h.argv[h.argv.index("--plan") + 1]
        plan_doc = HostPlan.model_validate_json(lp.files[file])
        assert {a.log.name for a in plan_doc.agents} == {
            Path(a.log).name for a in agents if a.host == h.flow}
        assert all(e.netns == f"/run/netns/mcl-{e.node}" for e in plan_doc.agents)
    # senders are dealt out first: each host has half of them
    senders = [sum(a.role == "sender" and a.host == h.flow for a in agents) for h in hosts]
    assert max(senders) - min(senders) <= 1
    process = plan_launches(resolve("ormcc-fig4-n16").experiment, plan, Path("/tmp/run"),
                            python="py")
    assert process.agents == {"mode": "process"}
    assert not any(launch.role == "host" or launch.host for launch in process.launches)


def test_hosts_per_core_never_outnumber_agents():
    res = resolve("default", sets=["agents.mode=host"])
    lp = plan_launches(res.experiment, plan_addresses(res.topology), Path("/r"), python="py",
                       cores=8)
    assert len(lp.agents["hosts"]) == 2  # default has two agents
    assert assign_hosts([], 3) == [[], [], []]


def test_agents_settings_are_checked():
    with pytest.raises(Exception, match="agents.bogus: unknown key"):
        resolve("default", sets=["agents.bogus=1"])
    with pytest.raises(Exception, match="process|host"):
        resolve("default", sets=["agents.mode=threads"])


def test_a_host_asks_for_the_cpu_weight_of_its_agents_as_processes():
    from agents.host import scheduler_nice

    # CFS weight grows 1.25x per nice step: 1.25**9 = 7.5 (8 agents), capped at -20
    assert [scheduler_nice(n) for n in (1, 2, 8, 64, 193)] == [0, -3, -9, -19, -20]


def test_the_hosts_metrics_answer_in_plain_text_whatever_the_scraper_asks():
    # Prometheus asks for OpenMetrics, gzipped; the host answers the cheaper
    # classic text format, uncompressed, and still every agent's series
    import urllib.request

    from agents.host import serve
    from agents.runtime.host_transport import Namespaces

    merged = MergedMetrics()
    agent = AgentMetrics("h1", "uni1", "cbr", "receiver")
    agent.core_gauge("rate_bps", 5.0)
    merged.agents.append(agent)
    namespaces = Namespaces()
    server = serve(merged, "127.0.0.1", 0, namespaces, None)
    try:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.server_port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0,text/plain;q=0.5",
                     "Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=5) as answer:
            body = answer.read().decode()
            assert answer.headers["Content-Type"].startswith("text/plain")
            assert answer.headers.get("Content-Encoding") in (None, "identity")
        assert 'mcc_agent_rate_bps{' in body and 'node="h1"' in body
        assert "# EOF" not in body  # OpenMetrics ends with it; the text format does not
    finally:
        server.shutdown()
        server.server_close()
        namespaces.close()


def test_a_started_agents_objects_are_left_out_of_full_collections(tmp_path):
    # A full collection walks every tracked object while the loop waits: the objects
    # an agent builds at its start are frozen out of it once the agent runs.
    import gc

    plan, sessions = write_plan(tmp_path, [{"role": "receiver", "node": "r1"}])
    loop = SimLoop()
    host = Host(plan, sessions, loop, transport=FakeNet(loop).transport)
    gc.unfreeze()
    try:
        host.schedule(origin=0.0)
        assert host.agents[0].state == "running"
        assert gc.get_freeze_count() > 0
        assert not any(o is host.agents[0].agent for o in gc.get_objects())
    finally:
        host.stop_all()
        gc.unfreeze()
