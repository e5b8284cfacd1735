"""What of an experiment a run on allocated hosts cannot do yet, found before anything starts.

:func:`unsupported` is pure: it reads the resolved experiment and its topology
and returns one :class:`Unsupported` per field the SSH backend
(``mcclab.testbed.lab``) cannot carry out. ``mcclab run EXP --inventory`` refuses
the run on any (no results folder, no SSH command), and ``mcclab testbed check``
lists them beside the hosts' own problems. Each of them would otherwise fail
part-way through a run, after the hosts had been configured and their routers
started:

* agent hosts (``agents.mode: host``): their plan enters the lab's namespaces
  (``/run/netns/mcl-<node>``) of one machine;
* captures (``captures:``): started through ``lab.spawn``, whose process and pcap
  would stay on a host the run does not collect from.

LANs are not among them: the testbed builds a LAN from the export, and the
inventory leaves its node out. Neither is the fork server: on hosts every
process is executed over SSH, which ``run.json`` records
(``python_tools_started_by``). Nor are TCP window ceilings (``max_window``,
usually from ``tcp.model``): the route with the locked ``cwnd`` runs on the
sender's host like every setup command, and the primer is planned per host
(``mcclab.experiment.launch.host_windows``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mcclab.capture import CaptureError, parse_target
from mcclab.experiment.spec import Experiment
from mcclab.model.addressing import plan_addresses
from mcclab.model.topology import Topology


@dataclass(frozen=True)
class Unsupported:
    """One field of an experiment that a run on allocated hosts cannot carry out."""

    experiment: str
    field: str  # the dotted key, as --set names it
    value: str  # what the experiment asks for
    why: str
    instead: str  # what to do instead

    def message(self) -> str:
        """One line: experiment, field and value, why, and what to do instead."""
        return (f"{self.experiment}: {self.field}: {self.value}: not supported on allocated "
                f"hosts: {self.why}; instead: {self.instead}")

    def record(self) -> dict[str, str]:
        """The problem as JSON-ready data (``mcclab testbed check --json``)."""
        return asdict(self)


def _count(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def _agent_hosts(exp: Experiment) -> list[Unsupported]:
    if exp.agents.mode == "process":
        return []
    return [Unsupported(
        exp.name, "agents.mode", exp.agents.mode,
        "an agent host runs its agents in the lab's network namespaces of one machine "
        "(/run/netns/mcl-<node>), and on a testbed each node is a machine of its own",
        "--set agents.mode=process: one process per agent, each on its node's host, the "
        "intended shape on a testbed (a host's CPU carries only its own node's agents)")]


def _captures(exp: Experiment, topo: Topology) -> list[Unsupported]:
    if not exp.captures:
        return []
    plan = plan_addresses(topo)
    where = []
    for i, cap in enumerate(exp.captures):
        try:
            node = parse_target(topo, plan, cap.on).node
        except CaptureError:
            node = cap.on  # the spec's own check names a bad target
        where.append(f"captures[{i}] on {cap.on} ({node}'s host)")
    return [Unsupported(
        exp.name, "captures", _count(len(exp.captures), "capture"),
        "a capture's tcpdump would run, and write its pcap, on the node's host, and the "
        "run neither starts processes there outside its launch plan nor copies pcaps back "
        f"({'; '.join(where)})",
        "--set captures=[], and capture on the host itself (tcpdump -i IFACE -w FILE) or "
        "run the experiment in a lab, where captures/ and the report's IGMP/PIM timeline "
        "are made")]


def unsupported(exp: Experiment, topo: Topology) -> list[Unsupported]:
    """Every field of ``exp`` (on ``topo``, its resolved topology) that a run on allocated
    hosts cannot carry out, in the order of the spec's keys; empty when it can run."""
    return _agent_hosts(exp) + _captures(exp, topo)
