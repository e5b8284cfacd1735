"""Packet captures: ``mcclab capture`` and the captures an experiment names.

A capture of a link runs tcpdump on the link's interface inside one end's
namespace (the veth itself); a capture of a node runs it on all the node's
interfaces (``-i any``), leaving out the control network. ``--filter`` takes a
name (igmp, pim, routing, multicast, udp, tcp, all) or a raw BPF expression.

Besides the I/O (argv builders and a small process wrapper) this module holds a
sans-I/O decoder of IGMP (v1-v3, RFC 3376) and PIM-SM (RFC 7761) messages from
classic pcap files, so checks, tests and the report read the messages without a
dissector: :func:`read_pcap` and :func:`describe`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import struct
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.net.node_config import netns_name

FILTERS = {
    "igmp": "igmp",
    "pim": "pim",
    "routing": "igmp or pim",
    "multicast": "ip multicast",
    "udp": "udp",
    "tcp": "tcp",
    "all": "",
}


class CaptureError(ValueError):
    """A capture target or filter the topology does not have."""


@dataclass(frozen=True)
class Target:
    """Where to capture: a node's namespace and one interface (None: all of them)."""

    node: str
    iface: str | None
    label: str

    @property
    def netns(self) -> str:
        """The namespace tcpdump runs in."""
        return netns_name(self.node)


def parse_target(topo: Topology, plan: AddressPlan, text: str) -> Target:
    """A link ``a-b`` (or ``a:b``) or a node name of ``topo``."""
    sep = "-" if "-" in text else ":" if ":" in text else None
    if sep is None:
        if text not in topo.nodes:
            raise CaptureError(
                f"{text!r} is neither a node nor a link (NODE-NODE) of "
                f"{topo.name}; nodes: {', '.join(topo.nodes)}"
            )
        if topo.kind_of(text) == "lan":
            raise CaptureError(f"{text} is a LAN: capture on a link to it, e.g. NODE-{text}")
        return Target(text, None, text)
    a, _, b = text.partition(sep)
    for end in (a, b):
        if end not in topo.nodes:
            raise CaptureError(f"{text!r}: {end!r} is not a node of {topo.name}")
    if not any({a, b} == set(link.endpoints) for link in topo.links):
        raise CaptureError(f"{topo.name} has no link between {a} and {b}")
    if topo.kind_of(a) == "lan":  # a LAN's bridge has no namespace: capture at the other end
        a, b = b, a
    return Target(a, plan.iface_towards(a, b).name, f"{a}-{b}")


def bpf(filter_name: str, control: ipaddress.IPv4Network | None) -> str:
    """The BPF expression for a filter name (or a raw expression), without the control net."""
    base = FILTERS.get(filter_name, filter_name).strip()
    parts = [f"({base})"] if base else []
    if control is not None:
        parts.append(f"not net {control}")
    return " and ".join(parts)


def tcpdump_argv(target: Target, expression: str, out: Path) -> list[str]:
    """tcpdump writing every packet of ``target`` matching ``expression`` to ``out``.

    -U writes each packet as it comes (a capture stopped by a signal loses
    nothing); -Z root keeps the right to write ``out`` wherever it is.
    """
    argv = ["tcpdump", "-i", target.iface or "any", "-n", "-U", "-Z", "root", "-w", str(out)]
    return argv + ([expression] if expression else [])


def tshark_summary_argv(pcap: Path) -> list[str]:
    """tshark's one-line-per-packet decoded summary of a pcap."""
    return ["tshark", "-r", str(pcap), "-n"]


class Capture:
    """One tcpdump run in a namespace, in its own process group, stopped with SIGINT."""

    def __init__(self, target: Target, expression: str, out: Path):
        self.target, self.expression, self.out = target, expression, out
        self.log = out.with_suffix(".log")
        self.proc: subprocess.Popen | None = None

    def start(self, ready_timeout: float = 10.0) -> None:
        """Start tcpdump and wait until it listens (so no early packet is missed)."""
        self.out.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            "ip",
            "netns",
            "exec",
            self.target.netns,
            *tcpdump_argv(self.target, self.expression, self.out),
        ]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_listening(
            self.log, lambda: self.proc is not None and self.proc.poll() is None, ready_timeout
        )

    def stop(self, grace: float = 5.0) -> int:
        """Stop tcpdump (SIGINT: it flushes and closes the file); its exit status."""
        if self.proc is None:
            return 0
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            rc = self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()
        if rc == 0:  # tcpdump's own output only matters when it failed
            self.log.unlink(missing_ok=True)
        return rc


def wait_listening(log: Path, alive, timeout: float) -> None:  # noqa: ANN001
    """Wait for tcpdump's "listening on" line; raise with its output if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "listening on" in text:
            return
        if not alive():
            raise CaptureError(f"tcpdump did not start: {text.strip() or 'no output'}")
        time.sleep(0.05)
    raise CaptureError(f"tcpdump was not listening after {timeout:g} s")


def tshark_summary(pcap: Path, limit: int = 200) -> str:
    """tshark's decoded summary of ``pcap`` (its first ``limit`` lines)."""
    out = subprocess.run(
        tshark_summary_argv(pcap), capture_output=True, text=True, check=False, timeout=120
    )
    lines = (out.stdout or out.stderr).splitlines()
    extra = f"\n... {len(lines) - limit} more" if len(lines) > limit else ""
    return "\n".join(lines[:limit]) + extra


# ---- sans-I/O decoding of IGMP and PIM from pcap bytes ----

IGMP_V3_RECORDS = {1: "IS_IN", 2: "IS_EX", 3: "TO_IN", 4: "TO_EX", 5: "ALLOW", 6: "BLOCK"}
PIM_TYPES = {
    0: "hello",
    1: "register",
    2: "register-stop",
    3: "join/prune",
    4: "bootstrap",
    5: "assert",
    8: "candidate-rp",
}
# Link-layer header lengths and where the EtherType is (pcap LINKTYPE_* values).
_LINK = {1: (14, 12), 113: (16, 14), 276: (20, 0), 101: (0, None), 12: (0, None)}


@dataclass(frozen=True)
class Entry:
    """One (source, group) of a message: source '*' for (*,G), ``rpt`` for (S,G,rpt)."""

    group: str
    source: str = "*"
    rpt: bool = False

    def __str__(self) -> str:
        return f"({self.source},{self.group}{',rpt' if self.rpt else ''})"


@dataclass(frozen=True)
class Message:
    """One IGMP or PIM message read from a capture."""

    time: float  # seconds since the epoch (the capture's clock)
    src: str
    dst: str
    protocol: str  # IGMP or PIM
    kind: str  # query, report, leave; hello, join/prune, register, ...
    version: int = 0
    joins: tuple[Entry, ...] = ()  # PIM joins; IGMP: groups joined (or kept)
    prunes: tuple[Entry, ...] = ()  # PIM prunes; IGMP: groups left
    records: tuple[str, ...] = field(default=())  # IGMPv3 group records, as text

    def describe(self) -> str:
        """One line for a timeline."""
        what = (
            f"{self.protocol}v{self.version} {self.kind}"
            if self.version
            else f"{self.protocol} {self.kind}"
        )
        parts = []
        if self.records:
            parts.append("; ".join(self.records))
        elif self.kind == "query":
            parts.append(f"group {self.joins[0].group}" if self.joins else "general")
        elif self.kind != "join/prune" and (self.joins or self.prunes):
            # Registers and Register-Stops name one (S,G); they neither join nor prune.
            parts.append(" ".join(map(str, self.joins + self.prunes)))
        else:
            if self.joins:
                parts.append("join " + " ".join(map(str, self.joins)))
            if self.prunes:
                parts.append("prune " + " ".join(map(str, self.prunes)))
        return f"{self.src} > {self.dst} {what}" + (f": {', '.join(parts)}" if parts else "")


def _ip(raw: bytes) -> str:
    return str(ipaddress.IPv4Address(raw))


def packets(data: bytes) -> Iterable[tuple[float, bytes]]:
    """(timestamp, IPv4 packet) of each IPv4 frame of a classic pcap file."""
    if len(data) < 24:
        return
    magic = data[:4]
    endian, scale = {
        b"\xd4\xc3\xb2\xa1": ("<", 1e-6),
        b"\xa1\xb2\xc3\xd4": (">", 1e-6),
        b"\x4d\x3c\xb2\xa1": ("<", 1e-9),
        b"\xa1\xb2\x3c\x4d": (">", 1e-9),
    }.get(magic, (None, 0.0))
    if endian is None:
        raise ValueError("not a classic pcap file (tcpdump -w writes one)")
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0xFFFF
    if linktype not in _LINK:
        raise ValueError(f"pcap link type {linktype} is not supported")
    head, type_at = _LINK[linktype]
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack(endian + "IIII", data[pos : pos + 16])
        frame = data[pos + 16 : pos + 16 + incl]
        pos += 16 + incl
        if type_at is not None:
            if len(frame) < head:
                continue
            ethertype = struct.unpack("!H", frame[type_at : type_at + 2])[0]
            offset = head
            if linktype == 1 and ethertype == 0x8100 and len(frame) >= 18:
                ethertype, offset = struct.unpack("!H", frame[16:18])[0], 18
            if ethertype != 0x0800:
                continue
            frame = frame[offset:]
        if frame and frame[0] >> 4 == 4:
            yield sec + frac * scale, frame


def decode(ts: float, ip: bytes) -> Message | None:
    """The IGMP or PIM message in an IPv4 packet, or None (other protocols, truncated)."""
    if len(ip) < 20:
        return None
    ihl = (ip[0] & 0x0F) * 4
    total = struct.unpack("!H", ip[2:4])[0]
    proto, src, dst = ip[9], _ip(ip[12:16]), _ip(ip[16:20])
    body = ip[ihl:total] if total >= ihl else ip[ihl:]
    try:
        if proto == 2:
            return _igmp(ts, src, dst, body)
        if proto == 103:
            return _pim(ts, src, dst, body)
    except (struct.error, IndexError, ValueError):
        return None  # truncated or malformed: not one of the messages we count
    return None


def _igmp(ts: float, src: str, dst: str, b: bytes) -> Message | None:
    kind = b[0]
    if kind == 0x11:
        group = _ip(b[4:8])
        version = 3 if len(b) >= 12 else (2 if b[1] else 1)
        entries = (Entry(group),) if group != "0.0.0.0" else ()
        return Message(ts, src, dst, "IGMP", "query", version, joins=entries)
    if kind in (0x12, 0x16):
        return Message(
            ts, src, dst, "IGMP", "report", 1 if kind == 0x12 else 2, joins=(Entry(_ip(b[4:8])),)
        )
    if kind == 0x17:
        return Message(ts, src, dst, "IGMP", "leave", 2, prunes=(Entry(_ip(b[4:8])),))
    if kind != 0x22:
        return None
    count = struct.unpack("!H", b[6:8])[0]
    pos, joins, prunes, records = 8, [], [], []
    for _ in range(count):
        rtype, aux, nsrc = b[pos], b[pos + 1], struct.unpack("!H", b[pos + 2 : pos + 4])[0]
        group = _ip(b[pos + 4 : pos + 8])
        sources = [_ip(b[pos + 8 + 4 * i : pos + 12 + 4 * i]) for i in range(nsrc)]
        pos += 8 + 4 * nsrc + 4 * aux
        name = IGMP_V3_RECORDS.get(rtype, str(rtype))
        records.append(f"{name} {group}" + (f" [{', '.join(sources)}]" if sources else ""))
        # Joining: EXCLUDE modes (all sources) or sources to include; leaving: INCLUDE of
        # nothing, or sources blocked (RFC 3376 sec. 4.2.12).
        if rtype in (2, 4):
            joins.append(Entry(group))
        elif rtype in (1, 5) and sources:
            joins += [Entry(group, s) for s in sources]
        elif rtype == 3 and not sources:
            prunes.append(Entry(group))
        elif rtype == 6:
            prunes += [Entry(group, s) for s in sources]
    return Message(ts, src, dst, "IGMP", "report", 3, tuple(joins), tuple(prunes), tuple(records))


def _pim(ts: float, src: str, dst: str, b: bytes) -> Message | None:
    version, kind = b[0] >> 4, b[0] & 0x0F
    name = PIM_TYPES.get(kind, f"type-{kind}")
    if kind == 3:
        return _join_prune(ts, src, dst, b, version)
    if kind == 1 and len(b) >= 28:
        inner = b[8:]
        null = bool(struct.unpack("!I", b[4:8])[0] & 0x40000000)
        entry = Entry(_ip(inner[16:20]), _ip(inner[12:16]))
        return Message(
            ts, src, dst, "PIM", "null-register" if null else "register", version, joins=(entry,)
        )
    if kind == 2 and len(b) >= 18:
        return Message(
            ts, src, dst, "PIM", name, version, prunes=(Entry(_ip(b[8:12]), _ip(b[14:18])),)
        )
    return Message(ts, src, dst, "PIM", name, version)


def _join_prune(ts: float, src: str, dst: str, b: bytes, version: int) -> Message:
    pos = 4 + 6  # header, encoded-unicast upstream neighbour (IPv4)
    ngroups = b[pos + 1]
    pos += 4  # reserved, number of groups, holdtime
    joins, prunes = [], []
    for _ in range(ngroups):
        group = _ip(b[pos + 4 : pos + 8])
        njoin, nprune = struct.unpack("!HH", b[pos + 8 : pos + 12])
        pos += 12
        for i in range(njoin + nprune):
            flags, addr = b[pos + 2], _ip(b[pos + 4 : pos + 8])
            pos += 8
            wildcard, rpt = bool(flags & 0x02), bool(flags & 0x01)
            entry = Entry(group, "*" if wildcard else addr, rpt and not wildcard)
            (joins if i < njoin else prunes).append(entry)
    return Message(ts, src, dst, "PIM", "join/prune", version, tuple(joins), tuple(prunes))


def read_pcap(path: Path) -> list[Message]:
    """Every IGMP and PIM message in a pcap file, in capture order."""
    out = []
    for ts, ip in packets(path.read_bytes()):
        msg = decode(ts, ip)
        if msg is not None:
            out.append(msg)
    return out


def counts(messages: Iterable[Message]) -> Counter[str]:
    """How many of each: igmp-query, igmp-report, igmp-leave (a v2 leave or a v3 record
    leaving), pim-hello, pim-join, pim-prune (a join/prune message counts for each it
    carries), pim-register, ..."""
    c: Counter[str] = Counter()
    for m in messages:
        if m.protocol == "IGMP":
            c[f"igmp-{m.kind}"] += 1
            if m.kind == "report" and m.prunes:
                c["igmp-leave"] += 1
        elif m.kind == "join/prune":
            c["pim-join"] += bool(m.joins)
            c["pim-prune"] += bool(m.prunes)
        else:
            c[f"pim-{m.kind}"] += 1
    return c


def timeline(
    messages: list[Message], start: float | None = None, skip: Iterable[str] = ("hello", "query")
) -> list[tuple[float, str]]:
    """(seconds from ``start``, description) of each message, leaving out the periodic
    kinds in ``skip`` (hellos and general queries say nothing about joins)."""
    if not messages:
        return []
    t0 = messages[0].time if start is None else start
    skipped = set(skip)
    return [
        (m.time - t0, m.describe())
        for m in messages
        if not (m.kind in skipped and not (m.kind == "query" and m.joins))
    ]
