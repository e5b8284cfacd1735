"""How long routers keep forwarding a STAIR group after the receivers' leaves (per hop).

``watch`` runs beside a lab (``mcclab run ... --wait`` in another shell): it waits for
the topology's router namespaces, then reads each router's multicast forwarding cache
(``/proc/net/ip_mr_cache``) every ``--period`` and writes one CSV row per change of an
entry's outgoing interfaces, stamped with CLOCK_MONOTONIC (the agents' event-log clock).
It stops when the namespaces go away.

``analyze`` matches every removal of an outgoing interface ``router -> peer`` for a
group to the last leave of that group by a receiver downstream of it (from the run's
event logs), and prints the delay per hop: the receiver's access router (IGMP
last-member query), the router above it (one PIM prune) and so on up to the sender's
router. The kernel cache is what forwards, so a removal there is when the link stops
carrying the group.

``carried`` uses the same CSV to tell how much of the session each link carried over
the run's window: per group, the bytes the sender sent (its per-channel counters)
while the router forwarded that group to the link's far end. For a link with one
receiver below, it prints that receiver's own rate (received + lost) beside it: the
difference is what the routers' join and leave latency put on the link.

    python -m bench.stair_leave_latency watch --topology topologies/stair-fig12.yaml \\
        --out /tmp/mfc.csv
    python -m bench.stair_leave_latency analyze --topology topologies/stair-fig12.yaml \\
        --mroutes /tmp/mfc.csv --run results/stair-fig13/<run>
    python -m bench.stair_leave_latency carried --topology topologies/stair-fig12.yaml \\
        --mroutes /tmp/mfc.csv --run results/stair-fig13/<run>
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import socket
import statistics
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from mcclab.analysis.results import load_run
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import load_topology
from mcclab.model.topology import Topology
from mcclab.net.node_config import netns_name
from mcclab.net.setns import NETNS_DIR, enter_netns
from mcclab.resultsdir import event_records

Entry = tuple[str, str]  # (source, group)


def _addr(word: str) -> str:
    """An address as the kernel prints it in ip_mr_cache (%08X of the network-order word)."""
    return socket.inet_ntoa(struct.pack("=I", int(word, 16)))


def parse_oifs(text: str) -> dict[Entry, frozenset[int]]:
    """Outgoing vifs of every resolved (source, group) entry of /proc/net/ip_mr_cache."""
    out: dict[Entry, frozenset[int]] = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 6:
            continue
        try:
            key = (_addr(parts[1]), _addr(parts[0]))
            if int(parts[2]) < 0:
                continue  # unresolved
            out[key] = frozenset(int(p.split(":")[0]) for p in parts[6:] if ":" in p)
        except (ValueError, struct.error):
            continue
    return out


def parse_vif_names(text: str) -> dict[int, str]:
    """vif index -> interface name from /proc/net/ip_mr_vif."""
    out = {}
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            out[int(parts[0])] = parts[1]
    return out


@dataclass(frozen=True)
class Removal:
    """A router stopped forwarding ``group`` towards ``peer`` at monotonic time ``t``."""

    t: float
    router: str
    peer: str
    group: str


def removals(rows: list[dict]) -> list[Removal]:
    """Removals of an outgoing interface from the watch CSV rows (``t, router, source,
    group, oifs`` with ``oifs`` the peers '+'-joined; an entry that disappears removes
    all its peers)."""
    last: dict[tuple[str, str, str], set[str]] = {}
    out = []
    for row in sorted(rows, key=lambda r: float(r["t"])):
        key = (row["router"], row["source"], row["group"])
        now = set(filter(None, row["oifs"].split("+")))
        for peer in sorted(last.get(key, set()) - now):
            out.append(Removal(float(row["t"]), row["router"], peer, row["group"]))
        last[key] = now
    return out


def downstream(topo: Topology, router: str, peer: str, receivers: list[str]) -> list[str]:
    """Receivers reached through ``router -> peer`` (the tree is the topology's, a tree)."""
    adj: dict[str, set[str]] = {}
    for link in topo.links:
        a, b = link.endpoints
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    seen, todo = {router, peer}, deque([peer])
    while todo:
        for nxt in adj.get(todo.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return [r for r in receivers if r in seen]


def leave_delays(removed: list[Removal], leaves: dict[str, list[tuple[float, str]]],
                 below: dict[tuple[str, str], list[str]], horizon: float = 5.0
                 ) -> list[tuple[Removal, float]]:
    """Each removal with its delay after the last leave of its group by a receiver below
    it (``leaves``: receiver -> [(t, group)]; ``below``: (router, peer) -> receivers).
    Removals with no such leave within ``horizon`` seconds are dropped (start-up, end)."""
    out = []
    for rem in removed:
        times = [t for r in below.get((rem.router, rem.peer), [])
                 for t, g in leaves.get(r, []) if g == rem.group and t <= rem.t]
        if times and rem.t - max(times) <= horizon:
            out.append((rem, rem.t - max(times)))
    return out


def summarize(delays: list[tuple[Removal, float]], hop: dict[str, str]) -> dict[str, dict]:
    """Per hop class (``hop``: router -> class name): n, median, mean, p90, max in ms."""
    groups: dict[str, list[float]] = {}
    for rem, d in delays:
        groups.setdefault(hop.get(rem.router, rem.router), []).append(d * 1e3)
    out = {}
    for name, values in sorted(groups.items()):
        values.sort()
        out[name] = {"n": len(values), "median_ms": round(statistics.median(values), 1),
                     "mean_ms": round(statistics.fmean(values), 1),
                     "p90_ms": round(values[int(0.9 * (len(values) - 1))], 1),
                     "max_ms": round(values[-1], 1)}
    return out


Sends = list[tuple[float, float, dict[str, int]]]  # (t0, t1, bytes per group)
Changes = list[tuple[float, frozenset[str]]]  # (t, outgoing peers from then on)


def channel_sends(stats: list[dict], groups: list[str]) -> Sends:
    """Bytes sent per group between consecutive sender ``stats`` records (their
    ``sent_channels`` counters are cumulative; channel i is ``groups[i]``)."""
    cum = [(r["t"], {groups[int(k)]: v["bytes"] for k, v in r["sent_channels"].items()})
           for r in stats]
    return [(t0, t1, {g: b - before.get(g, 0) for g, b in after.items()})
            for (t0, before), (t1, after) in itertools.pairwise(cum)]


def forwarding(rows: list[dict]) -> dict[tuple[str, str], Changes]:
    """(router, group) -> its outgoing peers over time, from the watch CSV rows."""
    out: dict[tuple[str, str], Changes] = {}
    for row in sorted(rows, key=lambda r: float(r["t"])):
        peers = frozenset(filter(None, row["oifs"].split("+")))
        out.setdefault((row["router"], row["group"]), []).append((float(row["t"]), peers))
    return out


def on_fraction(changes: Changes, peer: str, t0: float, t1: float) -> float:
    """Share of [t0, t1] during which ``peer`` was among the outgoing peers."""
    state, cur, on = frozenset(), t0, 0.0
    for t, peers in changes:
        if t <= t0:
            state = peers
            continue
        if t >= t1:
            break
        on += (t - cur) if peer in state else 0.0
        state, cur = peers, t
    on += (t1 - cur) if peer in state else 0.0
    return on / (t1 - t0)


def carried_bytes(sends: Sends, fwd: dict[tuple[str, str], Changes],
                  router: str, peer: str, lo: float, hi: float) -> float:
    """Bytes of the session ``router`` sent to ``peer`` in the sender's intervals within
    [lo, hi] (each interval's bytes of a group, times the share it was forwarded)."""
    total = 0.0
    for t0, t1, per_group in sends:
        if t0 < lo or t1 > hi:
            continue
        for group, sent in per_group.items():
            total += sent * on_fraction(fwd.get((router, group), []), peer, t0, t1)
    return total


# --- runner side ---------------------------------------------------------------------------

def _watch_router(router: str, peers: dict[str, str], period: float, stop: threading.Event,
                  sink: list[dict], lock: threading.Lock) -> None:
    """Poll one router's cache from a thread that lives in its namespace."""
    try:
        enter_netns(NETNS_DIR / netns_name(router))
    except OSError:
        return
    cache, vifs = Path("/proc/thread-self/net/ip_mr_cache"), Path("/proc/thread-self/net/ip_mr_vif")
    state: dict[Entry, frozenset[int]] = {}
    names: dict[int, str] = {}
    while not stop.is_set():
        try:
            text = cache.read_text()
            now = parse_oifs(text)
            # pimd adds its vifs one by one at start: read the names again while the
            # cache uses one not seen yet (counting them missed the last vif once)
            if any(v not in names for oifs in now.values() for v in oifs):
                names = parse_vif_names(vifs.read_text())
        except OSError:
            return  # the namespace is gone
        t = time.monotonic()
        for key in set(now) | set(state):
            if now.get(key, frozenset()) != state.get(key, frozenset()):
                oifs = "+".join(sorted(peers.get(names.get(v, ""), "?") for v in now.get(key, ())))
                with lock:
                    sink.append({"t": f"{t:.6f}", "router": router, "source": key[0],
                                 "group": key[1], "oifs": oifs})
        state = now
        stop.wait(period)


def watch(topo: Topology, out: Path, period: float, wait: float) -> None:
    """Wait for the lab's routers, record cache changes until they go away."""
    routers = topo.names("router")
    plan = plan_addresses(topo)
    marker = [NETNS_DIR / netns_name(n) for n in topo.nodes]
    deadline = time.monotonic() + wait
    while not all(p.exists() for p in marker):
        if time.monotonic() > deadline:
            raise SystemExit("the lab's namespaces never appeared")
        time.sleep(0.2)
    stop, lock, rows = threading.Event(), threading.Lock(), []
    threads = [threading.Thread(
        target=_watch_router, daemon=True,
        args=(r, {i.name: i.peer for i in plan.interfaces[r]}, period, stop, rows, lock))
        for r in routers]
    for th in threads:
        th.start()
    print(json.dumps({"watching": routers, "period_s": period}), flush=True)
    while all(p.exists() for p in marker):
        time.sleep(0.5)
    stop.set()
    for th in threads:
        th.join(2.0)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["t", "router", "source", "group", "oifs"])
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: float(r["t"])))
    print(json.dumps({"rows": len(rows), "out": str(out)}), flush=True)


def analyze(topo: Topology, mroutes: Path, run: Path, flow: str) -> dict[str, dict]:
    """Per-hop delays between the receivers' leaves and the routers' removals."""
    with mroutes.open() as fh:
        rows = list(csv.DictReader(fh))
    leaves: dict[str, list[tuple[float, str]]] = {}
    stops = []
    for log in sorted((run / "logs").glob(f"{flow}-receiver-*.jsonl")):
        node = log.stem.removeprefix(f"{flow}-receiver-")
        with log.open() as fh:
            recs = [json.loads(line) for line in fh if '"leave"' in line or '"stop"' in line]
        leaves[node] = [(r["t"], r["group"]) for r in recs if r.get("event") == "leave"]
        stops += [r["t"] for r in recs if r.get("event") == "stop"]
    # The receivers' own teardown (every group at once) is not the protocol's leaves.
    until = min(stops, default=float("inf"))
    removed = [r for r in removals(rows) if r.peer != "?" and r.t < until]
    below = {(r.router, r.peer): downstream(topo, r.router, r.peer, list(leaves))
             for r in removed}
    hosts = set(topo.names("host"))
    hop = {r.router: "access (IGMP)" if r.peer in hosts else f"{r.router} (PIM prune)"
           for r in removed}
    return summarize(leave_delays(removed, leaves, below), hop)


def carried(topo: Topology, mroutes: Path, run: Path, flow: str) -> dict[str, dict]:
    """Per link into a receiver's access router: the session's rate on it over the run's
    window, the receiver's own (received + lost) and their ratio."""
    with mroutes.open() as fh:
        fwd = forwarding(list(csv.DictReader(fh)))
    res = load_run(run)
    (log,) = (run / "logs").glob(f"{flow}-sender-*.jsonl")
    sender = log.stem.removeprefix(f"{flow}-sender-")
    recs = event_records(log)
    start = next(r for r in recs if r.get("event") == "start")
    groups = [c["group"] for c in start["session"]["channels"]]
    stats = [r for r in recs if r.get("event") == "stats"]
    size = stats[-1]["total_tx_bytes"] / stats[-1]["total_tx_packets"]
    agents = res.agents
    own = agents[(agents["node"] == sender) & (agents["role"] == "sender")
                 & (agents["event"] == "start")]
    t0 = start["t"] - float(own["t"].iloc[0])  # the run's time zero on the agents' clock
    lo, hi = res.window
    sec = res.per_second
    sec = sec[(sec["flow"] == flow) & (sec["t"] > lo) & (sec["t"] <= hi)]
    own_rate = ((sec["packets"] + sec["lost"]).groupby(sec["node"]).sum()
                * size * 8 / (hi - lo)).to_dict()
    sends = channel_sends(stats, groups)
    hosts = set(topo.names("host"))
    out = {}
    for router, peer in sorted({(r, p) for (r, _), ch in fwd.items() for _, on in ch for p in on}):
        below = downstream(topo, router, peer, sorted(own_rate))
        if peer in hosts or len(below) != 1:
            continue
        rate = carried_bytes(sends, fwd, router, peer, t0 + lo, t0 + hi) * 8 / (hi - lo)
        mine = own_rate[below[0]]
        out[f"{router}->{peer}"] = {"receiver": below[0], "carried_mbps": round(rate / 1e6, 3),
                                    "receiver_mbps": round(mine / 1e6, 3),
                                    "ratio": round(rate / mine, 3) if mine else None}
    return out


def main() -> None:
    """CLI: watch, analyze or carried."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("--topology", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--period", type=float, default=0.01)
    w.add_argument("--wait", type=float, default=3600.0)
    a = sub.add_parser("analyze")
    a.add_argument("--topology", required=True)
    a.add_argument("--mroutes", required=True)
    a.add_argument("--run", required=True)
    a.add_argument("--flow", default="stair")
    c = sub.add_parser("carried")
    c.add_argument("--topology", required=True)
    c.add_argument("--mroutes", required=True)
    c.add_argument("--run", required=True)
    c.add_argument("--flow", default="stair")
    args = ap.parse_args()
    topo = load_topology(args.topology)
    if args.cmd == "watch":
        watch(topo, Path(args.out), args.period, args.wait)
    elif args.cmd == "carried":
        print(json.dumps(carried(topo, Path(args.mroutes), Path(args.run), args.flow), indent=1))
    else:
        print(json.dumps(analyze(topo, Path(args.mroutes), Path(args.run), args.flow), indent=1))


if __name__ == "__main__":
    main()
