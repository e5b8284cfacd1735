"""Bringing a lab up reports each step to its own total (one progress bar per step)."""

from __future__ import annotations

from pathlib import Path

from mcclab import lab as lab_module
from mcclab import state as state_module
from mcclab.lab import Lab, LabOptions
from mcclab.model.loader import load_topology

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


class _Backend:
    """Stands in for Mininet: creates nothing."""

    def __init__(self, runner, state):
        pass

    def add_node(self, name):
        pass

    def add_lan(self, name):
        pass

    def add_link(self, topo, plan, index):
        pass


class _Runner:
    """Runs nothing."""

    def run_all(self, cmds):
        pass


def test_every_build_step_reaches_its_own_total(monkeypatch, tmp_path):
    monkeypatch.setattr(state_module, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(lab_module, "MininetBackend", _Backend)
    topo = load_topology(TOPOLOGIES / "lan.yaml")  # hosts, routers and a LAN
    calls: list[tuple[str, int, int]] = []
    lab = Lab(topo, LabOptions(progress=lambda *call: calls.append(call)))
    lab.runner = _Runner()
    lab._build(lab.options.progress)

    last = {step: (done, total) for step, done, total in calls}
    assert set(last) == {"creating nodes", "creating links", "configuring nodes"}
    assert last["creating nodes"] == (len(topo.nodes), len(topo.nodes))
    assert last["creating links"] == (len(topo.links), len(topo.links))
    assert all(done == total for done, total in last.values())
    assert [d for s, d, _ in calls if s == "creating links"] == list(range(1, len(topo.links) + 1))
