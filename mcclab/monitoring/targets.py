"""A run's scrape targets and exporter sources, read off its launch plan (pure).

Every agent launched with ``--metrics ADDR:PORT`` is a target, and so is the
router and link exporter; each carries the labels run, experiment, node, flow,
protocol, role and component. The iperf3 servers and on/off UDP sinks are the
exporter's sources for the TCP and UDP flows' received rates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcclab.monitoring import metric_names as mn
from mcclab.monitoring.exporter import IperfSource
from mcclab.monitoring.prometheus import Target

if TYPE_CHECKING:
    from mcclab.experiment.launch import LaunchPlan


def metrics_endpoint(argv: tuple[str, ...]) -> str | None:
    """The ``--metrics ADDR:PORT`` of an agent command line (None without one)."""
    for i, word in enumerate(argv[:-1]):
        if word == "--metrics":
            return argv[i + 1]
    return None


def flow_protocols(experiment: Any) -> dict[str, str]:
    """Flow name -> protocol label: the agent protocol, or tcp/udp for iperf3 flows."""
    out = {}
    for flow in getattr(experiment, "flows", []):
        protocol = getattr(flow, "protocol", None)
        if protocol is None:
            protocol = getattr(flow, "carrier", None) or flow.type
        out[flow.name] = str(protocol)
    return out


def targets_for(run: str, experiment: str, launches: LaunchPlan, protocols: dict[str, str],
                exporter: str) -> list[Target]:
    """Every scrape target of a run: the exporter first, then each agent's endpoint."""
    base = {"run": run, "experiment": experiment}
    out = [Target(exporter, {**base, "node": mn.ROOT_NODE, "flow": mn.NO_FLOW,
                             "protocol": mn.NO_FLOW, "role": "exporter",
                             "component": "exporter"})]
    for launch in launches.launches:
        endpoint = metrics_endpoint(launch.argv)
        if endpoint is None:
            continue
        out.append(Target(endpoint, {
            **base, "node": launch.node, "flow": launch.flow,
            "protocol": protocols.get(launch.flow, mn.NO_FLOW), "role": launch.role,
            "component": "agent"}))
    return out


def iperf_sources(launches: LaunchPlan, protocols: dict[str, str]) -> list[IperfSource]:
    """The iperf3 servers and UDP sinks whose reports the exporter turns into flow rates."""
    return [IperfSource(launch.flow, launch.node, protocols.get(launch.flow, "tcp"), launch.log,
                        "iperf3" if launch.role == "server" else "stats")
            for launch in launches.launches if launch.role in ("server", "sink")]
