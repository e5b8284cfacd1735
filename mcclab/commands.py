"""Commands as data: functions build Cmd values, one runner executes them.

Keeping the tc, ip, sysctl and iptables lines as plain data lets unit tests
assert on exactly what would run, without root and without a network.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class Cmd:
    """One command line, run in the root namespace or inside a node's namespace."""

    argv: tuple[str, ...]
    netns: str | None = None
    check: bool = True
    # Text fed to the command's stdin (``ip -batch -``: many changes, one process).
    input: str | None = None

    def __str__(self) -> str:
        where = f"[{self.netns}] " if self.netns else ""
        fed = "" if self.input is None else " < [" + "; ".join(self.input.splitlines()) + "]"
        return where + shlex.join(self.argv) + fed


def cmd(*argv: str | int | float, netns: str | None = None, check: bool = True) -> Cmd:
    """Build a Cmd from words; numbers are stringified."""
    return Cmd(tuple(str(a) for a in argv), netns, check)


def sysctl(netns: str | None, key: str, value: str | int) -> Cmd:
    """Set a sysctl inside a namespace (through /proc, which is per-netns for net.*)."""
    return cmd("sysctl", "-q", "-w", f"{key}={value}", netns=netns)


def sysctls(netns: str | None, settings: list[tuple[str, str | int]]) -> Cmd:
    """Set several sysctls of one namespace in one process, in the order given.

    A process costs about 3 ms whatever it does, and a node of a large lab has
    a dozen settings. ``sysctl`` still sets the keys after one that fails, and
    then exits non-zero naming it.
    """
    return cmd("sysctl", "-q", "-w", *(f"{k}={v}" for k, v in settings), netns=netns)
