"""The kernel backend: tc qdisc trees per link direction, built as data.

Each emulated direction gets this tree on the transmitting interface's egress:

    1:   prio    two bands; u32 filters send IGMP and PIM (IPv4 protocols 2, 103)
                 and ARP to band 1:1, everything else goes to 1:2
    2:   netem   (band 1:1, control) delay and jitter only: never loses a packet
    3:   netem   (band 1:2, data) delay, jitter, loss (Bernoulli or Gilbert-Elliott)
    10:  htb     under the data netem: one class 10:1 at the link rate
    20:  pfifo   limit N packets                      (drop-tail)
     or  red     thresholds in bytes, then 30: pfifo limit N packets  (RED)

The order matters. netem holds every packet for its propagation delay; placed
below the rate limiter its limit would count packets "on the wire" as queued
and its tfifo would become the bottleneck queue. Above the rate limiter it
only delays (and loses) packets, never drops for lack of room (large limit),
and the leaf under htb holds exactly the packets waiting for the link, which
is the queue the topology describes. A constant delay applied before the queue
instead of after it shifts every arrival by the same amount, so departures are
the same. netem also orphans the packets it holds, so a local sender's socket
is not charged for packets "in flight".

The control band keeps the routers' and hosts' IGMP and PIM out of the data's
losses and queue, as the userspace backend's protect_control does: the papers'
ns-2 runs have no group membership to lose, and a leaf whose queue dropped two
IGMP queries in a row lost its groups for about 110 s (docs/links.md, *Control
packets*). Unlike userspace, they do not wait behind the data or take link
time: a kernel qdisc cannot hold a packet in a FIFO it never drops from. ARP
takes the same band because the userspace backend never sees it (its rules are
IPv4's): a lost ARP request leaves a next hop unresolved, and the packets
behind it are dropped by the neighbour table, where no link counter sees them.

A size table on the root subtracts the 14-byte Ethernet header, so the rate,
the RED thresholds and the counters are in IP bytes, as in the userspace
backend.

This machine's kernel has neither sch_netem nor sch_red (nor sch_prio), so
these commands are only unit-tested here (tests/unit/test_links_kernel.py);
`make vm-check` runs them in a Debian VM.
"""

from __future__ import annotations

import json
import math

from mcclab.commands import Cmd, cmd
from mcclab.links.counters import LinkCounters
from mcclab.links.plan import Direction, Placement
from mcclab.model.topology import Queue

ETH_HEADER = 14
MTU_IP = 1500
# Token-bucket depth: one full-size packet, or 1 ms of the rate on fast links
# (enough to ride out softirq scheduling delays without losing rate). Mininet's
# fixed 15 kB would let a 320 kbit/s link emit 375 ms worth of packets at once.
BURST_TIME = 1e-3
# netem holds every packet in propagation (arrival rate x delay). 100k packets
# cover 1.2 s of full-size packets at 1 Gbit/s; memory is only used when held.
NETEM_LIMIT = 100_000
# Linux RED measures the queue in bytes; thresholds given in packets are turned
# into bytes with this mean packet size, so they match ns-2's packet mode
# exactly only for packets of this size (IP bytes).
RED_MEAN_PKT = 1000
# tc's max_P is a u32 fraction of 2^32, so max_p = 1 must be just below it.
MAX_P_CEILING = 1 - 2.0 ** -32

ROOT, CONTROL, DATA = "1:", "2:", "3:"
CONTROL_BAND, DATA_BAND = "1:1", "1:2"
DATA_CLASS = "3:1"  # the data netem's one class, which the htb hangs from
HTB, HTB_CLASS, LEAF, RED_CHILD = "10:", "10:1", "20:", "30:"
# IPv4 protocol numbers of IGMP and PIM: the IP packets the control band carries
# (linkemu's protect_control spares the same two). ARP goes there too.
CONTROL_PROTOCOLS = (2, 103)
# prio's priomap sends each of the 16 skb priorities to a band (0-based): all to the
# data band, so only the filters put a packet in the control band.
PRIOMAP = ["1"] * 16


def htb_burst_bytes(rate_bps: float) -> int:
    """The htb bucket depth for a rate: max(one MTU, BURST_TIME of the rate)."""
    return max(MTU_IP, math.ceil(rate_bps * BURST_TIME / 8))


def red_wlog(weight: float) -> int:
    """Linux RED's EWMA weight is 2^-Wlog: the nearest power of two to ``weight``."""
    return round(-math.log2(weight))


def tc_red_eval_ewma(qmin: int, burst: int, avpkt: int) -> int:
    """iproute2's tc_red_eval_ewma(): the Wlog tc derives from ``burst`` (-1 if none)."""
    a = burst + 1 - qmin / avpkt
    if a < 1.0:
        return -1
    w = 0.5
    for wlog in range(1, 32):
        if a <= (1 - (1 - w) ** burst) / w:
            return wlog
        w /= 2
    return -1


def red_burst_for_wlog(qmin: int, avpkt: int, wlog: int) -> int:
    """The smallest ``burst`` (packets) for which tc picks exactly ``wlog``.

    tc has no weight option: it derives Wlog from burst, so the burst that
    yields the wanted weight is found by running tc's own formula.
    """
    burst = max(1, math.ceil(qmin / avpkt))
    while burst < 1_000_000:
        got = tc_red_eval_ewma(qmin, burst, avpkt)
        if got == wlog:
            return burst
        if got > wlog:
            break
        burst += 1
    raise ValueError(f"no tc burst yields Wlog {wlog} for min {qmin}B, avpkt {avpkt}B")


def _fls(x: int) -> int:
    """Position of the highest set bit (the kernel's fls())."""
    return x.bit_length()


def problems(d: Direction) -> list[str]:
    """Parameters of ``d`` that Linux qdiscs cannot reproduce (each names the link)."""
    q = d.queue
    if q is None or q.red is None:
        return []
    red, out = q.red, []
    if red.gentle:
        out.append(f"{d.where}: the kernel's RED has no gentle mode; set 'gentle: false' "
                   "or use link_backend: userspace")
    wlog = red_wlog(red.weight)
    if wlog < 1:
        out.append(f"{d.where}: RED weight {red.weight:g} is above 0.7; the kernel's EWMA "
                   "weight is 2^-Wlog with Wlog >= 1")
    elif red.min_th < 2 and wlog > 1:
        # tc derives Wlog from burst and min/avpkt; with min/avpkt = 1 only Wlog 1 exists.
        out.append(f"{d.where}: tc cannot give RED weight {red.weight:g} with min_th "
                   f"{red.min_th}pkt; use min_th >= 2pkt or link_backend: userspace")
    elif _fls(red.max_th * RED_MEAN_PKT) + wlog >= 32:
        out.append(f"{d.where}: RED max_th {red.max_th}pkt with weight {red.weight:g} "
                   "overflows the kernel's fixed-point average")
    return out


def netem_args(d: Direction, loss: bool = True) -> list[str]:
    """netem options: delay (+uniform jitter), and loss unless ``loss`` is False.

    The limit never binds. The control band takes the same delay without the loss.
    """
    p = d.params
    args = ["netem", "limit", str(NETEM_LIMIT)]
    if p.delay > 0 or p.jitter > 0:
        args += ["delay", f"{p.delay * 1e6:.10g}us"]
        if p.jitter > 0:
            # Without a distribution table netem draws jitter uniformly in ±jitter.
            args.append(f"{p.jitter * 1e6:.10g}us")
    if not loss:
        return args
    ge = p.gilbert_elliott
    if ge is not None:
        # netem's gemodel takes p, r, 1-h (loss in bad) and 1-k (loss in good).
        args += ["loss", "gemodel", _pct(ge.p), _pct(ge.r), _pct(ge.loss_bad),
                 _pct(ge.loss_good)]
    elif p.loss > 0:
        args += ["loss", "random", _pct(p.loss)]
    return args


def _pct(prob: float) -> str:
    """A probability as tc's percentage."""
    return f"{prob * 100:.10g}%"


def red_args(q: Queue, rate_bps: float) -> list[str]:
    """tc red options from ns-2 style packet thresholds (see RED_MEAN_PKT)."""
    assert q.red is not None
    red = q.red
    qmin, qmax = red.min_th * RED_MEAN_PKT, red.max_th * RED_MEAN_PKT
    wlog = red_wlog(red.weight)
    return [
        "red",
        # The byte limit only sizes red's default bfifo, which the pfifo grafted
        # below replaces; the packet limit is the pfifo's.
        "limit", str(q.limit * MTU_IP),
        "min", str(qmin), "max", str(qmax), "avpkt", str(RED_MEAN_PKT),
        "burst", str(red_burst_for_wlog(qmin, RED_MEAN_PKT, wlog)),
        "probability", f"{min(red.max_p, MAX_P_CEILING):.10g}",
        # bandwidth sets the idle-time decay of the average (ns-2 does the same
        # with the link rate).
        "bandwidth", f"{round(rate_bps)}bit",
    ]


def direction_cmds(d: Direction, where: Placement) -> list[Cmd]:
    """The qdisc tree for one direction, replacing whatever the interface had."""
    ns, dev = where.netns, where.iface
    out = [
        # veth starts with noqueue, which cannot be deleted: failure is expected.
        cmd("tc", "qdisc", "del", "dev", dev, "root", netns=ns, check=False),
        cmd("tc", "qdisc", "add", "dev", dev, "root", "handle", ROOT,
            "stab", "overhead", -ETH_HEADER, "prio", "bands", 2, "priomap", *PRIOMAP,
            netns=ns),
        *[cmd("tc", "filter", "add", "dev", dev, "parent", ROOT, "protocol", "ip",
              "prio", 1, "u32", "match", "ip", "protocol", proto, "0xff",
              "flowid", CONTROL_BAND, netns=ns) for proto in CONTROL_PROTOCOLS],
        # every ARP packet (a mask of 0 matches anything)
        cmd("tc", "filter", "add", "dev", dev, "parent", ROOT, "protocol", "arp",
            "prio", 2, "u32", "match", "u32", 0, 0, "flowid", CONTROL_BAND, netns=ns),
        cmd("tc", "qdisc", "add", "dev", dev, "parent", CONTROL_BAND, "handle", CONTROL,
            *netem_args(d, loss=False), netns=ns),
        cmd("tc", "qdisc", "add", "dev", dev, "parent", DATA_BAND, "handle", DATA,
            *netem_args(d), netns=ns),
    ]
    q, rate = d.queue, d.params.rate
    if q is None or rate is None:
        return out
    burst = htb_burst_bytes(rate)
    out += [
        cmd("tc", "qdisc", "add", "dev", dev, "parent", DATA_CLASS, "handle", HTB, "htb",
            "default", "1", netns=ns),
        # ceil = rate: the class never borrows; quantum = one packet (a single
        # class needs no DRR fairness, and this silences htb's quantum warnings).
        cmd("tc", "class", "add", "dev", dev, "parent", HTB, "classid", HTB_CLASS, "htb",
            "rate", f"{round(rate)}bit", "ceil", f"{round(rate)}bit",
            "burst", burst, "cburst", burst, "quantum", MTU_IP + ETH_HEADER, netns=ns),
    ]
    if q.discipline == "droptail":
        out.append(cmd("tc", "qdisc", "add", "dev", dev, "parent", HTB_CLASS, "handle", LEAF,
                       "pfifo", "limit", q.limit, netns=ns))
    else:
        out += [
            cmd("tc", "qdisc", "add", "dev", dev, "parent", HTB_CLASS, "handle", LEAF,
                *red_args(q, rate), netns=ns),
            cmd("tc", "qdisc", "add", "dev", dev, "parent", "20:1", "handle", RED_CHILD,
                "pfifo", "limit", q.limit, netns=ns),
        ]
    return out


def clear_cmds(where: Placement) -> list[Cmd]:
    """Remove a direction's tree (the interface goes back to its default qdisc)."""
    return [cmd("tc", "qdisc", "del", "dev", where.iface, "root", netns=where.netns,
                check=False)]


def stats_cmd(where: Placement) -> Cmd:
    """Read every qdisc's counters on the interface as JSON."""
    return cmd("tc", "-s", "-j", "qdisc", "show", "dev", where.iface, netns=where.netns)


def parse_stats(output: str, d: Direction, where: Placement, now: float) -> LinkCounters:
    """Counters of one direction from ``tc -s -j qdisc show``.

    The root prio's sent counters are what left the link, in both bands; its
    drops include the data netem's random losses and every drop of the qdiscs
    below it (the kernel passes a child's drop up the tree), so random loss is
    the root's drops minus the queue's. The leaf (pfifo, or red whose drops
    include its pfifo's) holds the queue. The control band's netem counts the
    IGMP, PIM and ARP packets it admitted: sent, held, and (never, at its
    limit) dropped.
    """
    by_handle = {q.get("handle"): q for q in json.loads(output or "[]")}
    root = by_handle.get(ROOT, {})
    leaf = by_handle.get(LEAF, {})
    control = by_handle.get(CONTROL, {})
    drops_queue = int(leaf.get("drops", 0))
    sent_p, sent_b = int(root.get("packets", 0)), int(root.get("bytes", 0))
    drops_total = int(root.get("drops", 0))
    in_flight = int(root.get("qlen", 0))
    return LinkCounters(
        link=d.link, src=d.src, dst=d.dst, backend="kernel", node=where.node,
        iface=where.iface, hook=where.hook, time=now,
        # tc does not count the bytes of dropped packets, so bytes_in is unknown.
        pkts_in=sent_p + drops_total + in_flight, bytes_in=None, pkts_sent=sent_p,
        bytes_sent=sent_b, drops_queue=drops_queue,
        drops_loss=max(0, drops_total - drops_queue),
        qlen_pkts=int(leaf.get("qlen", 0)), qlen_bytes=int(leaf.get("backlog", 0)),
        in_flight=in_flight,
        control_in=sum(int(control.get(k, 0)) for k in ("packets", "qlen", "drops")),
    )
