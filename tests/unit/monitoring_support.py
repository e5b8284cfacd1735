"""What the monitoring tests share: a machine with none of its own monitoring services.

``start_monitoring`` reads the lab record root, the TSDB root, the Prometheus service
and Grafana from the machine; a test points each at nothing of the machine's (a
private folder, or none at all) so that it neither sees nor touches a real run's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcclab import state as st
from mcclab.monitoring import grafana, storage
from mcclab.monitoring import prometheus as prom
from mcclab.state import LabState, TrackedProcess


def private_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                    state_root: Path) -> Path:
    """Lab records under ``state_root``, the TSDB root a fresh ``tmp_path/disk``, no
    Prometheus service and no Grafana. Returns the TSDB root."""
    monkeypatch.setattr(st, "STATE_ROOT", state_root)
    root = tmp_path / "disk"
    root.mkdir()
    monkeypatch.setenv(storage.ROOT_ENV, str(root))
    monkeypatch.setattr(prom, "find_service", lambda: None)
    monkeypatch.setattr(grafana, "grafana_base", lambda: None)
    return root


def never_alive(state: LabState, what: str) -> TrackedProcess:
    """A process recorded in ``state`` as a fake spawn's: never alive (start time -1), so
    stopping the lab signals nothing real."""
    proc = TrackedProcess(os.getpid(), -1, what)
    state.processes.append(proc)
    return proc
