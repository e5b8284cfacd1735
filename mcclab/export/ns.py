"""Emulab NS file (the ``tb-*`` dialect of ns-2 Tcl) for an export plan.

What Emulab's parser and delay nodes accept, and so what is refused here
(sources: Emulab's ``tbsetup/ns2ir`` parser, ``tb_compat.tcl``, ``lanlink.tcl``,
``parse.tcl``; the FreeBSD delay node's ``delaysetup``; docs/testbeds.md):

* bandwidth in whole kbit/s, from 10 kbit/s to 1 Gbit/s (1000000 kbps);
* delay in whole ms, 0 or at least 2 ms (the parser's threshold);
* loss 0 or at least 0.000005 per direction;
* queues of at most 100 packets (a delay node's limit in slots);
* RED with ``linterm_`` = 1/max_p a whole number (stored as an integer), and
  one discipline per link: the queue type is an argument of ``duplex-link``;
* LAN ports with the default queue only (one queue object per LAN member,
  not per direction);
* netmasks of at least 255.255.0.0; node names other than ``ns`` and ``link<N>``.
"""

from __future__ import annotations

import ipaddress
import re

from mcclab.export.common import (
    DEFAULT_QUEUE,
    Direction,
    ExportPlan,
    Lan,
    PointLink,
    check_units,
    raise_refusals,
    start_command,
)
from mcclab.model.units import format_duration, format_probability, format_rate

TESTBED = "Emulab NS"
DEFAULT_OS = "UBUNTU22-64-STD"
# Emulab's limits (see the module docstring).
MIN_KBPS = 10
MAX_KBPS = 1_000_000
MIN_DELAY_MS = 2
MIN_LOSS = 0.000005
MAX_SLOTS = 100
MIN_PREFIX = 16
# A direction mcclab leaves unshaped crosses a plain veth; the closest Emulab
# link is one at the largest bandwidth it accepts, with shaping turned off.
UNSHAPED_BW = "1000Mb"
_RESERVED = re.compile(r"^(ns|link[0-9]+)$")


def _number(value: float) -> str:
    """A decimal without exponent: Emulab's float pattern has none ('0.000005', '0.01')."""
    text = f"{value:.12f}".rstrip("0").rstrip(".")
    return text or "0"


def _bw(d: Direction) -> str:
    """A direction's bandwidth as Emulab writes it: '100Mb', '128kb', or the unshaped rate."""
    kbps = d.rate_kbps()
    if kbps is None:
        return UNSHAPED_BW
    return f"{kbps // 1000}Mb" if kbps % 1000 == 0 else f"{kbps}kb"


def _delay(d: Direction) -> str:
    """A direction's one-way delay in ms ('50ms')."""
    return f"{d.delay_ms()}ms"


def _discipline(d: Direction) -> str:
    """The direction's queue type in NS terms (an unshaped direction keeps DropTail)."""
    q = d.queue
    return "RED" if q is not None and q.discipline == "red" else "DropTail"


def _check_direction(d: Direction, on_lan: bool) -> list[tuple[str, str]]:
    """Emulab's per-direction limits."""
    problems = []
    p = d.params
    kbps = d.rate_kbps()
    if kbps is not None and not MIN_KBPS <= kbps <= MAX_KBPS:
        problems.append((d.field("rate"), f"{d.label}: {format_rate(p.rate)} is outside "
                         "Emulab's bandwidths [10kbit, 1Gbit]"))
    if 0 < d.delay_ms() < MIN_DELAY_MS:
        problems.append((d.field("delay"), f"{d.label}: {format_duration(p.delay)}; Emulab takes "
                         "a delay of 0 or at least 2ms"))
    if 0 < p.loss < MIN_LOSS:
        problems.append((d.field("loss"), f"{d.label}: {format_probability(p.loss)} is below "
                         "Emulab's smallest loss rate, 0.0005%"))
    q = d.queue
    if q is None:
        return problems
    if on_lan and q != DEFAULT_QUEUE:
        problems.append((d.field("queue"), f"{d.label}: a LAN port's queue can only be Emulab's "
                         "default, 50 packets drop-tail (one queue per LAN member, not per "
                         "direction)"))
        return problems
    if q.limit > MAX_SLOTS:
        problems.append((d.field("queue.limit"), f"{d.label}: {q.limit}pkt; an Emulab delay "
                         f"node queues at most {MAX_SLOTS} packets"))
    if q.red is not None:
        linterm = 1 / q.red.max_p
        if abs(linterm - round(linterm)) > 1e-6:
            problems.append((d.field("queue.red.max_p"), f"{d.label}: "
                             f"{format_probability(q.red.max_p)} is not 1/N for a whole N; "
                             "Emulab sets RED's max_p as linterm_ = 1/max_p, a whole number"))
    return problems


def _check_link(link: PointLink) -> list[tuple[str, str]]:
    """One queue type per duplex link."""
    fwd, rev = link.forward, link.reverse
    if _discipline(fwd) == _discipline(rev):
        return []
    red = fwd if _discipline(fwd) == "RED" else rev
    other = rev if red is fwd else fwd
    return [(red.field("queue.discipline"), f"{red.label} is RED but {other.label} is not: "
             "Emulab gives a duplex link one queue type (duplex-link ... RED) for both "
             "directions")]


def emulab_problems(plan: ExportPlan) -> list[tuple[str, str]]:
    """Every field of the plan the NS dialect cannot express, as (field, reason)."""
    problems = check_units(plan, "Emulab")
    for name in plan.topology.nodes:
        if _RESERVED.match(name):
            problems.append((f"nodes.{name}", f"the NS file names the simulator 'ns' and the "
                             f"links 'link<N>'; node {name!r} would collide"))
    for link in plan.links:
        for d in (link.forward, link.reverse):
            problems += _check_direction(d, on_lan=False)
        problems += _check_link(link)
    for lan in plan.lans:
        for port in lan.ports:
            for d in (port.to_lan, port.from_lan):
                problems += _check_direction(d, on_lan=True)
    prefix = plan.topology.addressing.link_prefix
    if prefix < MIN_PREFIX:
        problems.append(("addressing.link_prefix", f"/{prefix}; Emulab's netmasks are at least "
                         "255.255.0.0 (/16)"))
    return problems


def _netmask(prefixlen: int) -> str:
    """Dotted netmask of a prefix length."""
    return str(ipaddress.IPv4Network(f"0.0.0.0/{prefixlen}").netmask)


def _queue_lines(d: Direction) -> list[str]:
    """The queue settings of one direction: `[[$ns link $a $b] queue] set ...`."""
    q = d.queue
    if q is None:
        return []
    target = f"[[$ns link ${d.src} ${d.dst}] queue]"
    values = [("limit_", str(q.limit))]
    if q.red is not None:
        values += [("queue-in-bytes_", "0"), ("thresh_", str(q.red.min_th)),
                   ("maxthresh_", str(q.red.max_th)), ("q_weight_", _number(q.red.weight)),
                   ("linterm_", str(round(1 / q.red.max_p))),
                   ("gentle_", "1" if q.red.gentle else "0")]
    return [f"{target} set {key} {value}" for key, value in values]


def _same(a: Direction, b: Direction) -> bool:
    """True when both directions have the same bandwidth, delay and loss."""
    return (_bw(a), a.delay_ms(), a.params.loss) == (_bw(b), b.delay_ms(), b.params.loss)


def _link_lines(link: PointLink) -> list[str]:
    """A duplex link, its addresses, loss or per-direction parameters, and its queues."""
    fwd, rev = link.forward, link.reverse
    a, b, name = link.a, link.b, link.name
    lines = [f"# {a.node} -- {b.node}",
             f"set {name} [$ns duplex-link ${a.node} ${b.node} {_bw(fwd)} {_delay(fwd)} "
             f"{_discipline(fwd)}]",
             f"tb-set-ip-link ${a.node} ${name} {a.address.ip}",
             f"tb-set-ip-link ${b.node} ${name} {b.address.ip}"]
    if a.address.network.prefixlen != 24:
        lines.append(f"tb-set-netmask ${name} {_netmask(a.address.network.prefixlen)}")
    if not (fwd.shaped or rev.shaped):
        lines.append(f"tb-set-noshaping ${name} 1")
    elif _same(fwd, rev):
        if fwd.params.loss:
            lines.append(f"tb-set-link-loss ${name} {_number(fwd.params.loss)}")
    else:
        for d in (fwd, rev):
            lines.append(f"tb-set-link-simplex-params ${name} ${d.src} {_delay(d)} {_bw(d)} "
                         f"{_number(d.params.loss)}")
    for d in (fwd, rev):
        lines += _queue_lines(d)
    return lines


def _lan_lines(lan: Lan) -> list[str]:
    """A LAN, its addresses, and each port's per-direction parameters when shaped."""
    members = " ".join(f"${port.member.node}" for port in lan.ports)
    lines = [f"# LAN {lan.name}",
             f'set {lan.name} [$ns make-lan "{members}" {UNSHAPED_BW} 0ms]']
    for port in lan.ports:
        lines.append(f"tb-set-ip-lan ${port.member.node} ${lan.name} {port.member.address.ip}")
    if lan.prefixlen != 24:
        lines.append(f"tb-set-netmask ${lan.name} {_netmask(lan.prefixlen)}")
    if not any(d.shaped for port in lan.ports for d in (port.to_lan, port.from_lan)):
        lines.append(f"tb-set-noshaping ${lan.name} 1")
        return lines
    for port in lan.ports:
        to, back = port.to_lan, port.from_lan
        lines.append(f"tb-set-lan-simplex-params ${lan.name} ${port.member.node} "
                     f"{_delay(to)} {_bw(to)} {_number(to.params.loss)} "
                     f"{_delay(back)} {_bw(back)} {_number(back.params.loss)}")
    return lines


def render_ns(plan: ExportPlan, os_image: str = DEFAULT_OS,
              start_script: str | None = None) -> str:
    """The NS file of a plan; raises ExportRefused (naming every field) if Emulab cannot."""
    raise_refusals(plan, emulab_problems(plan), TESTBED)
    topo = plan.topology
    exp = plan.experiment or topo.name
    lines = [f"# Emulab NS file for the mcclab experiment {exp} (profile {plan.profile or '-'}),",
             f"# topology {topo.name}: {' '.join(topo.reference.split())}".rstrip(": "),
             "# Generated by 'mcclab export emulab'; regenerate rather than edit.",
             "# Link parameters are per direction: bandwidth, one-way delay, loss, queue.",
             "set ns [new Simulator]",
             "source tb_compat.tcl",
             "",
             f"# Hosts and routers ({len(plan.nodes)})"]
    for node in plan.nodes:
        lines += [f"set {node} [$ns node]", f"tb-set-node-os ${node} {os_image}"]
    lines += ["", f"# Links ({len(plan.links)})"]
    for link in plan.links:
        lines += _link_lines(link)
    if plan.lans:
        lines += ["", f"# LANs ({len(plan.lans)})"]
        for lan in plan.lans:
            lines += _lan_lines(lan)
    if start_script:
        lines += ["", "# Start commands: SCRIPT KIND NODE EXPERIMENT PROFILE (docs/testbeds.md)"]
        for node in plan.nodes:
            command = start_command(start_script, plan, node)
            lines.append(f'tb-set-node-startcmd ${node} "{command}"')
    lines += ["", "# Unicast routes: shortest paths, as mcclab's address plan on a tree",
              "$ns rtproto Static", "$ns run", ""]
    return "\n".join(lines)
