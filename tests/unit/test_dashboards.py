"""Dashboards as code: the committed JSON matches the code, and every panel refers only to
metrics and labels that some exporter or agent defines, and every protocol dashboard shows
its own protocol only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agents.runtime.registry import package, protocols  # noqa: E402
from dashboards.build import BUILDERS, generated, queries, stale  # noqa: E402
from mcclab.monitoring import metric_names as mn  # noqa: E402
from mcclab.monitoring.promql import read  # noqa: E402

BOARDS = {name: json.loads(text) for name, text in generated().items()}


def test_committed_json_matches_the_code():
    assert stale() == [], "dashboards/json is stale: run 'make dashboards'"


def test_every_protocol_dashboard_is_collected_from_its_package():
    with_board = {name for name in protocols()
                  if (REPO / package(name).replace(".", "/") / "dashboard.py").is_file()}
    assert {"webrc", "rlc", "ormcc", "stair"} <= with_board
    assert set(BUILDERS) == {"mcclab-overview", "mcclab-network",
                             *(f"mcclab-{name}" for name in with_board)}
    for name in with_board:
        assert BOARDS[f"mcclab-{name}.json"]["uid"] == f"mcclab-{name}"


def test_every_dashboard_has_the_run_variable_and_the_datasource():
    assert len(BOARDS) == len(BUILDERS)
    for name, board in BOARDS.items():
        (run,) = [v for v in board["templating"]["list"] if v["name"] == "run"]
        assert "label_values(up" in str(run["query"]) and ", run)" in str(run["query"]), name
        for panel in board["panels"]:
            assert panel["datasource"]["uid"] == "mcclab-prometheus", (name, panel["title"])


def _all_queries():
    for name, board in BOARDS.items():
        for title, ref, expr in queries(board):
            yield name, title, ref, expr


@pytest.mark.parametrize("name,title,ref,expr", list(_all_queries()),
                         ids=[f"{n}:{t}:{r}" for n, t, r, _ in _all_queries()])
def test_panel_refers_only_to_defined_metrics_and_labels(name, title, ref, expr):
    usage = read(expr)
    known = mn.available()
    unknown = usage.metrics - set(known)
    assert not unknown, f"{name} / {title}: no exporter or agent defines {sorted(unknown)}"
    assert usage.metrics, f"{name} / {title}: no metric"
    allowed = set().union(*(mn.labels_of(m) for m in usage.metrics))
    for metric, matcher in usage.matchers:
        labels = mn.labels_of(metric) if metric else allowed
        assert matcher.label in labels, (
            f"{name} / {title}: label {matcher.label!r} is not a label of {metric or 'them'}")
    assert usage.labels <= allowed, f"{name} / {title}: unknown labels {usage.labels - allowed}"
    # Every selector picks the chosen run.
    for metric in usage.metrics:
        assert (metric, "run") in {(m, x.label) for m, x in usage.matchers
                                   if x.op == "=" and x.value == "$run"} or \
            re.search(rf'{metric}\{{run="\$run"', expr), f"{name} / {title}: {metric} not per run"


def test_legends_refer_only_to_labels_the_series_carry():
    for name, board in BOARDS.items():
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                usage = read(target["expr"])
                allowed = set().union(*(mn.labels_of(m) for m in usage.metrics))
                for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
                    assert label in allowed, (name, panel["title"], label)


def test_a_made_up_metric_or_label_is_caught():
    """The check above is not vacuous: a typo in a metric or label fails it."""
    with pytest.raises(AssertionError):
        test_panel_refers_only_to_defined_metrics_and_labels(
            "x", "t", "A", 'mcc_link_byts_total{run="$run"}')
    with pytest.raises(AssertionError):
        test_panel_refers_only_to_defined_metrics_and_labels(
            "x", "t", "A", 'mcc_link_bytes_total{run="$run", queue="1"}')
    with pytest.raises(AssertionError):
        test_panel_refers_only_to_defined_metrics_and_labels(
            "x", "t", "A", 'sum by (colour) (mcc_link_bytes_total{run="$run"})')


def _misplaced(name: str, board: dict) -> list[str]:
    """Panels of ``board`` (file ``name``) that show the wrong protocol: on a protocol's
    dashboard, a query must select that protocol and may read only the core gauges the
    protocol declares; the shared dashboards select no protocol and read no core gauge."""
    own = name.removeprefix("mcclab-").removesuffix(".json")
    gauges = mn.core_gauges().get(own)
    declared = {mn.PREFIX + g for g in {**gauges.sender, **gauges.receiver}} if gauges else set()
    runtime = {m.name for m in mn.RUNTIME}
    out = []
    for title, ref, expr in queries(board):
        usage = read(expr)
        core = {m for m in usage.metrics if m.startswith(mn.PREFIX)} - runtime
        selected = usage.label_values("protocol")
        wanted = {own} if gauges else set()
        if selected != wanted or not core <= declared:
            out.append(f"{name} / {title} / {ref}: protocol {sorted(selected)}, "
                       f"gauges not declared {sorted(core - declared)}")
    return out


def test_each_protocol_dashboard_shows_its_own_protocol_only():
    assert [p for name, board in BOARDS.items() for p in _misplaced(name, board)] == []


def test_a_panel_of_another_protocol_is_caught():
    """The check above is not vacuous: a gauge or protocol of another dashboard fails it."""
    def board(expr: str) -> dict:
        return {"panels": [{"title": "t", "targets": [{"refId": "A", "expr": expr}]}]}

    assert _misplaced("mcclab-webrc.json", board(
        'mcc_agent_nwc{run="$run", protocol="webrc"}')) == []
    assert _misplaced("mcclab-webrc.json", board(
        'mcc_agent_cr_id{run="$run", protocol="webrc"}'))  # an ORMCC gauge
    assert _misplaced("mcclab-webrc.json", board(
        'mcc_agent_nwc{run="$run", protocol="rlc"}'))
    assert _misplaced("mcclab-webrc.json", board('mcc_agent_nwc{run="$run"}'))
    assert _misplaced("mcclab-overview.json", board(
        'mcc_agent_throughput_bps{run="$run", protocol="rlc"}'))
