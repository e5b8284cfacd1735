"""Bring the routing daemons of a lab up: the runner side of the routing plans.

The plans come from ``mcclab.routing.plan`` (pure); this module creates each
router's private directory, writes the files, starts every daemon in its own
process group inside the router's namespace, and polls readiness (PIM
neighbours, RP reachable, vifs present) instead of sleeping. Link emulation
has the same split: ``mcclab.links.plan`` and ``mcclab.links.emulation``.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from mcclab.commands import Cmd
from mcclab.execute import Runner
from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.net.node_config import netns_name
from mcclab.processes import spawn
from mcclab.routing.common import DaemonPlan, ReadinessCheck
from mcclab.routing.plan import daemon_plan
from mcclab.routing.readiness import poll_readiness, remedy_note
from mcclab.state import LabState, TrackedProcess, kill_group

POLL_INTERVAL = 0.05


class RoutingError(RuntimeError):
    """A routing daemon died or did not become ready in time."""


def _log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class RouterSet:
    """The routing daemons of every router in a lab."""

    def __init__(self, topo: Topology, plan: AddressPlan, state: LabState, runner: Runner):
        self.topo, self.plan, self.state, self.runner = topo, plan, state, runner
        self.plans: dict[str, DaemonPlan] = {}
        self.procs: dict[str, list[tuple[TrackedProcess, Path]]] = {}
        self.ready_after: float | None = None
        self.started_at: float | None = None
        self.remedies: list[str] = []  # readiness remedies run, for the ready summary

    def node_dir(self, node: str) -> Path:
        """A router's private directory."""
        return self.state.path / "nodes" / node

    def _prepare(self, node: str, plan: DaemonPlan) -> None:
        """Create the plan's directories (with owners) and write its files."""
        for d in plan.dirs:
            path = Path(d.path)
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, pwd.getpwnam(d.owner).pw_uid, grp.getgrnam(d.group).gr_gid)
            path.chmod(d.mode)
        for name, text in plan.files.items():
            Path(name).write_text(text)

    def start(self, progress=lambda *a: None) -> None:  # noqa: ANN001
        """Start every router's daemons."""
        routers = self.topo.names("router")
        for i, node in enumerate(routers, 1):
            # The last router's start: each daemon's internal timers run from its own.
            self.started_at = time.monotonic()
            plan = daemon_plan(self.topo, self.plan, node, self.node_dir(node))
            self.plans[node] = plan
            self._prepare(node, plan)
            self.procs[node] = []
            for j in range(len(plan.start)):
                if j < len(plan.await_paths) and plan.await_paths[j]:
                    self._wait_for_path(Path(plan.await_paths[j]), node)
                self.procs[node].append(self._spawn(node, plan, j, ""))
            progress("starting routers", i, len(routers))

    def _spawn(self, node: str, plan: DaemonPlan, j: int, tag: str) -> tuple[TrackedProcess, Path]:
        """Start the plan's ``j``-th daemon in the router's namespace; it and its output file."""
        argv = plan.start[j]
        log = self.node_dir(node) / f"{Path(argv[0]).name}-{j}{tag}.out"
        return spawn(self.state, Cmd(tuple(argv), netns_name(node)), log,
                     f"{plan.backend} {node}", runner=self.runner), log

    def restart(self, node: str, order: Sequence[tuple[int, float]]) -> None:
        """Stop some of a router's daemons, then start them again in ``order``.

        ``order`` holds (the daemon's index in its plan's ``start``, seconds to pause
        after starting it). No socket is awaited: the order is the caller's, so a
        daemon can be started before the one it talks to, as a start-up race would
        (fault injection; tests/integration/test_multicast_routing.py). Readiness is
        not waited for: call ``wait_ready``, which reports any remedy it ran.
        """
        plan, procs = self.plans[node], self.procs[node]
        for j, _ in order:
            kill_group(procs[j][0])
        for j, pause in order:
            procs[j] = self._spawn(node, plan, j, "-restarted")
            time.sleep(pause)

    def _wait_for_path(self, path: Path, node: str, timeout: float = 10.0) -> None:
        """Poll until a daemon has created its socket."""
        deadline = time.monotonic() + timeout
        while not path.exists():
            self._check_alive(node)
            if time.monotonic() > deadline:
                raise RoutingError(f"{node}: {path} did not appear within {timeout:g}s")
            time.sleep(POLL_INTERVAL)

    def _check_alive(self, node: str) -> None:
        """Raise with the log tail if a daemon of ``node`` has exited."""
        for proc, log in self.procs.get(node, []):
            if not proc.alive():
                raise RoutingError(f"{proc.what} exited early; its output:\n{_log_tail(log)}")

    def _explain(self, node: str) -> str:
        """A router that is not ready, for the timeout's message: its namespace's unicast
        routes (the RIB its daemons read) and the tails of its daemons' logs."""
        routes = self._probe(node, ("ip", "-4", "route", "show"), True).strip()
        parts = [f"  ip route: {'; '.join(routes.splitlines()) or '(none)'}"]
        for log in self.plans[node].logs:
            tail = _log_tail(Path(log), lines=8)
            parts.append(f"  {Path(log).name}:\n" + "\n".join(f"    {line}"
                                                            for line in tail.splitlines()))
        return "\n".join(parts)

    def _remedied(self, node: str, check: ReadinessCheck, pending: float) -> None:
        """Note a readiness remedy run (``ReadinessCheck.remedy``) for the summary."""
        self.remedies.append(remedy_note(node, check, pending))

    def _probe(self, node: str, argv: tuple[str, ...], in_netns: bool) -> str:
        """Run a readiness probe and return its stdout ('' on failure)."""
        command = Cmd(tuple(argv), netns_name(node) if in_netns else None, check=False)
        try:
            out = subprocess.run(self.runner.argv(command), capture_output=True, text=True,
                                 timeout=5, check=False)
        except subprocess.TimeoutExpired:
            return ""
        return out.stdout

    def wait_ready(self, timeout: float, progress=lambda *a: None) -> None:  # noqa: ANN001
        """Poll every readiness check of every router until all pass."""
        start = time.monotonic()
        poll_readiness(self.plans, lambda node, check: self._probe(node, check.argv,
                                                                   check.in_netns),
                       self._check_alive, timeout, progress, POLL_INTERVAL, RoutingError,
                       explain=self._explain, remedied=self._remedied)
        self._settle(progress)
        self.ready_after = time.monotonic() - start

    def _settle(self, progress) -> None:  # noqa: ANN001
        """Wait out a daemon's known internal timer that no query can observe.

        pimd 2.3.2 takes its static RP in only 15-20 s after it started and shows
        nothing of it in its dump, so there is nothing to poll (docs/routing.md).
        The wait runs from the last router's start.
        """
        settle = max((p.settle_s for p in self.plans.values()), default=0.0)
        if settle <= 0 or self.started_at is None:
            return
        total = round(settle)
        while (waited := time.monotonic() - self.started_at) < settle:
            for node in self.plans:
                self._check_alive(node)
            progress(f"pimd static RP ({total} s)", min(total, int(waited)), total)
            time.sleep(0.2)
        progress(f"pimd static RP ({total} s)", total, total)

    def ready_summary(self) -> str:
        """One line for the user: what became ready and how fast."""
        checks = sum(len(p.readiness) for p in self.plans.values())
        rp = self.topo.rp if self.topo.routing.backend != "smcroute" else None
        rp_text = f", RP {rp} ({self.plan.address_of(rp)})" if rp else ""
        took = f" in {self.ready_after:.2f}s" if self.ready_after is not None else ""
        fixes = f" ({'; '.join(self.remedies)})" if self.remedies else ""
        return f"{len(self.plans)} routers, {checks} checks passed{took}{rp_text}{fixes}"
