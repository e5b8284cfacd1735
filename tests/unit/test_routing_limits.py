"""The kernel's 32 multicast vifs: preflight refuses routers that would silently lose some."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcclab.lab import router_interfaces
from mcclab.model.loader import load_topology
from mcclab.routing.limits import MAXVIFS, max_router_interfaces, vif_problems

REPO = Path(__file__).resolve().parents[2]


def test_pim_backends_keep_one_vif_for_pimreg():
    assert MAXVIFS == 32
    assert max_router_interfaces("frr") == 31
    assert max_router_interfaces("pimd") == 31
    assert max_router_interfaces("smcroute") == 32


@pytest.mark.parametrize(("backend", "count", "flagged"), [
    ("frr", 31, False), ("frr", 32, True), ("pimd", 32, True),
    ("smcroute", 32, False), ("smcroute", 33, True),
])
def test_vif_problems_at_the_limit(backend, count, flagged):
    problems = vif_problems(backend, {"r0": count, "r1": 2})
    assert bool(problems) == flagged
    if flagged:
        assert "r0" in problems[0] and str(count) in problems[0] and "r1" not in problems[0]


def test_router_interfaces_counts_links_and_lan_attachments():
    lan = load_topology(REPO / "topologies" / "lan.yaml")
    assert router_interfaces(lan) == {"r1": 2}
    star = load_topology(REPO / "topologies" / "ormcc-fig3.yaml")
    # The paper's 64-leaf star: src + 64 sources + 64 receivers on one router.
    assert router_interfaces(star) == {"r0": 129}
    assert vif_problems("frr", router_interfaces(star))
