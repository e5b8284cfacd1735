"""``ormcc``: single-rate multicast congestion control with a Congestion Representative.

Li and Kalyanaraman, "ORMCC: A Simple and Effective Single-Rate Multicast
Congestion Control Scheme". The source paces one channel with AIMD driven by
the CI(mu)s of one receiver, the CR, chosen by the lowest average TRAC
(throughput rate at congestion); receivers suppress their CIs unless their
average TRAC is below the CR's. See ``docs/ormcc.md``.
"""

from __future__ import annotations

import secrets

from agents.ormcc.contract import CONTRACT_CASE, RECEIVER_GAUGES, SENDER_GAUGES
from agents.ormcc.params import OrmccParams
from agents.ormcc.receiver import OrmccReceiver
from agents.ormcc.sender import OrmccSender
from agents.ormcc.wire import ORMCC_EXT
from agents.runtime.registry import ProtocolSpec, register


def make_receiver(params: OrmccParams, session: object) -> OrmccReceiver:
    """A receiver with a random 32-bit id (ids only need to differ within a session)."""
    return OrmccReceiver(params, session, rid=secrets.randbits(32))


SPEC = register(ProtocolSpec(
    name="ormcc", protocol_id=5, params=OrmccParams, sender=OrmccSender,
    receiver=make_receiver, extension=ORMCC_EXT, channels=lambda params: 1, feedback=True,
    example_params={"packet_size": "1000B", "beta": 0.65},
    sender_gauges=SENDER_GAUGES, receiver_gauges=RECEIVER_GAUGES,
    contract_case=CONTRACT_CASE,
))

__all__ = ["SPEC", "OrmccParams", "OrmccReceiver", "OrmccSender"]
