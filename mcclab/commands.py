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

    def __str__(self) -> str:
        where = f"[{self.netns}] " if self.netns else ""
        return where + shlex.join(self.argv)


def cmd(*argv: str | int | float, netns: str | None = None, check: bool = True) -> Cmd:
    """Build a Cmd from words; numbers are stringified."""
    return Cmd(tuple(str(a) for a in argv), netns, check)


def sysctl(netns: str | None, key: str, value: str | int) -> Cmd:
    """Set a sysctl inside a namespace (through /proc, which is per-netns for net.*)."""
    return cmd("sysctl", "-q", "-w", f"{key}={value}", netns=netns)
