"""Evidence that multicast reaches exactly the joined hosts, and how fast joins and leaves act.

Each check starts the probe sender and receivers inside a running lab, then
asserts on counters (nftables per-group counters at each node's interfaces),
never on timing alone: readiness is polled, windows are measured.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mcclab.lab import Lab
from mcclab.net.node_config import netns_name
from mcclab.probes import counters
from mcclab.slowdown import scaled
from mcclab.state import TrackedProcess, kill_group

PROBE = [sys.executable, "-m", "mcclab.probes.mcast"]
ASM_GROUP = "239.1.1.1"
SSM_GROUP = "232.1.1.1"


@dataclass
class Flow:
    """What one group should do: which hosts join it, from which source for SSM."""

    group: str
    ssm: bool


@dataclass
class ReachReport:
    """Packets each node's interfaces carried for each group during the window."""

    window_s: float
    rate_pps: float
    arrived: dict[tuple[str, str], int] = field(default_factory=dict)  # (iface, group) -> pkts
    latency: dict[tuple[str, str], float] = field(default_factory=dict)  # (host, group) -> s
    iface_node: dict[str, str] = field(default_factory=dict)
    # node -> (shortest, longest) time its counters can have counted: the nominal
    # window stretched by the reads, which run one node after another (slow on a
    # slow CPU), so each node's own window is measured from its reads' timestamps.
    node_window: dict[str, tuple[float, float]] = field(default_factory=dict)

    def at(self, node: str, group: str, iface: str | None = None) -> int:
        """Packets of ``group`` that arrived at ``node`` (on ``iface``, else all ifaces)."""
        return sum(n for (i, g), n in self.arrived.items()
                   if g == group and self.iface_node[i] == node and (iface is None or i == iface))

    def window_of(self, node: str) -> tuple[float, float]:
        """(shortest, longest) seconds ``node``'s counters counted (nominal if not measured)."""
        return self.node_window.get(node, (self.window_s, self.window_s))

    def expected(self, node: str, tolerance: float) -> tuple[float, float]:
        """Counts a full-rate receiver at ``node`` may show: rate x its window, +-tolerance."""
        lo, hi = self.window_of(node)
        return (1 - tolerance) * self.rate_pps * lo, (1 + tolerance) * self.rate_pps * hi

    def full_rate(self, node: str, group: str, tolerance: float) -> bool:
        """``node`` got ``group`` at the sending rate over its measured window, within tolerance."""
        lo, hi = self.expected(node, tolerance)
        return lo <= self.at(node, group) <= hi


def read_events(log: Path) -> list[dict]:
    """JSON lines a probe has written so far."""
    events = []
    try:
        text = log.read_text()
    except OSError:
        return events
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line still being written
    return events


def wait_for(predicate, timeout: float, what: str, interval: float = 0.02):  # noqa: ANN001, ANN201
    """Poll ``predicate`` until it returns a truthy value; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


class ProbeSession:
    """Sender and receivers of the probe inside a lab; stops them all on exit."""

    def __init__(self, lab: Lab):
        self.lab = lab
        self.procs: list[TrackedProcess] = []
        self.count = 0

    def _spawn(self, node: str, args: list[str], tag: str) -> tuple[TrackedProcess, Path]:
        """Start one probe process."""
        self.count += 1
        proc, log = self.lab.spawn(node, PROBE + args, f"probe-{self.count}-{tag}-{node}")
        self.procs.append(proc)
        return proc, log

    def send(self, node: str, groups: list[str], rate: float, duration: float = 3600) -> Path:
        """Start a sender of ``rate`` pkt/s per group."""
        return self._spawn(node, ["send", "--groups", ",".join(groups), "--rate", str(rate),
                                  "--duration", str(duration)], "send")[1]

    def receive(self, node: str, groups: list[str], source: str | None = None, *,
                hold: bool = True, dwell: float = 0.2, timeout: float = 30.0
                ) -> tuple[TrackedProcess, Path]:
        """Start a receiver joining ``groups`` (SSM from ``source`` when given)."""
        args = ["recv", "--groups", ",".join(groups), "--timeout", str(timeout),
                "--dwell", str(dwell)]
        if source:
            args += ["--source", source]
        if hold:
            args.append("--hold")
        return self._spawn(node, args, "recv")

    def close(self) -> None:
        """Stop every probe process."""
        for proc in self.procs:
            kill_group(proc, grace=1.0)
        self.procs.clear()

    def __enter__(self) -> ProbeSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def install_counters(lab: Lab, groups: list[str]) -> dict[str, str]:
    """Per-group counters on every experiment interface of every node; iface -> node."""
    owner = {}
    for node, ifaces in lab.plan.interfaces.items():
        pairs = [(i.name, g) for i in ifaces for g in groups]
        lab.runner.run_all(counters.install_cmds(netns_name(node), pairs))
        owner.update({i.name: node for i in ifaces})
    return owner


@dataclass
class Snapshot:
    """Counter values of a set of nodes, with when each node's read started and ended."""

    values: dict[tuple[str, str], int] = field(default_factory=dict)  # (iface, group) -> pkts
    read: dict[str, tuple[float, float]] = field(default_factory=dict)  # node -> (start, end)


def snapshot(lab: Lab, groups: list[str], nodes: list[str] | None = None) -> Snapshot:
    """Packet count per (iface, group) on ``nodes`` (all by default), one read per node."""
    snap = Snapshot()
    for node in nodes if nodes is not None else list(lab.plan.interfaces):
        start = time.monotonic()
        found = counters.parse(lab.runner.run(counters.read_cmd(netns_name(node))))
        snap.read[node] = (start, time.monotonic())
        for iface in lab.plan.interfaces[node]:
            for g in groups:
                snap.values[(iface.name, g)] = found.get(counters.counter_name(iface.name, g), 0)
    return snap


def node_windows(before: Snapshot, after: Snapshot) -> dict[str, tuple[float, float]]:
    """Per node, the (shortest, longest) time between its two reads.

    A read samples the counters somewhere between its start and end, so the
    counted span lies between ``after.start - before.end`` and ``after.end - before.start``.
    """
    return {node: (after.read[node][0] - b[1], after.read[node][1] - b[0])
            for node, b in before.read.items() if node in after.read}


def reach(lab: Lab, sender: str, joiners: dict[str, list[Flow]], *, rate: float = 200.0,
          window: float = 2.0, join_timeout: float = 30.0) -> ReachReport:
    """Send every flow's group from ``sender``, join as given, count a window of traffic."""
    groups = sorted({f.group for flows in joiners.values() for f in flows})
    owner = install_counters(lab, groups)
    source = str(lab.plan.address_of(sender))
    report = ReachReport(window_s=window, rate_pps=rate, iface_node=owner)
    with ProbeSession(lab) as probes:
        probes.send(sender, groups, rate)
        logs = {}
        for host, flows in joiners.items():
            for flow in flows:
                _, logs[(host, flow.group)] = probes.receive(
                    host, [flow.group], source if flow.ssm else None, timeout=join_timeout)

        def first_packets() -> bool:
            for key, log in logs.items():
                first = [e for e in read_events(log) if e["event"] == "first"]
                if first:
                    report.latency[key] = first[0]["latency"]
            return len(report.latency) == len(logs)

        try:
            wait_for(first_packets, join_timeout + scaled(5),
                     "every joined receiver's first packet")
        except TimeoutError as exc:
            waiting = sorted(set(logs) - set(report.latency))
            raise TimeoutError(f"{exc}; still waiting: {waiting}; "
                               f"first packets after (s): {report.latency}") from None
        before = snapshot(lab, groups)
        time.sleep(window)  # the measurement window itself, not a wait for readiness
        after = snapshot(lab, groups)
    report.arrived = {k: after.values[k] - before.values[k] for k in after.values}
    report.node_window = node_windows(before, after)
    return report


def join_latencies(lab: Lab, sender: str, receiver: str, trials: int = 20, *,
                   ssm: bool = False, rate: float = 200.0) -> list[float]:
    """Join ``trials`` fresh groups one after another; seconds from join to first packet."""
    base = SSM_GROUP if ssm else ASM_GROUP
    prefix = base.rsplit(".", 2)[0]
    groups = [f"{prefix}.2.{i}" for i in range(1, trials + 1)]
    source = str(lab.plan.address_of(sender)) if ssm else None
    with ProbeSession(lab) as probes:
        probes.send(sender, groups, rate)
        _, log = probes.receive(receiver, groups, source, hold=False, dwell=0.05, timeout=10)

        def all_left() -> list[dict] | None:
            left = [e for e in read_events(log) if e["event"] == "left"]
            return left if len(left) == trials else None

        done = wait_for(all_left, trials * 11.0, "all join trials")
    missing = [e["group"] for e in done if e["latency"] is None]
    if missing:
        raise AssertionError(f"no packet ever arrived for {missing}")
    return [e["latency"] for e in done]


def leave_time(lab: Lab, sender: str, receiver: str, *, ssm: bool = False, rate: float = 200.0,
               settle: float = 1.5, observe: float = 8.0, router: str | None = None,
               leave_when: Callable[[], bool] | None = None) -> float:
    """Seconds from the receiver's leave until a router's upstream link stops carrying
    the group, measured on that link's per-group counter (inf if it never stops).

    ``router`` is the receiver's own router unless named (a router further up
    the path shows how the prune travels); ``settle`` is how long the receiver
    stays joined with the flow running before it leaves; with ``leave_when`` it
    leaves as soon as that returns true instead (polled twice a second), and a
    TimeoutError says so if it is still false after ``settle``. Only the router's
    counters are read (one short read, so the time resolution stays fine on a
    slow CPU). The result is an upper bound: the end of the first read that
    saw the final count, so the last packet came no later than that.
    """
    group = SSM_GROUP if ssm else ASM_GROUP
    router = router or lab.plan.interfaces[receiver][0].peer
    upstream = _upstream_iface(lab, router, sender)
    install_counters(lab, [group])
    source = str(lab.plan.address_of(sender)) if ssm else None
    key = (upstream, group)

    def read() -> tuple[int, float]:
        snap = snapshot(lab, [group], [router])
        return snap.values[key], snap.read[router][1]

    with ProbeSession(lab) as probes:
        probes.send(sender, [group], rate)
        proc, log = probes.receive(receiver, [group], source, hold=True)
        wait_for(lambda: any(e["event"] == "first" for e in read_events(log)), scaled(30),
                 "first packet")
        if leave_when is None:
            time.sleep(settle)  # let the flow run steadily before leaving
        else:
            wait_for(leave_when, settle, "the state to leave in", interval=0.5)
        left_at = time.monotonic()
        kill_group(proc, grace=1.0)  # closing the socket sends the IGMP leave
        last_value, _ = read()
        last_change = left_at
        while time.monotonic() - left_at < observe:
            value, read_end = read()
            if value != last_value:
                last_value, last_change = value, read_end
            elif time.monotonic() - last_change > 3.0:
                break
            time.sleep(0.05)
        stopped = time.monotonic() - last_change > 1.0
    return last_change - left_at if stopped else float("inf")


def _upstream_iface(lab: Lab, router: str, sender: str) -> str:
    """The router's interface towards the sender (its RPF interface)."""
    dest = lab.plan.interfaces[sender][0].subnet
    for route in lab.plan.routes_of(router):
        if route.dest == dest:
            return route.dev
    return lab.plan.iface_towards(router, sender).name


def summarize(latencies: list[float]) -> dict[str, float]:
    """p50, p99 and max of a latency sample, in seconds."""
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"n": len(ordered), "p50": statistics.median(ordered), "p99": p99,
            "max": ordered[-1]}
