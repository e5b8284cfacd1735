"""The lab's agent contract cases (each protocol's SPEC.contract_case) in simulated time.

tests/integration/test_agent_contract.py runs every discovered protocol's case as real
processes in two namespaces; this runs the same sessions on the simulator, so a case
that cannot pass (a wrong expected rate, a missing channel) fails without a lab, and a
new protocol's case is checked as soon as its package exposes a SPEC.
"""

from __future__ import annotations

import pytest

from agents.runtime.registry import ProtocolSpec, protocols
from agents.runtime.session import Session
from agents.sim import simulate
from mcclab.model.units import parse_rate

TOLERANCE = 0.05
SENDER_SECONDS = 3.5


def session(name: str, case: dict) -> Session:
    """The contract session of ``name`` between nodes ``snd`` and ``rcv``."""
    return Session.model_validate({
        "protocol": name, "flow": f"contract-{name}", "session_id": 4242,
        "source": "10.0.0.1", "ssm": case["ssm"], "ttl": 1,
        "channels": case["channels"], "params": case["params"],
        "nodes": {"snd": {"address": "10.0.0.1"},
                  "rcv": {"address": "10.0.0.2", "params": case.get("receiver_params", {})}},
        **case.get("session", {}),
    })


def received_rate(spec: ProtocolSpec) -> float:
    """bit/s the receiver got over its stats intervals inside the sender's active time."""
    case = spec.contract_case
    res = simulate(session(spec.name, case), sender="snd", receivers=["rcv"],
                   duration=SENDER_SECONDS)
    full = [r for r in res.receivers["rcv"].records("stats")
            if r["t"] - r["interval"] >= 0.0 and r["t"] <= SENDER_SECONDS]
    assert len(full) >= 2, full
    return 8 * sum(r["rx_bytes"] for r in full) / sum(r["interval"] for r in full)


def meets(case: dict, rate: float) -> bool:
    """Whether ``rate`` passes the case's rate check (as the lab test applies it)."""
    if "expected_range" in case:
        low, high = (parse_rate(x) for x in case["expected_range"])
        return low <= rate <= high
    expected = parse_rate(case["expected"])
    return abs(rate - expected) <= TOLERANCE * expected


@pytest.mark.parametrize("name", sorted(protocols()))
def test_contract_case_passes_in_simulated_time(name: str) -> None:
    spec = protocols()[name]
    assert spec.contract_case, f"{name}: no contract_case in its SPEC"
    rate = received_rate(spec)
    assert meets(spec.contract_case, rate), (name, rate)


def test_a_wrong_expected_rate_fails() -> None:
    """The check is not vacuous: cbr's case with twice its rate expected fails it."""
    case = protocols()["cbr"].contract_case
    rate = received_rate(protocols()["cbr"])
    assert meets(case, rate)
    assert not meets({**case, "expected": f"{2 * parse_rate(case['expected']):.0f}bit"}, rate)
