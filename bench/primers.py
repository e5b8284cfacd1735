"""TCP window ceilings at paper scale: one primer process per flow against one for the run.

    python bench/primers.py [--pairs 32]

ORMCC's 64-leaf star has 64 TCP flows, each with a window ceiling (the paper's
TCP model: ns-2's 20 packets), so the bring-up primes the kernel's TCP metrics
cache 64 times (``mcclab.net.tcp_window``). The benchmark makes ``--pairs``
namespace pairs of its own (``mcb-prime-<pid>-<i>s`` and ``...r``: a veth
between them, 10.253.<i>.1 and .2, nothing leaves them), installs each
sender's locked ``cwnd`` route, and primes every pair both ways in the same
run, with the cache entries deleted in between: one primer process per pair
(what the lab ran, one input line each), then one process fed every pair
(what ``mcclab.experiment.launch.window_setup`` builds now). Both go through
``mcclab.execute.Runner`` as the lab's commands do. It prints the wall time
per way and per pair, and checks each sender's cache holds the ceiling after
each way. Needs root. Takes about 30 s with the defaults.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcclab.execute import Runner  # noqa: E402
from mcclab.net.tcp_window import Prime, clamp_route, prime_cmd  # noqa: E402

SEGMENTS = 20


def make(pid: int, pairs: int) -> list[Prime]:
    """The namespace pairs, their veths and addresses; one Prime per pair."""
    out = []
    for i in range(pairs):
        s, r = f"mcb-prime-{pid}-{i}s", f"mcb-prime-{pid}-{i}r"
        for ns in (s, r):
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        subprocess.run(["ip", "-n", s, "link", "add", "p0", "type", "veth", "peer", "name",
                        "p1", "netns", r], check=True)
        for ns, dev, host in ((s, "p0", 1), (r, "p1", 2)):
            subprocess.run(["ip", "-n", ns, "addr", "add", f"10.253.{i}.{host}/24", "dev", dev],
                           check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        out.append(Prime(s, r, f"10.253.{i}.2", SEGMENTS))
    return out


def cached(p: Prime) -> int | None:
    """The cwnd in the sender's cache for the receiver's address."""
    words = subprocess.run(["ip", "-n", p.sender_ns, "tcp_metrics", "show", p.address],
                           capture_output=True, text=True, check=False).stdout.split()
    return int(words[words.index("cwnd") + 1]) if "cwnd" in words else None


def forget(primes: list[Prime]) -> None:
    for p in primes:
        subprocess.run(["ip", "-n", p.sender_ns, "tcp_metrics", "delete", p.address],
                       capture_output=True, check=False)


def main(argv: list[str] | None = None) -> int:
    """Run both ways; 0 when every cache held the ceiling after each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=32)
    args = parser.parse_args(argv)
    runner = Runner()
    primes: list[Prime] = []
    ok = True
    try:
        primes = make(os.getpid(), args.pairs)
        runner.run_all([clamp_route(p.sender_ns, ipaddress.IPv4Address(p.address), None, "p0",
                                    SEGMENTS) for p in primes])
        print(f"{args.pairs} sender/receiver namespace pairs, ceiling {SEGMENTS} segments")
        print(f"{'way':<22} {'processes':>9} {'wall s':>8} {'ms/pair':>8}")
        for way, commands in (("one primer per pair", [prime_cmd([p]) for p in primes]),
                              ("one primer per run", [prime_cmd(primes)])):
            forget(primes)
            began = time.monotonic()
            runner.run_all(commands)
            took = time.monotonic() - began
            held = [cached(p) for p in primes]
            good = all(h == SEGMENTS for h in held)
            ok &= good
            print(f"{way:<22} {len(commands):>9} {took:>8.2f} {1e3 * took / len(primes):>8.1f}"
                  + ("" if good else f"  NOT HELD: {held}"))
    finally:
        for p in primes or []:
            for ns in (p.sender_ns, p.listener_ns):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        # a pair made before make() failed part-way has no Prime yet
        for name in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
            if name.startswith(f"mcb-prime-{os.getpid()}-"):
                subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
