"""Prometheus metrics of agents: plain numbers, exported by a collector at scrape time.

Every series carries the labels ``node``, ``flow``, ``protocol`` and ``role``.
Core gauges (``metrics()`` and ``Metric`` actions) are exported as
``mcc_agent_<name>`` with the same labels.

The hot path (a datagram sent or received) only adds to a Python integer: about
as cheap as an attribute update gets, where a prometheus_client ``Counter.inc()``
takes a lock and goes through a child lookup every time (``bench/metrics_cost.py``
compares the two). :class:`AgentsCollector` turns the numbers of every agent it
holds into counter and gauge families when Prometheus scrapes, with the same
names, types, help texts and labels the metric contract
(``mcclab/monitoring/metric_names.py``) lists. One collector serves every agent
registered on the same registry, so one process (an agent host) may hold many
agents behind one endpoint: each metric is one family with a series per agent.
"""

from __future__ import annotations

import re
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from ipaddress import IPv4Address, ip_address
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from agents.runtime.header import Drop

PREFIX = "mcc_agent_"
LABELS = ("node", "flow", "protocol", "role")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

# (attribute of AgentMetrics, metric name without PREFIX, help), in export order.
COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("packets_sent", "packets_sent", "Packets sent"),
    ("bytes_sent", "bytes_sent", "UDP payload bytes sent"),
    ("packets_received", "packets_received", "Well-formed packets received"),
    ("bytes_received", "bytes_received", "UDP payload bytes received"),
    ("send_errors", "send_errors", "Packets the kernel refused to send"),
    ("joins", "joins", "Joins carried out (Join actions)"),
    ("leaves", "leaves", "Leaves carried out (Leave actions)"),
    ("feedback_sent", "feedback_sent", "Unicast feedback datagrams sent"),
    ("feedback_received", "feedback_received",
     "Well-formed unicast feedback datagrams received"),
)
GAUGES: tuple[tuple[str, str, str], ...] = (
    ("packets_lost", "packets_lost", "Packets lost (sequence gaps), cumulative"),
    ("loss_fraction", "loss_fraction", "Lost / expected over the last second"),
    ("throughput", "throughput_bps", "Received bit/s over the last second"),
    ("send_rate", "send_rate_bps", "Sent bit/s over the last second"),
    ("joined", "joined_channels", "Channels currently joined"),
)
MALFORMED = ("malformed_datagrams", "Datagrams dropped, by reason")
# Names a core gauge may not take (with or without a counter's _total/_created suffix).
BUILTIN = frozenset(name for _attr, name, _doc in (*COUNTERS, *GAUGES)) | {MALFORMED[0]}


class AgentMetrics:
    """The runtime's counters and gauges of one agent plus any gauges its core provides.

    Counters are plain integers the runtime adds to (``metrics.packets_sent += 1``),
    gauges plain numbers it assigns, ``malformed`` maps each :class:`Drop` reason to
    its count. Nothing is exported until a scrape reads them through the registry's
    :class:`AgentsCollector`. Several agents may share one ``registry`` (an agent
    host); their label sets must differ.
    """

    def __init__(self, node: str, flow: str, protocol: str, role: str,
                 registry: CollectorRegistry | None = None):
        self.registry = registry if registry is not None else CollectorRegistry()
        self.labels = {"node": node, "flow": flow, "protocol": protocol, "role": role}
        self.label_values = (node, flow, protocol, role)
        self.created = time.time()  # the counters' _created samples, as prometheus_client's
        # Written once here so a scrape only formats numbers (render_text).
        self.label_text = _label_text(self.labels)
        self.created_text = floatToGoString(self.created)
        self.reason_label_text = {reason: _label_text({**self.labels, "reason": str(reason)})
                                  for reason in Drop}
        self.packets_sent = 0
        self.bytes_sent = 0
        self.packets_received = 0
        self.bytes_received = 0
        self.send_errors = 0
        self.joins = 0
        self.leaves = 0
        self.feedback_sent = 0
        self.feedback_received = 0
        self.packets_lost: float = 0
        self.loss_fraction: float = 0.0
        self.throughput: float = 0.0
        self.send_rate: float = 0.0
        self.joined = 0
        self.malformed: dict[Drop, int] = dict.fromkeys(Drop, 0)
        self._core: dict[str, float] = {}
        self.collector = collector_for(self.registry)
        self.collector.add(self)

    def core_gauge(self, name: str, value: float) -> str | None:
        """Set a core gauge; returns an error message instead of raising for a bad name."""
        if name not in self._core:
            if not _NAME.match(name):
                return f"core metric name {name!r} must match {_NAME.pattern}"
            if name.removesuffix("_total").removesuffix("_created") in BUILTIN:
                return f"core metric name {name!r} collides with a runtime metric"
            self._core[name] = 0.0  # exported from now on, as a Gauge child would be
        try:
            self._core[name] = float(value)
        except (TypeError, ValueError):
            return f"core metric {name!r} has a non-numeric value {value!r}"
        return None

    def core_gauges(self) -> dict[str, float]:
        """A copy of the core gauges set so far (safe to take from the scrape thread)."""
        return dict(self._core)

    def remove(self) -> None:
        """Stop exporting this agent's series (an agent host whose agent ended)."""
        self.collector.discard(self)

    def value(self, name: str, **labels: str) -> float | None:
        """The current value of sample ``name`` for this agent (for tests and the simulator)."""
        return self.registry.get_sample_value(name, {**self.labels, **labels})


class AgentsCollector(Collector):
    """Exports the numbers of every :class:`AgentMetrics` it holds when a registry collects.

    Each metric is one family (so a scrape of many agents stays valid exposition
    text) with one series per agent; a core gauge appears once some agent set it.
    """

    def __init__(self) -> None:
        self._agents: dict[tuple[str, ...], AgentMetrics] = {}
        self._lock = threading.Lock()  # add/discard from the agents, collect from a scrape

    def add(self, metrics: AgentMetrics) -> None:
        """Export ``metrics`` from now on; two agents may not share a label set."""
        with self._lock:
            if metrics.label_values in self._agents:
                raise ValueError(f"an agent with labels {metrics.labels} is registered already")
            self._agents[metrics.label_values] = metrics

    def discard(self, metrics: AgentMetrics) -> None:
        """Stop exporting ``metrics`` (nothing if it is not held)."""
        with self._lock:
            if self._agents.get(metrics.label_values) is metrics:
                del self._agents[metrics.label_values]

    def agents(self) -> list[AgentMetrics]:
        """The agents held, in the order they were added."""
        with self._lock:
            return list(self._agents.values())

    def collect(self) -> Iterator[Metric]:
        """One family per metric, one sample per agent: the numbers as they are now."""
        agents = self.agents()
        for attr, name, doc in COUNTERS:
            counter = CounterMetricFamily(PREFIX + name, doc, labels=LABELS)
            for m in agents:
                counter.add_metric(m.label_values, float(getattr(m, attr)), created=m.created)
            yield counter
        for attr, name, doc in GAUGES:
            gauge = GaugeMetricFamily(PREFIX + name, doc, labels=LABELS)
            for m in agents:
                gauge.add_metric(m.label_values, float(getattr(m, attr)))
            yield gauge
        malformed = CounterMetricFamily(PREFIX + MALFORMED[0], MALFORMED[1],
                                        labels=(*LABELS, "reason"))
        for m in agents:
            for reason, count in list(m.malformed.items()):
                malformed.add_metric((*m.label_values, str(reason)), float(count),
                                     created=m.created)
        yield malformed
        core: dict[str, GaugeMetricFamily] = {}
        for m in agents:
            for name, value in m.core_gauges().items():
                family = core.get(name)
                if family is None:
                    family = core[name] = GaugeMetricFamily(PREFIX + name,
                                                            f"Protocol gauge {name}",
                                                            labels=LABELS)
                family.add_metric(m.label_values, value)
        yield from core.values()


def _escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _label_text(labels: dict[str, str]) -> str:
    """``{a="x",b="y"}``, names sorted, as prometheus_client writes a sample's labels."""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


def _family(out: list[str], name: str, doc: str, kind: str) -> None:
    """A family's HELP and TYPE lines (help text escapes backslashes and newlines only)."""
    help_text = doc.replace("\\", r"\\").replace("\n", r"\n")
    out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")


def render_text(agents: Sequence[AgentMetrics]) -> bytes:
    """The agents' series in the classic text format, as one scrape answers them.

    Byte for byte what ``prometheus_client.generate_latest`` writes for a registry
    holding these agents (one family per metric, one series per agent, families
    in :meth:`AgentsCollector.collect`'s order), without building a family and a
    sample object per series first: an agent host renders every agent's series
    on each scrape while its event loop waits for the interpreter lock, and
    building them took most of the scrape (``make bench-metrics``).
    """
    out: list[str] = []
    for attr, name, doc in COUNTERS:
        full = PREFIX + name
        _family(out, full + "_total", doc, "counter")
        out.extend(f"{full}_total{m.label_text} {floatToGoString(getattr(m, attr))}\n"
                   for m in agents)
        if agents:  # prometheus_client writes the _created family only with samples
            _family(out, full + "_created", doc, "gauge")
            out.extend(f"{full}_created{m.label_text} {m.created_text}\n" for m in agents)
    for attr, name, doc in GAUGES:
        full = PREFIX + name
        _family(out, full, doc, "gauge")
        out.extend(f"{full}{m.label_text} {floatToGoString(getattr(m, attr))}\n"
                   for m in agents)
    full = PREFIX + MALFORMED[0]
    _family(out, full + "_total", MALFORMED[1], "counter")
    created: list[str] = []
    for m in agents:
        for reason, count in list(m.malformed.items()):
            labels = m.reason_label_text[reason]
            out.append(f"{full}_total{labels} {floatToGoString(count)}\n")
            created.append(f"{full}_created{labels} {m.created_text}\n")
    if created:
        _family(out, full + "_created", MALFORMED[1], "gauge")
        out.extend(created)
    core: dict[str, list[str]] = {}
    for m in agents:
        for name, value in m.core_gauges().items():
            core.setdefault(name, []).append(
                f"{PREFIX}{name}{m.label_text} {floatToGoString(value)}\n")
    for name, lines in core.items():
        _family(out, PREFIX + name, f"Protocol gauge {name}", "gauge")
        out.extend(lines)
    return "".join(out).encode("utf-8")


# One collector per registry, so agents given the same registry share it.
_COLLECTORS: weakref.WeakKeyDictionary[CollectorRegistry, AgentsCollector] = (
    weakref.WeakKeyDictionary())
_COLLECTORS_LOCK = threading.Lock()


def collector_for(registry: CollectorRegistry) -> AgentsCollector:
    """The agents' collector registered on ``registry`` (registered on first use)."""
    with _COLLECTORS_LOCK:
        collector = _COLLECTORS.get(registry)
        if collector is None:
            collector = _COLLECTORS[registry] = AgentsCollector()
            registry.register(collector)
        return collector


def parse_endpoint(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` -> (addr, port). The address must be a specific IPv4 address: the
    endpoint belongs on the control net, never on every interface."""
    addr, sep, port_text = text.rpartition(":")
    if not sep or not addr:
        raise ValueError(f"metrics endpoint {text!r} must be ADDR:PORT")
    try:
        ip = ip_address(addr)
        port = int(port_text)
    except ValueError:
        raise ValueError(f"metrics endpoint {text!r} must be IPv4ADDR:PORT") from None
    if not isinstance(ip, IPv4Address) or ip.is_unspecified or ip.is_multicast:
        raise ValueError(f"metrics endpoint {text!r} needs the node's control-net IPv4 address")
    if not 1 <= port <= 65535:
        raise ValueError(f"metrics port {port} outside 1..65535")
    return str(ip), port


def serve(metrics: AgentMetrics, addr: str, port: int) -> Any:
    """Start the ``/metrics`` HTTP server (its own thread) on ``addr:port`` for the registry of
    ``metrics`` (every agent on it); returns the server, stop it with ``shutdown()``."""
    server, _thread = start_http_server(port, addr=addr, registry=metrics.registry)
    return server
