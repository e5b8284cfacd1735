"""Measure FRR's leave latency on the RLC topologies (sets the RLC deaf period t_D).

The leave latency is the time from a receiver's IGMP leave until the bottleneck
link towards its router stops carrying the group (mcclab.probes.reach.leave_time),
for ASM and SSM, a few trials each. Prints one JSON line per trial and a summary.

    python -m bench.rlc_leave_latency [--topology topologies/rlc-fig2a.yaml] [--trials 5]
"""

from __future__ import annotations

import argparse
import json
import statistics

from mcclab.features import probe
from mcclab.lab import Lab, LabOptions
from mcclab.model.loader import load_topology
from mcclab.probes.reach import leave_time


def main() -> None:
    """Bring the topology up once and time ``trials`` leaves per mode."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--topology", default="topologies/rlc-fig2a.yaml")
    ap.add_argument("--sender", default="n0")
    ap.add_argument("--receiver", default="n5")
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    topo = load_topology(args.topology)
    out: dict[str, list[float]] = {"asm": [], "ssm": []}
    with Lab(topo, LabOptions(features=probe(), lock_timeout=1800)) as lab:
        for _ in range(args.trials):
            for mode in ("asm", "ssm"):
                took = leave_time(lab, args.sender, args.receiver, ssm=mode == "ssm")
                out[mode].append(took)
                print(json.dumps({"mode": mode, "leave_s": took}), flush=True)
    for mode, values in out.items():
        print(json.dumps({"mode": mode, "n": len(values), "median": statistics.median(values),
                          "min": min(values), "max": max(values)}), flush=True)


if __name__ == "__main__":
    main()
