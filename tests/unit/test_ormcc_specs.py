"""The ORMCC experiment specs validate in both profiles and match their generator."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcclab.experiment.loader import resolve

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted(p.stem for p in (REPO / "experiments").glob("ormcc-*.yaml"))


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_spec_validates(name, profile):
    spec = resolve(name, profile)
    spec = getattr(spec, "experiment", spec)
    assert any(f.type == "multicast" and f.protocol == "ormcc" for f in spec.flows)


def test_generated_specs_are_up_to_date(tmp_path):
    subprocess.run([sys.executable, str(REPO / "experiments" / "gen" / "ormcc.py"),
                    str(tmp_path)], check=True)
    generated = sorted(tmp_path.rglob("*.yaml"))
    assert len(generated) >= 12
    for path in generated:
        committed = REPO / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale: run experiments/gen/ormcc.py and commit its output")


def test_table1_quick_profile_scales_every_period_by_one_fifth():
    quick = getattr(resolve("ormcc-table1", "quick"), "experiment", None) or resolve(
        "ormcc-table1", "quick")
    paper = getattr(resolve("ormcc-table1", "paper"), "experiment", None) or resolve(
        "ormcc-table1", "paper")
    assert quick.duration == pytest.approx(0.2 * paper.duration)
    for q, p in zip(quick.flows[1:], paper.flows[1:], strict=True):
        assert q.start == pytest.approx(0.2 * p.start)
        assert (q.stop or quick.duration) == pytest.approx(0.2 * (p.stop or paper.duration))


@pytest.mark.parametrize("name", SPECS)
def test_quick_profiles_fit_the_kernels_multicast_vifs(name):
    """A router beyond 31 interfaces gets no vif for the rest: their receivers see nothing."""
    from mcclab.lab import router_interfaces
    from mcclab.routing.limits import vif_problems

    topo = resolve(name, "quick").topology
    assert vif_problems(topo.routing.backend, router_interfaces(topo)) == []


def test_fig4_sources_behind_a_second_router_keep_the_100_ms_base_rtt():
    topo = resolve("ormcc-fig4-n24", "quick").topology
    assert topo.nodes["r1"].kind == "router"
    by_pair = {frozenset(link.endpoints): link for link in topo.links}
    up = by_pair[frozenset(("r0", "r1"))]
    down = by_pair[frozenset(("r0", "h24"))]
    assert 2 * (up.delay + down.delay) == pytest.approx(0.100)
    assert by_pair[frozenset(("r1", "s24"))].rate is None
    assert up.queue.limit >= 1000  # shared by 24 sources: never the bottleneck
