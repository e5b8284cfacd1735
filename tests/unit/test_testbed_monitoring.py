"""Monitoring on allocated hosts, as data: the forwards' ssh argvs, the endpoints moved to
the hosts' loopback, which hosts run an exporter and with what, the targets Prometheus
scrapes and every refusal; then the same carried out with ssh faked, through the
session's seam, and the exporter reading a router in place."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from monitoring_support import never_alive, private_machine

from mcclab.lab import LabOptions
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import load_topology
from mcclab.monitoring import exporter as exp_mod
from mcclab.monitoring import lifecycle, session
from mcclab.monitoring import prometheus as prom
from mcclab.monitoring.exporter import ExporterConfig, IperfSource, LabCollector, registry_for
from mcclab.testbed import monitoring as tm
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.lab import TestbedLab
from mcclab.testbed.ssh import Ssh

REPO = Path(__file__).resolve().parents[2]
TOPO = load_topology(REPO / "topologies" / "webrc-dumbbell.yaml")
PLAN = plan_addresses(TOPO)
HOSTS = {n: Host(address=f"pc{i}.emulab.net", user="me") for i, n in enumerate(TOPO.nodes)}
LABELS = {"run": "r1", "experiment": "default"}


def _inventory(**extra: object) -> Inventory:
    return Inventory(source="nodes.txt", format="emulab", hosts=HOSTS, **extra)


def _ports(start: int = 40000):
    return iter(range(start, start + 100))


def _ctl(node: str) -> str:
    return str(PLAN.control[node].ip)


def _exporter(address: str = "127.0.0.1:9463") -> prom.Target:
    return prom.Target(address, {**LABELS, "node": "root", "flow": "none", "protocol": "none",
                                 "role": "exporter", "component": "exporter"})


def _agent(node: str, port: int, address: str | None = None, role: str = "receiver"
           ) -> prom.Target:
    return prom.Target(f"{address or _ctl(node)}:{port}",
                       {**LABELS, "node": node, "flow": "webrc", "protocol": "webrc",
                        "role": role, "component": "agent"})


# --- forwards ---------------------------------------------------------------------------------

def test_forward_and_cancel_ride_on_the_hosts_master_connection(tmp_path):
    ssh = Ssh(_inventory(ssh_command=("ip", "netns", "exec", "c", "ssh")), tmp_path)
    fwd = tm.Forward("d1", 40001, 9464)
    assert fwd.spec() == "127.0.0.1:40001:127.0.0.1:9464"
    argv = tm.forward_argv(ssh, fwd, "forward")
    assert argv == ["ip", "netns", "exec", "c", "ssh", *ssh.options("d1"), "-O", "forward",
                    "-L", "127.0.0.1:40001:127.0.0.1:9464", "--", "me@pc3.emulab.net"]
    # the master connection's socket is named, so no new connection is made
    assert f"ControlPath={tmp_path}/%C" in argv
    cancel = tm.forward_argv(ssh, fwd, "cancel")
    assert cancel[cancel.index("-O") + 1] == "cancel" and cancel[-3:] == argv[-3:]


@pytest.mark.parametrize(("fwd", "operation", "message"), [
    (tm.Forward("d1", 40001, 9464), "exit", "not a forwarding operation"),
    (tm.Forward("d1", 40001, 9464), "stop", "not a forwarding operation"),
    (tm.Forward("d1", 0, 9464), "forward", "port 0 is outside 1-65535"),
    (tm.Forward("d1", 40001, 65536), "cancel", "port 65536 is outside 1-65535"),
])
def test_forward_refusals(tmp_path, fwd, operation, message):
    with pytest.raises(tm.MonitoringRefused, match=message):
        tm.forward_argv(Ssh(_inventory(), tmp_path), fwd, operation)


# --- endpoints on the hosts' loopback ---------------------------------------------------------

def test_only_the_metrics_endpoint_moves_to_loopback():
    argv = ("python", "-m", "agents.run", "--dest", "172.30.0.4:9464", "--metrics",
            "172.30.0.4:9465", "--log", "x")
    assert tm.loopback_metrics(argv) == ["python", "-m", "agents.run", "--dest",
                                         "172.30.0.4:9464", "--metrics", "127.0.0.1:9465",
                                         "--log", "x"]
    assert tm.loopback_metrics(("iperf3", "-s")) == ["iperf3", "-s"]
    # a trailing flag without a value is left as it is
    assert tm.loopback_metrics(("x", "--metrics")) == ["x", "--metrics"]


@pytest.mark.parametrize("value", ["172.30.0.4", "172.30.0.4:", ":9464", "host:http"])
def test_a_metrics_value_without_address_and_port_is_refused(value):
    with pytest.raises(tm.MonitoringRefused, match="no ADDRESS:PORT"):
        tm.loopback_metrics(("agents.run", "--metrics", value))


# --- which hosts run an exporter --------------------------------------------------------------

def test_every_router_and_every_sink_host_gets_an_exporter():
    sources = [IperfSource("tcp", "d2", "tcp", "/res/logs/tcp-server-d2.txt"),
               IperfSource("onoff", "d1", "udp", "/res/logs/onoff-sink-d1.jsonl", "stats")]
    sites, here = tm.plan_sites(["rl", "rr"], sources, lambda p: "/h" + p, HOSTS)
    assert sites == [
        tm.Site("rl", True), tm.Site("rr", True),
        tm.Site("d1", False, (IperfSource("onoff", "d1", "udp",
                                          "/h/res/logs/onoff-sink-d1.jsonl", "stats"),))]
    # iperf3's report comes back through its ssh connection: read on the controller
    assert here == [sources[0]]


def test_a_sink_on_a_router_joins_that_routers_exporter():
    src = IperfSource("u", "rl", "udp", "/l.jsonl", "stats")
    sites, here = tm.plan_sites(["rl"], [src], lambda p: p, HOSTS)
    assert sites == [tm.Site("rl", True, (src,))] and here == []


def test_a_node_without_a_host_is_refused():
    hosts = {n: h for n, h in HOSTS.items() if n != "rr"}
    with pytest.raises(tm.MonitoringRefused, match="no host for rr"):
        tm.plan_sites(["rl", "rr"], [], lambda p: p, hosts)
    with pytest.raises(tm.MonitoringRefused, match="no host for x9"):
        tm.plan_sites([], [IperfSource("f", "x9", "udp", "/l", "stats")], lambda p: p, HOSTS)


def test_a_sites_exporter_listens_on_loopback_and_reads_its_router_in_place():
    site = tm.Site("rl", True)
    files = tm.site_files(site, "/tmp/mcclab-ssh/lab1", "name: t\n")
    config_path = "/tmp/mcclab-ssh/lab1/monitoring/exporter-rl.json"
    assert set(files) == {config_path, "/tmp/mcclab-ssh/lab1/monitoring/topology.yaml"}
    config = ExporterConfig.from_json(files[config_path])
    assert config == ExporterConfig(
        listen="127.0.0.1", port=9463, lab_dir="/tmp/mcclab-ssh/lab1",
        topology="/tmp/mcclab-ssh/lab1/monitoring/topology.yaml", link_backend="testbed",
        routers=["rl"], iperf=[], in_place=True)
    assert tm.site_config(tm.Site("d1", False), "/x").routers == []
    command = tm.site_command(site, "/tmp/mcclab-ssh/lab1", "/opt/mcclab/venv/bin/python")
    assert command.netns == "mcl-rl"  # the lab's runner sends it to rl's host
    assert command.argv == ("/opt/mcclab/venv/bin/python", "-m", "mcclab.monitoring.exporter",
                            "--config", config_path)
    assert tm.counters_cleanup() == ["nft", "delete", "table", "ip", "mclmon"]


# --- targets ----------------------------------------------------------------------------------

def test_agents_and_sites_are_scraped_through_forwards_with_the_labs_labels():
    targets = [_exporter(), _agent("s1", 9464, role="sender"), _agent("d1", 9464),
               _agent("d1", 9465)]
    sites = [tm.Site("rl", True), tm.Site("rr", True)]
    out, forwards = tm.forwarded_targets(targets, sites, PLAN, HOSTS, _ports())
    assert forwards == [tm.Forward("s1", 40000, 9464), tm.Forward("d1", 40001, 9464),
                        tm.Forward("d1", 40002, 9465), tm.Forward("rl", 40003, 9463),
                        tm.Forward("rr", 40004, 9463)]
    assert out[0] == targets[0]  # the controller's exporter, on its loopback already
    for target, agent, port in zip(out[1:4], targets[1:], (40000, 40001, 40002), strict=True):
        assert target.address == f"127.0.0.1:{port}" and target.labels == agent.labels
    rl, rr = out[4:]
    assert rl.address == "127.0.0.1:40003" and rr.address == "127.0.0.1:40004"
    assert rl.labels == {**targets[0].labels, "node": "rl"}
    assert rr.labels["component"] == "exporter" and rr.labels["node"] == "rr"
    assert len(out) == 6


@pytest.mark.parametrize(("targets", "sites", "message"), [
    ([_exporter(), _agent("d1", 9464, address="10.0.4.10")], [],
     "not on d1's control address"),
    ([_exporter(), _agent("ghost", 9464, address="172.30.0.99")], [], "'ghost' has no host"),
    ([_exporter("172.30.0.1:9463")], [], "not on loopback"),
    ([_exporter(), _agent("rl", 9463)], [tm.Site("rl", True)], "the exporter's on rl"),
    ([_exporter(), _agent("d1", 9464), _agent("d1", 9464)], [], "two endpoints on port 9464"),
    ([_agent("d1", 9464)], [], "found 0"),
    ([_exporter(), _exporter()], [], "found 2"),
    ([_exporter(), prom.Target("172.30.0.5", _agent("d1", 1).labels)], [], "no ADDRESS:PORT"),
])
def test_target_refusals(targets, sites, message):
    with pytest.raises(tm.MonitoringRefused, match=message):
        tm.forwarded_targets(targets, sites, PLAN, HOSTS, _ports())


def test_an_agent_on_port_9463_of_a_host_without_an_exporter_is_forwarded():
    out, forwards = tm.forwarded_targets([_exporter(), _agent("d1", 9463)], [], PLAN, HOSTS,
                                         _ports())
    assert forwards == [tm.Forward("d1", 40000, 9463)]


def test_free_loopback_ports_never_repeat(monkeypatch):
    picks = iter([5000, 5000, 5001, 5000, 5002])
    monkeypatch.setattr(prom, "free_port", lambda host, preferred: next(picks))
    ports = tm.free_loopback_ports()
    assert [next(ports), next(ports), next(ports)] == [5000, 5001, 5002]


# --- the exporter on a router's host ----------------------------------------------------------

class _Nft:
    """A runner answering the exporter's nft commands, recording where each would run."""

    def __init__(self) -> None:
        self.netns: list[str | None] = []

    def run(self, command) -> str:  # noqa: ANN001
        self.netns.append(command.netns)
        if "list" in command.argv:
            return json.dumps({"nftables": [{"counter": {"name": "pim_out_rl_eth0",
                                                         "packets": 17}}]})
        return ""


def test_an_in_place_exporter_reads_its_router_here(tmp_path, monkeypatch):
    def no_namespace(*args: object) -> dict:
        raise FileNotFoundError("/run/netns/mcl-rl")

    monkeypatch.setattr(exp_mod, "read_net_files", no_namespace)
    config = tm.site_config(tm.Site("rl", True), str(tmp_path))
    runner = _Nft()
    collector = LabCollector(config, TOPO, runner)  # type: ignore[arg-type]
    collector.install()
    reg = registry_for(collector)
    labels = {"node": "rl", "flow": "none", "protocol": "none", "iface": "rl-eth0",
              "direction": "out"}
    assert reg.get_sample_value("mcc_router_pim_packets_total", labels) == 17
    errors = {"node": "root", "flow": "none", "protocol": "none", "source": "router:rl"}
    assert reg.get_sample_value("mcc_exporter_errors_total", errors) == 0
    assert runner.netns and set(runner.netns) == {None}
    assert (tmp_path / "monitoring" / "nft-rl.nft").read_text().startswith("add table ip mclmon")
    # in a lab the same router is read inside its namespace
    lab_runner = _Nft()
    lab = LabCollector(ExporterConfig("127.0.0.1", 1, str(tmp_path), "", "testbed", ["rl"]),
                       TOPO, lab_runner)  # type: ignore[arg-type]
    lab.install()
    assert registry_for(lab).get_sample_value("mcc_exporter_errors_total", errors) == 1
    assert set(lab_runner.netns) == {"mcl-rl"}


# --- carried out: HostMonitoring and the session's seam ---------------------------------------

@pytest.fixture
def testbed(tmp_path, monkeypatch):
    """A TestbedLab whose ssh, spawns and readiness waits are recorded, not run."""
    private_machine(tmp_path, monkeypatch, tmp_path / "state")
    run_dir = tmp_path / "results" / "default" / "r1"
    lab = TestbedLab(TOPO, LabOptions(lab_id="default-r1"), _inventory(), run_dir,
                     control_dir=tmp_path / "cm")
    lab.state.save()
    log: list = []
    lab.ssh.put = lambda node, path, data, mode=0o644: log.append(("put", node, path, data))
    lab.ssh.run = lambda node, argv, **kw: log.append(("run", node, list(argv))) or ""
    lab.remote.update({f"mcl-{n}": lab._argv_for(n) for n in HOSTS})
    lab._pushed = True

    def fake_run(argv, **kw):  # noqa: ANN001, ANN202
        log.append(("ssh -O", argv[argv.index("-O") + 1], argv[argv.index("-L") + 1],
                    argv[-1]))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(tm.subprocess, "run", fake_run)

    def fake_spawn(state, command, log_path, what, runner=None):  # noqa: ANN001, ANN202
        argv = runner.argv(command, spawn=True) if runner else list(command.argv)
        log.append(("spawn", what, argv))
        return never_alive(state, what)

    monkeypatch.setattr(tm, "spawn", fake_spawn)
    monkeypatch.setattr(lifecycle, "spawn", fake_spawn)
    waits: list = []
    monkeypatch.setattr(lifecycle, "wait_ready",
                        lambda check, procs, what, log_path: waits.append(what))
    monkeypatch.setattr(lifecycle, "first_scrape", lambda *a, **k: True)
    ports = iter(range(41000, 41100))
    # Prometheus keeps its own port: the forwards' and exporters' are what is checked here.
    monkeypatch.setattr(prom, "free_port", lambda host, preferred: preferred
                        if preferred == prom.DEFAULT_PORT else next(ports))
    return SimpleNamespace(lab=lab, log=log, waits=waits, run_dir=run_dir)


def _launches(run_dir: Path) -> SimpleNamespace:
    agent = ("python", "-m", "agents.run", "receiver", "--metrics", f"{_ctl('d1')}:9464")
    sender = ("python", "-m", "agents.run", "sender", "--metrics", f"{_ctl('s1')}:9464")
    return SimpleNamespace(launches=[
        SimpleNamespace(flow="webrc", role="sender", node="s1", argv=sender, log="x"),
        SimpleNamespace(flow="webrc", role="receiver", node="d1", argv=agent, log="y"),
        SimpleNamespace(flow="tcp", role="server", node="d2", argv=("iperf3", "-s"),
                        log=str(run_dir / "logs" / "tcp-server-d2.txt"))])


def test_a_testbed_run_starts_exporters_on_the_routers_and_scrapes_through_forwards(testbed):
    experiment = SimpleNamespace(name="default", duration=10.0,
                                 flows=[SimpleNamespace(name="webrc", protocol="webrc"),
                                        SimpleNamespace(name="tcp", protocol=None,
                                                        carrier=None, type="tcp")])
    mon = session.start_monitoring(testbed.lab, testbed.run_dir, experiment,
                                   _launches(testbed.run_dir))
    assert mon.notes == [] and mon.prometheus_url
    log = testbed.log
    puts = [e for e in log if e[0] == "put"]
    assert {(e[1], e[2].rsplit("/", 1)[1]) for e in puts} == {
        ("rl", "exporter-rl.json"), ("rl", "topology.yaml"),
        ("rr", "exporter-rr.json"), ("rr", "topology.yaml")}
    spawns = [e for e in log if e[0] == "spawn"]
    assert [e[1] for e in spawns] == ["monitoring prometheus", "monitoring exporter rl",
                                      "monitoring exporter rr", "monitoring exporter"]
    # the routers' exporters go to their hosts over ssh, each with a pid file
    assert spawns[1][2][-1].endswith("mcclab.monitoring.exporter --config "
                                     "/tmp/mcclab-ssh/default-r1/monitoring/exporter-rl.json")
    assert HOSTS["rl"].target() in spawns[1][2] and "setsid -w" in spawns[1][2][-1]
    # every file is on its host before its exporter starts, every forward before the waits
    assert log.index(puts[-1]) < log.index(spawns[2])
    opened = [e for e in log if e[0] == "ssh -O"]
    assert [(e[1], e[2], e[3]) for e in opened] == [
        ("forward", "127.0.0.1:41001:127.0.0.1:9464", HOSTS["s1"].target()),
        ("forward", "127.0.0.1:41002:127.0.0.1:9464", HOSTS["d1"].target()),
        ("forward", "127.0.0.1:41003:127.0.0.1:9463", HOSTS["rl"].target()),
        ("forward", "127.0.0.1:41004:127.0.0.1:9463", HOSTS["rr"].target())]
    assert testbed.waits[:2] == ["the exporter on rl's host", "the exporter on rr's host"]

    work = testbed.lab.state.path / "monitoring"
    # the controller's exporter: loopback, no router of its own, the iperf3 report here
    config = ExporterConfig.from_json((work / "exporter.json").read_text())
    assert (config.listen, config.port, config.routers) == ("127.0.0.1", 41000, [])
    assert [s.flow for s in config.iperf] == ["tcp"]
    scraped = yaml.safe_load((work / "prometheus.yml").read_text())
    assert scraped["scrape_configs"][0]["file_sd_configs"][0]["files"] == [
        str(work / "targets.json")]
    groups = json.loads((work / "targets.json").read_text())
    assert [(g["targets"][0], g["labels"]["node"], g["labels"]["component"])
            for g in groups] == [
        ("127.0.0.1:41000", "root", "exporter"), ("127.0.0.1:41001", "s1", "agent"),
        ("127.0.0.1:41002", "d1", "agent"), ("127.0.0.1:41003", "rl", "exporter"),
        ("127.0.0.1:41004", "rr", "exporter")]

    # teardown: forwards cancelled, every remote group ended, counter tables removed
    testbed.log.clear()
    testbed.lab.ssh.stop_files = lambda groups, grace=3.0: testbed.log.append(
        ("stop", [node for node, _ in groups]))
    testbed.lab.ssh.close = lambda: None
    testbed.lab.down()
    cancelled = [(e[1], e[2]) for e in testbed.log if e[0] == "ssh -O"]
    assert sorted(cancelled) == sorted(("cancel", f"127.0.0.1:{p}:127.0.0.1:{r}")
                                       for p, r in ((41001, 9464), (41002, 9464),
                                                    (41003, 9463), (41004, 9463)))
    assert testbed.lab.monitoring_hosts.forwards == []
    stop = next(e for e in testbed.log if e[0] == "stop")
    assert sorted(stop[1]) == ["rl", "rr"]
    assert testbed.log.index(stop) > max(i for i, e in enumerate(testbed.log)
                                         if e[0] == "ssh -O")
    cleaned = [e[1] for e in testbed.log if e[0] == "run" and e[2] == tm.counters_cleanup()]
    assert cleaned == ["rl", "rr"]


def test_a_refused_plan_starts_nothing_on_the_hosts_and_is_noted(testbed):
    launches = _launches(testbed.run_dir)
    # an agent whose endpoint is not its node's control address
    launches.launches[1].argv = ("python", "-m", "agents.run", "--metrics", "10.9.9.9:9464")
    mon = session.start_monitoring(testbed.lab, testbed.run_dir,
                                   SimpleNamespace(name="default", duration=1.0, flows=[]),
                                   launches)
    assert mon.prometheus_url is None
    assert mon.notes == ["MonitoringRefused: agent endpoint 10.9.9.9:9464 is not on d1's "
                         f"control address {_ctl('d1')}"]
    # only the run's Prometheus here, begun with the bring-up and stopped with the refusal
    assert [e[1] for e in testbed.log if e[0] in ("spawn", "put", "ssh -O")] == [
        "monitoring prometheus"]
    assert mon.processes == []


def test_a_lab_without_hosts_keeps_its_gateway_and_routers(testbed, monkeypatch):
    # the seam is only taken by a lab that has monitoring_hosts
    lab = SimpleNamespace(state=testbed.lab.state, topo=TOPO, link_backend="kernel",
                          plan=SimpleNamespace(control_gateway=SimpleNamespace(ip="127.0.0.1")))
    session.start_monitoring(lab, testbed.run_dir, SimpleNamespace(name="d", duration=1.0,
                                                                   flows=[]),
                             SimpleNamespace(launches=[]))
    config = json.loads((testbed.lab.state.path / "monitoring" / "exporter.json").read_text())
    assert config["routers"] == ["rl", "rr"] and config["in_place"] is False
    assert not [e for e in testbed.log if e[0] in ("put", "ssh -O")]
