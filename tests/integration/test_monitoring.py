"""Acceptance of live monitoring on a real run with the real Prometheus.

One short run of the default experiment (``mcclab run default --profile quick
--set duration=25s``) is started in the background by a module fixture; the
tests watch it while it runs:

* (c) isolation: from every host namespace, with its experiment address as the
  source (routed normally, and forced through the experiment interface by a
  policy route), no agent, exporter or Prometheus port answers on any address;
  from its control address, no other node's endpoint answers (port
  isolation); Prometheus and the exporter listen on loopback / the gateway only;
* (a) panels return data: every PromQL expression of the shared dashboards and
  of the run's own protocol's dashboard, run against the run's Prometheus,
  returns data;
* every stored series carries run, experiment, node, flow and protocol;
* the run's Prometheus keeps its database on disk, in a folder the lab's record
  names (so ``mcclab clean`` removes it after a crash), and the end of the run
  removes it, recording its size;
* the results folder keeps ``tables/metrics.csv.gz`` and it replays into a fresh
  Prometheus.

Only one lab can be up on a machine: the run waits (``mcclab run --wait``, up
to ``MCCLAB_TEST_LAB_WAIT`` seconds, default 900) while another lab is up, and
the test never cleans someone else's lab.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from dashboards.build import generated, queries  # noqa: E402
from mcclab.model.addressing import plan_addresses  # noqa: E402
from mcclab.model.topology import Topology  # noqa: E402
from mcclab.monitoring import metric_names as mn  # noqa: E402
from mcclab.monitoring import prometheus as prom  # noqa: E402
from mcclab.monitoring import storage  # noqa: E402
from mcclab.monitoring.promql import read, substitute  # noqa: E402
from mcclab.state import STATE_ROOT, LabState, TrackedProcess  # noqa: E402

LAB_WAIT = float(os.environ.get("MCCLAB_TEST_LAB_WAIT", "900"))
DURATION = 25
# timeout: slowest test 15.7 s measured without a lab-lock wait (2-core VM); 120 s leaves
# room for the fixture's own 90-s wait for the run to end
pytestmark = [pytest.mark.root, pytest.mark.timeout(120)]

MCCLAB = [sys.executable, "-m", "mcclab"]


@dataclass
class LiveRun:
    """The background run and what the tests need to reach it."""

    proc: subprocess.Popen
    results: Path
    lab_dir: Path
    record: dict
    out: Path
    monitors: list[TrackedProcess]

    @property
    def run_id(self) -> str:
        return self.record["run"]

    @property
    def prometheus(self) -> str:
        return self.record["prometheus"]

    def elapsed(self) -> float:
        return time.time() - self.record["started"]

    def finish(self, timeout: float = 90) -> int:
        return self.proc.wait(timeout)


def _start_run(results: Path, out: Path) -> subprocess.Popen:
    """Start the run in its own session; it waits (``--wait``) while another lab is up."""
    with out.open("w") as fh:
        return subprocess.Popen(
            MCCLAB + ["run", "default", "--profile", "quick", "--set", f"duration={DURATION}s",
                      "--set", "warmup=2s", "--results", str(results), "--wait", f"{LAB_WAIT:g}"],
            stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The run, started and monitored; stopped (by its own timer) at the end of the module."""
    tmp = tmp_path_factory.mktemp("monitoring")
    results, out = tmp / "results", tmp / "run.out"
    proc = _start_run(results, out)
    record, lab_dir = None, None
    deadline = time.monotonic() + LAB_WAIT + 90
    while record is None and time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the run ended early:\n{out.read_text()[-3000:]}")
        runs = list(results.glob("default/*"))
        if runs:
            candidate = STATE_ROOT / f"default-{runs[0].name}"
            path = candidate / "monitoring" / "monitoring.json"
            if path.is_file():
                record, lab_dir = json.loads(path.read_text()), candidate
        time.sleep(0.2)
    assert record is not None, f"monitoring did not start:\n{out.read_text()[-3000:]}"
    assert record["prometheus"], record
    state = LabState.load(lab_dir)
    monitors = [p for p in state.processes if p.what.startswith("monitoring")]
    run = LiveRun(proc, results, lab_dir, record, out, monitors)
    yield run
    if proc.poll() is None:
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # our own runner's session only
            proc.wait(60)


def _topology(live: LiveRun) -> Topology:
    run_dir = next(live.results.glob("default/*"))
    return Topology.model_validate(yaml.safe_load((run_dir / "topology.yaml").read_text()))


def _targets(live: LiveRun) -> list[dict]:
    path = live.lab_dir / "monitoring" / "targets.json"
    return json.loads(path.read_text())


def _wait_agents_up(live: LiveRun, timeout: float = 20) -> list[str]:
    """Agent endpoints, once Prometheus has scraped every one of them."""
    agents = [t["targets"][0] for t in _targets(live) if t["labels"]["component"] == "agent"]
    deadline = time.monotonic() + timeout
    while True:
        data = prom.api(live.prometheus, "/api/v1/query",
                        {"query": f'up{{run="{live.run_id}", component="agent"}} == 1'})
        if len(data["result"]) == len(agents):
            return agents
        assert time.monotonic() < deadline, f"agents not scraped: {data['result']}"
        time.sleep(0.5)


# Connects to every (address, port) without blocking, from a given source address,
# and prints the ones that were accepted. Runs inside a node's namespace.
PROBE = textwrap.dedent("""
    import json, select, socket, sys, time
    src, targets = json.loads(sys.argv[1])
    socks = {}
    for addr, port in targets:
        s = socket.socket()
        s.setblocking(False)
        if src:
            s.bind((src, 0))
        s.connect_ex((addr, port))
        socks[s] = (addr, port)
    deadline, open_ = time.monotonic() + 1.2, []
    while socks and time.monotonic() < deadline:
        _, w, _ = select.select([], list(socks), [], 0.1)
        for s in w:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                open_.append(socks[s])
            del socks[s]
    print(json.dumps(open_))
""")


def _probe_all(jobs: list[tuple[str | None, str | None, list[tuple[str, int]]]]
               ) -> list[list]:
    """Run probes (namespace, source, targets) in parallel; the accepted targets of each."""
    procs = []
    for ns, src, targets in jobs:
        argv = [sys.executable, "-c", PROBE, json.dumps([src, targets])]
        if ns is not None:
            argv = ["nsenter", f"--net=/run/netns/{ns}", "--", *argv]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        results.append(sorted(map(tuple, json.loads(out))))
    return results


def _listening(ns: str | None, port: int) -> set[str]:
    """Local addresses with a TCP socket listening on ``port``."""
    argv = ["ss", "-Hltn", f"sport = :{port}"]
    if ns is not None:
        argv = ["nsenter", f"--net=/run/netns/{ns}", "--", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in out.splitlines() if line.strip()}


def test_metrics_endpoints_are_unreachable_from_the_experiment_network(live):
    topo = _topology(live)
    plan = plan_addresses(topo)
    agents = _wait_agents_up(live)
    gateway = str(plan.control_gateway.ip)
    exporter = live.record["exporter"].split("//")[1].split("/")[0]
    prom_port = int(live.prometheus.rsplit(":", 1)[1])
    ports = sorted({int(a.rsplit(":", 1)[1]) for a in [*agents, exporter]} | {prom_port})

    # Listening: Prometheus on loopback only, the exporter on the gateway only, each
    # agent on its node's control address only.
    assert _listening(None, prom_port) == {"127.0.0.1"}
    assert _listening(None, int(exporter.rsplit(":", 1)[1])) == {gateway}
    for target in _targets(live):
        if target["labels"]["component"] == "agent":
            addr, port = target["targets"][0].rsplit(":", 1)
            ns = f"mcl-{target['labels']['node']}"
            assert _listening(ns, int(port)) == {addr}, target

    # Positive control: from the root namespace every endpoint answers, so the
    # refusals below are isolation, not endpoints that are down.
    everything = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in [*agents, exporter]]
    assert _probe_all([(None, None, everything)]) == [sorted(everything)]

    # The guard must be in place before any packet with an experiment source
    # address is sent towards the root namespace (else its reply would leave
    # through the machine's default route).
    rp = Path("/proc/sys/net/ipv4/conf/mclctl/rp_filter").read_text().strip()
    assert rp == "1", "the root namespace's control bridge is not guarded"

    addresses = sorted({gateway, *(str(i.ip) for i in plan.control.values()),
                        *(str(i.address.ip) for ifs in plan.interfaces.values() for i in ifs)})
    control_net = str(topo.addressing.control)
    hosts = topo.names("host")
    jobs, control_jobs = [], []
    for host in hosts:
        own = {str(plan.control[host].ip), *(str(i.address.ip) for i in plan.interfaces[host])}
        targets = [(a, p) for a in addresses if a not in own for p in ports]
        jobs.append((f"mcl-{host}", str(plan.interfaces[host][0].address.ip), targets))
        # From the control address: no other node's endpoint (port isolation). The
        # gateway's exporter is on the control net by design and is left out here.
        others = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in agents
                  if a.rsplit(":", 1)[0] != str(plan.control[host].ip)]
        control_jobs.append((f"mcl-{host}", str(plan.control[host].ip), others))

    # 1. experiment source address, normal routing (the control net through ctl0)
    assert _probe_all(jobs) == [[] for _ in hosts]
    # 2. experiment source address, the control net forced through the experiment link
    #    (a policy route for that source only, so the agents' own replies are untouched)
    try:
        for host in hosts:
            ns, iface = f"mcl-{host}", plan.interfaces[host][0]
            hop = next(r.gateway for r in plan.routes_of(host))
            subprocess.run(["ip", "-n", ns, "route", "add", control_net, "via", str(hop), "dev",
                            iface.name, "table", "4242"], check=True)
            subprocess.run(["ip", "-n", ns, "rule", "add", "from", str(iface.address.ip),
                            "lookup", "4242", "priority", "100"], check=True)
        assert _probe_all(jobs) == [[] for _ in hosts]
    finally:
        for host in hosts:
            ns = f"mcl-{host}"
            subprocess.run(["ip", "-n", ns, "rule", "del", "priority", "100"],
                           capture_output=True, check=False)
            subprocess.run(["ip", "-n", ns, "route", "flush", "table", "4242"],
                           capture_output=True, check=False)
    # 3. control source address: port isolation
    assert _probe_all(control_jobs) == [[] for _ in hosts]


def _run_protocols() -> set[str]:
    """The protocols the monitored run's multicast flows use."""
    from mcclab.experiment.loader import resolve

    return {f.protocol for f in resolve("default").experiment.flows if f.type == "multicast"}


def test_every_dashboard_panel_returns_data_for_the_run(live):
    while live.elapsed() < 15:
        time.sleep(0.5)
    end = time.time()
    start = live.record["started"]
    ran = _run_protocols()
    other, empty, checked = [], [], 0
    for board_name, text in generated().items():
        for title, ref, expr in queries(json.loads(text)):
            where = f"{board_name.removesuffix('.json')} / {title} / {ref}"
            usage = read(expr)
            if usage.label_values("protocol") - ran:  # another protocol's dashboard
                other.append(where)
                continue
            promql = substitute(expr, {"run": live.run_id})
            result = prom.query_range(live.prometheus, promql, start, end, 1.0)
            checked += 1
            if not any(series["values"] for series in result):
                empty.append(f"{where}: {promql}")
    assert checked >= 20, checked  # the overview and network dashboards hold 23 queries
    assert not empty, "panels without data:\n" + "\n".join(empty)
    # The run's own protocol dashboard was checked; only other protocols' were left out.
    assert ran and not any(f"mcclab-{p}" in o for p in ran for o in other), other


def test_every_series_carries_the_common_labels(live):
    for label in mn.COMMON_LABELS:
        data = prom.api(live.prometheus, "/api/v1/query",
                        {"query": f'count by (__name__) ({{run="{live.run_id}", {label}=""}})'})
        assert data["result"] == [], f"series without {label}: {data['result']}"
    names = prom.api(live.prometheus, "/api/v1/query",
                     {"query": f'count by (__name__) ({{run="{live.run_id}"}})'})["result"]
    assert {"mcc_agent_throughput_bps", "mcc_link_bytes_total", "mcc_router_pim_packets_total",
            "mcc_iperf_throughput_bps", "up"} <= {r["metric"]["__name__"] for r in names}


def test_the_database_is_on_disk_in_a_folder_the_lab_record_names(live):
    tsdb = Path(live.record["tsdb"])
    assert tsdb == storage.tsdb_path(storage.tsdb_root(), live.lab_dir.name)
    assert tsdb.is_dir() and not tsdb.is_relative_to(STATE_ROOT)
    assert str(tsdb.parent) in LabState.load(live.lab_dir).dirs
    (prometheus,) = [p for p in live.monitors if p.what == "monitoring prometheus"]
    argv = Path(f"/proc/{prometheus.pid}/cmdline").read_bytes().split(b"\0")
    assert f"--storage.tsdb.path={tsdb}".encode() in argv
    # Prometheus writes there while the run goes on (its write-ahead log at least).
    assert storage.disk_usage(tsdb / "wal") > 0


def test_results_keep_the_series_and_they_replay(live, tmp_path):
    assert live.finish() == 0, live.out.read_text()[-3000:]
    out = live.out.read_text()
    assert "live metrics" in out or "live dashboards" in out, out
    run_dir = next(live.results.glob("default/*"))
    record = json.loads((run_dir / "logs" / "monitoring.json").read_text())
    assert record["notes"] == [], record
    # The database went with the run, and its size was recorded first.
    assert record["tsdb"] == live.record["tsdb"] and record["tsdb_bytes"] > 0
    assert not Path(record["tsdb"]).parent.exists()
    print(f"\nthe run's TSDB: {record['tsdb_bytes']} bytes on disk at the end "
          f"({DURATION}-s run)")
    csv_path = run_dir / "tables" / "metrics.csv.gz"
    with gzip.open(csv_path, "rt") as fh:
        header = fh.readline().strip().split(",")
    assert {"time", "metric", "value", *mn.COMMON_LABELS} <= set(header)
    # Everything it started is gone with the lab (other engineers' labs may be up by
    # now, so only this lab's own record and processes are checked).
    assert not (STATE_ROOT / live.lab_dir.name).exists()
    assert live.monitors and not [p for p in live.monitors if p.alive()]

    from mcclab.monitoring.replay import backfill, serve_argv

    first, last = backfill(csv_path, tmp_path / "data")
    assert last - first >= DURATION - 3
    config = tmp_path / "p.yml"
    config.write_text("global: {scrape_interval: 1s}\n")
    url = f"http://127.0.0.1:{prom.free_port('127.0.0.1', 0)}"
    proc = subprocess.Popen(serve_argv(tmp_path / "data", config, url.split("//")[1]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not prom.ready(url):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        result = prom.query_range(
            url, f'mcc_agent_throughput_bps{{run="{live.run_id}", role="receiver"}}',
            first, last, 1.0)
        assert result and max(float(v) for _, v in result[0]["values"]) > 0.9e6
    finally:
        proc.terminate()
        proc.wait(10)
