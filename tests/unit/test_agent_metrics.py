"""agents/runtime/metrics.py: plain numbers exported by a collector at scrape time."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from agents.runtime.header import Drop
from agents.runtime.metrics import COUNTERS, GAUGES, MALFORMED, PREFIX, AgentMetrics

LABELS = ("node", "flow", "protocol", "role")


def _fill(m: AgentMetrics, k: int) -> None:
    """Distinct values in every series of ``m`` (k makes two agents differ)."""
    for i, (attr, _name, _doc) in enumerate(COUNTERS):
        setattr(m, attr, 100 * k + i)
    for i, (attr, _name, _doc) in enumerate(GAUGES):
        setattr(m, attr, 0.5 * k + i)
    for i, reason in enumerate(Drop):
        m.malformed[reason] = 10 * k + i
    assert m.core_gauge("rate_bps", 1e6 * k) is None


def _reference(values: list[AgentMetrics]) -> CollectorRegistry:
    """What prometheus_client's own Counter/Gauge children export for the same numbers:
    the families, types, help texts and labels the runtime exported before the collector."""
    reg = CollectorRegistry()
    families = {}
    for attr, name, doc in COUNTERS:
        families[attr] = Counter(PREFIX + name, doc, LABELS, registry=reg)
    for attr, name, doc in GAUGES:
        families[attr] = Gauge(PREFIX + name, doc, LABELS, registry=reg)
    malformed = Counter(PREFIX + MALFORMED[0], MALFORMED[1], (*LABELS, "reason"), registry=reg)
    core = Gauge(PREFIX + "rate_bps", "Protocol gauge rate_bps", LABELS, registry=reg)
    for m in values:
        for attr, _name, _doc in COUNTERS:
            families[attr].labels(**m.labels).inc(getattr(m, attr))
        for attr, _name, _doc in GAUGES:
            families[attr].labels(**m.labels).set(getattr(m, attr))
        for reason in Drop:
            malformed.labels(**m.labels, reason=str(reason)).inc(m.malformed[reason])
        core.labels(**m.labels).set(m.core_gauges()["rate_bps"])
    return reg


def _without_created(text: bytes) -> list[str]:
    return [line for line in text.decode().splitlines() if "_created" not in line]


def test_a_scrape_shows_the_numbers_the_runtime_holds():
    m = AgentMetrics("h1", "f", "cbr", "receiver")
    assert m.value("mcc_agent_packets_received_total") == 0
    m.packets_received += 3
    m.bytes_received += 3000
    m.malformed[Drop.MAGIC] += 2
    m.throughput = 8000.0
    assert m.value("mcc_agent_packets_received_total") == 3
    assert m.value("mcc_agent_bytes_received_total") == 3000
    assert m.value("mcc_agent_malformed_datagrams_total", reason=str(Drop.MAGIC)) == 2
    assert m.value("mcc_agent_malformed_datagrams_total", reason=str(Drop.SHORT)) == 0
    assert m.value("mcc_agent_throughput_bps") == 8000.0
    m.packets_received += 1  # read at scrape time, not copied at registration
    assert m.value("mcc_agent_packets_received_total") == 4
    assert m.value("mcc_agent_packets_received_created") == pytest.approx(m.created)


def test_exposition_is_what_prometheus_client_counters_and_gauges_gave():
    m = AgentMetrics("h1", "f", "cbr", "receiver")
    _fill(m, 1)
    assert _without_created(generate_latest(m.registry)) == _without_created(
        generate_latest(_reference([m])))


def test_two_agents_with_different_labels_share_one_registry():
    reg = CollectorRegistry()
    a = AgentMetrics("h1", "f", "ormcc", "receiver", registry=reg)
    b = AgentMetrics("s1", "f", "ormcc", "sender", registry=reg)
    _fill(a, 1)
    _fill(b, 2)
    assert a.collector is b.collector
    assert a.value("mcc_agent_joins_total") == 105
    assert b.value("mcc_agent_joins_total") == 205
    assert b.value("mcc_agent_rate_bps") == 2e6
    text = generate_latest(reg)
    # One family per metric with a series per agent: valid exposition text.
    assert text.decode().count("# TYPE mcc_agent_joins_total counter") == 1
    assert _without_created(text) == _without_created(generate_latest(_reference([a, b])))
    b.remove()
    assert b.value("mcc_agent_joins_total") is None
    assert a.value("mcc_agent_joins_total") == 105


def test_the_same_labels_twice_on_one_registry_are_refused():
    reg = CollectorRegistry()
    AgentMetrics("h1", "f", "cbr", "receiver", registry=reg)
    with pytest.raises(ValueError, match="registered already"):
        AgentMetrics("h1", "f", "cbr", "receiver", registry=reg)


def test_a_core_gauge_appears_once_set_and_bad_ones_are_refused():
    m = AgentMetrics("h1", "f", "cbr", "receiver")
    assert m.value("mcc_agent_level") is None
    assert m.core_gauge("level", 3) is None
    assert m.value("mcc_agent_level") == 3.0
    assert m.core_gauge("level", 4) is None
    assert m.value("mcc_agent_level") == 4.0
    assert "must match" in m.core_gauge("Bad-Name", 1)
    assert "collides" in m.core_gauge("packets_sent_total", 1)
    assert "collides" in m.core_gauge("malformed_datagrams", 1)
    assert "non-numeric" in m.core_gauge("level", "x")
    assert m.value("mcc_agent_level") == 4.0


def test_render_text_writes_what_generate_latest_writes_for_the_same_agents():
    # An agent host answers scrapes with render_text: Prometheus and the analysis
    # must see the exposition prometheus_client would have written, byte for byte,
    # with awkward label values, NaN and large values, and core gauges that only
    # some agents set (their families in order of first appearance).
    from agents.runtime.metrics import render_text

    registry = CollectorRegistry()
    agents = [AgentMetrics(node, "f", "ormcc", role, registry=registry)
              for node, role in (("h1", "sender"), ('h"2\\x\ny', "receiver"), ("h3", "receiver"))]
    for k, m in enumerate(agents):
        _fill(m, k + 1)
    agents[1].loss_fraction = float("nan")
    agents[2].throughput = 1.25e9  # prometheus_client writes 1.25e+09
    assert agents[1].core_gauge("trac_bps", 2.5) is None
    assert agents[2].core_gauge("cr_id", -1.0) is None
    assert agents[0].core_gauge("trac_bps", float("inf")) is None
    assert render_text(agents) == generate_latest(registry)
    assert render_text(agents[:1]) != render_text(agents[1:2])
    for m in agents:
        m.remove()
    assert render_text([]) == generate_latest(registry)  # families without samples
