"""CloudLab profile (a geni-lib script) and its request RSpec for an export plan.

The RSpec is built with geni-lib's ``geni.rspec.pg`` (never by hand) from rows
of plain data; the profile script embeds the same rows and builds the same
request through ``geni.portal`` on CloudLab. A link direction's bandwidth
(kbit/s), latency (ms) and loss (fraction) are set on the interface the
direction arrives at: geni-lib writes them as the RSpec's per-direction
``<property source_id dest_id capacity latency packet_loss>`` (the source is
the other end), which the testbed shapes with its delay nodes.

A request RSpec has no queue settings, so every rate-limited direction must
have the queue mcclab gives when none is written and the delay node keeps by
default: 50 packets drop-tail. geni-lib writes a LAN port's shaping in one
direction only (node to LAN), so shaped LAN ports are refused too.
"""

from __future__ import annotations

import pprint
from dataclasses import dataclass
from typing import Any

from mcclab.export.common import (
    DEFAULT_QUEUE,
    Attachment,
    Direction,
    ExportPlan,
    check_units,
    raise_refusals,
    start_command,
)

TESTBED = "CloudLab (geni-lib)"
DEFAULT_IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
NODE_TYPES = ("rawpc", "xenvm")
_SLIVER = {"rawpc": "raw", "xenvm": "emulab-xen"}
_RSPEC = "http://www.geni.net/resources/rspec/3"


def cloudlab_problems(plan: ExportPlan) -> list[tuple[str, str]]:
    """Every field of the plan a geni-lib request cannot express, as (field, reason)."""
    problems = check_units(plan, "CloudLab")
    for d in plan.directions():
        q = d.queue
        if q is not None and q != DEFAULT_QUEUE:
            what = (f"RED ({q.limit}pkt)" if q.discipline == "red"
                    else f"a {q.limit}pkt drop-tail queue")
            key = "queue.discipline" if q.discipline == "red" else "queue.limit"
            problems.append((d.field(key), f"{d.label}: {what}; a request RSpec has no queue "
                             "settings, so CloudLab's delay node keeps its default, 50 packets "
                             "drop-tail"))
    for lan in plan.lans:
        for port in lan.ports:
            for d in (port.to_lan, port.from_lan):
                if d.shaped:
                    key = next(k for k in ("rate", "delay", "loss", "jitter", "gilbert_elliott")
                               if getattr(d.params, k))
                    problems.append((d.field(key), f"{d.label}: a shaped LAN port; geni-lib "
                                     "shapes a LAN port only from the node to the LAN, mcclab "
                                     "both ways"))
    return problems


@dataclass(frozen=True)
class End:
    """One interface of a link or LAN and the shaping of what arrives at it."""

    node: str
    port: str
    address: str
    netmask: str
    kbps: int  # 0: not limited
    latency_ms: int
    loss: float

    def row(self) -> tuple[Any, ...]:
        """The plain tuple the profile script embeds."""
        return (self.node, self.port, self.address, self.netmask, self.kbps, self.latency_ms,
                self.loss)


def _end(att: Attachment, arriving: Direction) -> End:
    """An interface with the parameters of the direction that arrives at it."""
    return End(att.node, att.port, str(att.address.ip), str(att.address.netmask),
               arriving.rate_kbps() or 0, arriving.delay_ms(), arriving.params.loss)


@dataclass(frozen=True)
class Rows:
    """The request as plain data: nodes, point-to-point links and LANs."""

    nodes: list[tuple[str, str, str]]  # name, kind, start command ("" for none)
    links: list[tuple[str, list[End]]]
    lans: list[tuple[str, list[End]]]


def request_rows(plan: ExportPlan, start_script: str | None = None) -> Rows:
    """The rows of a plan; raises ExportRefused (naming every field) if CloudLab cannot."""
    raise_refusals(plan, cloudlab_problems(plan), TESTBED)
    nodes = [(n, kind, start_command(start_script, plan, n) if start_script else "")
             for n, kind in plan.nodes.items()]
    links = [(link.name, [_end(link.a, link.reverse), _end(link.b, link.forward)])
             for link in plan.links]
    lans = [(lan.name, [_end(p.member, p.from_lan) for p in lan.ports]) for lan in plan.lans]
    return Rows(nodes, links, lans)


def build_request(rows: Rows, image: str = DEFAULT_IMAGE, node_type: str = "rawpc") -> Any:
    """A geni-lib ``pg.Request`` holding the rows."""
    import geni.rspec.emulab  # noqa: F401  (registers setRoutingStyle and XenVM on Request)
    import geni.rspec.pg as pg

    request = pg.Request()
    request.addNamespace(pg.Namespaces.EMULAB)
    # Unicast routes over the experiment network, as `$ns rtproto Static` on Emulab.
    request.setRoutingStyle("static")
    nodes = {}
    for name, _kind, command in rows.nodes:
        node = request.XenVM(name) if node_type == "xenvm" else request.RawPC(name)
        node.disk_image = image
        if command:
            node.addService(pg.Execute(shell="sh", command=command))
        nodes[name] = node
    for maker, groups in ((request.Link, rows.links), (request.LAN, rows.lans)):
        for name, ends in groups:
            link = maker(name)
            for end in ends:
                iface = nodes[end.node].addInterface(end.port,
                                                     pg.IPv4Address(end.address, end.netmask))
                if end.kbps:
                    iface.bandwidth = end.kbps
                if end.latency_ms:
                    iface.latency = end.latency_ms
                if end.loss:
                    iface.plr = end.loss
                link.addInterface(iface)
    return request


def rspec_xml(request: Any) -> str:
    """The request's XML text (geni-lib's ``writeXML`` writes bytes to a text file on Python 3)."""
    return request.toXMLString(pretty_print=True, ucode=True)


_SCRIPT = '''\
"""{title}

Generated by 'mcclab export cloudlab'; regenerate rather than edit (docs/testbeds.md).
Each link direction's bandwidth (kbit/s), latency (ms) and loss (fraction) is set
on the interface it arrives at; geni-lib writes them as per-direction link
properties and CloudLab shapes them with delay nodes. Start commands run
SCRIPT KIND NODE EXPERIMENT PROFILE at boot; mcclab ships no such script.
"""

import geni.portal as portal
import geni.rspec.pg as pg
import geni.rspec.emulab  # noqa: F401  (setRoutingStyle, XenVM)

IMAGE = {image!r}
NODE_TYPE = {node_type!r}
# (name, kind, start command)
NODES = {nodes}
# (name, [(node, interface, address, netmask, kbit/s in, ms in, loss in), ...])
LINKS = {links}
LANS = {lans}

request = portal.context.makeRequestRSpec()
request.addNamespace(pg.Namespaces.EMULAB)
request.setRoutingStyle("static")

nodes = {{}}
for name, kind, command in NODES:
    if NODE_TYPE == "xenvm":
        node = request.XenVM(name)
    else:
        node = request.RawPC(name)
    node.disk_image = IMAGE
    if command:
        node.addService(pg.Execute(shell="sh", command=command))
    nodes[name] = node


def attach(link, ends):
    """Add each end's interface to the link, shaped for what arrives at it."""
    for node, port, address, netmask, kbps, ms, loss in ends:
        iface = nodes[node].addInterface(port, pg.IPv4Address(address, netmask))
        if kbps:
            iface.bandwidth = kbps
        if ms:
            iface.latency = ms
        if loss:
            iface.plr = loss
        link.addInterface(iface)


for name, ends in LINKS:
    attach(request.Link(name), ends)
for name, ends in LANS:
    attach(request.LAN(name), ends)

portal.context.printRequestRSpec()
'''


def _literal(rows: list[Any]) -> str:
    """A Python literal of the rows, one entry per line, valid in Python 2 and 3."""
    return pprint.pformat(rows, width=96, sort_dicts=False)


def render_profile(plan: ExportPlan, rows: Rows, image: str = DEFAULT_IMAGE,
                   node_type: str = "rawpc") -> str:
    """The geni-lib profile script of the rows."""
    topo = plan.topology
    title = (f"CloudLab profile for the mcclab experiment {plan.experiment or topo.name}\n"
             f"(profile {plan.profile or '-'}), topology {topo.name}.")
    return _SCRIPT.format(
        title=title, image=image, node_type=node_type,
        nodes=_literal(rows.nodes),
        links=_literal([(name, [e.row() for e in ends]) for name, ends in rows.links]),
        lans=_literal([(name, [e.row() for e in ends]) for name, ends in rows.lans]))


def check_rspec(xml: str, rows: Rows, image: str, node_type: str) -> list[str]:
    """Parse a request RSpec back and list what differs from the rows (empty: all there).

    Checks every node (sliver type, image, start command), every interface and
    address, every link and LAN with its members, and every direction's
    capacity, latency and loss (and that unshaped directions carry none).
    """
    from lxml import etree

    ns = {"r": _RSPEC}
    root = etree.fromstring(xml.encode())
    wrong: list[str] = []
    found = {n.get("client_id"): n for n in root.findall("r:node", ns)}
    if set(found) != {name for name, _, _ in rows.nodes}:
        wrong.append(f"nodes: {sorted(found)} instead of {sorted(n for n, _, _ in rows.nodes)}")
    for name, _kind, command in rows.nodes:
        node = found.get(name)
        if node is None:
            continue
        sliver = node.find("r:sliver_type", ns)
        if sliver is None or sliver.get("name") != _SLIVER[node_type]:
            wrong.append(f"{name}: sliver type is not {_SLIVER[node_type]}")
        disk = node.find("r:sliver_type/r:disk_image", ns)
        if disk is None or disk.get("name") != image:
            wrong.append(f"{name}: disk image is not {image}")
        cmds = [e.get("command") for e in node.findall("r:services/r:execute", ns)]
        if cmds != ([command] if command else []):
            wrong.append(f"{name}: start commands {cmds}")
    ifaces = {i.get("client_id"): i for i in root.iter(f"{{{_RSPEC}}}interface")}
    links = {e.get("client_id"): e for e in root.findall("r:link", ns)}
    expected = [(n, ends, False) for n, ends in rows.links] + [(n, e, True) for n, e in rows.lans]
    if set(links) != {n for n, _, _ in expected}:
        wrong.append(f"links: {sorted(links)} instead of {sorted(n for n, _, _ in expected)}")
    for name, ends, is_lan in expected:
        link = links.get(name)
        if link is None:
            continue
        ids = [f"{e.node}:{e.port}" for e in ends]
        refs = [r.get("client_id") for r in link.findall("r:interface_ref", ns)]
        if refs != ids:
            wrong.append(f"{name}: members {refs} instead of {ids}")
        kind = link.find("r:link_type", ns)
        if is_lan != (kind is not None and kind.get("name") == "lan"):
            wrong.append(f"{name}: link type {None if kind is None else kind.get('name')}")
        for end, iid in zip(ends, ids, strict=True):
            ip = ifaces.get(iid)
            addr = None if ip is None else ip.find("r:ip", ns)
            if addr is None or (addr.get("address"), addr.get("netmask")) != (end.address,
                                                                              end.netmask):
                wrong.append(f"{iid}: address is not {end.address}/{end.netmask}")
        if not is_lan:
            wrong += _check_properties(link, ends, ids, ns)
    return wrong


def _check_properties(link: Any, ends: list[End], ids: list[str], ns: dict[str, str]) -> list[str]:
    """Each direction of a point-to-point link has exactly its capacity, latency and loss."""
    wrong = []
    props = {(p.get("source_id"), p.get("dest_id")): p for p in link.findall("r:property", ns)}
    for end, dest, source in ((ends[0], ids[0], ids[1]), (ends[1], ids[1], ids[0])):
        want = {"capacity": str(end.kbps) if end.kbps else None,
                "latency": str(end.latency_ms) if end.latency_ms else None,
                "packet_loss": str(end.loss) if end.loss else None}
        prop = props.get((source, dest))
        got = {k: None if prop is None else prop.get(k) for k in want}
        if got != want:
            wrong.append(f"{link.get('client_id')} {source} -> {dest}: {got} instead of {want}")
    return wrong


def export_cloudlab(plan: ExportPlan, image: str = DEFAULT_IMAGE, node_type: str = "rawpc",
                    start_script: str | None = None) -> tuple[str, str]:
    """The profile script and the request RSpec of a plan, checked against each other's data.

    Raises ExportRefused before anything is built if CloudLab cannot express
    the plan, and RuntimeError if geni-lib's RSpec lacks something of the plan.
    """
    rows = request_rows(plan, start_script)
    xml = rspec_xml(build_request(rows, image, node_type))
    wrong = check_rspec(xml, rows, image, node_type)
    if wrong:
        raise RuntimeError("the request RSpec does not hold the plan: " + "; ".join(wrong))
    return render_profile(plan, rows, image, node_type), xml
