"""One TCP model per paper (experiments/tcp/models.yaml): what each sets, and who uses it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from mcclab.experiment.launch import plan_launches
from mcclab.experiment.loader import EXPERIMENTS, resolve
from mcclab.experiment.spec import Experiment, carries_tcp, tcp_model
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import SpecError
from mcclab.model.tcp_models import (
    host_sysctls,
    load_models,
    model,
    models,
    reading_label,
)

RUN = Path("/tmp/mcclab-test-run")
OFF = [("net.ipv4.tcp_sack", 0), ("net.ipv4.tcp_recovery", 0),
       ("net.ipv4.tcp_early_retrans", 0), ("net.ipv4.tcp_frto", 0)]

# name: (cc, max_window, sack, rack, tlp, frto, verdict)
PINNED = {
    "webrc": ("reno", None, False, False, False, False, True),
    "rlc": ("reno", 20, False, False, False, False, True),
    "ormcc": ("reno", 20, False, False, False, False, True),
    "ormcc-emulab": ("reno", None, True, False, False, False, True),
    "stair": ("reno", 20, False, False, False, False, True),
    "linux-reno": ("reno", None, True, True, True, True, False),
    "linux-cubic": ("cubic", None, True, True, True, True, False),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_each_model_sets_what_its_paper_says(name):
    m = model(name)
    assert (m.cc, m.max_window, m.sack, m.rack, m.tlp, m.frto, m.verdict) == PINNED[name]


def test_every_model_is_pinned_and_the_linux_reading_is_linux_reno():
    assert set(models().models) == set(PINNED)
    assert models().linux_reading == "linux-reno"


def test_host_sysctls_turn_off_exactly_what_the_model_turns_off():
    assert host_sysctls(model("webrc")) == OFF
    assert host_sysctls(model("ormcc-emulab")) == OFF[1:]  # SACK stays on (Linux 2.4)
    assert host_sysctls(model("linux-reno")) == []  # the kernel's defaults stay


def test_a_papers_model_sources_every_setting(tmp_path):
    text = (EXPERIMENTS / "tcp" / "models.yaml").read_text()
    bad = tmp_path / "models.yaml"
    bad.write_text(text.replace('sack: "inferred: ns-2\'s Agent/TCP and Agent/TCP/Reno have '
                                'no SACK; the paper names no SACK agent."',
                                'sack: "no SACK"', 1))
    with pytest.raises(SpecError, match="why.sack: a paper's model says 'quoted:'"):
        load_models(bad)
    bad.write_text(text.replace("linux_reading: linux-reno", "linux_reading: webrc"))
    with pytest.raises(SpecError, match="never a verdict"):
        load_models(bad)
    bad.write_text(text.replace("    frto: false\n", "    frto: false\n    ecn: true\n", 1))
    with pytest.raises(SpecError, match="models.webrc.ecn"):
        load_models(bad)


def _default(**change) -> Experiment:
    data = resolve("default").experiment.model_dump(mode="json", exclude_unset=True)
    data.update(change)
    return Experiment.model_validate(data)


def test_an_unknown_model_is_refused_with_the_known_ones():
    with pytest.raises(ValidationError, match=r"no TCP model 'ns2'; known: linux-cubic, "):
        _default(tcp={"model": "ns2"})


@pytest.mark.parametrize("field,value", [("cc", "reno"), ("sack", False),
                                         ("max_window", "20pkt")])
def test_a_flow_under_a_model_chooses_no_tcp_setting_of_its_own(field, value):
    data = resolve("default").experiment.model_dump(mode="json", exclude_unset=True)
    tcp = next(f for f in data["flows"] if f["type"] == "tcp")
    tcp[field] = value
    with pytest.raises(ValidationError, match=rf"flows\[1\]\.{field}: set by the TCP model "
                                              r"\(webrc"):
        Experiment.model_validate(data)


def _setup(exp: Experiment, topology) -> list[str]:
    return [str(c) for c in plan_launches(exp, plan_addresses(topology), RUN, python="py").setup]


def test_the_webrc_model_turns_recovery_off_on_the_sender_and_sets_no_ceiling():
    res = resolve("default", "quick")
    assert _setup(res.experiment, res.topology) == [
        "[mcl-s2] sysctl -q -w " + " ".join(f"{k}={v}" for k, v in sorted(OFF))]
    linux = _default(tcp={"model": "linux-reno"})
    assert _setup(linux, res.topology) == []
    cubic = _default(tcp={"model": "linux-cubic"})
    clients = [launch.argv for launch in plan_launches(cubic, plan_addresses(res.topology),
                                                       RUN).launches if launch.role == "client"]
    assert clients and all(argv[argv.index("-C") + 1] == "cubic" for argv in clients)


def test_the_stair_model_caps_every_path_at_20_segments():
    res = resolve("stair-fig9", "quick")
    setup = _setup(res.experiment, res.topology)
    routes = [c for c in setup if "cwnd lock 20" in c]
    primed = [c for c in setup if "mcclab.net.tcp_window" in c]
    assert routes and len(primed) == 1 and primed[0].count(" 20") >= len(routes)
    assert [c for c in setup if "sysctl" in c] == [
        "[mcl-tsrc] sysctl -q -w " + " ".join(f"{k}={v}" for k, v in sorted(OFF))]


def _paper_model(name: str) -> str:
    """Which paper's TCP an experiment reproduces, by its file name."""
    if name == "default" or name.startswith("webrc-"):
        return "webrc"
    if name.startswith("ormcc-fig11"):
        return "ormcc-emulab"  # Emulab, kernel TCP (sec. V-F)
    return name.split("-")[0]


COMPETING = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml")
                   if any(carries_tcp(f) for f in resolve(p.stem).experiment.flows))


@pytest.mark.parametrize("name", [n for n in COMPETING if n != "ormcc-smoke"])
def test_every_tcp_competition_figure_runs_its_papers_model_and_both_readings(name):
    exp = resolve(name, "paper").experiment
    want = _paper_model(name)
    assert exp.tcp is not None and exp.tcp.model == want
    assert {tcp_model(exp, f).cc for f in exp.flows if carries_tcp(f)} == {"reno"}
    readings = exp.sweeps["tcp-readings"]
    assert [p["tcp.model"] for p in readings.points()] == [want, "linux-reno"]
    quick = resolve(name, "quick").experiment  # the quick profile keeps the model
    assert quick.tcp is not None and quick.tcp.model == want


def test_competition_figures_are_found():
    """The list above is not empty by accident: every paper with TCP figures is in it."""
    assert {_paper_model(n) for n in COMPETING} >= {"webrc", "rlc", "ormcc", "ormcc-emulab",
                                                    "stair"}


def test_reports_say_which_reading_a_run_is():
    assert reading_label(None) == ""
    assert reading_label("webrc").endswith("these are the verdicts")
    assert "reno, no window ceiling, SACK off, RACK off, TLP off, F-RTO off" in reading_label(
        "webrc")
    assert "window ≤ 20 segments" in reading_label("stair")
    linux = reading_label("linux-reno")
    assert "Linux's default TCP" in linux and "not the verdict" in linux
    assert "unknown" in reading_label("gone")


def test_run_and_sweep_reports_label_each_reading(tmp_path):
    from types import SimpleNamespace

    import yaml

    from mcclab.analysis.report import _tcp_reading
    from mcclab.analysis.results import SpecView
    from mcclab.analysis.sweep_report import _reading

    def run(spec_yaml: str) -> SimpleNamespace:
        """A run as the report sees it: its spec.yaml read through the analysis' view."""
        return SimpleNamespace(spec=SpecView.model_validate(yaml.safe_load(spec_yaml)))

    assert "a second reading, not the verdict" in _tcp_reading(
        run("name: x\ntcp: {model: linux-reno}\n"))
    assert "these are the verdicts" in _tcp_reading(run("name: x\ntcp: {model: ormcc}\n"))
    assert _tcp_reading(run("name: x\n")) == ""

    def point(value: str) -> SimpleNamespace:
        return SimpleNamespace(record=SimpleNamespace(set={"tcp.model": value}))

    assert "the verdict" in _reading("tcp.model", point("stair"))
    assert "not the verdict" in _reading("tcp.model", point("linux-reno"))
    assert _reading("seed", point("stair")) == ""
