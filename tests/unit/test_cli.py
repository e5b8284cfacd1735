"""The command line's offline commands: validate, show, schema."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mcclab.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_validate_accepts_every_repository_topology():
    files = sorted(str(p) for p in (REPO / "topologies").glob("*.yaml"))
    result = runner.invoke(app, ["topo", "validate", *files])
    assert result.exit_code == 0, result.output
    assert result.output.count("ok ") == len(files)


def test_validate_rejects_a_malformed_file_with_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ngenerate: {kind: star, leaves: 2, leaf_link: {rate: 10}}\n")
    result = runner.invoke(app, ["topo", "validate", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: generate.leaf_link.rate" in result.output


def test_show_lists_nodes_and_both_directions_of_each_link():
    result = runner.invoke(app, ["topo", "show", str(REPO / "topologies" / "dumbbell.yaml")],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "rl→rr" in result.output and "rr→rl" in result.output
    assert "3.2Mbit" in result.output and "40pkt droptail" in result.output


def test_show_dot_is_a_graphviz_graph():
    result = runner.invoke(app, ["topo", "show", "--dot",
                                 str(REPO / "topologies" / "star4.yaml")])
    assert result.exit_code == 0
    assert result.output.startswith('graph "star4" {') and '"r0" -- "h1"' in result.output


def test_committed_schema_matches_the_models():
    result = runner.invoke(app, ["topo", "schema", "--check",
                                 str(REPO / "schema" / "topology.schema.json")])
    assert result.exit_code == 0, result.output
