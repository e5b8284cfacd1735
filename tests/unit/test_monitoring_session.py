"""start_monitoring and Monitoring.stop with the processes faked: the order of the steps,
what a bad database folder stops, and what the end of a run removes and keeps."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
from monitoring_support import never_alive, private_machine

from mcclab.monitoring import export, lifecycle, session, storage
from mcclab.state import LabState, TrackedProcess


@dataclass
class FakeTopo:
    def model_dump(self, mode: str) -> dict:
        return {"name": "chain", "mode": mode}

    def names(self, kind: str) -> list[str]:
        return ["r1"] if kind == "router" else []


@dataclass
class FakeLab:
    state: LabState
    topo: FakeTopo = field(default_factory=FakeTopo)
    link_backend: str = "kernel"
    plan: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(
        control_gateway=SimpleNamespace(ip="127.0.0.1")))


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """A private lab record root and TSDB root, no Prometheus service, no Grafana, and a
    fake spawn that records every command instead of running it."""
    root = private_machine(tmp_path, monkeypatch, tmp_path / "run-mcclab")
    spawned: list = []

    def fake_spawn(state: LabState, command, log: Path, what: str) -> TrackedProcess:
        spawned.append(command)
        return never_alive(state, what)

    monkeypatch.setattr(lifecycle, "spawn", fake_spawn)
    monkeypatch.setattr(lifecycle, "wait_ready", lambda *a, **k: None)
    monkeypatch.setattr(lifecycle, "first_scrape", lambda *a, **k: True)
    lab = FakeLab(LabState(lab_id="default-r1"))
    lab.state.save()
    return SimpleNamespace(root=root, spawned=spawned, lab=lab, run_dir=tmp_path / "run-r1")


def _start(machine: SimpleNamespace) -> session.Monitoring:
    experiment = SimpleNamespace(name="default", duration=10.0, flows=[])
    return session.start_monitoring(machine.lab, machine.run_dir, experiment,
                                    SimpleNamespace(launches=[]))


def test_a_missing_database_folder_is_said_before_anything_starts(machine, monkeypatch):
    missing = machine.root / "not-mounted"
    monkeypatch.setenv(storage.ROOT_ENV, str(missing))
    mon = _start(machine)
    assert machine.spawned == []  # neither the exporter nor Prometheus
    assert mon.url is None and mon.prometheus_url is None
    assert mon.announcement == (
        f"live monitoring unavailable: Prometheus's data folder {missing} does not exist; "
        f"{storage.ROOT_ENV}={missing} is set; point it at a writable folder on a local disk")
    assert machine.lab.state.dirs == [] and machine.lab.state.processes == []


def test_the_database_is_recorded_and_made_then_the_processes_start(machine):
    mon = _start(machine)
    assert mon.notes == [] and mon.url and mon.prometheus_url
    folder = machine.root / "default-r1"
    assert mon.tsdb == folder / "prometheus" and mon.tsdb.is_dir()
    on_disk = json.loads((machine.lab.state.path / "state.json").read_text())
    assert on_disk["dirs"] == [str(folder)]
    prometheus, exporter = machine.spawned  # Prometheus first: it can start earlier
    assert exporter.argv[1:3] == ("-m", "mcclab.monitoring.exporter")
    assert f"--storage.tsdb.path={folder / 'prometheus'}" in prometheus.argv
    work = machine.lab.state.path / "monitoring"
    assert json.loads((work / session.STATE_FILE).read_text())["tsdb"] == str(mon.tsdb)
    assert (work / "prometheus.yml").is_file() and (work / "exporter.json").is_file()


def test_the_end_of_a_run_keeps_the_series_and_removes_the_database(machine, monkeypatch):
    copied = []

    def copy_series(url, run, start, end, run_dir):  # noqa: ANN001, ANN202
        # The database must still be there while the series are copied out of it.
        copied.append((run, run_dir, mon.tsdb.is_dir()))
        return 7

    monkeypatch.setattr(export, "copy_series", copy_series)
    monkeypatch.setattr(session.time, "sleep", lambda s: None)
    mon = _start(machine)
    (mon.tsdb / "wal").mkdir()
    (mon.tsdb / "wal" / "00000000").write_bytes(b"\1" * 50_000)
    mon.stop(machine.run_dir)
    assert copied == [("run-r1", machine.run_dir, True)]
    assert not (machine.root / "default-r1").exists()
    assert machine.lab.state.dirs == [] and machine.lab.state.processes == []
    record = json.loads((machine.run_dir / "logs" / "monitoring.json").read_text())
    assert record["tsdb_bytes"] >= 50_000 and record["notes"] == []
    kept = machine.run_dir / "logs" / "monitoring"
    assert sorted(p.name for p in kept.iterdir()) == ["exporter.json", "prometheus.yml",
                                                      "targets.json"]
