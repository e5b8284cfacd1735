"""Shared pytest fixtures and the root / kernel-feature gate for network tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    """Skip network tests, saying why, where they cannot run (not root, no netns, no mnexec)."""
    reason = None
    if os.geteuid() != 0:
        reason = "needs root to create network namespaces"
    elif not Path("/proc/net/ip_mr_vif").exists():
        reason = "kernel has no IPv4 multicast routing (CONFIG_IP_MROUTE)"
    elif shutil.which("mnexec") is None:
        reason = "mininet is not installed (run 'make setup')"
    if reason is None:
        return
    for item in items:
        if "root" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def kernel_features():
    """Probe the kernel once per session."""
    from mcclab.features import probe

    return probe()


@pytest.fixture
def topologies() -> Path:
    """The repository's topology folder."""
    return REPO / "topologies"
