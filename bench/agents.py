"""CPU per delivered datagram: one process per agent against agent hosts, in one run.

    python bench/agents.py [--counts 1 8 32 64 128] [--window 10] [--rate 50] [--no-scrape]

For each count K, one cbr sender sends ``--rate`` packets/s (1000-byte payloads)
to one group, and K receivers, each in a network namespace of its own, receive
it. Every namespace has a veth to a bridge inside a hub namespace; nothing
leaves the namespaces this benchmark makes (prefix ``mcb-``), and they are
removed at the end. Two modes run side by side for each K:

* ``process``: each receiver is its own process (``agents.run``, forked from this
  interpreter after the imports, as the runner's fork server does);
* ``host``: one process (``agents.host``) runs all K receivers on one event loop,
  each receiver's sockets made in its own namespace.

The sender is its own process in both modes. Unless ``--no-scrape``, a scraper in
the hub namespace fetches every ``/metrics`` endpoint once a second, as
Prometheus does in a run (K + 1 endpoints in process mode, 2 in host mode).

After a 3-s warm-up the receivers' CPU time (user + system, every thread, from
``/proc/PID/task/*/schedstat``, nanoseconds) is read over ``--window`` seconds
and divided by the datagrams they delivered in that window (their stats records).
Printed per row: CPU per delivered datagram (µs), the receivers' total CPU (% of one
core), the sender's, the share of the expected datagrams delivered, and, per K,
host/process. The kernel's own cost of delivering (softirq) is in neither figure.
Needs root; about 3 minutes for the default counts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import agents.host  # noqa: E402 - imported before forking: each child starts warm
import agents.run  # noqa: E402
from agents.runtime.registry import get  # noqa: E402
from bench.common import parse_bench_args, require_root  # noqa: E402
from mcclab.net.setns import enter_netns  # noqa: E402

PREFIX = "mcb-"
HUB = f"{PREFIX}hub"
SENDER = f"{PREFIX}s"
GROUP, PORT = "239.77.0.1", 5500
SIZE = 1000
HUB_ADDR = "10.77.255.254"
WARMUP = 3.0


def receiver_ns(i: int) -> str:
    return f"{PREFIX}r{i}"


def receiver_addr(i: int) -> str:
    return f"10.77.{1 + i // 250}.{1 + i % 250}"


SENDER_ADDR = "10.77.0.1"


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True)


def make_net(count: int) -> None:
    """The hub (a bridge), the sender's namespace and ``count`` receivers' namespaces."""
    remove_net()
    ip("netns", "add", HUB)
    ip("-n", HUB, "link", "set", "lo", "up")
    ip("-n", HUB, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
    ip("-n", HUB, "addr", "add", f"{HUB_ADDR}/16", "dev", "br0")
    ip("-n", HUB, "link", "set", "br0", "up")
    nodes = [(SENDER, SENDER_ADDR, "vs")] + [(receiver_ns(i), receiver_addr(i), f"v{i}")
                                             for i in range(count)]
    for ns, addr, port in nodes:
        ip("netns", "add", ns)
        ip("-n", HUB, "link", "add", port, "type", "veth", "peer", "name", "eth0",
           "netns", ns)
        ip("-n", HUB, "link", "set", port, "master", "br0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "addr", "add", f"{addr}/16", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")


def remove_net() -> None:
    """Delete every namespace of this benchmark (their veths go with them)."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                           check=False).stdout.split()
    for name in names:
        if name.startswith(PREFIX):
            subprocess.run(["ip", "netns", "del", name], check=False)


def write_session(folder: Path, count: int, rate: float) -> Path:
    """A cbr session at ``rate`` packets/s with a sender and ``count`` receivers."""
    session = {
        "protocol": "cbr", "flow": "bench", "session_id": 7, "source": SENDER_ADDR,
        "ssm": False, "ttl": 1, "channels": [{"group": GROUP, "port": PORT}],
        "params": {"rate": f"{rate * SIZE * 8:.0f}bit", "packet_size": f"{SIZE}B"},
        "nodes": {"s": {"address": SENDER_ADDR},
                  **{f"r{i}": {"address": receiver_addr(i)} for i in range(count)}},
    }
    path = folder / "session.json"
    path.write_text(json.dumps(session))
    return path


def fork(netns: str, out: Path, body: Callable[[], int]) -> int:
    """A child in its own session inside ``netns``, output to ``out``, running ``body``."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        enter_netns(Path("/run/netns") / netns)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        code = body()
    except BaseException:  # noqa: BLE001 - the child must end here
        import traceback
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def scraper(urls: list[str]) -> int:
    """Fetch every endpoint once a second until SIGTERM."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        began = time.monotonic()
        for url in urls:
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
                r.read()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - began)))


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of ``pid`` so far, in nanoseconds (0 once it is gone)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    return total


def delivered(logs: list[Path], t0: float, t1: float) -> float:
    """Datagrams the receivers delivered in (t0, t1]: each receiver's rate over the stats
    intervals that ended in it, times its length (whole records only, so no edge effect)."""
    total = 0.0
    for log in logs:
        packets = seconds = 0.0
        with contextlib.suppress(OSError):
            for line in log.read_text().splitlines():
                rec = json.loads(line)
                if rec.get("event") == "stats" and t0 < rec["t"] <= t1:
                    packets += rec.get("rx_packets", 0)
                    seconds += rec.get("interval", 0.0)
        if seconds > 0:
            total += packets / seconds * (t1 - t0)
    return total


def _tail(path: Path, size: int = 2000) -> str:
    """The end of a file ('' if there is none)."""
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


@dataclass
class Row:
    count: int
    mode: str
    per_datagram_us: float
    receivers_cpu: float  # share of one core
    sender_cpu: float
    delivered_share: float
    processes: int


def stop(pids: list[int]) -> None:
    """SIGTERM each process group, then wait for every child (SIGKILL after 5 s)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5.0
    for pid in pids:
        while True:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.02)


def wait_ready(outs: list[Path], timeout: float = 60.0) -> None:
    """Until every output file shows a ready line."""
    deadline = time.monotonic() + timeout
    while not all(p.exists() and '"ready"' in p.read_text() for p in outs):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready: {[str(p) for p in outs if not p.exists()][:3]}")
        time.sleep(0.05)


def measure(mode: str, count: int, folder: Path, session: Path, window: float, rate: float,
            scrape: bool) -> Row:
    """One row: start the receivers (and sender), measure, stop everything."""
    work = folder / f"{mode}-{count}"
    work.mkdir()
    logs = [work / f"r{i}.jsonl" for i in range(count)]
    receivers: list[int] = []
    outs: list[Path] = []
    urls: list[str] = []
    if mode == "process":
        for i in range(count):
            argv = ["receiver", "--session", str(session), "--node", f"r{i}", "--log",
                    str(logs[i]), "--metrics", f"{receiver_addr(i)}:9464"]
            outs.append(work / f"r{i}.out")
            receivers.append(fork(receiver_ns(i), outs[-1],
                                  lambda a=argv: agents.run.main(a)))
            urls.append(f"http://{receiver_addr(i)}:9464/metrics")
    else:
        plan = {"name": "bench", "metrics": f"{HUB_ADDR}:9400", "agents": [
            {"role": "receiver", "node": f"r{i}", "netns": f"/run/netns/{receiver_ns(i)}",
             "session": str(session), "log": str(logs[i])} for i in range(count)]}
        plan_file = work / "host.json"
        plan_file.write_text(json.dumps(plan))
        outs.append(work / "host.out")
        receivers.append(fork(HUB, outs[-1],
                              lambda: agents.host.main(["--plan", str(plan_file)])))
        urls.append(f"http://{HUB_ADDR}:9400/metrics")
    wait_ready(outs)
    sender_out = work / "sender.out"
    sender = fork(SENDER, sender_out, lambda: agents.run.main([
        "sender", "--session", str(session), "--node", "s", "--log", str(work / "s.jsonl"),
        "--metrics", f"{SENDER_ADDR}:9464"]))
    urls.append(f"http://{SENDER_ADDR}:9464/metrics")
    wait_ready([sender_out])
    pids = [*receivers, sender]
    if scrape:
        pids.append(fork(HUB, work / "scraper.out", lambda: scraper(urls)))
    try:
        time.sleep(WARMUP)
        t0, cpu0, s0 = time.monotonic(), sum(cpu_ns(p) for p in receivers), cpu_ns(sender)
        time.sleep(window)
        t1, cpu1, s1 = time.monotonic(), sum(cpu_ns(p) for p in receivers), cpu_ns(sender)
    finally:
        stop(pids)
    got = delivered(logs, t0, t1)
    seconds = t1 - t0
    if got < 0.9 * count * rate * seconds:  # say why a row is not comparable
        silent = [log.name for log in logs if '"stats"' not in _tail(log)]
        print(f"  {mode} K={count}: {got:.0f} of {count * rate * seconds:.0f} datagrams "
              f"delivered; receivers without a stats record: {len(silent)}; load "
              f"{os.getloadavg()[0]:.1f}; output: {_tail(outs[0])[-300:]!r}", flush=True)
    return Row(count, mode, (cpu1 - cpu0) / 1e3 / max(got, 1), (cpu1 - cpu0) / 1e9 / seconds,
               (s1 - s0) / 1e9 / seconds, got / (count * rate * seconds), len(receivers))


def main(argv: list[str] | None = None) -> int:
    def own(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--rate", type=float, default=50.0, help="packets/s per receiver")
        parser.add_argument("--no-scrape", action="store_true", help="no /metrics scrapes")

    args = parse_bench_args(__doc__, [1, 8, 32, 64, 128], argv, own)
    if not require_root("bench/agents.py", "network namespaces"):
        return 2
    get("cbr")  # the registry imports the protocols now, before any fork
    rows: list[Row] = []
    print(f"machine: {os.cpu_count()} cores, {os.uname().release}; {args.rate:g} pkt/s per "
          f"receiver, window {args.window:g} s, scrapes {'off' if args.no_scrape else 'on'}")
    print(f"{'K':>4} {'mode':>8} {'µs/datagram':>12} {'receivers CPU':>14} "
          f"{'sender CPU':>11} {'delivered':>10} {'host/process':>13}")
    try:
        with tempfile.TemporaryDirectory(prefix="mcb-") as tmp:
            folder = Path(tmp) if args.keep is None else args.keep
            folder.mkdir(parents=True, exist_ok=True)
            for count in args.counts:
                make_net(count)
                session = write_session(folder, count, args.rate)
                pair = []
                for mode in ("process", "host"):
                    row = measure(mode, count, folder, session, args.window, args.rate,
                                  not args.no_scrape)
                    rows.append(row)
                    pair.append(row)
                    ratio = (f"{pair[1].per_datagram_us / pair[0].per_datagram_us:.3f}"
                             if len(pair) == 2 else "")
                    print(f"{count:>4} {mode:>8} {row.per_datagram_us:>12.1f} "
                          f"{row.receivers_cpu:>13.1%} {row.sender_cpu:>10.1%} "
                          f"{row.delivered_share:>9.1%} {ratio:>13}", flush=True)
                remove_net()
    finally:
        remove_net()
    return 0


if __name__ == "__main__":
    sys.exit(main())
