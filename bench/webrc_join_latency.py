"""Measure the join latency WEBRC's MRTT samples contain, on an experiment's own topology.

A WEBRC MRTT sample is join sent -> first packet of the wave. This bench takes the
wave's packet spacing out: the probe sender sends ``--rate`` packets/s per group (1 ms
to 10 ms apart), the receiver joins fresh SSM groups one after another
(mcclab.probes.reach.join_latencies), so each latency is the path RTT plus IGMP, FRR's
PIM (S,G) join and forwarding set-up, plus at most one probe spacing. Unicast ping over
the same path gives the emulated links' own RTT (the userspace emulator's latency
included) to subtract. One JSON line per measurement and a summary.

    python -m bench.webrc_join_latency [--experiment webrc-fig4] [--trials 20]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics

from mcclab.experiment.loader import resolve
from mcclab.features import probe
from mcclab.lab import Lab, LabOptions
from mcclab.probes.reach import join_latencies, summarize

PING_RTT = re.compile(r"time=([0-9.]+) ms")


def ping_rtts(lab: Lab, src: str, dst: str, count: int) -> list[float]:
    """Unicast round-trip times (s) from ``src`` to ``dst`` over the lab's links."""
    out = lab.run(src, ["ping", "-n", "-c", str(count), "-i", "0.2",
                        str(lab.plan.address_of(dst))], check=False)
    return [float(m) / 1e3 for m in PING_RTT.findall(out)]


def main() -> None:
    """Bring the experiment's topology up once; ping, then time ``trials`` SSM joins."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--experiment", default="webrc-fig4")
    ap.add_argument("--sender", default="s1")
    ap.add_argument("--receiver", default="d1")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--rate", type=float, default=100.0, help="probe packets/s per group")
    args = ap.parse_args()
    resolved = resolve(args.experiment, "quick")
    with Lab(resolved.topology, LabOptions(features=probe(), lock_timeout=3600)) as lab:
        rtts = ping_rtts(lab, args.receiver, args.sender, 20)
        print(json.dumps({"ping_rtt_s": rtts}), flush=True)
        joins = join_latencies(lab, args.sender, args.receiver, trials=args.trials, ssm=True,
                               rate=args.rate)
        print(json.dumps({"join_latency_s": joins}), flush=True)
    spacing = 1 / args.rate
    ping_median = statistics.median(rtts) if rtts else float("nan")
    summary = {"experiment": args.experiment, "probe_spacing_s": spacing,
               "ping_rtt_median_s": ping_median,
               "ping_rtt_min_s": min(rtts) if rtts else float("nan"),
               "join": summarize(joins), "join_mean_s": statistics.fmean(joins),
               "join_min_s": min(joins),
               # join latency minus the link RTT minus the mean wait for the probe's packet
               "join_excess_mean_s": statistics.fmean(joins) - ping_median - spacing / 2}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
