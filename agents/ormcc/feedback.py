"""The runtime's unicast feedback action (a local stand-in until it lands on main)."""

from __future__ import annotations

from dataclasses import dataclass

try:
    from agents.runtime.actions import Feedback
except ImportError:  # pragma: no cover - removed once the runtime provides it

    @dataclass(frozen=True, slots=True)
    class Feedback:  # type: ignore[no-redef]
        """A unicast datagram to the sender (``to=None``) or to a peer."""

        data: bytes
        to: str | None = None

__all__ = ["Feedback"]
