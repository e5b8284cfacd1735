"""The network-backend seam: a Lab builds through whatever LabOptions.network_backend makes."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from network_support import FakeNetwork

from mcclab import state as state_module
from mcclab.execute import Runner
from mcclab.lab import Lab, LabOptions
from mcclab.model.loader import load_topology
from mcclab.net.backend import NetworkBackend
from mcclab.net.mininet_backend import MininetBackend
from mcclab.net.node_config import netns_name
from mcclab.state import LabState

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


@pytest.fixture
def state_root(monkeypatch, tmp_path):
    monkeypatch.setattr(state_module, "STATE_ROOT", tmp_path)
    return tmp_path


def _built_lab() -> Lab:
    topo = load_topology(TOPOLOGIES / "lan.yaml")  # hosts, routers and a LAN
    lab = Lab(topo, LabOptions(network_backend=FakeNetwork))
    lab.runner = Runner(dry_run=True)
    lab._build(lab.options.progress)
    return lab


def test_the_lab_builds_through_the_backend_it_is_given(state_root):
    lab = _built_lab()
    fake, topo = lab.backend, lab.topo
    assert isinstance(fake, FakeNetwork)
    assert fake.runner is lab.runner and fake.state is lab.state
    # Every node first (a LAN as a bridge, the rest as namespaces), then every link.
    assert fake.calls == ([("lan" if n.kind == "lan" else "node", name)
                           for name, n in topo.nodes.items()]
                          + [("link", i) for i in range(len(topo.links))])
    assert all(t is topo and p is lab.plan for t, p in fake.seen)
    assert lab.mininet is None  # only Mininet's backend has a Mininet object


def test_the_lab_configures_nodes_by_namespace_name_whatever_made_them(state_root):
    """The protocol's promise: namespaces are mcl-<node>; the lab's commands rely on it."""
    lab = _built_lab()
    entered = {c.netns for c in lab.runner.history if c.netns is not None}
    layer3 = {n for n in lab.topo.nodes if lab.topo.kind_of(n) != "lan"}
    assert entered == {netns_name(n) for n in layer3}


def test_down_closes_the_backend(state_root):
    topo = load_topology(TOPOLOGIES / "lan.yaml")
    lab = Lab(topo, LabOptions(network_backend=FakeNetwork))
    # Nothing is recorded in the state, so teardown removes only its directory.
    lab.backend = fake = FakeNetwork(lab.runner, lab.state)
    lab.down()
    assert fake.closed


def test_mininet_is_the_default_and_matches_the_protocol(state_root):
    assert LabOptions().network_backend is MininetBackend
    state = LabState(lab_id="seam")
    for cls in (MininetBackend, FakeNetwork):
        assert isinstance(cls(Runner(dry_run=True), state), NetworkBackend)
        # Same parameters as the protocol's methods, so a lab's calls fit any backend.
        for name in ("add_node", "add_lan", "add_link", "close"):
            want = list(inspect.signature(getattr(NetworkBackend, name)).parameters)
            assert list(inspect.signature(getattr(cls, name)).parameters) == want, (cls, name)
