"""Every on/off UDP source and sink of a run in one process, on one event loop.

    python -m mcclab.traffic.onoff_host --plan PLAN [--t0 T] [--duration S]

A source and a sink process per flow (:mod:`mcclab.traffic.udp_onoff`) are each
woken for every datagram: ORMCC's Table II, with 168 flows, is 336 such processes.
The host runs them all on one :class:`~agents.runtime.loop.EventLoop`. Each socket
is made inside its own node's network namespace (``setns`` only for the creation,
as agent hosts do), so the datagrams take the same paths. Each flow keeps its own
state (:class:`~mcclab.traffic.udp_onoff.SourceState`,
:class:`~mcclab.traffic.udp_onoff.SinkState`) and writes the same records, to the
same log files, as the one-flow command.

The plan (JSON, every key checked)::

    {"name": "onoff-host",
     "sinks": [{"flow": "o1", "node": "d1", "netns": "/run/netns/mcl-d1",
                "bind": "10.0.1.2", "port": 5202, "log": "logs/o1-sink-d1.jsonl"}],
     "sources": [{"flow": "o1", "node": "s1", "netns": "/run/netns/mcl-s1",
                  "dest": "10.0.1.2", "port": 5202, "rate_bps": 200000, "size": 1000,
                  "schedule": "sessions/o1.onoff.json",
                  "log": "logs/o1-source-s1.jsonl"}]}

Every sink binds and writes its first ``stats`` record before any source starts;
then the host prints ``{"event": "ready", ...}``. A source starts at time 0
(``--t0``, CLOCK_MONOTONIC; default: the host's start) plus its schedule's
``origin_s``, or at once if that has passed, and skips what was due before it
began, as ``udp_onoff send --t0`` does. The host stops on SIGTERM/SIGINT or after
``--duration``: each sink writes its last ``stats`` record and each started source
its ``done`` record. Exit status: 0, 1 when a socket could not be made (the flows
already made are stopped cleanly), 2 for a bad command line or plan.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.host import raise_fd_limit, take_agents_share
from agents.runtime.loop import EventLoop
from mcclab.traffic.udp_onoff import (
    SEQ,
    SinkState,
    SourceState,
    read_schedule,
    schedule_origin,
    write_record,
)

NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
RECV_BUFFER = 65536


class _FlowEnd(BaseModel):
    """What a sink and a source share: the flow, the node and its namespace, the port,
    the log."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flow: str
    node: str = Field(pattern=NAME_PATTERN)
    netns: str | None = Field(None, description="the node's namespace file (null: the host's)")
    port: int = Field(ge=1, le=65535)
    log: Path


class SinkPlan(_FlowEnd):
    """One sink: what ``udp_onoff recv`` takes, and its node's namespace."""

    bind: str


class SourcePlan(_FlowEnd):
    """One source: what ``udp_onoff send`` takes, and its node's namespace."""

    dest: str
    rate_bps: float = Field(gt=0)
    size: int = Field(ge=SEQ.size, le=65507)
    schedule: Path


class OnOffPlan(BaseModel):
    """Every sink and source one host runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    sinks: list[SinkPlan] = Field(default_factory=list)
    sources: list[SourcePlan] = Field(default_factory=list)

    @model_validator(mode="after")
    def _distinct(self) -> OnOffPlan:
        if not self.sinks and not self.sources:
            raise ValueError("no sinks and no sources")
        seen: dict[Path, str] = {}
        for kind, entries in (("sinks", self.sinks), ("sources", self.sources)):
            for i, entry in enumerate(entries):
                where = f"{kind}[{i}]"
                other = seen.setdefault(entry.log, where)
                if other != where:
                    raise ValueError(f"{where}.log: {entry.log} is {other}'s log too")
        return self


class NamespaceOpener(Protocol):
    """Where sockets are made: :class:`mcclab.net.setns.Namespaces`, or a fake in tests."""

    def inside(self, path: str | None) -> contextlib.AbstractContextManager[None]: ...


class _Here:
    """Every socket in the host's own namespace (plans whose entries name none)."""

    @contextlib.contextmanager
    def inside(self, path: str | None) -> Iterator[None]:
        if path is not None:
            raise OSError(f"no namespace support to enter {path}")
        yield


class _Sink:
    """A sink's socket, log and counts."""

    def __init__(self, plan: SinkPlan, sock: socket.socket, log: IO[str], now: float):
        self.plan = plan
        self.sock = sock
        self.log = log
        self.state = SinkState(now)
        self.timer: Any = None


class _Source:
    """A source's socket, log and schedule; ``state`` is set when it starts."""

    def __init__(self, plan: SourcePlan, sock: socket.socket, periods: list[tuple[float, float]],
                 origin_s: float):
        self.plan = plan
        self.sock = sock
        self.periods = periods
        self.origin_s = origin_s
        self.log: IO[str] | None = None
        self.state: SourceState | None = None
        self.timer: Any = None  # the next datagram's (one per source: not one per datagram)
        self.finished = False


class OnOffHost:
    """The plan's sinks and sources on one loop.

    ``loop`` has ``now()``, ``call_at(when, fn)`` and ``add_reader``/``remove_reader``
    (an :class:`EventLoop`); ``namespaces`` makes each socket in its node's namespace.
    """

    def __init__(self, plan: OnOffPlan, loop: Any, namespaces: NamespaceOpener | None = None):
        self.plan = plan
        self.loop = loop
        self.namespaces = namespaces or _Here()
        self.sinks: list[_Sink] = []
        self.sources: list[_Source] = []
        self._timers: list[Any] = []

    def open(self) -> None:
        """Read every schedule, make every socket, bind the sinks and write their first
        records. Raises OSError or ValueError (what was made is closed by :meth:`stop`)."""
        schedules = {s.schedule: (read_schedule(str(s.schedule)),
                                  schedule_origin(str(s.schedule)))
                     for s in self.plan.sources}
        for plan in self.plan.sinks:
            with self.namespaces.inside(plan.netns):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                sock.bind((plan.bind, plan.port))
                sock.setblocking(False)
                plan.log.parent.mkdir(parents=True, exist_ok=True)
                log = plan.log.open("a")
            except OSError:
                sock.close()
                raise
            sink = _Sink(plan, sock, log, self.loop.now())
            self.sinks.append(sink)
            write_record(log, sink.state.stats(sink.state.last_t))
            self.loop.add_reader(sock, lambda s=sink: self._receive(s))
            self._stats_at(sink)
        for plan in self.plan.sources:
            with self.namespaces.inside(plan.netns):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sources.append(_Source(plan, sock, *schedules[plan.schedule]))
            sock.connect((plan.dest, plan.port))
            sock.setblocking(False)

    def schedule(self, t0: float) -> None:
        """Start each source at ``t0`` plus its schedule's origin (at once if passed)."""
        now = self.loop.now()
        for source in self.sources:
            at = t0 + source.origin_s
            if at <= now:
                self._begin(source, at)
            else:
                self._timers.append(self.loop.call_at(at, lambda s=source, a=at:
                                                      self._begin(s, a)))

    def _begin(self, source: _Source, start: float) -> None:
        """Open the source's log, as a started ``udp_onoff send --t0`` process does."""
        plan = source.plan
        plan.log.parent.mkdir(parents=True, exist_ok=True)
        source.log = plan.log.open("a")
        source.state = SourceState(source.periods, plan.rate_bps, plan.size, start,
                                   self.loop.now())
        write_record(source.log, source.state.start_record())
        self._send(source)

    def _send(self, source: _Source) -> None:
        """Send every datagram due by now (late ones at once, as the command does), then
        wait for the next one."""
        state = source.state
        assert state is not None
        now = self.loop.now()
        while (due := state.next_due()) is not None:
            if due > now:
                source.timer = self.loop.call_at(due, lambda: self._fire(source))
                return
            self._one(source, state)
        self._finish(source)

    def _fire(self, source: _Source) -> None:
        """The datagram this timer was set for, then the following ones."""
        assert source.state is not None
        self._one(source, source.state)
        self._send(source)

    @staticmethod
    def _one(source: _Source, state: SourceState) -> None:
        try:
            source.sock.send(state.datagram())
        except OSError:  # ICMP unreachable from an earlier packet, ENOBUFS, EAGAIN
            state.refused()

    def _finish(self, source: _Source) -> None:
        """The schedule is over (or the host stops): the ``done`` record, socket closed."""
        if source.finished or source.state is None or source.log is None:
            return
        source.finished = True
        write_record(source.log, source.state.done_record(self.loop.now()))
        source.log.close()
        source.sock.close()

    def _receive(self, sink: _Sink) -> None:
        """Count everything the socket holds."""
        recv, count = sink.sock.recv, sink.state.datagram
        while True:
            try:
                count(recv(RECV_BUFFER))
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # ICMP errors queued on the socket: nothing to count
                continue

    def _stats_at(self, sink: _Sink) -> None:
        sink.timer = self.loop.call_at(sink.state.next_stats, lambda: self._stats(sink))

    def _stats(self, sink: _Sink) -> None:
        """The once-a-second ``stats`` record; what arrived before it is counted first."""
        self._receive(sink)
        write_record(sink.log, sink.state.stats(self.loop.now()))
        self._stats_at(sink)

    def stop(self) -> None:
        """Every started source's ``done`` record and every sink's last ``stats`` record;
        every socket and log closed."""
        for handle in [*self._timers, *(x.timer for x in (*self.sources, *self.sinks))]:
            if handle is not None:
                handle.cancel()
        self._timers.clear()
        for source in self.sources:
            self._finish(source)
            if not source.finished:
                source.sock.close()
        for sink in self.sinks:
            if sink.log.closed:
                continue
            self._receive(sink)
            write_record(sink.log, sink.state.stats(self.loop.now()))
            sink.log.close()
            with contextlib.suppress(KeyError, ValueError):
                self.loop.remove_reader(sink.sock)
            sink.sock.close()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mcclab.traffic.onoff_host",
                                     description="Run many on/off UDP sources and sinks on "
                                     "one loop.")
    parser.add_argument("--plan", required=True, type=Path, help="the host plan (JSON)")
    parser.add_argument("--t0", type=float, default=None,
                        help="CLOCK_MONOTONIC time of the run's time 0 (default: now)")
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds after time 0 to stop (default: SIGTERM/SIGINT)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Command line: run a plan until a stop signal or ``--duration``."""
    args = parse_args(argv)
    try:
        plan = OnOffPlan.model_validate_json(args.plan.read_text())
        if args.duration is not None and args.duration <= 0:
            raise ValueError("--duration must be positive")
    except (OSError, ValueError) as exc:  # a pydantic ValidationError is a ValueError
        print(f"onoff_host: {args.plan}: {exc}", file=sys.stderr)
        return 2
    from mcclab.net.setns import Namespaces

    raise_fd_limit()
    # The CPU weight of the processes it replaces (a source and a sink per flow).
    nice = take_agents_share(len(plan.sinks) + len(plan.sources))
    loop = EventLoop()
    namespaces = Namespaces()
    host = OnOffHost(plan, loop, namespaces)
    status = 0
    try:
        loop.stop_on_signals(signal.SIGTERM, signal.SIGINT)
        host.open()
        t0 = loop.now() if args.t0 is None else args.t0
        host.schedule(t0)
        print(json.dumps({"event": "ready", "host": plan.name, "sinks": len(host.sinks),
                          "sources": len(host.sources), "nice": nice, "t": loop.now()}),
              flush=True)
        loop.run(None if args.duration is None else t0 + args.duration)
    except (OSError, ValueError) as exc:  # an address not there, a port taken, a schedule
        print(f"onoff_host: {exc}", file=sys.stderr)
        status = 1
    finally:
        host.stop()
        loop.close()
        namespaces.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
