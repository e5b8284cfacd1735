"""The registry discovers protocol packages: a new folder under agents/ is enough."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import agents
from agents.runtime import registry

PACKAGE = '''
from agents.cbr import CbrParams, CbrReceiver, CbrSender
from agents.runtime.registry import ProtocolSpec

SPEC = ProtocolSpec(name="toy", protocol_id=250, params=CbrParams, sender=CbrSender,
                    receiver=CbrReceiver, channels=lambda params: 1,
                    sender_gauges={"target_rate_bps": "configured rate, bit/s"})
'''


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty registry, and a second folder of agents' packages to drop packages into."""
    monkeypatch.setattr(registry, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_PACKAGES", {})
    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(agents, "__path__", [*agents.__path__, str(tmp_path)])
    yield tmp_path
    for name in ("agents.toy", "agents.helpers"):
        sys.modules.pop(name, None)


def test_a_new_package_is_found_without_any_list(fresh: Path) -> None:
    (fresh / "toy").mkdir()
    (fresh / "toy" / "__init__.py").write_text(textwrap.dedent(PACKAGE))
    assert "agents.toy" in registry.protocol_packages()
    spec = registry.get("toy")
    assert spec.protocol_id == 250 and registry.package("toy") == "agents.toy"
    assert {"cbr", "rlc", "webrc", "toy"} <= set(registry.protocols())
    registry.unregister("toy")  # a discovered protocol stays registered
    assert "toy" in registry.protocols()


def test_packages_without_a_spec_and_the_runtime_are_not_protocols(fresh: Path) -> None:
    (fresh / "helpers").mkdir()
    (fresh / "helpers" / "__init__.py").write_text("VALUE = 1\n")
    assert "agents.helpers" in registry.protocol_packages()
    assert "agents.runtime" not in registry.protocol_packages()
    names = registry.protocols()
    assert {registry.package(n) for n in names} == set(registry.protocol_packages()) - {
        "agents.helpers"}
    with pytest.raises(KeyError, match="unknown protocol"):
        registry.get("helpers")


def test_a_protocol_registered_by_hand_can_be_removed(fresh: Path) -> None:
    spec = registry.get("cbr")
    hand = registry.register(registry.ProtocolSpec(
        name="by-hand", protocol_id=251, params=spec.params, sender=spec.sender,
        receiver=spec.receiver))
    assert registry.get("by-hand") is hand
    with pytest.raises(KeyError):
        registry.package("by-hand")
    registry.unregister("by-hand")
    assert "by-hand" not in registry.protocols()
