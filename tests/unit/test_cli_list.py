"""``mcclab list``: every experiment spec with its paper, figure and run lengths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from mcclab.catalog import split_reference
from mcclab.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_lists_every_spec_of_the_tree_with_both_durations():
    result = runner.invoke(app, ["list", "--json"])
    assert result.exit_code == 0, result.output
    entries = {e["name"]: e for e in json.loads(result.output)}
    specs = {p.stem for p in (REPO / "experiments").glob("*.yaml")}
    assert set(entries) == specs
    default = entries["default"]
    # experiments/default.yaml: 500 s as written, 150 s under profiles.quick.set.
    assert default["durations_s"] == {"quick": 150.0, "paper": 500.0}
    assert default["figure"] == "Fig. 9(a)"
    assert default["paper"].endswith("SIGCOMM 2002")
    assert entries["stair-fig13"]["figure"] == "Figs. 12-14"


def test_table_shows_the_durations():
    result = runner.invoke(app, ["list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "│ default " in line)
    assert "150s" in row and "500s" in row and "Fig. 9(a)" in row


def test_a_malformed_spec_is_named_and_the_others_still_listed(tmp_path):
    shutil.copy(REPO / "experiments" / "default.yaml", tmp_path / "default.yaml")
    (tmp_path / "broken.yaml").write_text(
        "name: broken\ntopology: topologies/dumbbell.yaml\nduration: 10s\n"
        "flows: [{name: t, type: tcp, sender: s1, receiver: r1}]\nbogus: 1\n")
    (tmp_path / "noquick.yaml").write_text(
        "name: noquick\nreference: 'A, B, sec. 2, Table II'\n"
        "topology: topologies/webrc-dumbbell.yaml\nduration: 30s\n"
        "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    result = runner.invoke(app, ["list", "--json", "--experiments", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path / 'broken.yaml'}: bogus: unknown key" in result.stderr
    listed = {e["name"]: e for e in json.loads(result.stdout)}
    assert set(listed) == {"default", "noquick"}
    assert listed["noquick"]["durations_s"] == {"quick": None, "paper": 30.0}
    assert (listed["noquick"]["paper"], listed["noquick"]["figure"]) == ("A, B", "Table II")


def test_split_reference_keeps_a_reference_without_a_place_whole():
    assert split_reference("Vicisano, Rizzo, Crowcroft, INFOCOM 1998, sec. 4.6, Fig. 7 (left)") \
        == ("Vicisano, Rizzo, Crowcroft, INFOCOM 1998", "Fig. 7")
    assert split_reference("lab check (ORMCC, sec. III)") == ("lab check (ORMCC, sec. III)", "")


def test_a_missing_folder_is_an_error_not_an_empty_list(tmp_path):
    result = runner.invoke(app, ["list", "--experiments", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "no such folder" in result.stderr


def test_a_reference_with_brackets_is_listed_as_written(tmp_path):
    # Read as Rich markup, "[/x]" raised a MarkupError and "[II]" vanished as a tag.
    (tmp_path / "brackets.yaml").write_text(
        "name: brackets\nreference: 'A [/x], B, sec. 2, Table [II]'\n"
        "topology: topologies/webrc-dumbbell.yaml\nduration: 30s\n"
        "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    result = runner.invoke(app, ["list", "--experiments", str(tmp_path)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "│ brackets " in line)
    assert "A [/x], B" in row and "Table [II]" in row
