"""The metric contract (mcclab/monitoring/metric_names.py) against the code that exports it."""

from __future__ import annotations

from agents.runtime.metrics import AgentMetrics
from agents.runtime.registry import protocols
from agents.runtime.session import Session
from agents.sim import simulate
from mcclab.model.loader import load_topology
from mcclab.monitoring import metric_names as mn
from mcclab.monitoring.exporter import ExporterConfig, LabCollector, registry_for


def _sample_names(registry) -> set[str]:
    return {s.name for fam in registry.collect() for s in fam.samples
            if not s.name.endswith("_created")}


def test_runtime_metrics_are_exactly_what_the_agent_runtime_exports():
    names = _sample_names(AgentMetrics("n", "f", "p", "receiver").registry)
    assert names == {m.name for m in mn.RUNTIME}


def test_core_gauges_are_assembled_from_the_discovered_protocols():
    registered = protocols()
    gauges = mn.core_gauges()
    assert set(gauges) == set(registered)
    for name, spec in registered.items():
        assert gauges[name].sender == spec.sender_gauges, name
        assert gauges[name].receiver == spec.receiver_gauges, name
        assert all(spec.sender_gauges.values()) and all(spec.receiver_gauges.values()), (
            f"{name}: every gauge needs its meaning")


def test_the_registry_discovers_every_protocol_package():
    """Every package under agents/ but the runtime holds a protocol the registry found, and
    each protocol lives in its own package (so a new one needs no edit elsewhere)."""
    from agents.runtime.registry import package, protocol_packages

    found = {package(name) for name in protocols()}
    assert found == set(protocol_packages())
    assert len(found) == len(protocols())
    assert {"agents.cbr", "agents.rlc", "agents.webrc", "agents.ormcc"} <= found


def _session(name: str) -> Session:
    spec = protocols()[name]
    params = spec.params.model_validate(spec.example_params)
    channels = spec.channels(params) if spec.channels else 1
    return Session.model_validate({
        "protocol": name, "flow": "f", "session_id": 1, "source": "10.0.0.1", "ssm": False,
        "ttl": 1, "channels": [{"group": f"239.9.9.{c + 1}", "port": 5000}
                               for c in range(channels)],
        "params": spec.example_params,
        "nodes": {"s": {"address": "10.0.0.1"}, "r": {"address": "10.0.0.2"}},
        **({"feedback_port": 5001} if spec.feedback else {}),
    })


def test_registered_cores_export_the_gauges_the_contract_lists():
    for name, gauges in mn.core_gauges().items():
        result = simulate(_session(name), sender="s", receivers=["r"], duration=2.0)
        builtin = {m.name for m in mn.RUNTIME}
        for role, node, expected in (("sender", result.sender, gauges.sender),
                                     ("receiver", result.receivers["r"], gauges.receiver)):
            core = _sample_names(node.agent.metrics.registry) - builtin
            assert core == {mn.PREFIX + g for g in expected}, (name, role)


def test_core_gauge_names_do_not_collide_with_runtime_metrics():
    # The runtime refuses a colliding core gauge only when it is set, once a second,
    # as an error record; the contract catches it before any agent runs.
    runtime = {m.name.removesuffix("_total") for m in mn.RUNTIME}
    for m in mn.core_metrics(mn.core_gauges()):
        assert m.name.removesuffix("_total") not in runtime, m.name


def test_exporter_metrics_are_exactly_what_the_exporter_exports(tmp_path):
    topo = load_topology("topologies/dumbbell.yaml")
    (tmp_path / "links").mkdir()
    config = ExporterConfig(listen="127.0.0.1", port=1, lab_dir=str(tmp_path), topology="",
                            link_backend="kernel", routers=[])
    collector = LabCollector(config, topo)
    collector.links.counters = lambda: []  # no lab: the families are still declared
    names = {fam.name for fam in registry_for(collector).collect()}
    declared = {m.name.removesuffix("_total") for m in mn.EXPORTER}
    assert names == declared
