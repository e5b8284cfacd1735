"""Reading a results folder: the contract, partial folders, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from synthetic_runs import rows, write_run

from mcclab.analysis.results import RunError, load_run
from mcclab.model.loader import SpecError


def simple(folder: Path, **kwargs) -> Path:
    data = rows("m", "multicast", "r1", 1e6, range(1, 61), level=3) \
        + rows("t", "tcp", "NA", 2e6, range(1, 61))
    return write_run(folder, data, **kwargs)


def test_complete_run(tmp_path):
    run = load_run(simple(tmp_path / "exp" / "r1"))
    assert run.info.status == "complete"
    assert run.info.experiment == "exp" and run.info.run_id == "r1"
    assert run.window == (10.0, 60.0)
    assert run.notes == []
    assert run.links is None
    table = run.per_second
    assert len(table) == 120
    assert table["throughput_bps"].dtype == float
    # A node called NA is a name, not a missing value.
    assert set(table["node"]) == {"r1", "NA"}
    assert table.loc[table["flow"] == "t", "level"].isna().all()
    assert table.loc[table["flow"] == "m", "level"].eq(3).all()
    assert run.flow_type("m") == "multicast" and run.flow_type("t") == "tcp"
    assert run.env["kernel"] == "6.1.0-synthetic"


def test_interrupted_window_is_clipped_to_elapsed(tmp_path):
    run = load_run(simple(tmp_path / "e" / "r", status="interrupted", elapsed_s=35.5))
    assert run.window == (10.0, 35.5)


def test_window_is_clipped_to_the_last_recorded_second(tmp_path):
    data = rows("m", "multicast", "r1", 1e6, range(1, 31))
    run = load_run(write_run(tmp_path / "e" / "r", data, status="interrupted", elapsed_s=42))
    assert run.window == (10.0, 30.0)


def test_run_that_stopped_during_warmup(tmp_path):
    data = rows("m", "multicast", "r1", 1e6, range(1, 4))
    run = load_run(write_run(tmp_path / "e" / "r", data, status="failed", elapsed_s=3.5))
    assert run.window == (10.0, 3.0)
    assert any("window is empty" in n for n in run.notes)


def test_only_run_json(tmp_path):
    folder = tmp_path / "e" / "r"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({
        "experiment": "e", "run_id": "r", "status": "failed", "duration_s": 60,
        "warmup_s": 5, "elapsed_s": 0, "error": "boom", "extra": "ignored"}))
    run = load_run(folder)
    assert run.per_second.empty
    assert run.spec.name == "e" and run.spec.references == []
    assert len(run.notes) == 4  # spec, env, per_second missing; empty window


def test_empty_per_second_file(tmp_path):
    folder = simple(tmp_path / "e" / "r")
    (folder / "tables" / "per_second.csv").write_text("")
    assert load_run(folder).per_second.empty


def test_missing_run_json(tmp_path):
    with pytest.raises(RunError, match="no run.json"):
        load_run(tmp_path)


def test_bad_status(tmp_path):
    folder = simple(tmp_path / "e" / "r")
    info = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps(info | {"status": "done"}))
    with pytest.raises(RunError, match=r"run.json: status"):
        load_run(folder)


def test_missing_column(tmp_path):
    folder = simple(tmp_path / "e" / "r")
    path = folder / "tables" / "per_second.csv"
    path.write_text(path.read_text().replace("throughput_bps", "rate"))
    with pytest.raises(RunError, match="missing column.*throughput_bps"):
        load_run(folder)


def test_non_numeric_cell_names_line_and_column(tmp_path):
    folder = simple(tmp_path / "e" / "r")
    path = folder / "tables" / "per_second.csv"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace(",1000000.0,", ",fast,")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunError, match=r"line 4: column 'throughput_bps'.*'fast'"):
        load_run(folder)


def spec_error(tmp_path: Path, reference: dict) -> SpecError:
    folder = simple(tmp_path / "e" / "r", references=[reference])
    with pytest.raises(SpecError) as info:
        load_run(folder)
    assert "spec.yaml" in str(info.value)
    return info.value


@pytest.mark.parametrize(("reference", "field", "reason"), [
    ({"kind": "throughput", "label": "x", "flow": "m", "paper": 1e6, "tolerance": "10%"},
     "references[0].paper", "needs a unit"),
    ({"kind": "throughput", "label": "x", "flow": "m", "paper": "1Mbit", "tolerance": 0.1},
     "references[0].tolerance", "needs a unit"),
    ({"kind": "throughput", "label": "x", "flow": "m", "paper": "1Mbit", "tolerence": "10%"},
     "references[0].tolerence", "unknown key"),
    ({"kind": "share", "label": "x", "flow": "m", "paper": 0.5, "capacity": "1Mbit",
      "of_flows": ["m", "t"]}, "references[0]", "exactly one of"),
    ({"kind": "fairness", "label": "x", "flows": ["m", "t"], "paper": 0.9,
      "within": [1.0, 0.5]}, "references[0]", "low bound above high bound"),
    ({"kind": "fairness", "label": "x", "flows": ["m"], "paper": 0.9},
     "references[0].flows", "at least 2"),
    ({"kind": "goodput", "label": "x", "flow": "m", "paper": 1}, "references[0]", "kind"),
    ({"kind": "throughput", "label": "x", "flow": "webrc", "paper": "1Mbit"},
     "references[0].flow", "unknown flow 'webrc'"),
    ({"kind": "ratio", "label": "x", "numerator": "m", "denominator": "tpc", "paper": 1},
     "references[0].denominator", "unknown flow 'tpc'"),
    ({"kind": "share", "label": "x", "flow": "t", "paper": 0.5, "capacity": "1Mbit",
      "bits": "ip"}, "references[0].bits", "only multicast flows count packets"),
    ({"kind": "share", "label": "x", "flow": "m", "paper": 0.5, "of_flows": ["m", "t"],
      "bits": "ip"}, "references[0]", "needs 'capacity'"),
])
def test_invalid_reference_names_the_field(tmp_path, reference, field, reason):
    error = spec_error(tmp_path, reference)
    assert any(f == field and reason in r for f, r in error.problems), error.problems


def test_spec_duplicate_key_is_an_error(tmp_path):
    folder = simple(tmp_path / "e" / "r")
    (folder / "spec.yaml").write_text("name: a\nname: b\n")
    with pytest.raises(SpecError, match="duplicate key"):
        load_run(folder)


def test_spec_keeps_labels_and_ignores_runner_keys(tmp_path):
    folder = simple(tmp_path / "e" / "r", spec={"topology": "dumbbell", "duration": "60s"})
    spec = yaml.safe_load((folder / "spec.yaml").read_text())
    assert spec["topology"] == "dumbbell"
    run = load_run(folder)
    assert run.spec.reference == "Synthetic, Fig. 0"
    assert [f.name for f in run.spec.flows] == ["m", "t"]


def test_bad_links_table_is_a_note_not_an_error(tmp_path):
    folder = simple(tmp_path / "e" / "r", links=[{"t": 1, "link": "0", "src": "a", "dst": "b"}])
    path = folder / "tables" / "links.csv"
    path.write_text(path.read_text().replace("bytes_out", "bytes_sent"))
    run = load_run(folder)
    assert run.links is None
    assert any("links.csv ignored" in n and "bytes_out" in n for n in run.notes)


def test_links_table(tmp_path):
    folder = simple(tmp_path / "e" / "r", links=[
        {"t": t, "link": "0", "src": "a", "dst": "b", "pkts_out": t, "bytes_out": 1000 * t,
         "drops_queue": 0, "drops_loss": 0, "qlen_pkts": 3} for t in range(5)])
    links = load_run(folder).links
    assert links is not None and len(links) == 5 and links["link"].tolist() == ["0"] * 5
