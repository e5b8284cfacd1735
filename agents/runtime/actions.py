"""What a protocol core asks the runtime to do. Cores return lists of these; nothing else
touches sockets, clocks or files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Send:
    """Send one packet of ``size`` bytes (UDP payload, header included) on ``channel``.

    The runtime fills in the sequence number (per channel, from 0, modulo 2**32)
    and the send time; ``flags`` may use only the protocol's declared high-nibble
    bits and ``ext`` is the protocol's extension value.
    """

    channel: int
    size: int
    flags: int = 0
    ext: Any = None


@dataclass(frozen=True, slots=True)
class Join:
    """Join ``channel``'s group (source-specific when the session is SSM)."""

    channel: int


@dataclass(frozen=True, slots=True)
class Leave:
    """Leave ``channel``'s group; its loss accounting restarts on the next join."""

    channel: int


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Call ``on_timer(now, timer_id)`` at absolute time ``at``; replaces a pending timer
    of the same id."""

    timer_id: str
    at: float


@dataclass(frozen=True, slots=True)
class CancelTimer:
    """Forget the pending timer ``timer_id`` (no error if there is none)."""

    timer_id: str


@dataclass(frozen=True, slots=True)
class Log:
    """Write ``{"event": event, **fields}`` to the event log."""

    event: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Metric:
    """Set the core gauge ``name`` (exported as ``mcc_agent_<name>``) to ``value`` now."""

    name: str
    value: float


@dataclass(frozen=True, slots=True)
class Feedback:
    """Send ``data`` by unicast: to the session's sender when ``to`` is None, else to ``to``,
    a peer string the core was given by ``on_feedback`` (the protocol must be registered
    with ``feedback=True``)."""

    data: bytes
    to: str | None = None


@dataclass(frozen=True, slots=True)
class Reject:
    """The datagram this event handed the core is not valid traffic: the runtime counts it
    as dropped instead of received (reason ``extension`` from ``on_packet``, ``feedback``
    from ``on_feedback``). Only an answer to a datagram; the core must not have acted on it."""


Action = Send | Join | Leave | SetTimer | CancelTimer | Log | Metric | Feedback | Reject
