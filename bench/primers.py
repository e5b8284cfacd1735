"""TCP window ceilings at paper scale: one primer process per flow against one for the run.

    python bench/primers.py [--experiment ormcc-fig4-n16]

Every TCP flow of an experiment whose TCP model caps the window (ns-2's 20
packets for ORMCC, RLC and STAIR) needs its sender's TCP metrics cache primed
before it starts (``mcclab.net.tcp_window``): a route with a locked ``cwnd``,
then one connection to the receiver, closed. The benchmark brings up the
experiment's topology as a lab (links emulated as in a run, so each
connection crosses the emulated delays; it takes the machine's lab lock and
tears the lab down after), installs the routes, and primes every flow both
ways in the same lab, with the cache entries deleted in between: one primer
process per flow, run one after another (what the bring-up did), then one
process for all flows, which starts every connection before it waits for any
(what ``mcclab.experiment.launch.window_setup`` builds now). Both go through
the lab's runner. It prints the wall time per way and per flow, and checks
after each that every sender's cache holds its ceiling. Needs root. Takes
about a minute with the default (16 flows), most of it the lab's bring-up.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcclab.experiment.launch import window_setup  # noqa: E402
from mcclab.experiment.loader import resolve  # noqa: E402
from mcclab.features import probe  # noqa: E402
from mcclab.lab import Lab, LabOptions  # noqa: E402
from mcclab.net.tcp_window import Prime, parse_primes, prime_cmd  # noqa: E402


def cached(p: Prime) -> int | None:
    """The cwnd in the sender's cache for the receiver's address."""
    words = subprocess.run(["ip", "-n", p.sender_ns, "tcp_metrics", "show", p.address],
                           capture_output=True, text=True, check=False).stdout.split()
    return int(words[words.index("cwnd") + 1]) if "cwnd" in words else None


def forget(primes: list[Prime]) -> None:
    """Delete every sender's cache entry, so that each way primes from nothing."""
    for p in primes:
        subprocess.run(["ip", "-n", p.sender_ns, "tcp_metrics", "delete", p.address],
                       capture_output=True, check=False)


def main(argv: list[str] | None = None) -> int:
    """Run both ways; 0 when every cache held its ceiling after each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="ormcc-fig4-n16")
    parser.add_argument("--wait", type=float, default=3600.0,
                        help="seconds to wait for another lab on this machine")
    args = parser.parse_args(argv)
    res = resolve(args.experiment, "paper")
    lab = Lab(res.topology, LabOptions(features=probe(), lock_timeout=args.wait))
    ok = True
    try:
        lab.up()
        setup = window_setup(res.experiment, lab.plan)
        routes = [c for c in setup if "mcclab.net.tcp_window" not in c.argv]
        primer = next(c for c in setup if "mcclab.net.tcp_window" in c.argv)
        primes = parse_primes(primer.input or "")
        lab.runner.run_all(routes)
        print(f"{args.experiment}: {len(primes)} TCP flows, emulated links")
        print(f"{'way':<24} {'processes':>9} {'wall s':>8} {'ms/flow':>8}")
        for way, commands in (("one primer per flow", [prime_cmd([p]) for p in primes]),
                              ("one primer, all at once", [prime_cmd(primes)])):
            forget(primes)
            began = time.monotonic()
            lab.runner.run_all(commands)
            took = time.monotonic() - began
            held = [cached(p) for p in primes]
            good = all(h == p.segments for h, p in zip(held, primes, strict=True))
            ok &= good
            print(f"{way:<24} {len(commands):>9} {took:>8.2f} {1e3 * took / len(primes):>8.1f}"
                  + ("" if good else f"  NOT HELD: {held}"))
    finally:
        lab.down()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
