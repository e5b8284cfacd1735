"""A lab on allocated hosts: what ``mcclab run EXP --inventory FILE`` runs its experiment in.

:class:`TestbedLab` stands in for :class:`mcclab.lab.Lab` in the experiment
runner (``RunOptions.lab``). The testbed has made the machines and their
links; bring-up here

1. checks every host's addresses against the address plan and gives each
   node the lab's sysctls and routes (``mcclab.testbed.hosts``);
2. measures each host's clock offsets and writes ``clocks.json`` into the
   run's folder (``mcclab.testbed.clocks``);
3. starts every router's daemons on its host and waits for PIM
   (``mcclab.testbed.routers``);
4. routes the nodes' namespace names to their hosts in ``remote``, the
   mapping its runner (``lab.runner``) was made with, so every command and
   process the experiment runner starts in a node through that runner (setup
   commands, agents, iperf3, armed starts) runs on its host over SSH, unchanged.
   The routes belong to this lab alone: another lab in the same process has
   its own runner and its own routes. The experiment runner plans its launches
   knowing which namespaces are routed here, so the TCP window ceilings come
   as a listener on each receiver's host and a primer on each sender's
   (``mcclab.experiment.launch.host_windows``), each a node's command like any
   other; what each sender's cache held reaches the run's
   ``logs/tcp-windows.log`` as the hosts' files do, at teardown.

The run's monitoring reaches the hosts through ``monitoring_hosts``
(``mcclab.testbed.monitoring``): every metrics endpoint on a host's loopback,
exporters on the routers' hosts, each scraped through a forward of the host's
master connection; teardown cancels the forwards.

On each host the lab keeps one folder, ``/tmp/mcclab-ssh/<lab>/`` (``REMOTE_ROOT``):
the routers' files in ``/tmp/mcclab-ssh/<lab>/nodes/<router>/``, the started
processes' pid files in ``/tmp/mcclab-ssh/<lab>/pids/``, and the run's files in
``/tmp/mcclab-ssh/<lab>/run/``: an argv word naming a path in the local run
folder is rewritten to the same path under it, session files are copied there
before the first process starts, and each process's files are copied back at
teardown. Times cross between the clocks with each host's measured offsets
(``mcclab.testbed.timebase``): the run's ``--t0`` is moved onto the host's
monotonic clock in the argv sent, agents' event-log times back onto the
controller's, armed starts' marks from the host's boot clock onto the
controller's; every move is listed in ``clocks.json`` with the offset's
uncertainty. A process started on a host writes its process group to a pid
file there; its local SSH client is tied to it (``mcclab.testbed.ssh.tied``),
so the runner ending the client at the launch's stop time ends the group, and
teardown ends every group left by its pid file.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path, PurePosixPath

from mcclab.execute import RemoteCommand
from mcclab.lab import LabOptions
from mcclab.model.addressing import AddressPlan, plan_addresses
from mcclab.model.topology import Topology
from mcclab.net.node_config import netns_name
from mcclab.state import LabState, destroy
from mcclab.testbed.clocks import ClockOffset, measure_all, write_clocks
from mcclab.testbed.hosts import configure
from mcclab.testbed.inventory import Inventory
from mcclab.testbed.monitoring import HostMonitoring, loopback_metrics
from mcclab.testbed.routers import RemoteRouters
from mcclab.testbed.ssh import SPAWN_SCRIPT, TIE_GRACE, Ssh, SshError, SshRunner, tied
from mcclab.testbed.timebase import (
    Translation,
    armed_marks,
    marks_to_controller,
    program,
    to_host_argv,
)

REMOTE_ROOT = "/tmp/mcclab-ssh"


def shift_event_times(text: str, offset: float) -> str:
    """An agent event log (JSON lines) with every ``t`` moved by ``-offset`` seconds:
    from the host's monotonic clock onto the controller's."""
    return _shift_events(text, offset)[0]


def _shift_events(text: str, offset: float) -> tuple[str, int]:
    """:func:`shift_event_times`, and how many records it moved."""
    out = []
    moved = 0
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(record, dict) and isinstance(record.get("t"), int | float):
            record["t"] = round(record["t"] - offset, 6)
            line = json.dumps(record)
            moved += 1
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), moved


class TestbedLab:
    """The experiment's topology on the inventory's hosts, driven over SSH."""

    __test__ = False  # not a pytest class, whatever its name

    def __init__(self, topo: Topology, options: LabOptions, inventory: Inventory,
                 run_dir: Path, control_dir: Path | None = None):
        self.topo, self.options, self.inventory = topo, options, inventory
        lab_id = options.lab_id or f"{topo.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.state = LabState(lab_id=lab_id)
        self.plan: AddressPlan = plan_addresses(topo)
        self.run_dir = run_dir  # the run's folder on the controller
        self.remote_dir = f"{REMOTE_ROOT}/{lab_id}"
        self._own_sockets = control_dir is None
        self.control_dir = control_dir or Path(tempfile.mkdtemp(prefix="mcs-", dir="/tmp"))
        self.ssh = Ssh(inventory, self.control_dir, state=self.state)
        # Namespace -> the node's host; filled once the hosts are up, emptied at teardown.
        self.remote: dict[str, RemoteCommand] = {}
        self.runner = SshRunner(self.ssh, transcript=self.state.path / "commands.log",
                                remote=self.remote)
        # The run's monitoring calls this (mcclab.monitoring.session.RemoteSites).
        self.monitoring_hosts = HostMonitoring(self)
        self.routers: RemoteRouters | None = None
        self.features = None
        self.links = None
        self.link_backend = "testbed"
        self.mininet = None
        self.clocks: dict[str, ClockOffset] = {}
        self._spawned: list[tuple[str, str]] = []  # (node, remote pid file)
        self._files: dict[str, set[str]] = {}  # node -> local run files its processes name
        self._marks: dict[str, set[str]] = {}  # node -> armed wrappers' marks files
        # Every time moved between a host's clock and the controller's (clocks.json).
        self.translations: list[Translation] = []
        self._pushed = False
        self._down = False

    def remote_path(self, local: str) -> str:
        """Where a file of the local run folder is on every host."""
        rel = PurePosixPath(local).relative_to(PurePosixPath(str(self.run_dir)))
        return str(PurePosixPath(self.remote_dir) / "run" / rel)

    def _rewrite(self, node: str, argv: tuple[str, ...]) -> list[str]:
        """``argv`` for ``node``'s host: run-folder paths moved under the host's folder,
        a metrics endpoint moved to the host's loopback (the controller scrapes it
        through a forward, ``mcclab.testbed.monitoring``), and times on the controller's
        monotonic clock (``--t0``) moved onto the host's by its measured offset."""
        prefix = str(self.run_dir) + "/"
        marks = armed_marks(argv)
        if marks is not None and marks.startswith(prefix):
            self._marks.setdefault(node, set()).add(marks)
        out = []
        for word in loopback_metrics(argv):
            if word.startswith(prefix):
                self._files.setdefault(node, set()).add(word)
                word = self.remote_path(word)
            out.append(word)
        clock = self.clocks.get(node)
        out, moved = to_host_argv(out, clock.monotonic_offset_s if clock else 0.0)
        if moved and clock is None:
            raise SshError(f"{node}: {moved[0][0]} is a time on the controller's clock, and "
                           "the host's clock offset is not measured")
        for option, controller, host in moved:
            assert clock is not None
            self.translations.append(Translation(
                node, "to-host", "monotonic", f"{option} of {program(argv)}",
                clock.monotonic_offset_s, clock.uncertainty_s,
                controller_s=round(controller, 6), host_s=round(host, 6)))
        return out

    def _push_run_files(self) -> None:
        """Copy the run's session files to every host (once, before the first start)."""
        if self._pushed:
            return
        self._pushed = True
        sessions = self.run_dir / "sessions"
        for node in self.inventory.hosts:
            self.ssh.run(node, ["mkdir", "-p", self.remote_path(str(self.run_dir / "logs")),
                                self.remote_path(str(sessions))])
            for path in sorted(sessions.glob("*")) if sessions.is_dir() else []:
                self.ssh.put(node, self.remote_path(str(path)), path.read_bytes())

    def _argv_for(self, node: str) -> RemoteCommand:
        """The route of ``node``'s namespace in ``remote``: its commands as ssh argvs."""
        def remote(argv: tuple[str, ...], spawn: bool) -> list[str]:
            words = self._rewrite(node, argv)
            if not spawn:
                return self.ssh.argv(node, words)
            self._push_run_files()
            pid_file = f"{self.remote_dir}/pids/{len(self._spawned)}.pgid"
            self._spawned.append((node, pid_file))
            # Tied: the runner ends a launch at its stop time by ending this argv's local
            # process group, and the remote group must end with it.
            return tied(self.ssh.argv(node, ["setsid", "-w", "sh", "-c", SPAWN_SCRIPT,
                                             "mcclab", pid_file, *words]),
                        self.ssh.stop_argv(node, pid_file, TIE_GRACE))
        return remote

    def run(self, node: str, argv: list[str], check: bool = True) -> str:
        """Run a short command on ``node``'s host and return its stdout."""
        return self.ssh.run(node, self._rewrite(node, tuple(argv)), check=check)

    def spawn(self, node: str, argv: list[str], name: str) -> tuple[object, Path]:
        """Not on allocated hosts: a capture's pcap would stay on the host."""
        raise SshError(f"{name} on {node}: captures (and other lab.spawn users) are not "
                       "supported on allocated hosts")

    def up(self) -> TestbedLab:
        """Configure the hosts, measure their clocks, start and await the routers, and
        redirect the nodes' commands to their hosts."""
        progress = self.options.progress
        self.state.save()
        try:
            configure(self.runner, self.topo, self.plan)
            progress("configuring hosts", 1, 1)
            self.clocks = measure_all(self.ssh)
            write_clocks(self.run_dir, self.clocks)
            progress("measuring clocks", 1, 1)
            for node in self.inventory.hosts:
                self.ssh.run(node, ["mkdir", "-p", f"{self.remote_dir}/pids"])
            self.routers = RemoteRouters(self.topo, self.plan, self.ssh, self.remote_dir,
                                         self.state.path / "nodes")
            self.routers.start(progress)
            self.routers.wait_ready(self.options.readiness_timeout, progress)
            for note in self.routers.remedies:  # a daemon state the runner had to mend
                progress(f"routing ready: {note}", 1, 1)
            for node in self.inventory.hosts:
                self.remote[netns_name(node)] = self._argv_for(node)
        except BaseException:
            self.down()
            raise
        self.state.status = "up"
        self.state.save()
        return self

    def _stop_spawned(self, grace: float = 3.0) -> None:
        """End every process group started on a host (agents flush on SIGTERM)."""
        waiters = [(node, pid_file) for node, pid_file in reversed(self._spawned)]
        self._spawned.clear()
        self.ssh.stop_files(waiters, grace)

    def _to_controller(self, node: str, local: str, text: str) -> str:
        """A file copied back from ``node``'s host with its times on the controller's
        clock: an event log's ``t`` (monotonic), an armed-start marks file's times
        (boot clock); any other file as it is."""
        clock = self.clocks.get(node)
        if clock is None:
            return text
        if local.endswith(".jsonl"):
            text, moved = _shift_events(text, clock.monotonic_offset_s)
            kind, offset = "monotonic", clock.monotonic_offset_s
        elif local in self._marks.get(node, ()):
            # A host without a boot-clock offset (an old clocks.json) has not been
            # suspended since its boot as far as the run can tell: boot = monotonic.
            kind, offset = (("boottime", clock.boottime_offset_s)
                            if clock.boottime_offset_s is not None
                            else ("monotonic", clock.monotonic_offset_s))
            text, moved = marks_to_controller(text, offset)
        else:
            return text
        rel = str(PurePosixPath(local).relative_to(PurePosixPath(str(self.run_dir))))
        self.translations.append(Translation(node, "to-controller", kind, rel, offset,
                                             clock.uncertainty_s, values=moved))
        return text

    def _collect(self) -> None:
        """Copy back each host's files of the run, their times moved onto the controller's
        clock (:meth:`_to_controller`); a file several hosts wrote (the armed starts'
        marks) merged line by line."""
        seen: dict[str, list[str]] = {}
        for node, files in self._files.items():
            for local in sorted(files):
                if "/sessions/" in local:
                    continue
                try:
                    text = self.ssh.get(node, self.remote_path(local)).decode(errors="replace")
                except SshError:
                    continue  # a process that never wrote its file
                path = Path(local)
                path.parent.mkdir(parents=True, exist_ok=True)
                text = self._to_controller(node, local, text)
                if local.endswith(".jsonl"):
                    path.write_text(text)
                elif local in seen:
                    lines = seen[local] + [ln for ln in text.splitlines()
                                           if ln not in seen[local]]
                    seen[local] = lines
                    path.write_text("\n".join(lines) + "\n")
                else:
                    seen[local] = text.splitlines()
                    path.write_text(text)

    def record_clocks(self) -> None:
        """Rewrite ``clocks.json`` with every translation made so far (nothing when the
        clocks were never measured)."""
        if self.clocks:
            write_clocks(self.run_dir, self.clocks, [t.record() for t in self.translations])

    def down(self) -> None:
        """Stop everything on the hosts, copy the run's files back, remove the hosts' folders
        (once: a failed bring-up tears down, and the runner's wind-up calls this again)."""
        if self._down:
            return
        self._down = True
        self.remote.clear()
        try:
            self.monitoring_hosts.cancel()
            with contextlib.suppress(SshError):
                self._stop_spawned()
            with contextlib.suppress(SshError):
                self.monitoring_hosts.cleanup()
            with contextlib.suppress(SshError):
                self._collect()
            self.record_clocks()
            if self.routers is not None:
                self.routers.stop()
                # The runner copied the lab's folder before teardown; the daemons' own
                # logs go where it put the rest of the routers' files.
                with contextlib.suppress(SshError):
                    self.routers.collect(self.run_dir / "logs" / "lab-nodes")
            for node in self.inventory.hosts:
                with contextlib.suppress(SshError):
                    self.ssh.run(node, ["rm", "-rf", self.remote_dir], check=False)
        finally:
            destroy(self.state)
            self.ssh.close()
            if self._own_sockets:
                shutil.rmtree(self.control_dir, ignore_errors=True)

    def __enter__(self) -> TestbedLab:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()


class TestbedLabs:
    """``RunOptions.lab`` and ``RunOptions.started`` for runs on an inventory's hosts:
    the runner names the run's folder first, then makes the lab."""

    __test__ = False

    def __init__(self, inventory: Inventory, control_dir: Path | None = None):
        self.inventory = inventory
        self.control_dir = control_dir
        self.run_dir: Path | None = None

    def started(self, run_dir: Path) -> None:
        """The run's folder (RunOptions.started)."""
        self.run_dir = run_dir

    def __call__(self, topo: Topology, options: LabOptions) -> TestbedLab:
        """The lab of the run (RunOptions.lab)."""
        if self.run_dir is None:
            raise RuntimeError("the run's folder is not known yet")
        return TestbedLab(topo, options, self.inventory, self.run_dir, self.control_dir)
