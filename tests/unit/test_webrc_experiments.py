"""The WEBRC experiment specs: each resolves in both profiles, with valid WEBRC sessions."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.webrc.params import WebrcParams
from mcclab.experiment.loader import resolve
from mcclab.experiment.spec import MulticastFlow

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
WEBRC = sorted(["default"] + [p.stem for p in EXPERIMENTS.glob("webrc-*.yaml")])


def test_every_paper_section_has_a_spec():
    assert {"default", "webrc-fig4", "webrc-fig6", "webrc-fig7", "webrc-fig8", "webrc-fig9b",
            "webrc-fig10", "webrc-fig10-separate", "webrc-fig11"} <= set(WEBRC)


@pytest.mark.parametrize("name", WEBRC)
def test_spec_resolves_in_both_profiles(name):
    quick, paper = resolve(name, "quick"), resolve(name, "paper")
    assert quick.experiment.duration < paper.experiment.duration
    assert quick.experiment.references and paper.experiment.references
    for resolved in (quick, paper):
        flows = [f for f in resolved.experiment.flows if isinstance(f, MulticastFlow)]
        assert flows and all(f.protocol == "webrc" for f in flows)
        for flow in flows:
            params = WebrcParams.model_validate(flow.params)
            assert params.packet_size == 1024  # LENP
            assert (params.p, params.tsd, params.epoch) == (0.75, 10.0, 0.5)  # Table 1


def test_default_experiment_is_section_5_2_webrc_against_tcp():
    exp = resolve("default", "quick").experiment
    assert {f.name: f.type for f in exp.flows} == {"webrc": "multicast", "tcp": "tcp"}
    assert exp.topology == "topologies/webrc-dumbbell.yaml"
    assert exp.duration <= 180


def test_section_5_2_tcp_is_the_papers_model_without_a_window_ceiling():
    """WEBRC's model: Reno, no ceiling (sec. 5.2: the first session reaches the full link)."""
    from mcclab.experiment.spec import tcp_model

    for name in ("default", "webrc-fig9b"):
        exp = resolve(name, "paper").experiment
        (tcp,) = [f for f in exp.flows if f.type == "tcp"]
        assert exp.tcp is not None and exp.tcp.model == "webrc"
        assert (tcp_model(exp, tcp).cc, tcp_model(exp, tcp).max_window) == ("reno", None)
        sweep = exp.sweeps["tcp-readings"]
        assert [p["tcp.model"] for p in sweep.points()] == ["webrc", "linux-reno"]
