"""The link emulator's spin budget: its CPU with spinning unbounded against bounded.

    python bench/spin_budget.py [--pps 4000] [--seconds 8]

A node whose links are all slow (10 Mbit/s or less) gets an emulator that
busy-waits the last 100 µs before each verdict (``--spin-us 100``, for timing
accuracy), at real-time priority. With many such links busy at once (ORMCC's
64-leaf star: 64 access links on one router), the spinning took most of a core
from every normal process. ``--spin-budget-ms`` bounds it per second.

The benchmark makes two namespaces of its own (``mcb-spin-<pid>-a`` and
``-b``, a veth between them, 10.252.0.1 and .2; nothing leaves them), queues
a's egress to an emulator with one 10-Mbit/s, 5-ms link, and sends
``--pps`` small UDP datagrams a second through it with iperf3, once per
setting in the same run: ``--spin-budget-ms 0`` (no bound: what the lab ran)
and the default 100. For each it prints the emulator's CPU (user + system
time over the send), the verdicts' lateness (the emulator's own p50, p99 and
maximum) and the datagrams delivered. Needs root, iptables (NFQUEUE) and
iperf3. Takes about 30 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcclab.links.userspace import linkemu_binary  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def sh(*argv: str, check: bool = True) -> str:
    return subprocess.run(argv, check=check, capture_output=True, text=True).stdout


def cpu_s(pid: int) -> float:
    """User + system seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one(binary: Path, a: str, b: str, work: Path, budget: int, pps: int,
        seconds: float) -> dict[str, float]:
    """One send through an emulator with ``--spin-budget-ms budget``."""
    conf, stats = work / "emu.conf", work / f"stats-{budget}.json"
    conf.write_text("queue=7 rate_bps=10000000 delay_us=5000 limit_pkts=1000 name=a\n")
    emu = subprocess.Popen(["ip", "netns", "exec", a, str(binary), "--config", str(conf),
                            "--stats", str(stats), "--spin-us", "100",
                            "--spin-budget-ms", str(budget), "--rt-priority", "10"],
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not stats.exists():
            if time.monotonic() > deadline or emu.poll() is not None:
                raise SystemExit("the emulator did not start")
            time.sleep(0.05)
        sh("ip", "netns", "exec", a, "iptables", "-t", "mangle", "-A", "POSTROUTING", "-o",
           "sb0", "-j", "NFQUEUE", "--queue-num", "7")
        size = 64
        before = cpu_s(emu.pid)
        out = sh("ip", "netns", "exec", a, "iperf3", "-c", "10.252.0.2", "-u", "-l", str(size),
                 "-b", str(pps * size * 8), "-t", str(seconds), "-J")
        used = cpu_s(emu.pid) - before
        sh("ip", "netns", "exec", a, "iptables", "-t", "mangle", "-F")
    finally:
        os.killpg(emu.pid, 15)
        emu.wait(timeout=10)
    lane = json.loads(stats.read_text())["queues"]["7"]
    end = json.loads(out)["end"]["sum"]
    return {"cpu": used / seconds, "p50": lane["late_p50_us"], "p99": lane["late_p99_us"],
            "max": lane["late_max_us"], "sent": end["packets"],
            "lost": end["lost_packets"], "verdicts": lane["pkts_out"]}


def main(argv: list[str] | None = None) -> int:
    """Both settings; 0 when both delivered their datagrams."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pps", type=int, default=4000)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    a, b = f"mcb-spin-{os.getpid()}-a", f"mcb-spin-{os.getpid()}-b"
    server = None
    try:
        for ns in (a, b):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", a, "link", "add", "sb0", "type", "veth", "peer", "name", "sb1",
           "netns", b)
        sh("ip", "-n", a, "addr", "add", "10.252.0.1/24", "dev", "sb0")
        sh("ip", "-n", b, "addr", "add", "10.252.0.2/24", "dev", "sb1")
        sh("ip", "-n", a, "link", "set", "sb0", "up")
        sh("ip", "-n", b, "link", "set", "sb1", "up")
        server = subprocess.Popen(["ip", "netns", "exec", b, "iperf3", "-s"],
                                  stdout=subprocess.DEVNULL, start_new_session=True)
        time.sleep(0.5)
        print(f"one 10-Mbit/s, 5-ms link, --spin-us 100, {args.pps} datagrams/s of 64 B "
              f"for {args.seconds:g} s")
        print(f"{'spin budget':<14} {'emulator CPU':>12} {'late p50':>9} {'p99':>7} "
              f"{'max':>8} {'sent':>7} {'lost':>6}")
        ok = True
        with tempfile.TemporaryDirectory() as tmp:
            for budget in (0, 100):
                r = one(linkemu_binary(), a, b, Path(tmp), budget, args.pps, args.seconds)
                ok &= r["sent"] > 0
                label = "none" if budget == 0 else f"{budget} ms/s"
                print(f"{label:<14} {r['cpu']:>11.0%} {r['p50']:>7.0f}us {r['p99']:>5.0f}us "
                      f"{r['max']:>6.0f}us {r['sent']:>7.0f} {r['lost']:>6.0f}")
        return 0 if ok else 1
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait(timeout=10)
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


if __name__ == "__main__":
    sys.exit(main())
