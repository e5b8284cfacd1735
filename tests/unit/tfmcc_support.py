"""TFMCC registered in the agent registry only while a TFMCC test runs.

Importing ``agents.tfmcc`` registers the protocol; other tests check the registry against
the metric contract, which lists the protocols that are built in. A test module that needs
TFMCC imports ``tfmcc_registered`` from here (an autouse fixture, so importing it is enough).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import agents.tfmcc
from agents.runtime import registry

# Importing the package registered TFMCC; keep it out of the registry outside these tests.
registry.unregister("tfmcc")


@pytest.fixture(autouse=True)
def tfmcc_registered() -> Iterator[None]:
    """TFMCC registered for the importing module's tests only: other tests check the
    registry against the metric contract, which lists the protocols that are built in."""
    registry.register(agents.tfmcc.SPEC)
    yield
    registry.unregister("tfmcc")
