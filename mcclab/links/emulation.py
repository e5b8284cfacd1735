"""Running link emulation: backend choice, start, re-apply, liveness, counters.

The pure parts live in ``plan``, ``kernel`` and ``userspace``; this module is
the runner side. It writes files, runs commands through the lab's Runner and
starts emulators with ``mcclab.processes.spawn``, so every process is in its
own group and recorded in the lab state before anything depends on it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mcclab.commands import Cmd
from mcclab.execute import Runner
from mcclab.features import KERNEL_LINK_FEATURES, KernelFeatures
from mcclab.links import kernel, userspace
from mcclab.links.counters import LinkCounters
from mcclab.links.plan import (
    Direction,
    Placement,
    kernel_placement,
    plan_directions,
    userspace_placement,
    warnings,
)
from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.processes import spawn
from mcclab.state import LabState, TrackedProcess, kill_group

if TYPE_CHECKING:
    from mcclab.lab import Lab

Progress = Callable[[str, int, int], None]
POLL_INTERVAL = 0.02
READY_TIMEOUT = 10.0
SPIN_ENV = "MCCLAB_LINKEMU_SPIN_US"
# Busy-wait the last 100 us before each verdict: on this VM a pure timer wakes
# 60 us late at the median and 0.3-1.7 ms at p99, which adds up over a path;
# spinning cuts that to ~10 us / 0.1 ms. The emulator does not read new
# packets while it spins, so at high packet rates spinning halves what it can
# carry (50k -> 25k packets/s here) and burns a core. Hence spin only on nodes
# whose emulated directions are all rate-limited to SPIN_MAX_RATE or less,
# where packets are far apart and the tail matters; MCCLAB_LINKEMU_SPIN_US
# overrides the choice for every node.
DEFAULT_SPIN_US = 100
SPIN_MAX_RATE = 10e6
# Spinning is bounded per second and per lab: the lab's spinning emulators share
# LAB_SPIN_BUDGET_MS of busy-waiting a second, at most EMULATOR_SPIN_BUDGET_MS each
# (linkemu's --spin-budget-ms). One bound per emulator alone grew with the routers:
# the full ORMCC Table II tree has 21 routers whose links are all slow, and 21
# emulators spinning up to 100 ms each could take a whole core at real-time
# priority. 200 ms is what the 64-leaf star's two spinning emulators had when its
# agents kept up (docs/agents.md), so that lab keeps its 100 ms each.
EMULATOR_SPIN_BUDGET_MS = 100
LAB_SPIN_BUDGET_MS = 200
RT_ENV = "MCCLAB_LINKEMU_RT_PRIORITY"
# The emulators run SCHED_FIFO: at normal priority, whenever agents, routers
# or anything else on the machine wanted both cores, verdicts went out up to
# 2-13 ms late (p99 0.4-1.6 ms) and the 10 ms-echo RTT's p99 rose 1.1-2.9 ms
# above its median. Low on the RT scale, below the kernel's own RT threads.
# Spinning stays bounded by --spin-us per verdict, and the kernel keeps 5% of
# each second for normal tasks. MCCLAB_LINKEMU_RT_PRIORITY=0 turns it off.
DEFAULT_RT_PRIORITY = 10


class LinkEmulationError(RuntimeError):
    """Link emulation could not start, or an emulator died (its links are down)."""


def select_backend(topo: Topology, features: KernelFeatures) -> str:
    """The backend a lab uses: 'none' if no link needs emulation, else kernel or userspace.

    ``link_backend: auto`` takes the kernel when it has every qdisc and can
    reproduce every link (the kernel's RED has no gentle mode); an explicit
    ``kernel`` or ``userspace`` is taken as given, and checked by link_problems.
    """
    directions = plan_directions(topo)
    if not directions:
        return "none"
    if topo.link_backend != "auto":
        return topo.link_backend
    backend = features.link_backend("auto")
    if backend == "kernel" and any(kernel.problems(d) for d in directions):
        return "userspace"
    return backend


def selection_reason(topo: Topology, features: KernelFeatures) -> str:
    """One line saying why select_backend chose what it chose (printed and recorded)."""
    backend = select_backend(topo, features)
    if backend == "none":
        return "no link has a rate, delay or loss: nothing to emulate"
    if topo.link_backend != "auto":
        return f"link_backend: {backend} in the topology"
    if features.link_backend("auto") == "userspace":
        missing = [f for f in KERNEL_LINK_FEATURES if not getattr(features, f)]
        return f"auto: the kernel lacks {', '.join(missing)}"
    if backend == "userspace":
        return "auto: a link needs RED features the kernel's red lacks (gentle mode)"
    return f"auto: the kernel has {', '.join(KERNEL_LINK_FEATURES)}"


def link_problems(topo: Topology, backend: str, features: KernelFeatures) -> list[str]:
    """Reasons the chosen backend cannot emulate this topology, found before anything exists.

    Parameter errors (negative delay, min_th above max_th, ...) are rejected
    earlier by the topology model; these are limits of a backend.
    """
    if backend == "none":
        return []
    out = []
    # preflight() already reported what features.link_backend() needs; report
    # the rest when the choice here differs from it.
    if backend != features.link_backend(topo.link_backend):
        missing = features.missing_for(backend)
        if missing:
            out.append(f"the kernel lacks {', '.join(missing)} needed for link backend "
                       f"{backend!r}")
    if backend == "kernel":
        for d in plan_directions(topo):
            out += kernel.problems(d)
        return out
    binary = userspace.linkemu_binary()
    if not os.access(binary, os.X_OK):
        out.append(f"the userspace link emulator {binary} is missing: run 'make -C linkemu'")
    if shutil.which("iptables") is None:
        out.append("iptables not found: run 'make setup'")
    return out


class LinkEmulation:
    """The link emulation of a running lab. This base class emulates nothing (backend 'none')."""

    backend = "none"

    def __init__(self, directions: list[Direction] | None = None, reason: str = "",
                 notes: list[str] | None = None):
        self.directions = list(directions or [])
        self.reason = reason
        self.notes = list(notes or [])

    def describe(self) -> str:
        """'userspace (auto: the kernel lacks netem, red), 6 directions' for the user."""
        return f"{self.backend} ({self.reason}), {len(self.directions)} link directions"

    def check(self) -> None:
        """Raise LinkEmulationError if an emulated link has failed (nothing can fail here)."""

    def counters(self, max_age: float | None = None) -> list[LinkCounters]:
        """Counters per emulated direction (none here)."""
        return []

    def records(self, max_age: float | None = None) -> list[dict[str, object]]:
        """counters() as plain dicts: a tidy table, one row per link direction."""
        return [c.as_dict() for c in self.counters(max_age)]

    def stats(self, max_age: float | None = None) -> dict[str, dict]:
        """Each emulator process's whole stats by node (none here: no emulator runs)."""
        return {}

    def apply(self, topo: Topology) -> None:
        """Switch to the link parameters of ``topo`` (same nodes and links, new values)."""
        if plan_directions(topo):
            raise LinkEmulationError("this lab started without link emulation; bring it up "
                                     "with the emulated topology instead")

    def stop(self) -> None:
        """Stop emulating (teardown of the lab does this too)."""


def spin_for(placed: list[tuple[Direction, Placement]]) -> int:
    """The emulator's --spin-us for a node: DEFAULT_SPIN_US if all its links are slow."""
    slow = all(d.params.rate is not None and d.params.rate <= SPIN_MAX_RATE for d, _ in placed)
    return DEFAULT_SPIN_US if slow else 0


def spin_budget_ms(spinning: int) -> int:
    """Each spinning emulator's --spin-budget-ms when ``spinning`` of the lab's spin: an
    equal share of LAB_SPIN_BUDGET_MS, at most EMULATOR_SPIN_BUDGET_MS, at least 1."""
    if spinning <= 0:
        return EMULATOR_SPIN_BUDGET_MS
    return max(1, min(EMULATOR_SPIN_BUDGET_MS, LAB_SPIN_BUDGET_MS // spinning))


def _env_int(name: str, default: int | None = None) -> int | None:
    """An integer from the environment, ``default`` when unset or empty."""
    text = os.environ.get(name)
    return int(text) if text else default


def _same_graph(a: Topology, b: Topology) -> bool:
    """True when two topologies have the same nodes and links (parameters may differ)."""
    return (a.nodes == b.nodes
            and [link.endpoints for link in a.links] == [link.endpoints for link in b.links])


def _tail(path: Path, lines: int = 10) -> str:
    """The end of a log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
    except OSError:
        return "(no log)"


@dataclass
class Emulator:
    """One node's mcclab-linkemu process and its files."""

    node: str
    placed: list[tuple[Direction, Placement]]
    config: Path
    stats: Path
    log: Path
    text: str
    proc: TrackedProcess | None = None


class UserspaceEmulation(LinkEmulation):
    """One mcclab-linkemu per node that receives emulated traffic, NFQUEUE rules, fail closed."""

    backend = "userspace"

    def __init__(self, topo: Topology, plan: AddressPlan, state: LabState, runner: Runner,
                 reason: str = "", binary: Path | None = None, spin_us: int | None = None,
                 rt_priority: int | None = None, seed: int = userspace.SEED):
        super().__init__(reason=reason, notes=warnings(topo, "userspace"))
        self.topo, self.plan, self.state, self.runner = topo, plan, state, runner
        self.seed = seed
        self.binary = binary or userspace.linkemu_binary()
        self.spin_us = spin_us if spin_us is not None else _env_int(SPIN_ENV)
        self.rt_priority = (rt_priority if rt_priority is not None
                            else _env_int(RT_ENV, DEFAULT_RT_PRIORITY))
        self.dir = state.path / "links"
        self.emulators: dict[str, Emulator] = {}
        self.rules: dict[int, Cmd] = {}  # queue number -> installed rule

    def _layout(self, topo: Topology) -> dict[str, Emulator]:
        """The emulator each node needs for ``topo`` (files named, nothing written)."""
        by_node: dict[str, list[tuple[Direction, Placement]]] = {}
        for d in plan_directions(topo):
            where = userspace_placement(topo, self.plan, d)
            assert where.node is not None
            by_node.setdefault(where.node, []).append((d, where))
        return {
            node: Emulator(node, placed, self.dir / f"{node}.conf",
                           self.dir / f"{node}.stats.json", self.state.path / "logs" /
                           f"linkemu-{node}.log", userspace.node_config(node, placed, self.seed))
            for node, placed in by_node.items()
        }

    def start(self, progress: Progress) -> None:
        """Start every emulator, wait until each has bound its queues, then add the rules."""
        self._switch(self.topo, progress)

    def apply(self, topo: Topology) -> None:
        """Restart only the emulators whose config changed; rules stay unless a direction goes.

        A restarted node's links drop packets for the moment no emulator is
        bound (fail closed), typically a few milliseconds.
        """
        if not _same_graph(self.topo, topo):
            raise LinkEmulationError("apply() needs the same nodes and links")
        self._switch(topo, lambda *a: None)
        self.topo = topo
        self.notes = warnings(topo, "userspace")

    def _switch(self, topo: Topology, progress: Progress) -> None:
        """Bring the running emulators and rules from their current state to ``topo``'s."""
        wanted = self._layout(topo)
        self.directions = [d for e in wanted.values() for d, _ in e.placed]
        new_rules = {d.queue_num: userspace.rule_cmd(d, where)
                     for e in wanted.values() for d, where in e.placed}
        for num in [n for n, rule in self.rules.items() if new_rules.get(n) != rule]:
            self.runner.run(self._delete(self.rules.pop(num)))
        changed = [n for n in set(self.emulators) | set(wanted)
                   if n not in wanted or n not in self.emulators
                   or self.emulators[n].text != wanted[n].text or not self._alive(n)]
        for node in changed:
            if node in self.emulators:
                self._stop(self.emulators.pop(node))
        starting = [wanted[n] for n in sorted(changed) if n in wanted]
        if starting:
            self.dir.mkdir(parents=True, exist_ok=True)
        spins = {n: self.spin_us if self.spin_us is not None else spin_for(e.placed)
                 for n, e in wanted.items()}
        budget = spin_budget_ms(sum(1 for spin in spins.values() if spin))
        for emu in starting:
            emu.config.write_text(emu.text)
            emu.stats.unlink(missing_ok=True)
            argv = userspace.emulator_argv(self.binary, emu.config, emu.stats,
                                           spins[emu.node], self.rt_priority, budget)
            emu.proc = spawn(self.state, Cmd(tuple(argv), emu.placed[0][1].netns), emu.log,
                             f"linkemu {emu.node}", runner=self.runner)
            self.emulators[emu.node] = emu
        total = len(wanted)
        for done, emu in enumerate(starting, total - len(starting) + 1):
            self._wait_ready(emu)
            progress("links (userspace)", done, total)
        for num, rule in sorted(new_rules.items()):
            if num not in self.rules:
                self.runner.run(rule)
                self.rules[num] = rule
        if not starting:
            progress("links (userspace)", total, total)

    @staticmethod
    def _delete(rule: Cmd) -> Cmd:
        """The -D twin of an -A rule."""
        argv = tuple("-D" if a == "-A" else a for a in rule.argv)
        return Cmd(argv, rule.netns, check=False)

    def _alive(self, node: str) -> bool:
        """True when the node's emulator is running."""
        proc = self.emulators[node].proc if node in self.emulators else None
        return proc is not None and proc.alive()

    def _wait_ready(self, emu: Emulator) -> None:
        """Poll for the stats file, which the emulator writes once every queue is bound."""
        deadline = time.monotonic() + READY_TIMEOUT
        while not emu.stats.exists():
            if emu.proc is None or not emu.proc.alive():
                raise LinkEmulationError(
                    f"the link emulator of node {emu.node} exited during start-up; its "
                    f"output ({emu.log}):\n{_tail(emu.log)}")
            if time.monotonic() > deadline:
                raise LinkEmulationError(
                    f"the link emulator of node {emu.node} did not bind its queues within "
                    f"{READY_TIMEOUT:g}s; its output:\n{_tail(emu.log)}")
            time.sleep(POLL_INTERVAL)

    def _stop(self, emu: Emulator) -> None:
        """End one emulator and drop it from the lab record."""
        if emu.proc is None:
            return
        kill_group(emu.proc)
        if emu.proc in self.state.processes:
            self.state.processes.remove(emu.proc)
            self.state.save()

    def check(self) -> None:
        """Raise naming the node if any emulator has died: its links now drop everything."""
        dead = [e for e in self.emulators.values() if e.proc is None or not e.proc.alive()]
        if not dead:
            return
        lines = []
        for emu in dead:
            links = ", ".join(f"{d.src}->{d.dst}" for d, _ in emu.placed)
            pid = emu.proc.pid if emu.proc else "?"
            lines.append(f"the link emulator of node {emu.node} (pid {pid}) has died; its links "
                         f"drop every packet (fail closed): {links}\nits last output "
                         f"({emu.log}):\n{_tail(emu.log)}")
        raise LinkEmulationError("\n".join(lines))

    def counters(self, max_age: float | None = None) -> list[LinkCounters]:
        """Counters from each emulator's stats file (rewritten every 100 ms).

        With ``max_age``, waits (up to 1 s) until every file is at most that old,
        so counters read right after a test include its last packets.
        """
        out = []
        for emu in self.emulators.values():
            data = self._read_stats(emu, max_age)
            out += userspace.parse_stats(data, emu.placed)
        return sorted(out, key=lambda c: (c.link, c.src))

    def stats(self, max_age: float | None = None) -> dict[str, dict]:
        """Each emulator's whole stats file by node (linkemu/README.md), fresh as in
        ``counters``: for what the counters leave out, such as the late-verdict log."""
        return {node: self._read_stats(emu, max_age) for node, emu in self.emulators.items()}

    def _read_stats(self, emu: Emulator, max_age: float | None) -> dict:
        """One emulator's stats, fresh enough when asked."""
        deadline = time.monotonic() + 1.0
        while True:
            try:
                data = json.loads(emu.stats.read_text())
            except (OSError, ValueError):
                data = {}
            fresh = max_age is None or data.get("time", 0) >= time.monotonic() - max_age
            if fresh or time.monotonic() > deadline:
                return data
            time.sleep(POLL_INTERVAL)

    def emulator_pids(self) -> dict[str, int]:
        """Node -> pid of its emulator (for CPU accounting and fault injection)."""
        return {n: e.proc.pid for n, e in self.emulators.items() if e.proc is not None}

    def stop(self) -> None:
        """Remove the rules (links become unshaped), then end the emulators."""
        for rule in self.rules.values():
            self.runner.run(self._delete(rule))
        self.rules.clear()
        for emu in self.emulators.values():
            self._stop(emu)
        self.emulators.clear()


class KernelEmulation(LinkEmulation):
    """tc qdisc trees (prio: control netem | data netem -> htb -> pfifo|red) on each egress."""

    backend = "kernel"

    def __init__(self, topo: Topology, plan: AddressPlan, runner: Runner, reason: str = ""):
        super().__init__(reason=reason, notes=warnings(topo, "kernel"))
        self.topo, self.plan, self.runner = topo, plan, runner
        self.placed: list[tuple[Direction, Placement]] = []

    def _layout(self, topo: Topology) -> list[tuple[Direction, Placement]]:
        """Each direction with its egress interface."""
        return [(d, kernel_placement(topo, self.plan, d)) for d in plan_directions(topo)]

    def start(self, progress: Progress) -> None:
        """Install every direction's qdisc tree."""
        self.placed = self._layout(self.topo)
        self.directions = [d for d, _ in self.placed]
        for i, (d, where) in enumerate(self.placed, 1):
            self.runner.run_all(kernel.direction_cmds(d, where))
            progress("links (kernel)", i, len(self.placed))

    def apply(self, topo: Topology) -> None:
        """Replace the trees of changed directions and clear the ones no longer emulated."""
        if not _same_graph(self.topo, topo):
            raise LinkEmulationError("apply() needs the same nodes and links")
        old = {d.queue_num: (d, w) for d, w in self.placed}
        new = self._layout(topo)
        still = {n.queue_num for n, _ in new}
        for num, (_, where) in old.items():
            if num not in still:
                self.runner.run_all(kernel.clear_cmds(where))
        for d, where in new:
            if old.get(d.queue_num, (None, None))[0] != d:
                self.runner.run_all(kernel.direction_cmds(d, where))
        self.topo, self.placed = topo, new
        self.directions = [d for d, _ in new]
        self.notes = warnings(topo, "kernel")

    def counters(self, max_age: float | None = None) -> list[LinkCounters]:
        """Counters read from tc now (``max_age`` is irrelevant: tc is always current)."""
        out = []
        for d, where in self.placed:
            text = self.runner.run(kernel.stats_cmd(where))
            out.append(kernel.parse_stats(text, d, where, time.monotonic()))
        return out

    def stop(self) -> None:
        """Remove every tree."""
        for _, where in self.placed:
            self.runner.run_all(kernel.clear_cmds(where))
        self.placed = []


def _record(lab: Lab, emulation: LinkEmulation) -> None:
    """Write the choice and the per-direction placement next to the lab state."""
    path = lab.state.path / "links"
    path.mkdir(parents=True, exist_ok=True)
    rows = []
    for d in emulation.directions:
        where = (userspace_placement if emulation.backend == "userspace"
                 else kernel_placement)(lab.topo, lab.plan, d)
        rows.append({"link": d.link, "src": d.src, "dst": d.dst, "queue_num": d.queue_num,
                     "node": where.node, "iface": where.iface, "hook": where.hook,
                     "params": d.params.model_dump(mode="json")})
    (path / "plan.json").write_text(json.dumps(
        {"backend": emulation.backend, "reason": emulation.reason, "notes": emulation.notes,
         "directions": rows}, indent=1))


def start_links(lab: Lab, progress: Progress) -> LinkEmulation:
    """Emulate every link direction of ``lab`` with the backend chosen for it.

    Called right after the network is built and before the routers start, so
    routing traffic crosses emulated links from its first packet. Sets
    ``lab.link_backend`` to the backend in use ('none' when nothing needs it).
    """
    features = lab.features
    backend = lab.link_backend
    if backend not in ("kernel", "userspace", "none"):
        backend = select_backend(lab.topo, features) if features else "userspace"
    if not plan_directions(lab.topo):
        backend = "none"
    reason = selection_reason(lab.topo, features) if features else "chosen by the caller"
    emulation: LinkEmulation
    if backend == "userspace":
        emulation = UserspaceEmulation(lab.topo, lab.plan, lab.state, lab.runner, reason,
                                       seed=lab.options.link_seed)
        emulation.start(progress)
    elif backend == "kernel":
        emulation = KernelEmulation(lab.topo, lab.plan, lab.runner, reason)
        emulation.start(progress)
    else:
        emulation = LinkEmulation(reason=reason)
    lab.link_backend = emulation.backend
    _record(lab, emulation)
    return emulation
