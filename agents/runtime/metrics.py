"""Prometheus metrics of one agent, on its own registry, served on the control-net address.

Every series carries the labels ``node``, ``flow``, ``protocol`` and ``role``.
Core gauges (``metrics()`` and ``Metric`` actions) are exported as
``mcc_agent_<name>`` with the same labels.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Address, ip_address
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from agents.runtime.header import Drop

PREFIX = "mcc_agent_"
LABELS = ("node", "flow", "protocol", "role")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class AgentMetrics:
    """The runtime's counters and gauges plus any gauges the core provides."""

    def __init__(self, node: str, flow: str, protocol: str, role: str,
                 registry: CollectorRegistry | None = None):
        self.registry = registry if registry is not None else CollectorRegistry()
        self.labels = {"node": node, "flow": flow, "protocol": protocol, "role": role}
        self.packets_sent = self._counter("packets_sent", "Packets sent")
        self.bytes_sent = self._counter("bytes_sent", "UDP payload bytes sent")
        self.packets_received = self._counter("packets_received", "Well-formed packets received")
        self.bytes_received = self._counter("bytes_received", "UDP payload bytes received")
        self.send_errors = self._counter("send_errors", "Packets the kernel refused to send")
        self.joins = self._counter("joins", "Joins carried out (Join actions)")
        self.leaves = self._counter("leaves", "Leaves carried out (Leave actions)")
        self.feedback_sent = self._counter("feedback_sent", "Unicast feedback datagrams sent")
        self.feedback_received = self._counter("feedback_received",
                                               "Well-formed unicast feedback datagrams received")
        self.packets_lost = self._gauge("packets_lost", "Packets lost (sequence gaps), cumulative")
        self.loss_fraction = self._gauge("loss_fraction", "Lost / expected over the last second")
        self.throughput = self._gauge("throughput_bps", "Received bit/s over the last second")
        self.send_rate = self._gauge("send_rate_bps", "Sent bit/s over the last second")
        self.joined = self._gauge("joined_channels", "Channels currently joined")
        malformed = Counter(PREFIX + "malformed_datagrams", "Datagrams dropped, by reason",
                            (*LABELS, "reason"), registry=self.registry)
        self.malformed = {r: malformed.labels(**self.labels, reason=str(r)) for r in Drop}
        self._builtin = {n[len(PREFIX):] for n in _names(self.registry)}
        self._core: dict[str, Any] = {}

    def _counter(self, name: str, doc: str) -> Any:
        return Counter(PREFIX + name, doc, LABELS, registry=self.registry).labels(**self.labels)

    def _gauge(self, name: str, doc: str) -> Any:
        return Gauge(PREFIX + name, doc, LABELS, registry=self.registry).labels(**self.labels)

    def core_gauge(self, name: str, value: float) -> str | None:
        """Set a core gauge; returns an error message instead of raising for a bad name."""
        if not _NAME.match(name):
            return f"core metric name {name!r} must match {_NAME.pattern}"
        if name.removesuffix("_total").removesuffix("_created") in self._builtin:
            return f"core metric name {name!r} collides with a runtime metric"
        gauge = self._core.get(name)
        if gauge is None:
            gauge = self._gauge(name, f"Protocol gauge {name}")
            self._core[name] = gauge
        try:
            gauge.set(float(value))
        except (TypeError, ValueError):
            return f"core metric {name!r} has a non-numeric value {value!r}"
        return None

    def value(self, name: str, **labels: str) -> float | None:
        """The current value of sample ``name`` for this agent (for tests and the simulator)."""
        return self.registry.get_sample_value(name, {**self.labels, **labels})


def _names(registry: CollectorRegistry) -> set[str]:
    return {metric.name for metric in registry.collect()}


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
    """Start the ``/metrics`` HTTP server (its own thread) on ``addr:port``; returns the server,
    stop it with ``shutdown()``."""
    server, _thread = start_http_server(port, addr=addr, registry=metrics.registry)
    return server
