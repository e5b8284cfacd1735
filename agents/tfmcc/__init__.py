"""``tfmcc``: TCP-Friendly Multicast Congestion Control (RFC 4654).

A single-rate scheme: each receiver computes a TCP-friendly rate from the TCP
throughput equation with its own loss-event rate and RTT; the sender follows the
receiver with the lowest rate (the CLR), and rate-biased feedback timers with
suppression keep the other receivers' reports few. See ``agents/tfmcc/README.md``.
Importing this module registers the protocol.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from agents.runtime.registry import ProtocolSpec, register
from agents.tfmcc.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.tfmcc.params import TfmccParams
from agents.tfmcc.receiver import TfmccReceiver
from agents.tfmcc.sender import TfmccSender
from agents.tfmcc.wire import TFMCC_EXT


def new_receiver_id() -> int:
    """A random 32-bit receiver id (ids only need to differ within a session)."""
    return secrets.randbits(32)


# The seam tests replace with a seeded source, so a simulation is reproducible: the id
# also seeds the receiver's feedback-timer draws.
receiver_ids: Callable[[], int] = new_receiver_id


def make_receiver(params: TfmccParams, session: object) -> TfmccReceiver:
    """A receiver with an id from :data:`receiver_ids`."""
    return TfmccReceiver(params, session, rid=receiver_ids())


PROTOCOL_ID = 8  # 1-6 are taken by the older protocols

SPEC = register(ProtocolSpec(
    name="tfmcc", protocol_id=PROTOCOL_ID, params=TfmccParams, sender=TfmccSender,
    receiver=make_receiver, extension=TFMCC_EXT, channels=lambda params: 1, feedback=True,
    example_params={"packet_size": "1000B"},
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))

__all__ = ["SPEC", "TfmccParams", "TfmccReceiver", "TfmccSender"]
