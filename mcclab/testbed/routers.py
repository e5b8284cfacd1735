"""The routing daemons of a topology's routers, on their hosts over SSH.

The plans are the lab's (``mcclab.routing.plan.daemon_plan``), with each
router's private directory on its host (``REMOTE_ROOT/<lab>/nodes/<router>``).
This runner makes the directories there with their owners, copies the
configuration files over the SSH connection, starts each daemon in a session
of its own and polls the same readiness checks the lab polls, on the host.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from mcclab.model.addressing import AddressPlan
from mcclab.model.topology import Topology
from mcclab.routing.common import DaemonPlan
from mcclab.routing.plan import daemon_plan
from mcclab.routing.readiness import poll_readiness, remedy_note
from mcclab.testbed.ssh import RemoteProcess, Ssh, SshError

POLL_INTERVAL = 0.1
Progress = Callable[[str, int, int], None]


def _no_progress(step: str, done: int, total: int) -> None:
    """Default progress sink."""


class RemoteRouters:
    """Every router's daemons, each on its node's host."""

    def __init__(self, topo: Topology, plan: AddressPlan, ssh: Ssh, remote_dir: str,
                 logs: Path):
        self.topo, self.plan, self.ssh = topo, plan, ssh
        self.remote_dir = remote_dir  # this lab's folder on every host
        self.logs = logs  # local: each daemon's output
        self.plans: dict[str, DaemonPlan] = {}
        self.procs: dict[str, list[RemoteProcess]] = {}
        self.remedies: list[str] = []  # readiness remedies run (remedy_note), for the user
        self.ready_after: float | None = None  # seconds wait_ready took

    def node_dir(self, node: str) -> PurePosixPath:
        """A router's private directory on its host."""
        return PurePosixPath(self.remote_dir) / "nodes" / node

    def _prepare(self, node: str, plan: DaemonPlan) -> None:
        """The plan's directories, with owners, and its files, on the host."""
        for d in plan.dirs:
            self.ssh.run(node, ["install", "-d", "-o", d.owner, "-g", d.group,
                                "-m", f"{d.mode:o}", d.path])
        for path, text in plan.files.items():
            self.ssh.put(node, path, text)

    def start(self, progress: Progress = _no_progress) -> None:
        """Start every router's daemons, each once the socket it needs is there."""
        routers = self.topo.names("router")
        for i, node in enumerate(routers, 1):
            plan = daemon_plan(self.topo, self.plan, node, Path(str(self.node_dir(node))))
            self.plans[node] = plan
            self._prepare(node, plan)
            self.procs[node] = []
            for j, argv in enumerate(plan.start):
                if j < len(plan.await_paths) and plan.await_paths[j]:
                    self._wait_for_path(node, plan.await_paths[j])
                name = f"{PurePosixPath(argv[0]).name}-{j}"
                proc = self.ssh.spawn(node, argv, self.logs / node / f"{name}.out",
                                      f"{plan.backend} {node}",
                                      str(self.node_dir(node) / f"{name}.pgid"))
                self.procs[node].append(proc)
            progress("starting routers", i, len(routers))

    def _wait_for_path(self, node: str, path: str, timeout: float = 15.0) -> None:
        """Poll the host until a daemon has made its socket."""
        deadline = time.monotonic() + timeout
        while True:
            if self.ssh.run(node, ["sh", "-c", 'test -e "$1" && echo yes', "mcclab", path],
                            check=False, timeout=10).strip() == "yes":
                return
            self._check_alive(node)
            if time.monotonic() > deadline:
                raise SshError(f"{node}: {path} did not appear within {timeout:g} s")
            time.sleep(POLL_INTERVAL)

    def _check_alive(self, node: str) -> None:
        """Raise with its output if a daemon of ``node`` has ended."""
        for proc in self.procs.get(node, []):
            if not proc.alive():
                tail = proc.log.read_text(errors="replace")[-1000:] if proc.log.exists() else ""
                raise SshError(f"{proc.what} ended early; its output:\n{tail}")

    def wait_ready(self, timeout: float, progress: Progress = _no_progress) -> float:
        """Poll every readiness check on every router's host until all pass; the seconds
        it took."""
        start = time.monotonic()
        poll_readiness(self.plans,
                       lambda node, check: self.ssh.run(node, check.argv, check=False,
                                                        timeout=10),
                       self._check_alive, timeout, progress, POLL_INTERVAL, SshError,
                       remedied=lambda node, check, pending: self.remedies.append(
                           remedy_note(node, check, pending)))
        settle = max((p.settle_s for p in self.plans.values()), default=0.0)
        time.sleep(max(0.0, settle - (time.monotonic() - start)))
        self.ready_after = time.monotonic() - start
        return self.ready_after

    def collect(self, dest: Path | None = None) -> None:
        """Copy every daemon's log file from its host into ``dest/<router>/`` (default:
        the local logs folder)."""
        for node, plan in self.plans.items():
            for path in plan.logs:
                try:
                    data = self.ssh.get(node, path)
                except SshError:
                    continue  # a daemon that never started leaves no log
                out = (dest or self.logs) / node / PurePosixPath(path).name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data)

    def stop(self) -> None:
        """End every daemon on every host."""
        self.ssh.stop([p for procs in self.procs.values() for p in reversed(procs)])
        self.procs.clear()
