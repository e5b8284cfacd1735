"""``pgmcc``: single-rate multicast congestion control with an acker (Rizzo, SIGCOMM 2000;
draft-ietf-rmt-bb-pgmcc).

A window-based, TCP-like control loop runs between the sender and one receiver, the
acker, which ACKs every data packet with a bitmap of the last 32; every receiver
reports losses in NAKs carrying its loss rate, and the sender makes the receiver with
the lowest throughput estimate (from loss rate and RTT) the acker, with a bias against
switching. See ``agents/pgmcc/README.md``. Importing this module registers the
protocol.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from agents.pgmcc.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.pgmcc.params import PgmccParams
from agents.pgmcc.receiver import PgmccReceiver
from agents.pgmcc.sender import PgmccSender
from agents.pgmcc.wire import PGMCC_EXT
from agents.runtime.registry import ProtocolSpec, register


def new_receiver_id() -> int:
    """A random non-zero 32-bit receiver id (ids only need to differ within a session)."""
    return secrets.randbits(32) or 1


# The seam tests replace with a seeded source, so a simulation is reproducible.
receiver_ids: Callable[[], int] = new_receiver_id


def make_receiver(params: PgmccParams, session: object) -> PgmccReceiver:
    """A receiver with an id from :data:`receiver_ids`."""
    return PgmccReceiver(params, session, rid=receiver_ids())


PROTOCOL_ID = 7  # 1-6 are taken by the older protocols, 8 by TFMCC

SPEC = register(ProtocolSpec(
    name="pgmcc", protocol_id=PROTOCOL_ID, params=PgmccParams, sender=PgmccSender,
    receiver=make_receiver, extension=PGMCC_EXT, channels=lambda params: 1, feedback=True,
    example_params={"packet_size": "1000B"},
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))

__all__ = ["SPEC", "PgmccParams", "PgmccReceiver", "PgmccSender"]
