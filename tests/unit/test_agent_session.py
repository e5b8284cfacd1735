"""Session descriptions, the protocol registry and the metrics endpoint argument."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from agents.cbr import CbrReceiver, CbrSender
from agents.runtime.metrics import parse_endpoint
from agents.runtime.registry import ProtocolSpec, get, protocols, register, unregister
from agents.runtime.session import Session


def cbr(**overrides):
    data = {"protocol": "cbr", "flow": "x1", "session_id": 1, "source": "10.0.0.1",
            "channels": [{"group": "239.1.1.1", "port": 5000}],
            "params": {"rate": "1Mbit", "packet_size": "1000B"}}
    data.update(overrides)
    return data


def layered(**overrides):
    data = {"protocol": "layered-cbr", "flow": "l1", "session_id": 2, "source": "10.0.0.1",
            "channels": [{"group": "239.1.1.1", "port": 5000},
                         {"group": "239.1.1.2", "port": 5000}],
            "params": {"rates": ["1Mbit", "2Mbit"]}}
    data.update(overrides)
    return data


def test_builtin_protocols_are_registered():
    assert {"cbr", "layered-cbr"} <= set(protocols())
    assert get("cbr").protocol_id != get("layered-cbr").protocol_id


def test_json_round_trip():
    session = Session.model_validate(layered(ssm=True, nodes={"r1": {
        "address": "10.0.1.2", "metrics": "172.30.0.5:9100", "params": {"level": 1}}}))
    again = Session.model_validate_json(session.model_dump_json())
    assert again == session
    assert session.params_for("r1").level == 1
    assert session.params_for("r2").level is None
    assert session.params_for(None).rates == [1e6, 2e6]


@pytest.mark.parametrize(("change", "message"), [
    ({"extra": 1}, "extra"),
    ({"protocol": "nope"}, "unknown protocol 'nope'"),
    ({"params": {"rate": 1000000}}, "needs a unit"),
    ({"params": {"rate": "1Mbit", "burst": 3}}, "burst"),
    ({"params": {"rate": "1Mbit", "packet_size": "10B"}}, "packet_size"),
    ({"params": {"rate": "0bit"}}, "positive"),
    ({"channels": []}, "at least 1"),
    ({"channels": [{"group": "10.1.1.1", "port": 5000}]}, "not a multicast group"),
    ({"channels": [{"group": "224.0.0.5", "port": 5000}]}, "link-local"),
    ({"channels": [{"group": "239.1.1.1", "port": 0}]}, "greater than or equal to 1"),
    ({"channels": [{"group": "239.1.1.1", "port": 5000}, {"group": "239.1.1.2", "port": 5000}]},
     "cbr needs 1 channels"),
    ({"session_id": 2**32}, "less than or equal"),
    ({"flow": "has space"}, "pattern"),
    ({"nodes": {"r": {"params": {"rate": "fast"}}}}, "nodes.r.params"),
    ({"nodes": {"r": {"adress": "10.0.0.2"}}}, "adress"),
])
def test_invalid_sessions_are_rejected_with_the_field(change, message):
    with pytest.raises(ValidationError, match=message):
        Session.model_validate(cbr(**change))


def test_layered_channel_count_and_level_are_checked():
    with pytest.raises(ValidationError, match="needs 3 channels"):
        Session.model_validate(layered(params={"rates": ["1Mbit"] * 3}))
    with pytest.raises(ValidationError, match="exceeds the 2 layers"):
        Session.model_validate(layered(nodes={"r": {"params": {"level": 3}}}))
    with pytest.raises(ValidationError, match="share a group and port"):
        Session.model_validate(layered(channels=[{"group": "239.1.1.1", "port": 5000}] * 2))


def test_session_file_is_plain_json():
    text = Session.model_validate(cbr()).model_dump_json()
    assert json.loads(text)["params"] == {"rate": "1Mbit", "packet_size": "1000B"}


class Toy(BaseModel):
    pass


def test_registry_refuses_duplicates_and_bad_ids():
    spec = ProtocolSpec("toy-x", 200, Toy, CbrSender, CbrReceiver)
    try:
        assert register(spec) is spec
        assert register(spec) is spec  # importing a module twice is harmless
        with pytest.raises(ValueError, match="already registered"):
            register(ProtocolSpec("toy-x", 201, Toy, CbrSender, CbrReceiver))
        with pytest.raises(ValueError, match="taken"):
            register(ProtocolSpec("toy-y", 200, Toy, CbrSender, CbrReceiver))
    finally:
        unregister("toy-x")
    with pytest.raises(ValueError, match="outside 1..255"):
        register(ProtocolSpec("toy-z", 0, Toy, CbrSender, CbrReceiver))
    with pytest.raises(ValueError, match="nibble"):
        register(ProtocolSpec("toy-z", 202, Toy, CbrSender, CbrReceiver, flags=0x01))
    with pytest.raises(KeyError, match="registered: "):
        get("toy-x")


@pytest.mark.parametrize(("text", "expected"), [
    ("172.30.0.5:9100", ("172.30.0.5", 9100)), ("10.0.0.1:1", ("10.0.0.1", 1))])
def test_metrics_endpoint(text, expected):
    assert parse_endpoint(text) == expected


@pytest.mark.parametrize("bad", ["0.0.0.0:9100", "9100", ":9100", "10.0.0.1:", "10.0.0.1:0",
                                 "10.0.0.1:70000", "[::1]:9100", "host:9100", "239.1.1.1:9100"])
def test_metrics_endpoint_must_be_a_specific_ipv4_address(bad):
    with pytest.raises(ValueError):
        parse_endpoint(bad)
