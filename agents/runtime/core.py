"""The typed interfaces every protocol implements: pure state machines driven by (now, event).

A core never reads a clock, opens a socket or sleeps. ``now`` is in seconds on
the runtime's clock (CLOCK_MONOTONIC in a lab, simulated time in
:mod:`agents.sim`); all returned times (``SetTimer.at``) are on that clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from agents.runtime.actions import Action, Reject
from agents.runtime.header import Header


class Core(ABC):
    """What senders and receivers share."""

    @abstractmethod
    def start(self, now: float) -> list[Action]:
        """The session begins: the first sends, joins and timers."""

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        """A timer set with ``SetTimer(timer_id, at)`` is due."""
        return []

    def on_packet(self, now: float, header: Header, payload_len: int, group: str) -> list[Action]:
        """A well-formed datagram of this session arrived.

        ``payload_len`` is the whole UDP payload in bytes (header, extension and
        padding: the packet size the sender asked for); ``group`` is the address of
        the channel it arrived on. ``[Reject()]`` counts the datagram as dropped (reason
        ``extension``) when its extension contradicts its channel or session.
        """
        return []

    def on_feedback(self, now: float, data: bytes, peer: str) -> list[Action]:
        """A unicast feedback datagram of this session arrived from ``peer``.

        ``data`` is what the other side put in its ``Feedback`` action; ``peer`` is
        opaque (``ADDR:PORT`` in a lab, a node name in the simulator) and can be
        passed back as ``Feedback(data, to=peer)``. A body the core does not accept is
        answered with ``[Reject()]``, so the runtime counts it as a drop; a core that
        expects no feedback (this default) rejects everything.
        """
        return [Reject()]

    def on_feedback_at(self, now: float, arrival: float, data: bytes, peer: str
                       ) -> list[Action]:
        """:meth:`on_feedback` with the datagram's arrival time (``arrival <= now``: the
        kernel's receive timestamp in a lab, ``now`` in the simulator). A core that
        measures round trips overrides this to leave out the time the datagram waited
        in the host; the default ignores it."""
        return self.on_feedback(now, data, peer)

    def stop(self, now: float) -> list[Action]:
        """The session ends (duration over or signal); only Log and Metric are honoured."""
        return []

    def metrics(self) -> dict[str, float]:
        """Gauges to export now, by name (``mcc_agent_<name>``); polled once per second."""
        return {}


class SenderCore(Core):
    """A protocol's sender."""


class ReceiverCore(Core):
    """A protocol's receiver."""
