"""Where a run's Prometheus keeps its database: the root, its checks, the lab record, clean-up."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from mcclab import state as st
from mcclab.monitoring import storage
from mcclab.state import LabState


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private STATE_ROOT, so nothing touches /run/mcclab."""
    root = tmp_path / "run-mcclab"
    monkeypatch.setattr(st, "STATE_ROOT", root)
    return root


def test_the_root_is_on_disk_unless_the_setting_moves_it():
    assert storage.tsdb_root({}) == Path("/var/lib/mcclab/labs")
    assert storage.tsdb_root({storage.ROOT_ENV: "  "}) == storage.DEFAULT_ROOT
    assert storage.tsdb_root({storage.ROOT_ENV: "/srv/tsdb"}) == Path("/srv/tsdb")
    # Not under /run (tmpfs: RAM), and apart from the machine's own Prometheus service's
    # folders in /var/lib/mcclab, which a sweep of the root must never reach.
    assert not storage.DEFAULT_ROOT.is_relative_to(st.STATE_ROOT)
    assert Path("/var/lib/mcclab") != storage.DEFAULT_ROOT
    assert storage.tsdb_path(Path("/r"), "default-20261121-1") == \
        Path("/r/default-20261121-1/prometheus")


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "../x"])
def test_a_lab_id_never_leaves_the_root(bad):
    with pytest.raises(ValueError):
        storage.lab_dir(Path("/r"), bad)


def test_the_default_root_is_made_with_its_parents(tmp_path):
    default = tmp_path / "var" / "lib" / "mcclab" / "labs"
    storage.check_root(default, default=default, min_free=0)
    assert default.is_dir() and list(default.iterdir()) == []  # the probe file is gone


def test_a_chosen_root_that_is_missing_is_refused_not_made(tmp_path):
    chosen = tmp_path / "unmounted" / "tsdb"
    with pytest.raises(storage.StorageError) as err:
        storage.check_root(chosen, default=tmp_path / "default", min_free=0)
    message = str(err.value)
    assert str(chosen) in message and "does not exist" in message
    assert f"{storage.ROOT_ENV}={chosen}" in message
    assert not chosen.exists()


def test_a_file_in_place_of_the_root_is_refused(tmp_path):
    root = tmp_path / "labs"
    root.write_text("")
    with pytest.raises(storage.StorageError, match="not a directory"):
        storage.check_root(root, default=root, min_free=0)


def test_an_unwritable_root_is_refused_with_the_cause(tmp_path, monkeypatch):
    def read_only(**_kw):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(storage.tempfile, "mkstemp", read_only)
    with pytest.raises(storage.StorageError) as err:
        storage.check_root(tmp_path, default=tmp_path, min_free=0)
    assert "not writable (Read-only file system)" in str(err.value)
    assert storage.ROOT_ENV in str(err.value)


def test_a_nearly_full_disk_is_refused(tmp_path):
    with pytest.raises(storage.StorageError, match="MiB free"):
        storage.check_root(tmp_path, default=tmp_path, min_free=2**62)
    storage.check_root(tmp_path, default=tmp_path, min_free=1)


def test_prepare_records_the_folder_before_making_it(state_root, tmp_path, monkeypatch):
    root = tmp_path / "labs"
    lab = LabState(lab_id="default-r1")
    seen = []
    record = lab.add_dir

    def add_dir(path: Path) -> None:
        seen.append((path, path.exists()))
        record(path)

    monkeypatch.setattr(lab, "add_dir", add_dir)
    tsdb = storage.prepare(lab, root, [], default=root, min_free=0)
    assert tsdb == root / "default-r1" / "prometheus" and tsdb.is_dir()
    assert seen == [(root / "default-r1", False)]
    # On disk, where `mcclab clean` reads it after a SIGKILL.
    assert json.loads((lab.path / "state.json").read_text())["dirs"] == [str(root / "default-r1")]


def test_an_unusable_root_records_nothing_and_makes_nothing(state_root, tmp_path):
    lab = LabState(lab_id="default-r1")
    with pytest.raises(storage.StorageError):
        storage.prepare(lab, tmp_path / "missing", [], default=tmp_path / "other", min_free=0)
    assert lab.dirs == [] and not (tmp_path / "missing").exists()


def test_clean_after_a_crash_removes_the_database(state_root, tmp_path):
    root = tmp_path / "labs"
    lab = LabState(lab_id="default-r1")
    tsdb = storage.prepare(lab, root, [], default=root, min_free=0)
    (tsdb / "wal").mkdir()
    (tsdb / "wal" / "00000000").write_bytes(b"x" * 4096)
    # What `mcclab clean` does with a dead owner's record: load it and destroy it.
    st.destroy(LabState.load(lab.path))
    assert not (root / "default-r1").exists() and root.is_dir()


def test_folders_of_labs_without_a_record_are_swept(state_root, tmp_path):
    root = tmp_path / "labs"
    for name in ("live", "crashed-before-reboot", "mine"):
        (root / name / "prometheus").mkdir(parents=True)
    (root / "notes.txt").write_text("not a lab's")
    lab = LabState(lab_id="mine")
    storage.prepare(lab, root, ["live"], default=root, min_free=0)
    assert sorted(p.name for p in root.iterdir()) == ["live", "mine", "notes.txt"]
    assert storage.sweep(root, ["live", "mine"]) == []
    assert storage.sweep(tmp_path / "absent", []) == []


def test_release_removes_the_folder_and_its_record(state_root, tmp_path):
    root = tmp_path / "labs"
    lab = LabState(lab_id="default-r1")
    tsdb = storage.prepare(lab, root, [], default=root, min_free=0)
    (tsdb / "chunks").write_bytes(b"\0" * 100_000)
    assert storage.disk_usage(tsdb) >= 100_000
    assert storage.disk_usage(tmp_path / "absent") == 0
    storage.release(lab, tsdb)
    assert not tsdb.parent.exists() and lab.dirs == []
    assert json.loads((lab.path / "state.json").read_text())["dirs"] == []
