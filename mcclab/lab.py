"""A lab is one emulated network brought up from a Topology: build, configure, route, tear down.

Everything is checked before anything is created (preflight), every resource
is recorded before it is created (``state``), and teardown uses the same code
path as crash cleanup, so the crash path is exercised on every normal run.
While the lab is up its owner runs inside the lab's cgroup (``mcclab.cgroup``),
so every process it starts is inside too, from its fork on.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcclab import cgroup
from mcclab.commands import Cmd
from mcclab.execute import Runner
from mcclab.features import KernelFeatures, probe
from mcclab.lablock import LabLock
from mcclab.links import LinkEmulation, link_problems, select_backend, start_links
from mcclab.model.addressing import AddressPlan, plan_addresses
from mcclab.model.topology import Topology
from mcclab.net import node_config
from mcclab.net.backend import NetworkBackend, NetworkBackendFactory
from mcclab.net.mininet_backend import MininetBackend
from mcclab.processes import spawn
from mcclab.routing.limits import vif_problems
from mcclab.routing.plan import required_binaries
from mcclab.routing.runner import RouterSet
from mcclab.state import (
    ROOT_IFACE_PREFIX,
    STATE_ROOT,
    LabState,
    TrackedProcess,
    all_states,
    command_line,
    destroy,
    leftovers,
)

LOCK_NAME = ".lab.lock"
QUEUE_NAME = ".lab.queue"

Progress = Callable[[str, int, int], None]


class PreflightError(RuntimeError):
    """The lab cannot start; nothing has been created."""


def _no_progress(step: str, done: int, total: int) -> None:
    """Default progress sink."""


@dataclass
class LabOptions:
    """Settings for bringing a lab up, passed explicitly (no globals)."""

    lab_id: str | None = None
    readiness_timeout: float = 60.0
    progress: Progress = _no_progress
    features: KernelFeatures | None = None  # probe once and pass in to save time
    lock_timeout: float = 0.0  # seconds to wait for another lab on this machine to finish
    # The userspace emulator's random drops (loss, RED, Gilbert-Elliott) draw from
    # this seed: a run gives its experiment's seed, so trials over seeds differ.
    link_seed: int = 1
    # What creates the namespaces, veth pairs and LAN bridges (mcclab.net.backend
    # says what it must keep); tests pass a fake that creates nothing.
    network_backend: NetworkBackendFactory = MininetBackend


def _root_networks() -> list[ipaddress.IPv4Network]:
    """Networks the root namespace routes to, other than mcclab's own control bridge."""
    out = subprocess.run(["ip", "-4", "-j", "route", "show", "table", "all"],
                         capture_output=True, text=True, check=False).stdout
    nets = []
    for route in json.loads(out or "[]"):
        dest, dev = route.get("dst", ""), route.get("dev", "")
        if dev.startswith(ROOT_IFACE_PREFIX) or dest in ("default", ""):
            continue
        try:
            net = ipaddress.IPv4Network(dest, strict=False)
        except ValueError:
            continue
        if not (net.is_loopback or net.is_multicast or net.prefixlen == 0):
            nets.append(net)
    return nets


def router_interfaces(topo: Topology) -> dict[str, int]:
    """Each router's interface count: one per link it ends (a LAN attachment is one)."""
    count = dict.fromkeys(topo.names("router"), 0)
    for link in topo.links:
        for end in link.endpoints:
            if end in count:
                count[end] += 1
    return count


def preflight(topo: Topology, features: KernelFeatures) -> list[str]:
    """Every reason the lab cannot start, as readable sentences (empty means go)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("mcclab needs root to create network namespaces (run with sudo)")
    backend = features.link_backend(topo.link_backend)
    missing = features.missing_for(backend)
    if missing:
        problems.append(f"the kernel lacks {', '.join(missing)} needed for link backend "
                        f"{backend!r}")
    if topo.routing.backend != "smcroute" and not features.pim:
        problems.append("the kernel has no PIM support (CONFIG_IP_PIMSM_V2)")
    problems += vif_problems(topo.routing.backend, router_interfaces(topo))
    for binary in required_binaries(topo.routing.backend):
        if shutil.which(binary) is None and not Path(binary).exists():
            problems.append(f"{binary} not found: run 'make setup'")
    for tool in ("ip", "tc", "ethtool", "nsenter", "bridge", "mnexec"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} not found: run 'make setup'")
    control = topo.addressing.control
    for net in _root_networks():
        if net.overlaps(control):
            problems.append(f"addressing.control {control} overlaps the host's route {net}")
    problem = leftover_problem(leftovers(), live_labs())
    if problem:
        problems.append(problem)
    return problems


def live_labs() -> list[LabState]:
    """Recorded labs whose owner still runs (labs in use, not crash leftovers)."""
    return [s for s in all_states() if s.owner_alive()]


def holders(live: list[LabState]) -> str:
    """Who holds the labs in use, for messages: lab id, owner pid and its command."""
    return "; ".join(f"lab {s.lab_id} held by pid {s.owner_pid}"
                     + (f" ({cmdline[:80]})" if (cmdline := command_line(s.owner_pid)) else "")
                     for s in live)


def leftover_problem(rest: dict[str, list[str]], live: list[LabState]) -> str | None:
    """Why mcclab namespaces or interfaces present now (``rest``) stop a new lab, or None.

    When a lab in use owns them the remedy is to wait for or stop its owner, not
    `mcclab clean`, which leaves a lab in use alone.
    """
    if not (rest["netns"] or rest["interfaces"]):
        return None
    counts = f"{len(rest['netns'])} namespaces, {len(rest['interfaces'])} interfaces"
    if live:
        return (f"another mcclab lab is up ({counts}): {holders(live)}; wait for it "
                "(--wait SECONDS) or stop its owner")
    return f"a crashed mcclab lab was not cleaned up ({counts}): run 'mcclab clean'"


class Lab:
    """Bring a topology up with real routers; use as a context manager for teardown."""

    def __init__(self, topo: Topology, options: LabOptions | None = None):
        self.topo = topo
        self.options = options or LabOptions()
        lab_id = self.options.lab_id or f"{topo.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.state = LabState(lab_id=lab_id)
        self.plan: AddressPlan = plan_addresses(topo)
        self.runner = Runner(transcript=self.state.path / "commands.log")
        self.features: KernelFeatures | None = self.options.features
        self.routers: RouterSet | None = None
        self.link_backend = "none"
        self.backend: NetworkBackend | None = None
        self.links: LinkEmulation | None = None
        self._lock_holder: LabLock | None = None
        self._home_cgroup: Path | None = None  # the owner's cgroup before the lab's

    @property
    def mininet(self):  # noqa: ANN201 - mininet has no type hints
        """The Mininet object holding the nodes (for Mininet's CLI); None on another backend."""
        return self.backend.net if isinstance(self.backend, MininetBackend) else None

    @property
    def run_dir(self) -> Path:
        """The lab's private directory (state, configs, logs)."""
        return self.state.path

    def _lock(self) -> None:
        """Take the machine-wide lab lock, first come first served: node namespaces are
        named by node, so one lab at a time (see ``mcclab.lablock``)."""
        self._lock_holder = LabLock(STATE_ROOT / LOCK_NAME, STATE_ROOT / QUEUE_NAME)
        if not self._lock_holder.acquire(self.options.lock_timeout,
                                         ready=lambda: not live_labs()):
            self._lock_holder = None
            live = holders(live_labs())
            raise PreflightError("cannot start the lab: another mcclab lab is being "
                                 "built or is up on this machine"
                                 + (f" ({live})" if live else ""))

    def _unlock(self) -> None:
        """Release the lab lock."""
        if self._lock_holder is not None:
            self._lock_holder.release()
            self._lock_holder = None

    def up(self) -> Lab:
        """Check, build, configure and wait for routing readiness."""
        progress = self.options.progress
        self.features = self.features or probe()
        self._lock()
        problems = preflight(self.topo, self.features)
        # Link hook: choose the link backend ('none' when no link is shaped) and
        # refuse links it cannot emulate, before anything is created.
        self.link_backend = select_backend(self.topo, self.features)
        problems += link_problems(self.topo, self.link_backend, self.features)
        if problems:
            self._unlock()
            raise PreflightError("cannot start the lab:\n  - " + "\n  - ".join(problems))
        self.state.save()
        try:
            self._enter_cgroup()
            self._build(progress)
            self.links = start_links(self, progress)
            self.routers = RouterSet(self.topo, self.plan, self.state, self.runner)
            self.routers.start(progress)
            self.routers.wait_ready(self.options.readiness_timeout, progress)
        except BaseException:
            self.down()
            raise
        self.state.status = "up"
        self.state.save()
        return self

    def _enter_cgroup(self) -> None:
        """Move this process into the lab's own cgroup, so everything it starts from now
        on is inside (recorded before it is created); no cgroup means the state file alone."""
        root = cgroup.find_root()
        if root is None:
            return
        path = cgroup.lab_dir(root, self.state.lab_id)
        self.state.set_cgroup(path)
        home = cgroup.current(os.getpid(), root)
        if home is None or not cgroup.create(path):
            cgroup.remove(path)
            self.state.set_cgroup(None)
            return
        try:
            cgroup.move(os.getpid(), path)
        except OSError:
            # Refused (say, a cgroup with controllers that forbid it): the state file alone.
            cgroup.remove(path)
            self.state.set_cgroup(None)
            return
        self._home_cgroup = home

    def _leave_cgroup(self) -> None:
        """Move this process back where it was, so the lab's cgroup kill spares it.

        Should its old cgroup be gone, ``cgroup.kill`` moves it to the root instead.
        """
        home, self._home_cgroup = self._home_cgroup, None
        if home is not None:
            with contextlib.suppress(OSError):
                cgroup.move(os.getpid(), home)

    def _build(self, progress: Progress) -> None:
        """Nodes, links, control network, addresses and routes."""
        l3 = [n for n in self.topo.nodes if self.topo.kind_of(n) != "lan"]
        backend = self.backend = self.options.network_backend(self.runner, self.state)
        # Each step has its own bar, so each counts to its own total (a shared
        # count left "creating nodes" unfinished, its clock running all run).
        for done, (name, node) in enumerate(self.topo.nodes.items(), 1):
            backend.add_lan(name) if node.kind == "lan" else backend.add_node(name)
            progress("creating nodes", done, len(self.topo.nodes))
        for index in range(len(self.topo.links)):
            backend.add_link(self.topo, self.plan, index)
            progress("creating links", index + 1, len(self.topo.links))
        self.state.add_root_iface(node_config.CONTROL_BRIDGE)
        self.runner.run_all(node_config.control_root_cmds(self.plan))
        for lan in self.topo.names("lan"):
            self.runner.run_all(node_config.lan_bridge_cmds(lan))
        for i, node in enumerate(l3, 1):
            self.state.add_root_iface(node_config.control_port(node))
            self.runner.run_all(node_config.control_node_cmds(node, self.plan))
            self.runner.run_all(node_config.node_cmds(self.topo, self.plan, node))
            progress("configuring nodes", i, len(l3))

    def spawn(self, node: str, argv: list[str], name: str) -> tuple[TrackedProcess, Path]:
        """Start a long-running process in ``node``'s namespace, in its own process group.

        Its output goes to ``<lab>/logs/<name>.log``, returned with the handle.
        """
        log = self.state.path / "logs" / f"{name}.log"
        proc = spawn(self.state, Cmd(tuple(argv), node_config.netns_name(node)), log, name,
                     runner=self.runner)
        return proc, log

    def run(self, node: str, argv: list[str], check: bool = True) -> str:
        """Run a short command in ``node``'s namespace and return its stdout."""
        return self.runner.run(Cmd(tuple(argv), node_config.netns_name(node), check))

    def down(self) -> None:
        """Tear everything down (the same path `mcclab clean` takes after a crash)."""
        try:
            self._leave_cgroup()
            destroy(self.state)
        finally:
            if self.backend is not None:
                self.backend.close()
            self._unlock()

    def __enter__(self) -> Lab:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()
