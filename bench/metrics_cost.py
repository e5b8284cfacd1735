"""Per-packet cost of the agents' metrics: prometheus_client children against plain numbers.

    python bench/metrics_cost.py [--packets 1000000] [--repeat 5] [--agents 64]

Both are measured in the same run, on the receive path of ``Agent`` (two counter
updates per datagram: packets and bytes received):

* **old**: what ``agents/runtime/metrics.py`` did before it exported plain numbers
  through a collector: a prometheus_client ``Counter`` per metric, its labelled
  child kept, ``child.inc()`` and ``child.inc(size)`` per datagram (kept here only,
  for the comparison);
* **new**: ``AgentMetrics`` as it is, ``m.packets_received += 1`` and
  ``m.bytes_received += size``.

Times are the thread's CPU time (``CLOCK_THREAD_CPUTIME_ID``), not the wall clock, so
other load on the machine does not count. It prints ns per datagram (best of
``--repeat``) for both and their ratio, then
what a scrape of ``--agents`` agents costs, the price moved from every packet to
once per scrape. An agent host answers every scrape for all its agents while its
event loop waits for the interpreter lock, so both ways of writing that answer are
timed in the same run, interleaved: prometheus_client's ``generate_latest`` of the
collector's families, and ``render_text``, which formats the same text straight from
the numbers (the test suite checks that the two are equal byte for byte).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry, Counter, generate_latest  # noqa: E402

from agents.runtime.metrics import LABELS, PREFIX, AgentMetrics, render_text  # noqa: E402

# The gauges an ORMCC sender's core exports (``metrics()``), for a realistic scrape.
CORE_GAUGES = ("rate_bps", "cr_valid", "cr_id", "rtt_cr_s", "rtt_max_s", "mu_cr_bps",
               "sigma_cr_bps", "t_cr_s", "ci_rx", "ci_rx_cr", "ci_ignored", "ci_malformed",
               "rate_cuts", "cr_switches", "cr_timeouts")


class OldReceiveCounters:
    """The two receive-path counters as the runtime kept them before: labelled children."""

    def __init__(self) -> None:
        registry = CollectorRegistry()
        labels = {"node": "h1", "flow": "f", "protocol": "ormcc", "role": "receiver"}
        self.packets_received = Counter(PREFIX + "packets_received", "Well-formed packets "
                                        "received", LABELS, registry=registry).labels(**labels)
        self.bytes_received = Counter(PREFIX + "bytes_received", "UDP payload bytes received",
                                      LABELS, registry=registry).labels(**labels)


def old_loop(m: OldReceiveCounters, n: int, size: int) -> float:
    """Seconds for ``n`` datagrams' worth of old-style updates."""
    t = time.thread_time()
    for _ in range(n):
        m.packets_received.inc()
        m.bytes_received.inc(size)
    return time.thread_time() - t


def new_loop(m: AgentMetrics, n: int, size: int) -> float:
    """Seconds for ``n`` datagrams' worth of plain-number updates (as Agent does them)."""
    t = time.thread_time()
    for _ in range(n):
        m.packets_received += 1
        m.bytes_received += size
    return time.thread_time() - t


def empty_loop(n: int) -> float:
    """Seconds for the bare loop, subtracted from both."""
    t = time.thread_time()
    for _ in range(n):
        pass
    return time.thread_time() - t


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--agents", type=int, default=97)
    args = ap.parse_args(argv)
    old, new = OldReceiveCounters(), AgentMetrics("h1", "f", "ormcc", "receiver")
    best = {"old": float("inf"), "new": float("inf"), "loop": float("inf")}
    for _ in range(args.repeat):  # interleaved, so a busy moment hits both alike
        best["loop"] = min(best["loop"], empty_loop(args.packets))
        best["old"] = min(best["old"], old_loop(old, args.packets, 1000))
        best["new"] = min(best["new"], new_loop(new, args.packets, 1000))
    ns = {k: (best[k] - best["loop"]) / args.packets * 1e9 for k in ("old", "new")}
    print(f"metrics per received datagram (2 counter updates), best of {args.repeat} x "
          f"{args.packets:,} datagrams, bare loop subtracted, thread CPU time:")
    print(f"  old  prometheus_client Counter child .inc():  {ns['old']:7.1f} ns")
    print(f"  new  plain integers (AgentMetrics):           {ns['new']:7.1f} ns")
    print(f"  new / old: {ns['new'] / ns['old']:.3f}")
    registry = CollectorRegistry()
    agents = [AgentMetrics(f"h{i}", "multi", "ormcc", "receiver", registry=registry)
              for i in range(args.agents)]
    for m in agents:
        for k, name in enumerate(CORE_GAUGES):
            m.core_gauge(name, 1e6 + k)
    if render_text(agents) != generate_latest(registry):
        print("render_text and generate_latest differ: the comparison is void", file=sys.stderr)
        return 1
    scrapes, best_scrape = 20, {"generate_latest": float("inf"), "render_text": float("inf")}
    for _ in range(args.repeat):
        for name, fn in (("generate_latest", lambda: generate_latest(registry)),
                         ("render_text", lambda: render_text(agents))):
            t = time.thread_time()
            for _ in range(scrapes):
                text = fn()
            best_scrape[name] = min(best_scrape[name], (time.thread_time() - t) / scrapes)
    old_ms, new_ms = (best_scrape[k] * 1e3 for k in ("generate_latest", "render_text"))
    print(f"one scrape of {args.agents} agents ({len(CORE_GAUGES)} core gauges each, "
          f"{len(text):,} bytes), best of {args.repeat} x {scrapes}, thread CPU time:")
    print(f"  old  generate_latest of the collector's families:  {old_ms:6.1f} ms")
    print(f"  new  render_text from the numbers:                 {new_ms:6.1f} ms")
    print(f"  new / old: {new_ms / old_ms:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
