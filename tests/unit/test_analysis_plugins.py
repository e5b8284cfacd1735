"""Analysis plugins: registry, on-demand import, measure quantities and plugin figures."""

from __future__ import annotations

import json
import math
import sys

import pytest
import yaml
from synthetic_runs import rows, write_run

from mcclab.analysis import plugins
from mcclab.analysis.plugins import PluginError, figure, get_measure, measure
from mcclab.analysis.report import build_report
from mcclab.analysis.results import load_run
from mcclab.analysis.summary import format_value, summarise
from mcclab.experiment.loader import resolve
from mcclab.experiment.spec import Experiment
from mcclab.model.loader import SpecError

# m: 1 Mbit/s until t=30, then 2 Mbit/s, at r1; t: 1.5 Mbit/s at r2. Window (10, 60].
FLOWS = (rows("m", "multicast", "r1", [1e6 if t <= 30 else 2e6 for t in range(1, 61)],
              range(1, 61))
         + rows("t", "tcp", "r2", 1.5e6, range(1, 61)))


@measure("unittest.boom", unit="1")
def _boom(run, flow: str) -> float:  # noqa: ANN001
    """Always fails, like a plugin with a bug."""
    raise RuntimeError(f"no data for {flow}")


@measure("unittest.packets", unit="pkt/s")
def _packets(run, flow: str) -> float:  # noqa: ANN001
    """Mean packets per second of a flow over the window."""
    start, end = run.window
    table = run.per_second[(run.per_second["flow"] == flow) & (run.per_second["t"] > start)]
    return float(table["packets"].sum()) / (end - start)


@figure("unittest.broken")
def _broken_figure(run, folder):  # noqa: ANN001, ANN202
    """Never drawn."""
    raise ValueError("cannot draw")


def summary_of(tmp_path, references, **kwargs):
    """The summary of a synthetic run with these references."""
    folder = write_run(tmp_path / "exp" / "run", FLOWS, references=references, **kwargs)
    return summarise(load_run(folder))


def test_decorators_register_and_refuse_bad_names_units_and_duplicates():
    assert get_measure("unittest.packets").unit == "pkt/s"
    doc = get_measure("unittest.packets").doc
    assert doc == "Mean packets per second of a flow over the window."
    with pytest.raises(ValueError, match="prefix.name"):
        measure("noprefix")(lambda run: 0.0)
    with pytest.raises(ValueError, match="unknown unit"):
        measure("unittest.x", unit="furlong")
    with pytest.raises(ValueError, match="already registered"):
        measure("unittest.boom")(lambda run, flow: 0.0)


def test_protocol_module_is_imported_on_demand(monkeypatch):
    module = "mcclab.analysis.protocols.generic"
    monkeypatch.delitem(sys.modules, module, raising=False)
    for name in [n for n in plugins.MEASURES if n.startswith("generic.")]:
        monkeypatch.delitem(plugins.MEASURES, name)
    assert "generic.mean_rate" not in plugins.MEASURES
    assert get_measure("generic.mean_rate").unit == "bit/s"
    assert module in sys.modules


def test_a_protocol_packages_analysis_is_imported_on_demand(monkeypatch):
    """``rlc.*`` names are found in agents/rlc/analysis.py, the protocol's own folder."""
    module = "agents.rlc.analysis"
    monkeypatch.delitem(sys.modules, module, raising=False)
    for name in [n for n in plugins.MEASURES if n.startswith("rlc.")]:
        monkeypatch.delitem(plugins.MEASURES, name)
    assert get_measure("rlc.fairness").fn.__module__ == module
    assert module in sys.modules
    known = plugins.known("measure")
    assert {"rlc.fairness", "webrc.artt", "ormcc.suppression", "stair.tcp_ratio"} <= set(known)


def test_unknown_names_list_the_known_ones():
    with pytest.raises(PluginError, match=r"unknown measure 'generic.nope'; known: .*"
                                          r"generic.mean_rate"):
        get_measure("generic.nope")
    with pytest.raises(PluginError, match="unknown figure 'nomodule.x'; known: .*generic.rates"):
        plugins.get_figure("nomodule.x")
    with pytest.raises(PluginError, match="unknown measure 'no-dot'"):
        get_measure("no-dot")


@pytest.mark.parametrize(("unit", "text", "value"), [
    ("1", 0.5, 0.5), ("1", "12%", 0.12), ("1", "1.5", 1.5), ("1", 3, 3.0),
    ("s", "200ms", 0.2), ("bit/s", "1.5Mbit", 1.5e6), ("pkt/s", "250pkt/s", 250.0),
    ("pkt", "40pkt", 40.0), ("B", "1kB", 1000.0),
])
def test_units_parse_and_write_back(unit, text, value):
    parsed = plugins.UNITS[unit].parse(text)
    assert parsed == pytest.approx(value)
    assert plugins.UNITS[unit].parse(plugins.UNITS[unit].write(parsed)) == pytest.approx(value)


@pytest.mark.parametrize(("unit", "text"), [("1", True), ("1", "12 apples"), ("s", 0.2),
                                            ("pkt/s", 250), ("bit/s", "1MB")])
def test_units_refuse(unit, text):
    with pytest.raises(ValueError):
        plugins.UNITS[unit].parse(text)


def test_measure_quantities_pass_fail_na_and_error(tmp_path):
    refs = [
        # mean over (30, 60] of m is 2 Mbit/s; over the whole window (10, 60], 1.6 Mbit/s
        {"kind": "measure", "label": "late", "measure": "generic.mean_rate",
         "args": {"flow": "m", "start": "30s"}, "paper": "2Mbit", "tolerance": "1%"},
        {"kind": "measure", "label": "all", "measure": "generic.mean_rate",
         "args": {"flow": "m"}, "paper": "2Mbit", "tolerance": "10%"},
        {"kind": "measure", "label": "absent", "measure": "generic.mean_rate",
         "args": {"flow": "m", "node": "r9"}, "paper": "1Mbit", "tolerance": "10%"},
        {"kind": "measure", "label": "boom", "measure": "unittest.boom", "args": {"flow": "t"},
         "paper": "50%", "within": [0, "100%"]},
        # 1.5 Mbit/s in 1000-byte packets: 187.5 -> 188 packets per second
        {"kind": "measure", "label": "pps", "measure": "unittest.packets", "args": {"flow": "t"},
         "paper": "190pkt/s", "within": ["180pkt/s", "200pkt/s"]},
    ]
    late, whole, absent, boom, pps = summary_of(tmp_path, refs).quantities
    assert (late.measured, late.verdict, late.unit) == (2e6, "pass", "bit/s")
    assert whole.measured == pytest.approx(1.6e6) and whole.verdict == "fail"
    assert absent.measured is None and absent.verdict == "n/a"
    assert "found nothing to measure" in absent.note
    assert boom.measured is None and boom.verdict == "error"
    assert boom.error == "RuntimeError: no data for t" and boom.paper == 0.5
    assert boom.within == (0.0, 1.0)
    assert pps.measured == pytest.approx(188) and pps.verdict == "pass"
    assert format_value(pps.kind, pps.measured, pps.unit) == "188 pkt/s"


def test_summary_json_carries_plugin_and_error_only_for_measures(tmp_path):
    refs = [{"kind": "throughput", "label": "t", "flow": "t", "paper": "1.5Mbit",
             "tolerance": "1%"},
            {"kind": "measure", "label": "boom", "measure": "unittest.boom",
             "args": {"flow": "t"}, "paper": 1, "tolerance": "5%"}]
    data = json.loads(summary_of(tmp_path, refs).model_dump_json())
    builtin, plugin = data["quantities"]
    assert "measure" not in builtin and "error" not in builtin
    assert plugin["measure"] == "unittest.boom" and plugin["verdict"] == "error"
    assert plugin["error"].startswith("RuntimeError")


def test_settling_time_of_a_step(tmp_path):
    # m steps from 1 to 2 Mbit/s after t=30; without smoothing it is within 10 %
    # of its final mean from t=31 on, 1 s after the step at 30 s.
    refs = [{"kind": "measure", "label": "settle", "measure": "generic.settling_time",
             "args": {"flow": "m", "smooth": 1, "after": "30s"}, "paper": "1s",
             "tolerance": "1%"},
            {"kind": "measure", "label": "smoothed", "measure": "generic.settling_time",
             "args": {"flow": "m", "smooth": 5}, "paper": "35s", "tolerance": "1%"}]
    step, smoothed = summary_of(tmp_path, refs).quantities
    assert step.measured == 1.0 and step.verdict == "pass"
    # the 5-s moving average reaches 1.8 Mbit/s (within 10 % of 2) at t=34
    assert smoothed.measured == 34.0 and smoothed.verdict == "fail"


def test_spec_with_measure_and_figures_resolves_and_round_trips(tmp_path):
    spec = tmp_path / "plug.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "plug", "topology": "topologies/dumbbell.yaml", "duration": "20s",
        "flows": [{"name": "t", "type": "tcp", "sender": "s2", "receiver": "d2"}],
        "references": [{"kind": "measure", "label": "settle", "measure": "generic.settling_time",
                        "args": {"flow": "t"}, "paper": "200ms", "within": ["0s", "1s"]}],
        "figures": [{"figure": "generic.rates", "args": {"smooth": 3}}],
    }))
    exp = resolve(str(spec)).experiment
    ref = exp.references[0]
    assert (ref.paper, ref.within, ref.unit) == (0.2, (0.0, 1.0), "s")
    dumped = exp.model_dump(mode="json")
    assert dumped["references"][0]["paper"] == "200ms"
    assert dumped["references"][0]["within"] == ["0ms", "1s"]
    assert Experiment.model_validate(dumped) == exp


def test_plugin_figures_in_report_and_failures_noted(tmp_path):
    folder = write_run(tmp_path / "exp" / "run", FLOWS, spec={"figures": [
        {"figure": "generic.rates", "args": {"flows": ["m"], "smooth": 3}},
        {"figure": "unittest.broken"},
        {"figure": "generic.gone"},
    ]})
    page = build_report(folder).read_text()
    assert (folder / "figures" / "generic-rates.svg").is_file()
    assert (folder / "figures" / "generic-rates.png").is_file()
    assert "Each flow&#39;s rate (mean over its receivers) over time" in page
    assert "figure unittest.broken failed: ValueError: cannot draw" in page
    assert "figure generic.gone left out: figure: unknown figure" in page


def test_rates_figure_without_data_still_draws(tmp_path):
    folder = write_run(tmp_path / "exp" / "run", None,
                       spec={"figures": [{"figure": "generic.rates"}]})
    build_report(folder)
    assert (folder / "figures" / "generic-rates.svg").is_file()
    assert math.isnan(get_measure("generic.mean_rate").fn(load_run(folder), flow="m"))


def test_spec_view_rejects_an_unknown_measure_in_a_results_folder(tmp_path):
    folder = write_run(tmp_path / "exp" / "run", FLOWS, references=[
        {"kind": "measure", "label": "x", "measure": "generic.nope", "paper": 1}])
    with pytest.raises(SpecError, match=r"references\[0\].*unknown measure 'generic.nope'"):
        load_run(folder)
