"""The process timeline of an experiment, asserted as data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcclab.experiment.launch import on_off_periods, plan_launches
from mcclab.experiment.loader import EXPERIMENTS, resolve
from mcclab.experiment.spec import OnOffFlow
from mcclab.model.addressing import plan_addresses
from mcclab.net.tcp_window import Prime, parse_primes

RUN = Path("/tmp/run")


def test_default_experiment_launches():
    res = resolve("default")
    plan = plan_addresses(res.topology)
    lp = plan_launches(res.experiment, plan, RUN, python="py")
    roles = [(launch.flow, launch.role, launch.node) for launch in lp.launches]
    assert roles == [("webrc", "sender", "s1"), ("webrc", "receiver", "d1"),
                     ("tcp", "server", "d2"), ("tcp", "client", "s2")]
    client = lp.launches[3]
    assert client.argv[:3] == ("iperf3", "-c", str(plan.address_of("d2")))
    assert "-C" in client.argv and client.argv[client.argv.index("-C") + 1] == "reno"
    assert client.start == 100.0
    assert client.argv[client.argv.index("-t") + 1] == "403"  # outlasts the run
    sender = lp.launches[0]
    assert sender.argv[:4] == ("py", "-m", "agents.run", "sender")
    metrics = sender.argv[sender.argv.index("--metrics") + 1]
    assert metrics.startswith(str(plan.control["s1"].ip) + ":")
    assert lp.launches[1].start == 3.0  # the receiver's own start
    session = json.loads(lp.files[str(RUN / "sessions" / "webrc.json")])
    assert session["source"] == str(plan.address_of("s1")) and session["ssm"] is True
    # WEBRC at 4 Mbit/s: T = 48 wave channels and the base channel, SSM groups
    assert len(session["channels"]) == 49
    assert session["channels"][0] == {"group": "232.10.1.1", "port": 5500}


def test_udp_flows_of_a_spec_without_tcp_plan_udp_clients():
    """webrc-fig8 has CBR flows and no TCP (no `tcp:`): its UDP clients have no TCP model
    to ask for a congestion control, and their command lines set none."""
    res = resolve("webrc-fig8", "paper")
    assert res.experiment.tcp is None
    lp = plan_launches(res.experiment, plan_addresses(res.topology), RUN, python="py")
    clients = [launch for launch in lp.launches if launch.role == "client"]
    assert {launch.flow for launch in clients} == {"cbr500", "cbr250"}
    for launch in clients:
        assert "-u" in launch.argv and "-C" not in launch.argv


@pytest.mark.parametrize("name", sorted(p.stem for p in EXPERIMENTS.glob("*.yaml")))
def test_every_experiment_plans_its_launches(name):
    """A spec that loads must also plan: a launch planner that trips over one kind of flow
    would otherwise fail only when the run starts (webrc-fig8's CBR flows once did)."""
    res = resolve(name, "quick")
    lp = plan_launches(res.experiment, plan_addresses(res.topology), RUN, python="py")
    assert lp.launches


def test_on_off_periods_are_seeded_and_inside_the_run():
    flow = OnOffFlow.model_validate({
        "name": "o", "type": "onoff", "sender": "s2", "receiver": "d2", "rate": "200kbit",
        "on_period": {"distribution": "pareto", "mean": "2s", "shape": 1.5},
        "off_period": {"distribution": "exponential", "mean": "2s"}})
    a = on_off_periods(flow, seed=7, end=600)
    assert a == on_off_periods(flow, seed=7, end=600)
    assert a != on_off_periods(flow, seed=8, end=600)
    assert all(0 <= s < e <= 600 for s, e in a)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(a, a[1:], strict=False))
    on_fraction = sum(e - s for s, e in a) / 600
    assert 0.3 < on_fraction < 0.7  # equal means: about half the time on


def test_feedback_protocols_get_a_feedback_port_per_session():
    from pydantic import BaseModel

    from agents.cbr import CbrReceiver, CbrSender
    from agents.runtime.registry import ProtocolSpec, register, unregister
    from mcclab.experiment.spec import Experiment
    from mcclab.model.loader import load_topology

    class Params(BaseModel):
        pass

    register(ProtocolSpec("fb-test", 247, Params, CbrSender, CbrReceiver, feedback=True))
    try:
        exp = Experiment.model_validate({
            "name": "fb", "topology": "topologies/dumbbell.yaml", "duration": "10s",
            "flows": [{"name": "plain", "type": "multicast", "protocol": "cbr", "sender": "s1",
                       "receivers": ["d1"], "params": {"rate": "1Mbit"}},
                      {"name": "a", "type": "multicast", "protocol": "fb-test",
                       "sender": "s1", "receivers": ["d1"]},
                      {"name": "b", "type": "multicast", "protocol": "fb-test",
                       "sender": "s1", "receivers": ["d2"]}]})
        lp = plan_launches(exp, plan_addresses(load_topology("topologies/dumbbell.yaml")), RUN)
    finally:
        unregister("fb-test")
    ports = {name: json.loads(lp.files[str(RUN / "sessions" / f"{name}.json")]).get(
        "feedback_port") for name in ("plain", "a", "b")}
    assert ports["plain"] is None
    assert ports["a"] != ports["b"] and None not in (ports["a"], ports["b"])


def _with_flows(*flows: dict):
    """The default experiment with its TCP flow replaced by the given ones (the first named tcp)."""
    from mcclab.experiment.spec import Experiment

    data = resolve("default").experiment.model_dump(mode="json")
    data.pop("tcp")  # without a TCP model each flow's own settings apply
    data["flows"] = [f for f in data["flows"] if f["type"] != "tcp"] + list(flows)
    return Experiment.model_validate(data)


def test_sack_is_on_unless_a_tcp_sender_turns_it_off():
    res = resolve("default")
    exp = _with_flows({"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2"})
    setup = plan_launches(exp, plan_addresses(res.topology), RUN).setup
    assert not [c for c in setup if "net.ipv4.tcp_sack=0" in c.argv]
    exp = _with_flows(
        {"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2", "sack": False},
        {"name": "t2", "type": "tcp", "sender": "s2", "receiver": "d2", "sack": False})
    setup = plan_launches(exp, plan_addresses(res.topology), RUN).setup
    # once per host, inside the sender's namespace; the receiver keeps its default
    assert [str(c) for c in setup] == ["[mcl-s2] sysctl -q -w net.ipv4.tcp_sack=0"]


def test_sack_must_agree_between_tcp_flows_of_one_sender():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"flows\[2\]\.sack: True differs from flows\[1\]"):
        _with_flows(
            {"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2", "sack": False},
            {"name": "t2", "type": "tcp", "sender": "s2", "receiver": "d2"})
    # a UDP flow from the same host has no say
    _with_flows(
        {"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2", "sack": False},
        {"name": "u", "type": "udp", "sender": "s2", "receiver": "d2", "rate": "1Mbit"})


def test_a_window_ceiling_is_a_locked_route_metric_and_a_primed_cache():
    res = resolve("default")
    plan = plan_addresses(res.topology)
    exp = _with_flows(
        {"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2", "max_window": "20pkt"},
        {"name": "t2", "type": "tcp", "sender": "s2", "receiver": "d2", "max_window": "20pkt"})
    setup = [str(c) for c in plan_launches(exp, plan, RUN, python="py").setup]
    dest = plan.address_of("d2")
    gateway, dev = plan.next_hop("s2", dest)
    assert gateway is not None and dev.startswith("s2-eth")  # d2 is behind the routers
    # once per sender and receiver, the route before the priming connection
    assert setup == [
        f"[mcl-s2] ip route replace {dest}/32 via {gateway} dev {dev} cwnd lock 20",
        f"py -m mcclab.net.tcp_window < [mcl-s2 mcl-d2 {dest} 20]",
    ]


def test_next_hop_follows_the_static_routes_or_the_shared_subnet():
    plan = plan_addresses(resolve("default").topology)
    s2 = plan.interfaces["s2"][0]
    router = s2.peer
    assert plan.next_hop("s2", plan.iface_towards(router, "s2").address.ip) == (None, s2.name)
    route = next(r for r in plan.routes_of("s2") if plan.address_of("d2") in r.dest)
    assert plan.next_hop("s2", plan.address_of("d2")) == (route.gateway, route.dev)


def test_a_window_ceiling_must_agree_between_flows_of_one_path():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"flows\[2\]\.max_window: None differs from "
                                              r"flows\[1\]\.max_window \(20\).*'s2' to 'd2'"):
        _with_flows(
            {"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2", "max_window": "20pkt"},
            {"name": "t2", "type": "tcp", "sender": "s2", "receiver": "d2"})
    with pytest.raises(ValidationError, match="needs a unit"):
        _with_flows({"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2",
                     "max_window": 20})
    # other paths and UDP flows have no say
    _with_flows(
        {"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2", "max_window": "20pkt"},
        {"name": "u", "type": "udp", "sender": "s2", "receiver": "d2", "rate": "1Mbit"})


def _onoff(carrier: str, **extra) -> OnOffFlow:
    """An on/off flow with mean-1 s exponential periods (ORMCC Table II's UDP flows)."""
    return OnOffFlow.model_validate({
        "name": "o", "type": "onoff", "sender": "s2", "receiver": "d2", "carrier": carrier,
        "on_period": {"distribution": "exponential", "mean": "1s"},
        "off_period": {"distribution": "exponential", "mean": "1s"}, **extra})


def test_udp_on_off_periods_keep_the_short_ones_that_iperf3_could_not_run():
    udp = on_off_periods(_onoff("udp", rate="200kbit"), seed=1, end=600)
    tcp = on_off_periods(_onoff("tcp"), seed=1, end=600)
    assert any(b - a < 0.5 for a, b in udp)
    assert all(b - a >= 0.5 for a, b in tcp)
    on_fraction = sum(b - a for a, b in udp) / 600
    assert 0.4 < on_fraction < 0.6  # equal means: half the time on, short periods included


def test_an_on_off_udp_flow_is_one_sink_and_one_source_for_the_whole_run():
    from mcclab.experiment.spec import Experiment
    from mcclab.model.loader import load_topology

    flow = {"name": "o", "type": "onoff", "sender": "s2", "receiver": "d2", "rate": "200kbit",
            "packet_size": "500B", "on_period": {"distribution": "exponential", "mean": "1s"},
            "off_period": {"distribution": "exponential", "mean": "1s"}}
    exp = Experiment.model_validate({"name": "oo", "topology": "topologies/dumbbell.yaml",
                                     "duration": "300s", "seed": 3, "flows": [flow]})
    plan = plan_addresses(load_topology("topologies/dumbbell.yaml"))
    lp = plan_launches(exp, plan, RUN, python="py")
    assert [(x.role, x.node) for x in lp.launches] == [("sink", "d2"), ("source", "s2")]
    sink, source = lp.launches
    periods = lp.onoff["o"]
    assert len(periods) > 100  # about 150 on-periods in 300 s, all in one process
    assert sink.start == 0.0 and source.start == periods[0][0]
    assert sink.argv[:5] == ("py", "-m", "mcclab.traffic.udp_onoff", "recv", "--bind")
    arg = dict(zip(source.argv[4::2], source.argv[5::2], strict=True))
    assert arg["--dest"] == str(plan.address_of("d2")) and arg["--port"] == sink.argv[
        sink.argv.index("--port") + 1]
    assert (arg["--rate"], arg["--size"]) == ("200000", "500")
    schedule = json.loads(lp.files[arg["--schedule"]])
    # periods from the source's own start, which is the first period's start
    shifted = [(a + schedule["origin_s"], b + schedule["origin_s"])
               for a, b in schedule["periods"]]
    assert schedule["origin_s"] == periods[0][0]
    assert len(shifted) == len(periods)
    assert all(abs(x - y) < 1e-5 for s, p in zip(shifted, periods, strict=True)
               for x, y in zip(s, p, strict=True))



def test_hosts_plan_from_each_launchs_entry_not_from_its_command_line():
    """Agents, sinks and sources carry what their argv says as data; the agent hosts' and
    the on/off host's plans are made from that data, so an argv they cannot read (here one
    cut to its interpreter) leaves the plans as they were."""
    from dataclasses import replace

    from mcclab.experiment.launch import (
        AgentEntry,
        SinkEntry,
        SourceEntry,
        host_agents,
        onoff_host,
    )

    res = resolve("ormcc-table2-n6", sets=["agents.mode=host", "agents.hosts=2"])
    plan = plan_addresses(res.topology)
    lp = plan_launches(res.experiment, plan, RUN, python="py", cores=2)
    hosted = [x for x in lp.launches if x.role in ("sender", "receiver", "sink", "source")]
    assert hosted and all(x.host is not None for x in hosted)
    for x in hosted:  # each argv is its entry's
        if isinstance(x.entry, AgentEntry):
            assert x.entry.metrics is None  # the host's endpoint serves it
            assert x.argv == x.entry.argv("py", x.role, x.node, x.log)
        elif isinstance(x.entry, SinkEntry):
            assert x.role == "sink" and x.argv == x.entry.argv("py", x.log)
        else:
            assert isinstance(x.entry, SourceEntry) and x.role == "source"
            assert x.argv == x.entry.argv("py", x.log)
    # the process-mode plan with every such argv cut short makes the same hosts' plans
    process = plan_launches(resolve("ormcc-table2-n6").experiment, plan, RUN, python="py")
    process.launches = [replace(x, argv=("py",)) if x.entry is not None else x
                        for x in process.launches]
    host_agents(process, plan, RUN, "py", 2)
    onoff_host(process, RUN, "py")
    assert process.files == lp.files and process.agents == lp.agents
    # and each agent's argv is whole again, made from its entry
    assert [x for x in process.launches if isinstance(x.entry, AgentEntry)] == [
        x for x in lp.launches if isinstance(x.entry, AgentEntry)]

def test_one_primer_process_serves_every_window_ceiling_of_a_run():
    res = resolve("default")
    plan = plan_addresses(res.topology)
    exp = _with_flows(
        {"name": "tcp", "type": "tcp", "sender": "s2", "receiver": "d2", "max_window": "20pkt"},
        {"name": "b", "type": "tcp", "sender": "s1", "receiver": "d1", "max_window": "8pkt"})
    setup = plan_launches(exp, plan, RUN, python="py").setup
    primers = [c for c in setup if "mcclab.net.tcp_window" in c.argv]
    assert len(primers) == 1 and primers[0].netns is None
    assert setup[-1] is primers[0]  # after every route it relies on
    lines = primers[0].input.splitlines()
    assert lines == [f"mcl-s1 mcl-d1 {plan.address_of('d1')} 8",
                     f"mcl-s2 mcl-d2 {plan.address_of('d2')} 20"]
    assert parse_primes(primers[0].input) == [
        Prime("mcl-s1", "mcl-d1", str(plan.address_of("d1")), 8),
        Prime("mcl-s2", "mcl-d2", str(plan.address_of("d2")), 20)]


def test_the_primer_refuses_a_malformed_line_naming_it():
    with pytest.raises(SystemExit, match="input line 2"):
        parse_primes("mcl-a mcl-b 10.0.0.1 20\nmcl-a mcl-b 10.0.0.1\n")
