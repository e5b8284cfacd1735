"""Protocol agents: a sender and a receiver program per congestion-control protocol.

Protocol logic lives in pure state machines (``SenderCore`` / ``ReceiverCore``
in :mod:`agents.runtime.core`) driven by ``(now, event)`` and returning
actions. The runtime (:mod:`agents.runtime`) owns sockets, timers, statistics,
the event log and the Prometheus endpoint; :mod:`agents.run` launches one agent
inside a lab node and :mod:`agents.sim` runs a whole session in simulated time.
See ``docs/agents.md``.
"""
