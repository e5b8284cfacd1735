"""CPU per datagram of on/off UDP traffic: a source and a sink process per flow against
one on/off host, in one run.

    python bench/onoff.py [--counts 8 84] [--window 10] [--keep DIR]

For each count K, K on/off UDP flows as ORMCC's Table II has them (200 kbit/s,
1000-B datagrams, exponential on and off periods of mean 1 s, seeded) run over
the loopback of one network namespace this benchmark makes (``mco-bench``,
removed at the end). The flows are planned by the runner's own code
(``mcclab.experiment.launch``): the same schedule files, the same command lines,
the same host plan. Two modes run one after the other for each K, on the same
schedules:

* ``process``: each sink and each source is its own ``mcclab.traffic.udp_onoff``
  process (2K), forked from this interpreter after the imports, as the runner's fork
  server does;
* ``host``: one ``mcclab.traffic.onoff_host`` runs all of them on one event loop.

Time 0 is set a second ahead, as the runner sets ``--t0``. After a 3-s warm-up the
CPU time of every process of the mode (user + system, every thread, from
``/proc/PID/task/*/schedstat``) is read over ``--window`` seconds and divided by the
datagrams the schedules send in that window; each is sent once and received once.
Printed per row: CPU per datagram (µs), the processes' total CPU (% of one core),
datagrams per second, the share the sinks received of what the sources sent, and,
per K, host/process. The kernel's own cost (softirq) is in neither figure. Needs
root; about a minute for the default counts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import parse_bench_args, require_root  # noqa: E402
from mcclab.experiment.launch import (  # noqa: E402
    ONOFF_HOST,
    LaunchPlan,
    _udp_onoff,
    on_off_periods,
    onoff_host,
)
from mcclab.experiment.spec import OnOffFlow  # noqa: E402
from mcclab.probes.reach import wait_for  # noqa: E402
from mcclab.traffic import onoff_host as host_module  # noqa: E402 - imported before forking
from mcclab.traffic import udp_onoff  # noqa: E402
from mcclab.traffic.udp_onoff import read_schedule, schedule_origin, send_offsets  # noqa: E402


def _bench_agents():  # type: ignore[no-untyped-def]
    """bench/agents.py (its name is the agents package's): fork, cpu_ns, stop."""
    spec = importlib.util.spec_from_file_location("bench_agents", REPO / "bench" / "agents.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_ba = _bench_agents()
fork, cpu_ns, stop = _ba.fork, _ba.cpu_ns, _ba.stop

NETNS = "mco-bench"
BASE_PORT = 7000
RATE, SIZE = 200_000.0, 1000
WARMUP = 3.0
LEAD = 1.0  # s from the start of the processes to time 0


def make_net() -> None:
    remove_net()
    subprocess.run(["ip", "netns", "add", NETNS], check=True)
    subprocess.run(["ip", "-n", NETNS, "link", "set", "lo", "up"], check=True)


def remove_net() -> None:
    subprocess.run(["ip", "netns", "del", NETNS], check=False, capture_output=True)


def plan_flows(count: int, work: Path, seed: int, end: float) -> LaunchPlan:
    """``count`` flows as the runner plans them, all to ports of 127.0.0.1; host plan
    included (its entries' namespaces pointed at this benchmark's one)."""
    out = LaunchPlan()
    for i in range(count):
        flow = OnOffFlow.model_validate({
            "name": f"o{i}", "type": "onoff", "carrier": "udp", "sender": "s",
            "receiver": "d", "rate": f"{RATE:.0f}bit", "packet_size": f"{SIZE}B",
            "on_period": {"distribution": "exponential", "mean": "1s"},
            "off_period": {"distribution": "exponential", "mean": "1s"}})
        periods = on_off_periods(flow, seed, end)
        _udp_onoff(out, flow, periods, "127.0.0.1", BASE_PORT + i, work, sys.executable)
    onoff_host(out, work, sys.executable)
    for path, content in out.files.items():
        if path.endswith(f"{ONOFF_HOST}.json"):
            plan = json.loads(content)
            for entry in [*plan["sinks"], *plan["sources"]]:
                entry["netns"] = f"/run/netns/{NETNS}"
            content = json.dumps(plan)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    (work / "logs").mkdir(exist_ok=True)
    return out


def scheduled(out: LaunchPlan, t0: float, a: float, b: float) -> int:
    """Datagrams the sources' schedules send in (a, b] (CLOCK_MONOTONIC)."""
    total = 0
    for launch in out.launches:
        if launch.role != "source":
            continue
        path = launch.argv[launch.argv.index("--schedule") + 1]
        start = t0 + schedule_origin(path)
        total += sum(a < start + o <= b for o in send_offsets(read_schedule(path), RATE, SIZE))
    return total


def wait_ready(outs: list[Path]) -> None:
    """Until every output shows its ready line (a sink's ``ready``, the host's JSON)."""
    wait_for(lambda: all(p.exists() and "ready" in p.read_text() for p in outs), 60.0,
             f"{len(outs)} ready lines")


@dataclass
class Row:
    count: int
    mode: str
    per_datagram_us: float
    cpu: float  # share of one core
    rate: float  # datagrams/s in the window
    received: float  # share of what was sent
    processes: int


def run_mode(mode: str, count: int, folder: Path, window: float, seed: int) -> Row:
    work = folder / f"{mode}-{count}"
    work.mkdir()
    out = plan_flows(count, work, seed, LEAD + WARMUP + window + 5)
    t0 = time.monotonic() + LEAD
    pids: list[int] = []
    outs: list[Path] = []
    try:  # whatever was started is stopped, also when one never gets ready
        if mode == "process":
            tools = sorted((x for x in out.launches if x.role in ("sink", "source")),
                           key=lambda x: x.role != "sink")  # sinks first
            for launch in tools:
                args = list(launch.argv[3:])
                if launch.role == "source":
                    args += ["--t0", repr(t0)]
                outs.append(Path(launch.log).with_suffix(".out"))
                pids.append(fork(NETNS, outs[-1], lambda a=args: udp_onoff.main(a)))
            wait_ready(outs[:sum(x.role == "sink" for x in tools)])
        else:
            (host,) = [x for x in out.launches if x.role == "host"]
            args = [*host.argv[3:], "--t0", repr(t0)]
            outs.append(Path(host.log))
            pids.append(fork(NETNS, outs[-1], lambda: host_module.main(args)))
            wait_ready(outs)
        time.sleep(max(0.0, t0 + WARMUP - time.monotonic()))
        a, c0 = time.monotonic(), sum(cpu_ns(p) for p in pids)
        time.sleep(window)
        b, c1 = time.monotonic(), sum(cpu_ns(p) for p in pids)
    finally:
        stop(pids)
    datagrams = scheduled(out, t0, a, b)
    sent = got = 0
    for launch in out.launches:
        with contextlib.suppress(OSError, ValueError, IndexError):
            last = json.loads(Path(launch.log).read_text().splitlines()[-1])
            sent += last.get("sent", 0) if launch.role == "source" else 0
            got += last.get("total_rx_packets", 0) if launch.role == "sink" else 0
    return Row(count, mode, (c1 - c0) / 1e3 / max(datagrams, 1), (c1 - c0) / 1e9 / (b - a),
               datagrams / (b - a), got / max(sent, 1), len(pids))


def main(argv: list[str] | None = None) -> int:
    args = parse_bench_args(__doc__, [8, 84], argv,
                            lambda parser: parser.add_argument("--seed", type=int, default=1))
    if not require_root("bench/onoff.py", "a network namespace"):
        return 2
    print(f"machine: {os.cpu_count()} cores, {os.uname().release}; {RATE / 1e3:g} kbit/s, "
          f"{SIZE} B, on/off mean 1 s; window {args.window:g} s; load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'K':>4} {'mode':>8} {'procs':>6} {'µs/datagram':>12} {'CPU':>7} "
          f"{'datagrams/s':>12} {'received':>9} {'host/process':>13}")
    try:
        make_net()
        with tempfile.TemporaryDirectory(prefix="mco-") as tmp:
            folder = Path(tmp) if args.keep is None else args.keep
            folder.mkdir(parents=True, exist_ok=True)
            for count in args.counts:
                pair: list[Row] = []
                for mode in ("process", "host"):
                    row = run_mode(mode, count, folder, args.window, args.seed)
                    pair.append(row)
                    ratio = (f"{pair[1].per_datagram_us / pair[0].per_datagram_us:.3f}"
                             if len(pair) == 2 else "")
                    print(f"{count:>4} {mode:>8} {row.processes:>6} "
                          f"{row.per_datagram_us:>12.1f} {row.cpu:>6.1%} {row.rate:>12.0f} "
                          f"{row.received:>8.1%} {ratio:>13}", flush=True)
    finally:
        remove_net()
    return 0


if __name__ == "__main__":
    sys.exit(main())
