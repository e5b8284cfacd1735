"""Why WEBRC's share against TCP is what it is: each flow's Eq. 1 inputs, measured.

Reads one finished run of a WEBRC-vs-TCP experiment (``default``, ``webrc-fig9b``) and,
over its measurement window, prints for each flow the loss events (per second and per
packet), the round-trip time its rate control works with and the rate Eq. 1 gives from
those inputs:

* WEBRC: loss events from the receiver's event log (``loss_event`` records: one per
  ARTT-long event, the paper's definition), packets received + lost from
  ``per_second.csv``, ARTT and LOSSP from its gauges; Eq. 6 at (LOSSP, ARTT), times
  Eq. 7's 0.869 for the mean;
* TCP: loss events = the seconds in which iperf3's reported cwnd fell (a Reno halving;
  at these window sizes one per several seconds), retransmissions from iperf3's
  ``Retr`` column, packets = bytes / MSS; RTT = cwnd / rate per second (the window's
  own round trip, queueing included), and the path RTT plus the bottleneck queue's
  delay from ``links.csv`` for comparison; Eq. 1 at (events/packets, RTT).

    python -m bench.webrc_share results/default/<run-id>
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np
import yaml

from agents.webrc.analysis import _sender_start, window_mean
from agents.webrc.model import peak_to_mean, tcp_rate
from mcclab.analysis.results import load_run
from mcclab.model.units import parse_duration, parse_rate, parse_size
from mcclab.resultsdir import event_records

ROW = re.compile(r"\[\s*\d+\]\s+([\d.]+)-([\d.]+)\s+sec\s+[\d.]+ \w+\s+([\d.]+) Kbits/sec"
                 r"\s+(\d+)\s+([\d.]+) (K|M)Bytes")


def iperf_rows(text: str) -> list[tuple[float, float, int, float]]:
    """(interval end s, rate bit/s, retransmissions, cwnd bytes) per second of a client."""
    out = []
    for m in ROW.finditer(text):
        cwnd = float(m.group(5)) * (1024 if m.group(6) == "K" else 1024 * 1024)
        out.append((float(m.group(2)), float(m.group(3)) * 1e3, int(m.group(4)), cwnd))
    return out


def main() -> None:
    """Print the inputs and Eq. 1's rates as one JSON object."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("run", type=Path)
    ap.add_argument("--webrc", default="webrc")
    ap.add_argument("--tcp", default="tcp")
    ap.add_argument("--node", default="d1")
    ap.add_argument("--bottleneck", default="rl,rr")
    ap.add_argument("--capacity", default="3.2Mbit", help="the bottleneck's rate")
    args = ap.parse_args()
    run = load_run(args.run)
    spec = yaml.safe_load((args.run / "spec.yaml").read_text())
    flows = {f["name"]: f for f in spec["flows"]}
    start, end = run.window
    span = end - start
    ps = run.per_second
    out: dict = {"run": str(args.run), "window_s": [start, end]}

    # WEBRC
    w = ps[(ps["flow"] == args.webrc) & (ps["node"] == args.node) & (ps["t"] > start)
           & (ps["t"] <= end)]
    size = parse_size(flows[args.webrc]["params"].get("packet_size", "1024B"))
    found = _sender_start(run, args.webrc)
    clock0 = found[1] if found else math.nan
    log = args.run / "logs" / f"{args.webrc}-receiver-{args.node}.jsonl"
    events = [r for r in event_records(log)
              if r.get("event") == "loss_event" and start < r["t"] - clock0 <= end]
    packets = float(w["packets"].sum() + w["lost"].sum())
    artt = window_mean(run, "artt_seconds", args.webrc, args.node)
    lossp = window_mean(run, "lossp", args.webrc, args.node)
    reqn = tcp_rate(lossp, artt)
    out["webrc"] = {
        "throughput_bps": float(w["throughput_bps"].mean()), "packets_per_s": packets / span,
        "lost_packets": float(w["lost"].sum()), "loss_events": len(events),
        "loss_events_per_s": len(events) / span,
        "loss_event_rate_counted": len(events) / packets if packets else math.nan,
        "lossp": lossp, "artt_s": artt, "reqn_pps": reqn,
        "eq1_x_eq7_bps": reqn * peak_to_mean(0.75) * 8 * size,
    }

    # TCP
    tcp = flows[args.tcp]
    mss = parse_size(tcp.get("mss", "1448B"))
    tcp_start = parse_duration(tcp.get("start", "0s"))
    record = json.loads((args.run / "run.json").read_text())
    starts = (record.get("iperf_test_starts_s") or {}).get(args.tcp)
    if starts:  # where the test really began (runs since the runner records it)
        tcp_start = float(starts[0])
    text = "".join(p.read_text(errors="replace")
                   for p in sorted((args.run / "logs").glob(f"{args.tcp}-client-*.txt")))
    rows = [(tcp_start + e, r, x, c) for e, r, x, c in iperf_rows(text)]
    inside = [(i, row) for i, row in enumerate(rows) if start < row[0] <= end]
    drops = sum(1 for i, row in inside if i and row[3] < rows[i - 1][3])
    retr = sum(row[2] for _, row in inside)
    rate = np.array([row[1] for _, row in inside])
    cwnd = np.array([row[3] for _, row in inside])
    tcp_packets = float(rate.sum() / 8 / mss)
    moving = rate > 0  # a second without data (a retransmission timeout) has no RTT
    rtt_cwnd = float(np.mean(cwnd[moving] / (rate[moving] / 8))) if moving.any() else math.nan
    src, dst = args.bottleneck.split(",")
    links = run.links
    qdelay = math.nan
    if links is not None and not links.empty:
        q = links[(links["src"] == src) & (links["dst"] == dst) & (links["t"] > start)
                  & (links["t"] <= end)]
        cap = parse_rate(args.capacity)
        qdelay = float(q["qlen_pkts"].mean()) * (size + 28) * 8 / cap
    p_tcp = drops / tcp_packets if tcp_packets else math.nan
    out["tcp"] = {
        "throughput_bps": float(rate.mean()) if len(rate) else math.nan,
        "packets_per_s": tcp_packets / span, "retransmits": retr, "cwnd_reductions": drops,
        "seconds_without_data": int((~moving).sum()),
        "loss_events_per_s": drops / span, "loss_event_rate": p_tcp,
        "rtt_cwnd_over_rate_s": rtt_cwnd, "bottleneck_queue_delay_s": qdelay,
        "eq1_bps": tcp_rate(p_tcp, rtt_cwnd) * 8 * mss if p_tcp > 0 else math.inf,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
