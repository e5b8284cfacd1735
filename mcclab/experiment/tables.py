"""Tidy per-second tables from raw logs: agents' event logs and iperf3 server reports.

Every source is first turned into a cumulative series (time, bytes, packets,
lost) on the shared monotonic clock, then sampled at each whole second of the
experiment, so flows that report on different grids line up exactly. The tables' file
names and columns are the results folder's contract (:mod:`mcclab.resultsdir`).
"""

from __future__ import annotations

import bisect
import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd

from mcclab.resultsdir import AGENT_COLUMNS, PER_SECOND_COLUMNS, PROTOCOL_COLUMNS, event_records

_INTERVAL = re.compile(
    r"^\[\s*\d+\]\s+(?P<a>[\d.]+)-(?P<b>[\d.]+)\s+sec\s+(?P<xfer>[\d.]+)\s+(?P<xu>\w?)Bytes\s+"
    r"(?P<rate>[\d.]+)\s+(?P<ru>\w?)bits/sec(?:\s+[\d.]+\s+ms\s+(?P<lost>\d+)/(?P<total>\d+))?")
_UNIT = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}


class CsvAppender:
    """A CSV written as its rows come, flushed at each batch.

    A run's per-second link samples went into a list until the run ended: over
    1000 s on 24 leaves that list grew the runner by 45 MB. Written as they come,
    they cost no memory, and a runner killed mid-run leaves its table up to the
    last second. The first batch's keys are the columns.
    """

    def __init__(self, path: Path):
        self.path = path
        self.rows = 0
        self._file: IO[str] | None = None
        self._writer: csv.DictWriter | None = None

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Write ``rows`` and flush them to the file."""
        if not rows:
            return
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("w", newline="")
            self._writer = csv.DictWriter(self._file, list(rows[0]))
            self._writer.writeheader()
        self._writer.writerows(rows)
        assert self._file is not None
        self._file.flush()
        self.rows += len(rows)

    def close(self) -> None:
        """Close the file (appending after this starts a new one)."""
        if self._file is not None:
            self._file.close()
        self._file = self._writer = None


@dataclass
class Series:
    """A cumulative counter series for one (flow, node)."""

    flow: str
    kind: str
    node: str
    times: list[float] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)
    packets: list[float] = field(default_factory=list)
    lost: list[float] = field(default_factory=list)
    levels: list[tuple[float, float]] = field(default_factory=list)

    def add(self, t: float, nbytes: float, packets: float, lost: float) -> None:
        """Append a cumulative sample (kept in time order)."""
        self.times.append(t)
        self.bytes.append(nbytes)
        self.packets.append(packets)
        self.lost.append(lost)

    def at(self, t: float) -> tuple[float, float, float]:
        """Cumulative (bytes, packets, lost) at time t, linearly interpolated."""
        if not self.times or t <= self.times[0]:
            return (0.0, 0.0, 0.0) if not self.times or t < self.times[0] else (
                self.bytes[0], self.packets[0], self.lost[0])
        i = bisect.bisect_right(self.times, t)
        if i >= len(self.times):
            return self.bytes[-1], self.packets[-1], self.lost[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        w = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
        return tuple(v[i - 1] + w * (v[i] - v[i - 1])  # type: ignore[return-value]
                     for v in (self.bytes, self.packets, self.lost))

    def level_at(self, t: float) -> float | None:
        """The last reported subscription level at or before t."""
        value = None
        for when, level in self.levels:
            if when > t:
                break
            value = level
        return value


def agent_series(log: Path, flow: str, node: str, kind: str = "multicast") -> Series:
    """A receiver agent's cumulative received bytes, from its event log's stats records.

    The subscription level comes from the core's ``subscription_level`` gauge, as
    carried in each stats record. An on/off UDP sink (mcclab.traffic.udp_onoff)
    writes the same records, without a level.
    """
    series = Series(flow, kind, node)
    for rec in event_records(log):
        if rec.get("event") != "stats" or "total_rx_bytes" not in rec:
            continue
        series.add(rec["t"], rec["total_rx_bytes"], rec["total_rx_packets"],
                   rec.get("total_lost", 0))
        level = (rec.get("core") or {}).get("subscription_level")
        if isinstance(level, int | float):
            series.levels.append((rec["t"], float(level)))
    return series


def protocol_table(logs: list[tuple[Path, str, str, str]], t0: float, seconds: int
                   ) -> pd.DataFrame:
    """One row per (second, flow, node, role, gauge): the protocol core's gauges.

    ``logs`` holds (event log, flow, node, role). Each whole experiment second k
    takes the last stats record at or before ``t0 + k`` (gauges are sampled once a
    second, so this holds the value the core last reported). The runtime's
    ``timer_late_max_ms`` (how late the agent's timers fired in that record's
    second: the agent process's own stalls) rides along as one more gauge.
    """
    rows = []
    for log, flow, node, role in logs:
        records = [(r["t"], _with_timer_lateness(r)) for r in event_records(log)
                   if r.get("event") == "stats" and isinstance(r.get("core"), dict)]
        times = [t for t, _ in records]
        for k in range(1, seconds + 1):
            i = bisect.bisect_right(times, t0 + k + 1e-6)
            if i == 0:
                continue
            for name, value in sorted(records[i - 1][1].items()):
                if isinstance(value, int | float) and not isinstance(value, bool):
                    rows.append({"t": k, "flow": flow, "node": node, "role": role,
                                 "name": name, "value": value})
    return pd.DataFrame(rows, columns=PROTOCOL_COLUMNS)


@dataclass(frozen=True)
class AgentLaunch:
    """One agent process as the runner planned it: its log and its schedule (run seconds)."""

    log: Path
    flow: str
    node: str
    role: str
    start: float
    stop: float | None = None


def agent_timing_table(agents: list[AgentLaunch], t0: float) -> pd.DataFrame:
    """One row per agent event that shows whether the agent got the CPU (``agents.csv``).

    Rows: the planned start (and stop, if any) from the schedule; the agent's own
    ``start`` event; each ``stats`` record with its ``timer_late_max_ms``; its
    ``stop``. ``t`` is in seconds since the experiment started (the agents log
    the shared monotonic clock), so a late start, a gap between records and a
    late timer all show on the run's time axis.
    """
    rows: list[dict] = []
    for agent in agents:
        who = {"flow": agent.flow, "node": agent.node, "role": agent.role}
        rows.append({"t": agent.start, **who, "event": "planned_start",
                     "timer_late_max_ms": None})
        if agent.stop is not None:
            rows.append({"t": agent.stop, **who, "event": "planned_stop",
                         "timer_late_max_ms": None})
        for rec in event_records(agent.log):
            if rec.get("event") not in ("start", "stats", "stop") or not isinstance(
                    rec.get("t"), int | float):
                continue
            late = rec.get("timer_late_max_ms") if rec["event"] == "stats" else None
            rows.append({"t": round(rec["t"] - t0, 6), **who, "event": rec["event"],
                         "timer_late_max_ms": late})
    return pd.DataFrame(rows, columns=AGENT_COLUMNS)


def _with_timer_lateness(record: dict) -> dict:
    """A stats record's core gauges, with its ``timer_late_max_ms`` when it has one."""
    if "timer_late_max_ms" not in record:
        return record["core"]
    return {**record["core"], "timer_late_max_ms": record["timer_late_max_ms"]}


@dataclass(frozen=True)
class IperfInterval:
    """One per-second report line of an iperf3 server (UDP lines also carry loss)."""

    test: int  # 0 for the first client served, 1 for the next, ...
    start: float  # seconds since that test began
    end: float
    rate_bps: float
    lost: int | None = None
    total: int | None = None


class IntervalParser:
    """The line-by-line state of reading an iperf3 server log: which test a line belongs
    to and whether it is in that test's end-of-test summary."""

    def __init__(self) -> None:
        self.test = -1
        self.in_summary = False

    def feed(self, line: str) -> list[IperfInterval | None]:
        """What one line adds: an interval, ``None`` for a test's end, or nothing."""
        if "Accepted connection from" in line:
            self.test, self.in_summary = self.test + 1, False
            return []
        if line.startswith("- - -"):
            self.in_summary = True
            return [None]
        m = _INTERVAL.match(line)
        if not m or self.in_summary or self.test < 0:
            return []
        lost = None if m["total"] is None else int(m["lost"])
        total = None if m["total"] is None else int(m["total"])
        return [IperfInterval(self.test, float(m["a"]), float(m["b"]),
                              float(m["rate"]) * _UNIT[m["ru"]], lost, total)]


def iperf_intervals(text: str) -> list[IperfInterval | None]:
    """The interval reports of an iperf3 server log, in order.

    ``None`` marks the end of a test (its summary repeats the intervals and is
    skipped), so a reader can tell "test over" from "no report yet".
    """
    parser = IntervalParser()
    return [item for line in text.splitlines() for item in parser.feed(line)]


class LogFollower:
    """The complete lines appended to a growing log since the last :meth:`new_lines`.

    Readers that look at a log every second (the runner, the exporter) would
    otherwise read and parse all of it each time: over a 1000-s run with 64 iperf3
    servers that cost grew to a tenth of a core. A line still being written (no
    newline yet) waits for the next call; a file that shrank is read again from
    its start (``restarted`` tells the caller to drop what it parsed).
    """

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""
        self.restarted = False

    def new_lines(self) -> list[str]:
        """The lines completed since the last call ([] while the file does not exist;
        other OSErrors are raised)."""
        try:
            size = self.path.stat().st_size
            self.restarted = size < self.offset
            if self.restarted:
                self.offset, self.partial = 0, b""
            if size == self.offset:
                return []
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read(size - self.offset)
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [line.decode(errors="replace") for line in lines]


class IperfFollower:
    """The interval reports appended to an iperf3 server log since the last call, parsed
    with the state of everything read before (:class:`LogFollower`)."""

    def __init__(self, path: Path):
        self.lines = LogFollower(path)
        self.parser = IntervalParser()

    def new_intervals(self) -> list[IperfInterval | None]:
        """The reports (``None``: a test's end) of the lines completed since the last call."""
        lines = self.lines.new_lines()
        if self.lines.restarted:
            self.parser = IntervalParser()
        return [item for line in lines for item in self.parser.feed(line)]


def latest_interval_ends(text: str) -> list[float]:
    """For each test of an iperf3 server log, in order, the end (seconds since that test
    began) of its newest interval report so far.

    A runner that notes when such a line appeared learns when the test really began:
    the client's scheduled start is earlier by its process start and connection set-up,
    seconds on a loaded machine.
    """
    ends: list[float] = []
    note_interval_ends(ends, iperf_intervals(text))
    return ends


def note_interval_ends(ends: list[float], reports: list[IperfInterval | None]) -> None:
    """Bring ``ends`` (each test's newest interval end, in order) up to date with
    ``reports``, the interval reports that follow those already noted."""
    for iv in reports:
        if iv is None:
            continue
        if iv.test == len(ends):
            ends.append(iv.end)
        elif iv.test == len(ends) - 1:
            ends[-1] = iv.end


def iperf_series(log: Path, flow: str, kind: str, node: str, test_starts: list[float]
                 ) -> Series:
    """An iperf3 server's received bytes, one test per client start (in order)."""
    series = Series(flow, kind, node)
    if not log.exists():
        return series
    total, packets, lost = 0.0, 0.0, 0.0
    for iv in iperf_intervals(log.read_text(errors="replace")):
        if iv is None or iv.test >= len(test_starts):
            continue
        if iv.total is not None:
            packets += iv.total - iv.lost
            lost += iv.lost
        start = test_starts[iv.test]
        if not series.times or start + iv.start > series.times[-1]:
            series.add(start + iv.start, total, packets, lost)  # flat until it began
        total += iv.rate_bps * (iv.end - iv.start) / 8.0
        series.add(start + iv.end, total, packets, lost)
    return series


def last_interval_rate(text: str) -> float | None:
    """The bit rate of the last per-second report of an iperf3 server (for live views)."""
    reports = [iv for iv in iperf_intervals(text) if iv is not None]
    return reports[-1].rate_bps if reports else None


def per_second(series: list[Series], t0: float, seconds: int) -> pd.DataFrame:
    """One row per (second, flow, node): throughput over [k-1, k) of experiment time."""
    rows = []
    for s in series:
        prev = s.at(t0)
        for k in range(1, seconds + 1):
            cur = s.at(t0 + k)
            level = s.level_at(t0 + k)
            rows.append({
                "t": k, "flow": s.flow, "kind": s.kind, "node": s.node,
                "throughput_bps": round((cur[0] - prev[0]) * 8.0, 1),
                "packets": round(cur[1] - prev[1]), "lost": round(cur[2] - prev[2]),
                "level": "" if level is None else level,
            })
            prev = cur
    return pd.DataFrame(rows, columns=PER_SECOND_COLUMNS)
