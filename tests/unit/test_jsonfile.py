"""The atomic JSON writer the run, sweep, lab and reproduce records share."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mcclab import jsonfile
from mcclab.jsonfile import write_json_atomic


def test_replaces_the_record_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"status": "running"}')
    write_json_atomic(path, {"status": "complete", "folder": tmp_path,
                             "ended": datetime(2026, 1, 2, tzinfo=UTC)})
    assert json.loads(path.read_text()) == {"status": "complete", "folder": str(tmp_path),
                                            "ended": "2026-01-02 00:00:00+00:00"}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    write_json_atomic(path, [1], newline=True)
    assert path.read_text() == "[\n 1\n]\n"


def test_a_failed_write_keeps_the_old_record(tmp_path, monkeypatch):
    # The rename is the only step that touches the record: if writing the text fails,
    # a reader still finds the old record intact.
    path = tmp_path / "state.json"
    path.write_text('{"old": true}')

    def broken(self: Path, text: str) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(jsonfile.Path, "write_text", broken)
    with pytest.raises(OSError):
        write_json_atomic(path, {"new": True})
    assert json.loads(path.read_text()) == {"old": True}


def test_the_temporary_name_is_private_to_the_process(tmp_path, monkeypatch):
    # Two processes writing one record (a sweep's runners) never share a temporary file.
    names = []
    real_replace = Path.replace

    def spy(self: Path, target: Path) -> Path:
        names.append(self.name)
        return real_replace(self, target)

    monkeypatch.setattr(jsonfile.Path, "replace", spy)
    write_json_atomic(tmp_path / "sweep.json", {})
    assert names == [f".sweep.json.{os.getpid()}.tmp"]
