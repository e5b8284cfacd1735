"""Human views of a topology: table rows per link direction and a Graphviz graph."""

from __future__ import annotations

from mcclab.model.topology import LinkParams, Topology
from mcclab.model.units import format_duration, format_rate


def _queue(p: LinkParams) -> str:
    """Short queue description."""
    if p.queue is None:
        return "-"
    q = f"{p.queue.limit}pkt {p.queue.discipline}"
    if p.queue.red is not None:
        r = p.queue.red
        q += f" {r.min_th}/{r.max_th}/{r.max_p:g}"
    return q


def _loss(p: LinkParams) -> str:
    """Short loss description."""
    if p.gilbert_elliott is not None:
        ge = p.gilbert_elliott
        return f"GE p={ge.p:g} r={ge.r:g}"
    return f"{p.loss * 100:g}%" if p.loss else "-"


def link_rows(topo: Topology) -> list[tuple[str, ...]]:
    """One row per link direction: index, link, direction, rate, delay, loss, queue."""
    rows = []
    for i, link in enumerate(topo.links):
        a, b = link.endpoints
        for forward, label in ((True, f"{a}→{b}"), (False, f"{b}→{a}")):
            p = link.direction(forward)
            rate = format_rate(p.rate) if p.rate else "unshaped"
            delay = format_duration(p.delay)
            if p.jitter:
                delay += f" ±{format_duration(p.jitter)}"
            rows.append((str(i), f"{a}—{b}", label, rate, delay, _loss(p), _queue(p)))
    return rows


def dot_graph(topo: Topology) -> str:
    """A Graphviz description of the topology (render with `dot -Tpng`)."""
    shapes = {"host": "box", "router": "ellipse", "lan": "hexagon"}
    lines = [f'graph "{topo.name}" {{', "  node [fontname=Helvetica];"]
    for name, node in topo.nodes.items():
        lines.append(f'  "{name}" [shape={shapes[node.kind]}];')
    for link in topo.links:
        p = link.direction(True)
        label = " ".join(x for x in (format_rate(p.rate) if p.rate else "",
                                     format_duration(p.delay) if p.delay else "") if x)
        a, b = link.endpoints
        lines.append(f'  "{a}" -- "{b}" [label="{label}"];')
    lines.append("}")
    return "\n".join(lines)
