"""Bringing a lab up reports each step to its own total (one progress bar per step)."""

from __future__ import annotations

from pathlib import Path

from network_support import FakeNetwork

from mcclab import state as state_module
from mcclab.execute import Runner
from mcclab.lab import Lab, LabOptions
from mcclab.model.loader import load_topology

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def test_every_build_step_reaches_its_own_total(monkeypatch, tmp_path):
    monkeypatch.setattr(state_module, "STATE_ROOT", tmp_path)
    topo = load_topology(TOPOLOGIES / "lan.yaml")  # hosts, routers and a LAN
    calls: list[tuple[str, int, int]] = []
    lab = Lab(topo, LabOptions(progress=lambda *call: calls.append(call),
                               network_backend=FakeNetwork))
    lab.runner = Runner(dry_run=True)
    lab._build(lab.options.progress)

    last = {step: (done, total) for step, done, total in calls}
    assert set(last) == {"creating nodes", "creating links", "configuring nodes"}
    assert last["creating nodes"] == (len(topo.nodes), len(topo.nodes))
    assert last["creating links"] == (len(topo.links), len(topo.links))
    assert all(done == total for done, total in last.values())
    assert [d for s, d, _ in calls if s == "creating links"] == list(range(1, len(topo.links) + 1))
