"""Fuzz every UDP port a running agent reads, through real sockets on loopback.

    python bench/fuzz_ports.py [--count 100000] [--protocols cbr stair ...] [--no-odd-peers]
                               [--host]

For each protocol, real agent processes (``python -m agents.run``; with ``--host``
each agent inside an agent host, ``python -m agents.host``) run on 127.0.0.1 and
the fuzzer sends them datagrams on every port they read:

* a receiver's member sockets (``data``): every channel it joined at start, by
  multicast on the loopback interface (TTL 1, ``IP_MULTICAST_IF`` 127.0.0.1);
* a receiver's feedback socket (``rx-feedback``, STAIR's probe echoes and ORMCC's
  ephemeral port): found from the first datagram the receiver sends to the
  session's feedback port, which the fuzzer holds;
* a sender's feedback port (``feedback``) for protocols with unicast feedback.

Each datagram is built as one category whose drop reason (or validity) is known
by construction: random bytes, truncated headers, one corrupted field (magic,
version, protocol, session, channel, flags, lengths, extension values the
protocol refuses, feedback bodies the core refuses), oversize, and valid traffic.
With ``odd_peers`` (needs root: a raw socket forges the IP/UDP header) valid
feedback also comes from UDP source port 0, a multicast source and a broadcast
source. The fuzzer sends in windows and waits until the agent's own counters
(``/metrics``: well-formed datagrams plus ``malformed_datagrams_total`` by
reason) account for the window, so no datagram is lost in a socket buffer. At
the end the agent must still be running, take a SIGTERM cleanly, and its stop
record's ``dropped`` must match its metrics.

Prints a table: protocol, port, datagrams sent, crashes, drops counted by
reason, drops the agent did not count, and kernel drops at the socket. The unit
test ``tests/unit/test_agent_fuzz_ports.py`` runs a shorter version; ``make
bench-fuzz`` runs this with 100,000 datagrams per port.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: import the repository's packages
    sys.path.insert(0, str(REPO))

from agents.runtime.feedback import FEEDBACK_MAGIC, FRAME, MAX_FEEDBACK_DATA  # noqa: E402
from agents.runtime.header import (  # noqa: E402
    FIXED,
    HEADER_LEN,
    MAGIC,
    MAX_DATAGRAM,
    MAX_EXT_LEN,
    Drop,
    Header,
    encode,
)
from agents.runtime.registry import ProtocolSpec, package, protocols  # noqa: E402
from agents.runtime.session import Session  # noqa: E402
from mcclab.probes.burst import internet_checksum  # noqa: E402

HOST = "127.0.0.1"
SESSION_ID = 0xF0221
VALID = "valid"  # the category of well-formed traffic (not a drop reason)
WINDOW = 200  # datagrams per window before waiting for the agent's counters
# and at most this much (kernel memory, 1 KiB a datagram more than its size) in flight per
# window: a feedback socket has the default receive buffer (rmem_default, 208 KiB here),
# a member socket asks for 4 MiB
WINDOW_BYTES = {"feedback": 120_000, "data": 2_000_000}
OVERSIZE = 0.005  # share of bad datagrams of the largest UDP size
WAIT = 20.0  # seconds a window may take before the port is given up on
_U32 = (1 << 32) - 1


# --------------------------------------------------------------------------- datagrams

@dataclass
class Gen:
    """What the datagram builders need to know about one session."""

    spec: ProtocolSpec
    session: Session
    rng: random.Random
    seq: dict[int, int] = field(default_factory=dict)  # next sequence number per channel
    probe: int = 0
    # the agent's clock in ns (CLOCK_MONOTONIC in a lab; a simulator's time in tests)
    now_ns: Callable[[], int] = time.monotonic_ns

    @property
    def n_channels(self) -> int:
        return len(self.session.channels)


def hook(spec: ProtocolSpec, name: str) -> Any:
    """The protocol's fuzzing hook ``name`` from ``<package>.fuzz``, or None.

    The hooks (all optional; ``g`` is a :class:`Gen`):

    * ``PARAMS``: parameters to override in the example ones (None removes one);
    * ``valid_ext(g, channel)``: an extension the receiver accepts on ``channel``
      (default: the extension's example);
    * ``refused_ext(g, channel)``: extension bytes of the right size the protocol
      refuses on ``channel`` (its decoder's check or its core);
    * ``layer(ext)``: what of an extension must match the channel's (the core refuses
      a datagram whose extension names another layer);
    * ``provoke_feedback(g, send, data)``: make a fresh receiver send feedback
      (``send(payload, channel)``, ``data(g, channel)`` the next valid datagram);
    * ``feedback_valid_body(g, role)``: a feedback body the role's core accepts;
    * ``feedback_refused(g, role)``: makers of bodies the core refuses;
    * ``not_accepted(g, role, body)``: ``body`` changed so that the core refuses it.
    """
    try:
        module = f"{package(spec.name)}.fuzz"
    except KeyError:  # registered by hand: no package, no hooks
        return None
    if importlib.util.find_spec(module) is None:
        return None
    return getattr(importlib.import_module(module), name, None)


def valid_ext(g: Gen, channel: int) -> Any:
    """An extension value the protocol's receiver accepts on ``channel``."""
    make = hook(g.spec, "valid_ext")
    return make(g, channel) if make else g.spec.extension.example()


def refused_ext(g: Gen, channel: int) -> bytes | None:
    """Extension bytes of the right size that the protocol refuses on ``channel`` (its
    decoder's check or its core), or None when every value is acceptable."""
    make = hook(g.spec, "refused_ext")
    return make(g, channel) if make else None


def data_valid(g: Gen, channel: int, size: int | None = None) -> bytes:
    """The next in-sequence datagram of ``channel`` (no gap: no loss reaction)."""
    seq = g.seq.get(channel, 0)
    ext = valid_ext(g, channel)
    g.seq[channel] = (seq + 1) & _U32
    if size is None:
        size = g.rng.choice([0, HEADER_LEN + g.spec.extension.max_len, 100, 512, 1400])
    header = Header(g.spec.protocol_id, g.session.session_id, channel, seq, g.now_ns(), 0, ext)
    return encode(header, g.spec.extension, size)


def _fixed(g: Gen, arrival: int, **fields: int) -> bytes:
    """A header of channel ``arrival`` with ``fields`` overridden (the extension follows)."""
    values = {"magic": MAGIC, "version": 1, "proto": g.spec.protocol_id,
              "session": g.session.session_id, "channel": arrival, "flags": 0,
              "ext_len": g.spec.extension.max_len, "seq": g.rng.getrandbits(32),
              "send_ns": g.now_ns()}
    values.update(fields)
    return FIXED.pack(*values.values())


def data_bad(g: Gen, channel: int) -> tuple[bytes, str]:
    """One malformed datagram for ``channel`` and the reason it must be dropped for."""
    rng, spec = g.rng, g.spec
    ext = spec.extension.encode(valid_ext(g, channel)) if spec.extension.max_len else b""
    pad = bytes(rng.choice([0, 0, 10, 500]))
    kinds = ["short", "short_trunc", "magic", "magic_random", "version", "protocol", "session",
             "channel", "flags", "ext_length", "ext_past_end"]
    if spec.extension.max_len:
        kinds += ["ext_size", "ext_value", "ext_value"]
    kind = "oversize_random" if rng.random() < OVERSIZE else rng.choice(kinds)
    if kind == "short":
        return rng.randbytes(rng.randrange(HEADER_LEN)), Drop.SHORT
    if kind == "short_trunc":
        return _fixed(g, channel)[:rng.randrange(HEADER_LEN)], Drop.SHORT
    if kind == "magic":
        magic = rng.choice([m for m in (0, 0x4D44, 0x434D, 0xFFFF, 0x4E43)])
        return _fixed(g, channel, magic=magic) + ext + pad, Drop.MAGIC
    if kind == "magic_random":
        data = bytearray(rng.randbytes(rng.randrange(HEADER_LEN, 300)))
        data[0] = rng.choice([b for b in range(256) if b != MAGIC >> 8][:40])
        return bytes(data), Drop.MAGIC
    if kind == "oversize_random":
        data = bytearray(rng.randbytes(MAX_DATAGRAM))
        data[0] = 0
        return bytes(data), Drop.MAGIC
    if kind == "version":
        return _fixed(g, channel, version=rng.choice([0, 2, 255])) + ext + pad, Drop.VERSION
    if kind == "protocol":
        other = rng.choice([p for p in range(256) if p != spec.protocol_id][:20])
        return _fixed(g, channel, proto=other) + ext + pad, Drop.PROTOCOL
    if kind == "session":
        other = (g.session.session_id + 1 + rng.getrandbits(31)) & _U32
        return _fixed(g, channel, session=other) + ext + pad, Drop.SESSION
    if kind == "channel":
        choices = [c for c in range(g.n_channels) if c != channel]
        other = rng.choice(choices + [g.n_channels, g.n_channels + 7, 0xFFFF])
        return _fixed(g, channel, channel=other) + ext + pad, Drop.CHANNEL
    if kind == "flags":
        allowed = spec.flags
        bad = rng.choice([f for f in range(1, 256) if f & ~allowed])
        return _fixed(g, channel, flags=bad) + ext + pad, Drop.FLAGS
    if kind == "ext_length":
        top = spec.extension.max_len
        ext_len = rng.randrange(top + 1, 256)
        return _fixed(g, channel, ext_len=ext_len) + bytes(ext_len), Drop.EXT_LENGTH
    if kind == "ext_past_end":
        ext_len = spec.extension.max_len or 1
        if ext_len > spec.extension.max_len:  # no extension: any length is too long
            return _fixed(g, channel, ext_len=ext_len), Drop.EXT_LENGTH
        return _fixed(g, channel) + ext[:rng.randrange(len(ext))], Drop.EXT_LENGTH
    if kind == "ext_size":  # shorter than the protocol's struct: its decoder refuses
        ext_len = rng.randrange(1, spec.extension.max_len)
        return _fixed(g, channel, ext_len=ext_len) + ext[:ext_len] + pad, Drop.EXTENSION
    bad_ext = refused_ext(g, channel)
    assert bad_ext is not None and len(bad_ext) == spec.extension.max_len <= MAX_EXT_LEN
    return _fixed(g, channel) + bad_ext + pad, Drop.EXTENSION


def frame(g: Gen, body: bytes, **fields: Any) -> bytes:
    """A feedback frame around ``body`` with ``fields`` of the frame overridden."""
    values = {"magic": FEEDBACK_MAGIC, "version": 1, "proto": g.spec.protocol_id,
              "reserved": 0, "session": g.session.session_id}
    values.update(fields)
    return FRAME.pack(*values.values()) + body


def feedback_valid_body(g: Gen, role: str) -> bytes | None:
    """A body the ``role``'s core accepts (None: it accepts none)."""
    make = hook(g.spec, "feedback_valid_body")
    return make(g, role) if make else None


def feedback_refused_body(g: Gen, role: str) -> bytes:
    """A body the ``role``'s core refuses (a counted ``feedback`` drop)."""
    rng = g.rng
    choices: list[Callable[[], bytes]] = [
        lambda: rng.randbytes(rng.randrange(0, MAX_FEEDBACK_DATA + 1)),
        lambda: b"",
    ]
    refused = hook(g.spec, "feedback_refused")
    if refused:
        choices += refused(g, role)
    body = rng.choice(choices)()
    # a random body that happens to be a message the core accepts is made not to be
    fix = hook(g.spec, "not_accepted")
    return fix(g, role, body) if fix else body


def feedback_bad(g: Gen, role: str) -> tuple[bytes, str]:
    """One malformed feedback datagram and its drop reason."""
    rng = g.rng
    body = feedback_valid_body(g, role) or b"\x00" * 16
    kind = "oversize_max" if rng.random() < OVERSIZE else rng.choice(
        ["short", "short_trunc", "magic", "magic_random", "version", "reserved", "protocol",
         "session", "oversize", "refused", "refused"])
    if kind == "short":
        return rng.randbytes(rng.randrange(FRAME.size)), Drop.SHORT
    if kind == "short_trunc":
        return frame(g, body)[:rng.randrange(FRAME.size)], Drop.SHORT
    if kind == "magic":
        return frame(g, body, magic=rng.choice([b"MCFA", b"mcfb", b"\0\0\0\0", b"BFCM"])), \
            Drop.MAGIC
    if kind == "magic_random":
        data = bytearray(rng.randbytes(rng.randrange(FRAME.size, 600)))
        data[0] = 0
        return bytes(data), Drop.MAGIC
    if kind == "version":
        return frame(g, body, version=rng.choice([0, 2, 255])), Drop.VERSION
    if kind == "reserved":
        return frame(g, body, reserved=rng.randrange(1, 1 << 16)), Drop.VERSION
    if kind == "protocol":
        other = rng.choice([p for p in range(256) if p != g.spec.protocol_id][:20])
        return frame(g, body, proto=other), Drop.PROTOCOL
    if kind == "session":
        other = (g.session.session_id + 1 + rng.getrandbits(31)) & _U32
        return frame(g, body, session=other), Drop.SESSION
    if kind == "oversize":
        return frame(g, body + bytes(MAX_FEEDBACK_DATA + 1 - len(body) + rng.randrange(100))), \
            Drop.EXT_LENGTH
    if kind == "oversize_max":
        return frame(g, bytes(MAX_DATAGRAM - FRAME.size)), Drop.EXT_LENGTH
    return frame(g, feedback_refused_body(g, role)), Drop.FEEDBACK


# --------------------------------------------------------------------------- odd peers

def forged(payload: bytes, src: str, sport: int, dst: str, dport: int) -> bytes:
    """An IPv4/UDP packet from ``src:sport`` (UDP checksum 0: none, allowed over IPv4)."""
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    return ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:] + udp


# (source address, source port, the runtime's verdict) of valid feedback from odd peers
ODD_PEERS = [("127.0.0.1", 0, Drop.PEER), ("224.1.2.3", 4000, Drop.PEER),
             ("255.255.255.255", 4000, Drop.PEER), ("127.255.255.255", 4000, VALID)]


# --------------------------------------------------------------------------- the agent

def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def make_session(name: str, role: str, feedback_port: int, base_port: int) -> Session:
    """A loopback session of protocol ``name`` (its example parameters)."""
    spec = protocols()[name]
    params = {**spec.example_params, **(hook(spec, "PARAMS") or {})}
    params = {k: v for k, v in params.items() if v is not None}
    count = 3 if spec.channels is None else spec.channels(spec.params(**params))
    salt = base_port % 200
    channels = [{"group": f"239.255.{salt}.{i + 1}", "port": base_port} for i in range(count)]
    return Session.model_validate({
        "protocol": name, "flow": "fuzz", "session_id": SESSION_ID, "source": HOST, "ttl": 1,
        "channels": channels, "params": params, "feedback_port": feedback_port,
        "nodes": {"n": {"address": HOST}}})


@dataclass
class Agent:
    """One agent process and what it exposes."""

    proc: subprocess.Popen[str]
    metrics_url: str
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def scrape(self) -> dict[str, float]:
        """Counter values by name (``malformed:<reason>`` for the drop counter)."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as reply:
            text = reply.read().decode()
        return parse_counters(text)

    def records(self, event: str) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [r for r in map(json.loads, lines) if r["event"] == event]

    def stop(self) -> int | None:
        """SIGTERM; the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


_COUNTER = re.compile(r'^mcc_agent_([a-z_]+)_total\{([^}]*)\} (\S+)$', re.M)
_REASON = re.compile(r'reason="([a-z_]+)"')


def parse_counters(text: str) -> dict[str, float]:
    """The agent's ``mcc_agent_*_total`` counters in exposition ``text``, by name without
    prefix and suffix (``malformed:<reason>`` for the drop counter). A regular expression,
    not prometheus_client's parser: the fuzzer scrapes after every window, and the full
    parser took most of its time."""
    out: dict[str, float] = {}
    for name, labels, value in _COUNTER.findall(text):
        if name == "malformed_datagrams":
            reason = _REASON.search(labels)
            name = f"malformed:{reason.group(1) if reason else '?'}"
        out[name] = float(value)
    return out


def launch(session: Session, role: str, workdir: Path, host: bool = False) -> Agent:
    """Start ``python -m agents.run`` (or, with ``host``, the agent alone in an agent host,
    ``python -m agents.host``) and wait for its ready line."""
    path = workdir / f"{session.protocol}-{role}.json"
    path.write_text(session.model_dump_json())
    log = workdir / f"{session.protocol}-{role}.jsonl"
    port = free_port()
    argv = [sys.executable, "-m", "agents.run", role, "--session", str(path), "--node", "n",
            "--log", str(log), "--metrics", f"{HOST}:{port}"]
    if host:
        plan = workdir / f"{session.protocol}-{role}-host.json"
        plan.write_text(json.dumps({"name": "fuzz", "agents": [
            {"role": role, "node": "n", "session": str(path), "log": str(log)}]}))
        argv = [sys.executable, "-m", "agents.host", "--plan", str(plan), "--metrics",
                f"{HOST}:{port}"]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.wait(10)
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"{session.protocol} {role} did not start: {err}")
    return Agent(proc, f"http://{HOST}:{port}/metrics", log)


def kernel_drops(local: tuple[str, int]) -> int:
    """Datagrams the kernel dropped at the UDP socket bound to ``local`` (/proc/net/udp)."""
    addr = socket.inet_aton(local[0])[::-1].hex().upper()
    want = f"{addr}:{local[1]:04X}"
    total = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[1] == want:
                total += int(cols[-1])
    return total


# --------------------------------------------------------------------------- one port

@dataclass
class PortResult:
    """The outcome of fuzzing one port of one agent."""

    protocol: str
    port: str
    sent: int = 0
    expected: Counter[str] = field(default_factory=Counter)  # by reason, and VALID
    counted: Counter[str] = field(default_factory=Counter)  # the agent's deltas
    crashes: int = 0
    kernel_drops: int = 0
    replies: int = 0  # datagrams the agent answered with (STAIR echoes)
    send_errors: int = 0
    error: str = ""

    @property
    def uncounted(self) -> int:
        """Bad datagrams the agent did not count under the reason they were sent for."""
        return sum(max(0, n - self.counted.get(r, 0)) for r, n in self.expected.items()
                   if r != VALID)


def _counted(before: dict[str, float], after: dict[str, float], valid_key: str
             ) -> Counter[str]:
    out: Counter[str] = Counter()
    for key, value in after.items():
        delta = int(value - before.get(key, 0.0))
        if key.startswith("malformed:") and delta:
            out[key.split(":", 1)[1]] = delta
    out[VALID] = int(after.get(valid_key, 0.0) - before.get(valid_key, 0.0))
    return out


def fuzz_port(agent: Agent, result: PortResult, datagrams: Iterator[tuple[bytes, str, Any]],
              send: Callable[[bytes, Any], None], valid_key: str,
              local: tuple[str, int] | None, drain: Callable[[], int] | None = None,
              window_bytes_max: int = WINDOW_BYTES["feedback"]) -> None:
    """Send ``datagrams`` (data, expected reason or VALID, destination) in windows, waiting
    after each until the agent's counters account for all of it."""
    base = agent.scrape()
    drops_before = kernel_drops(local) if local else 0
    window: list[str] = []
    window_bytes = 0
    done = 0

    def settle() -> bool:
        nonlocal done
        target = done + len(window)
        deadline = time.monotonic() + WAIT
        while True:
            if drain is not None:
                result.replies += drain()
            if not agent.alive():
                result.crashes += 1
                result.error = (agent.proc.stderr.read() if agent.proc.stderr else "")[-2000:]
                return False
            try:
                now = agent.scrape()
            except OSError:  # it died while answering: the next round says so
                time.sleep(0.05)
                continue
            seen = _counted(base, now, valid_key)
            if sum(seen.values()) >= target:
                done = target
                return True
            if time.monotonic() > deadline:
                result.error = f"agent accounted for {sum(seen.values())} of {target} datagrams"
                return False
            time.sleep(0.002)

    for data, reason, dest in datagrams:
        send(data, dest)
        result.sent += 1
        result.expected[reason] += 1
        window.append(reason)
        window_bytes += len(data) + 1024
        if len(window) >= WINDOW or window_bytes >= window_bytes_max:
            if not settle():
                break
            window.clear()
            window_bytes = 0
    else:
        if window:
            settle()
    time.sleep(0.05)
    if drain is not None:
        result.replies += drain()
    with contextlib.suppress(OSError):
        after = agent.scrape()
        result.counted = _counted(base, after, valid_key)
        result.send_errors = int(after.get("send_errors", 0) - base.get("send_errors", 0))
    if local:
        result.kernel_drops = kernel_drops(local) - drops_before


# --------------------------------------------------------------------------- per protocol

def fuzz_protocol(name: str, count: int, odd_peers: bool, workdir: Path, seed: int = 1,
                  host: bool = False) -> list[PortResult]:
    """Fuzz every port of ``name``'s receiver and (with feedback) sender; ``count``
    datagrams per port. With ``host`` each agent runs inside an agent host."""
    spec = protocols()[name]
    results = [*_fuzz_receiver(spec, count, odd_peers, workdir, seed, host)]
    if spec.feedback:
        results.append(_fuzz_sender(spec, count, odd_peers, workdir, seed, host))
    return results


def _fuzz_receiver(spec: ProtocolSpec, count: int, odd_peers: bool, workdir: Path, seed: int,
                   host: bool = False) -> list[PortResult]:
    hold = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # the session's feedback port
    hold.bind((HOST, 0))
    hold.settimeout(5.0)
    session = make_session(spec.name, "receiver", hold.getsockname()[1],
                           free_port(socket.SOCK_DGRAM))
    g = Gen(spec, session, random.Random(seed))
    agent = launch(session, "receiver", workdir, host)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    out.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(HOST))
    out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    results: list[PortResult] = []
    try:
        channels = [r["channel"] for r in agent.records("join")]
        fb_peer = None
        if spec.feedback:  # make the receiver open its feedback socket, and learn its port
            provoke = hook(spec, "provoke_feedback")
            if provoke:
                def to_channel(payload: bytes, channel: int) -> None:
                    chan = session.channels[channel]
                    out.sendto(payload, (str(chan.group), chan.port))
                provoke(g, to_channel, data_valid)
            _, fb_peer = hold.recvfrom(65536)
        data = PortResult(spec.name, f"receiver data ({len(channels)} ch)")

        def to_group(payload: bytes, channel: int) -> None:
            chan = session.channels[channel]
            out.sendto(payload, (str(chan.group), chan.port))

        def data_datagram() -> tuple[bytes, str, int]:
            ch = g.rng.choice(channels)
            if g.rng.random() < 0.25:
                if g.rng.random() < OVERSIZE:
                    return data_valid(g, ch, MAX_DATAGRAM), VALID, ch
                return data_valid(g, ch), VALID, ch
            payload, reason = data_bad(g, ch)
            return payload, reason, ch

        stream = (data_datagram() for _ in range(count))
        fuzz_port(agent, data, stream, to_group, "packets_received", None,
                  window_bytes_max=WINDOW_BYTES["data"])
        left = [r["channel"] for r in agent.records("leave")]
        if set(left) & set(channels):
            data.error = f"the receiver left channels {sorted(set(left) & set(channels))}"
        data.kernel_drops = sum(kernel_drops((str(session.channels[c].group),
                                              session.channels[c].port)) for c in channels)
        results.append(data)
        if fb_peer is not None:
            results.append(_fuzz_feedback(agent, g, "receiver", fb_peer, count, odd_peers,
                                          hold, f"receiver feedback (:{fb_peer[1]})"))
        _finish(agent, results)
    finally:
        agent.stop()
        out.close()
        hold.close()
    return results


def _fuzz_sender(spec: ProtocolSpec, count: int, odd_peers: bool, workdir: Path, seed: int,
                 host: bool = False) -> PortResult:
    port = free_port(socket.SOCK_DGRAM)
    session = make_session(spec.name, "sender", port, free_port(socket.SOCK_DGRAM))
    g = Gen(spec, session, random.Random(seed + 1))
    agent = launch(session, "sender", workdir, host)
    me = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # the "receiver": gets the echoes
    me.bind((HOST, 0))
    me.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    try:
        result = _fuzz_feedback(agent, g, "sender", (HOST, port), count, odd_peers, me,
                                f"sender feedback (:{port})")
        _finish(agent, [result])
    finally:
        agent.stop()
        me.close()
    return result


def _fuzz_feedback(agent: Agent, g: Gen, role: str, dest: tuple[str, int], count: int,
                   odd_peers: bool, me: socket.socket, label: str) -> PortResult:
    """Fuzz the feedback socket at ``dest`` of ``agent`` (whose core has ``role``)."""
    result = PortResult(g.spec.name, label)
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW) if odd_peers \
        else None
    me.setblocking(False)

    def send(payload: bytes, peer: tuple[str, int] | None) -> None:
        if peer is None:
            me.sendto(payload, dest)
        else:
            assert raw is not None
            raw.sendto(forged(payload, peer[0], peer[1], dest[0], dest[1]), (dest[0], 0))

    def datagram() -> tuple[bytes, str, tuple[str, int] | None]:
        body = feedback_valid_body(g, role)
        roll = g.rng.random()
        if body is not None and roll < 0.25:
            return frame(g, body), VALID, None
        if body is not None and odd_peers and roll < 0.30:
            src, sport, verdict = g.rng.choice(ODD_PEERS)
            return frame(g, body), verdict, (src, sport)
        payload, reason = feedback_bad(g, role)
        return payload, reason, None

    def drain() -> int:
        n = 0
        with contextlib.suppress(BlockingIOError):
            while True:
                me.recv(65536)
                n += 1
        return n

    try:
        stream = (datagram() for _ in range(count))
        fuzz_port(agent, result, stream, send, "feedback_received", dest, drain)
    finally:
        if raw is not None:
            raw.close()
    return result


def _finish(agent: Agent, results: list[PortResult]) -> None:
    """Stop the agent; a dirty exit is a crash, and its stop record must match /metrics."""
    if not agent.alive():
        return
    last = agent.scrape()
    status = agent.stop()
    if status != 0:
        results[-1].crashes += 1
        results[-1].error = f"exit status {status}"
        return
    stop = agent.records("stop")
    dropped = {k.split(":", 1)[1]: int(v) for k, v in last.items()
               if k.startswith("malformed:") and v}
    if not stop or stop[-1].get("dropped") != dropped:
        results[-1].error = f"stop record {stop[-1:]} does not match /metrics {dropped}"


# --------------------------------------------------------------------------- report

def table(results: list[PortResult]) -> str:
    """The results as a Markdown table."""
    head = ("| protocol | port | datagrams sent | crashes | valid processed | "
            "drops counted by reason | uncounted drops | kernel drops |")
    rows = [head, "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in results:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(r.counted.items()) if k != VALID)
        valid = f"{r.counted.get(VALID, 0)}/{r.expected.get(VALID, 0)}"
        if r.replies:
            valid += f" ({r.replies} datagrams from the agent)"
        rows.append(f"| {r.protocol} | {r.port} | {r.sent} | {r.crashes} | {valid} | "
                    f"{reasons} | {r.uncounted} | {r.kernel_drops} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="datagrams per port")
    parser.add_argument("--protocols", nargs="*", default=sorted(protocols()))
    parser.add_argument("--no-odd-peers", action="store_true",
                        help="no forged sources (the raw socket needs root)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--host", action="store_true",
                        help="each agent inside an agent host (agents.host)")
    args = parser.parse_args(argv)
    odd = not args.no_odd_peers
    if odd and os.geteuid() != 0:
        print("fuzz_ports: forged sources need root (or pass --no-odd-peers)", file=sys.stderr)
        return 2
    results: list[PortResult] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mcclab-fuzz-") as tmp:
        for name in args.protocols:
            t0 = time.monotonic()
            got = fuzz_protocol(name, args.count, odd, Path(tmp), args.seed, args.host)
            results += got
            print(f"{name}: {sum(r.sent for r in got)} datagrams in "
                  f"{time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    print(table(results))
    print(f"\n{sum(r.sent for r in results)} datagrams in {time.monotonic() - started:.0f} s")
    bad = [r for r in results if r.crashes or r.uncounted or r.error or r.kernel_drops
           or r.counted != r.expected]
    for r in bad:
        print(f"FAIL {r.protocol} {r.port}: expected {dict(r.expected)}, counted "
              f"{dict(r.counted)} {r.error}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
