"""Shared building blocks: the datasource, the run variable, selectors and panel shapes.

Every query selects ``run="$run"``, so a dashboard shows one run at a time,
and any run Prometheus still holds can be chosen from the run variable.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus as pb
from grafana_foundation_sdk.builders import stat, timeseries
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

from mcclab.monitoring import grafana
from mcclab.monitoring import metric_names as mn

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid=grafana.DATASOURCE_UID)
RATE = "$__rate_interval"
TAG = "mcclab"
HEIGHT = 8

def sel(metric: str, **matchers: str) -> str:
    """A selector of ``metric`` in the chosen run, with more equality matchers."""
    parts = ['run="$run"', *(f'{k}="{v}"' for k, v in matchers.items())]
    return f"{metric}{{{', '.join(parts)}}}"


def rate(metric: str, **matchers: str) -> str:
    """Per-second rate of a counter (or cumulative gauge) in the chosen run."""
    return f"rate({sel(metric, **matchers)}[{RATE}])"


def query(expr: str, legend: str, ref: str) -> pb.Dataquery:
    """One Prometheus range query."""
    return (pb.Dataquery().expr(expr).legend_format(legend).ref_id(ref).range()
            .datasource(DATASOURCE))


def _targets(targets: list[tuple[str, str]]) -> list[pb.Dataquery]:
    return [query(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)]


def series(title: str, unit: str, targets: list[tuple[str, str]], description: str,
           width: int = 12, step: bool = False) -> timeseries.Panel:
    """A time-series panel; ``step`` draws levels and states as steps."""
    panel = (timeseries.Panel().title(title).description(description).unit(unit)
             .datasource(DATASOURCE).targets(_targets(targets)).height(HEIGHT).span(width)
             .legend(cb.VizLegendOptions().show_legend(True)
                     .display_mode(cm.LegendDisplayMode.LIST)
                     .placement(cm.LegendPlacement.BOTTOM))
             .line_width(1).fill_opacity(5))
    if step:
        panel = panel.line_interpolation(cm.LineInterpolation.STEP_AFTER)
    return panel


def single(title: str, unit: str, expr: str, description: str, width: int = 6,
           decimals: int = 3) -> stat.Panel:
    """A stat panel showing the last value of one expression."""
    return (stat.Panel().title(title).description(description).unit(unit).decimals(decimals)
            .datasource(DATASOURCE).targets(_targets([(expr, title)])).height(HEIGHT)
            .span(width))


def run_variable() -> db.QueryVariable:
    """The run to show: every run Prometheus holds, newest first (run ids sort by time)."""
    return (db.QueryVariable("run").label("Run")
            .query(f'label_values(up{{job="{mn.JOB}"}}, run)')
            .datasource(DATASOURCE)
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.ALPHABETICAL_DESC))


def dashboard(uid: str, title: str, description: str) -> db.Dashboard:
    """A dashboard with mcclab's defaults: run variable, 1-s data, links to the others."""
    board = (db.Dashboard(f"mcclab · {title}").uid(uid).description(description)
             .tags([TAG]).time("now-5m", "now").refresh("5s").timezone("browser")
             .tooltip(dm.DashboardCursorSync.CROSSHAIR)
             .with_variable(run_variable()))
    return board.link(db.DashboardLink("mcclab").type(dm.DashboardLinkType.DASHBOARDS)
                      .tags([TAG]).as_dropdown(False).include_vars(True).keep_time(True))


# Legends and description text shared by the protocols' dashboards (agents/*/dashboard.py).
AT = "{{flow}} @ {{node}}"
FROM = "{{flow}} from {{node}}"


def receiver(metric: str, protocol: str) -> str:
    """A selector of ``metric`` on the receivers of ``protocol`` in the chosen run."""
    return sel(metric, protocol=protocol, role="receiver")


def sender(metric: str, protocol: str) -> str:
    """A selector of ``metric`` on the senders of ``protocol`` in the chosen run."""
    return sel(metric, protocol=protocol, role="sender")


def throughput(protocol: str) -> tuple[str, str]:
    """The receivers' throughput of ``protocol`` with its legend, a panel target."""
    return (receiver("mcc_agent_throughput_bps", protocol), "received " + AT)
