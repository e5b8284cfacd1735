"""TCP window ceilings on allocated hosts: the lab's primer, split by machine.

In a lab the experiment's setup ends with one primer process
(``mcclab.net.tcp_window``, no namespace) that enters every sender's and
receiver's namespace in turn. On a testbed those namespaces are machines, so
:class:`~mcclab.testbed.ssh.SshRunner` hands that command here instead of
running it on the controller. The routes with the locked ``cwnd`` come before
it in the setup and name the sender's namespace, so they already ran on the
senders' hosts. From the primer's own pairs (its stdin), :func:`plan_priming`
makes, per receiver's host, one listener on the receivers' addresses and, per
sender's host, one primer of all that sender's flows; :func:`prime_on_hosts`
starts every listener and waits until each has bound its ports, runs every
primer at once, then closes the listeners' stdin so they end. A primer that
finds a cache without its ceiling fails the setup, before any flow starts.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mcclab.commands import Cmd
from mcclab.net.tcp_window import (
    PRIME_TIMEOUT_S,
    READY,
    HostTarget,
    Prime,
    listen_argv,
    parse_listening,
    prime_host_argv,
)

MODULE = "mcclab.net.tcp_window"
# Seconds for a listener to report its ports, and for a primer (its own timeout plus
# the ssh round trips and a Python start on a loaded host).
READY_TIMEOUT_S = 20.0
PRIMER_TIMEOUT_S = PRIME_TIMEOUT_S + 20.0
END_TIMEOUT_S = 10.0  # for every listener's client to end once its stdin is closed


class HostArgv(Protocol):
    """What the sequencing needs of an SSH client (``mcclab.testbed.ssh.Ssh.argv``)."""

    def argv(self, node: str, argv: Sequence[str]) -> list[str]:
        """The local argv running ``argv`` on ``node``'s host."""
        ...


class PrimingError(RuntimeError):
    """A window ceiling could not be primed on a host."""


def is_primer(command: Cmd) -> bool:
    """Whether ``command`` is the lab's primer (``tcp_window.prime_cmd``): no namespace,
    ``PYTHON -m mcclab.net.tcp_window`` and nothing more."""
    return command.netns is None and tuple(command.argv[1:]) == ("-m", MODULE)


@dataclass
class HostPriming:
    """What each host does for the ceilings: the addresses a receiver's host listens on,
    and each sender's flows as ``(address, segments)``, both in the pairs' order."""

    listeners: dict[str, list[str]] = field(default_factory=dict)
    primers: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def listen_argvs(self, python: str) -> dict[str, list[str]]:
        """Each receiver's host's listener argv."""
        return {node: listen_argv(addresses, python)
                for node, addresses in self.listeners.items()}

    def prime_argvs(self, ports: Mapping[str, int], python: str) -> dict[str, list[str]]:
        """Each sender's host's primer argv, given the listeners' ``ports`` by address."""
        return {node: prime_host_argv([HostTarget(a, ports[a], s) for a, s in flows], python)
                for node, flows in self.primers.items()}


def plan_priming(primes: Sequence[Prime], nodes: Mapping[str, str]) -> HostPriming:
    """The hosts' part of each pair; ``nodes`` maps a namespace name to its node.
    PrimingError for a namespace that is no node of the inventory."""
    def node(ns: str) -> str:
        try:
            return nodes[ns]
        except KeyError:
            raise PrimingError(f"window ceiling: namespace {ns!r} is no node of the "
                               "inventory") from None

    out = HostPriming()
    for p in primes:
        receiver, sender = node(p.listener_ns), node(p.sender_ns)
        if p.address not in out.listeners.setdefault(receiver, []):
            out.listeners[receiver].append(p.address)
        flows = out.primers.setdefault(sender, [])
        if (p.address, p.segments) not in flows:
            flows.append((p.address, p.segments))
    return out


def _await_ready(node: str, proc: subprocess.Popen[bytes], deadline: float) -> str:
    """The listener's output up to its ``ready`` line; PrimingError if it ends first."""
    assert proc.stdout is not None
    seen = b""
    while not any(line.strip() == READY.encode() for line in seen.splitlines()):
        left = deadline - time.monotonic()
        readable, _, _ = select.select([proc.stdout], [], [], max(left, 0))
        chunk = os.read(proc.stdout.fileno(), 4096) if readable else b""
        if not chunk:
            what = "timed out" if not readable else f"ended ({proc.wait()})"
            raise PrimingError(f"window ceiling: the listener on {node} {what} before "
                               f"accepting: {_stderr(proc)}")
        seen += chunk
    return seen.decode(errors="replace")


def _stderr(proc: subprocess.Popen[bytes]) -> str:
    """What an ended process wrote on stderr (empty while it runs)."""
    if proc.stderr is None or proc.poll() is None:
        return ""
    return proc.stderr.read().decode(errors="replace").strip()[-500:]


def _end(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Close each listener's stdin (it ends on EOF), then reap it; a client still running
    after END_TIMEOUT_S is killed (its listener ends by its own ``--limit``)."""
    for proc in procs:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
    deadline = time.monotonic() + END_TIMEOUT_S
    for proc in procs:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def prime_on_hosts(ssh: HostArgv, plan: HostPriming, python: str) -> dict[str, str]:
    """Listeners up on every receiver's host, then every sender's primer at once, then the
    listeners ended. Returns each sender's primer output (``ADDRESS cwnd N`` lines);
    PrimingError naming the host and its primer's reason when any cache lacks its ceiling."""
    listeners: list[subprocess.Popen[bytes]] = []
    try:
        ports: dict[str, int] = {}
        for node, argv in plan.listen_argvs(python).items():
            listeners.append(subprocess.Popen(ssh.argv(node, argv), stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        deadline = time.monotonic() + READY_TIMEOUT_S
        for node, proc in zip(plan.listeners, listeners, strict=True):
            ports.update(parse_listening(_await_ready(node, proc, deadline)))
        missing = sorted({a for flows in plan.primers.values() for a, _ in flows} - set(ports))
        if missing:
            raise PrimingError(f"window ceiling: no listener reported a port for {missing}")
        primers = {node: subprocess.Popen(ssh.argv(node, argv), stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for node, argv in plan.prime_argvs(ports, python).items()}
        out, failed = {}, []
        for node, proc in primers.items():
            try:
                stdout, stderr = proc.communicate(timeout=PRIMER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                stderr += b"timed out"
            if proc.returncode != 0:
                failed.append(f"{node} ({proc.returncode}): "
                              f"{stderr.decode(errors='replace').strip()[-500:]}")
            out[node] = stdout.decode(errors="replace")
        if failed:
            raise PrimingError("window ceiling not primed on " + "; ".join(failed))
        return out
    finally:
        _end(listeners)
