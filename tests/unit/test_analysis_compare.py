"""``mcclab compare``: the side-by-side table and the overlay figure."""

from __future__ import annotations

import pytest
import typer
from rich.console import Console
from synthetic_runs import demo_run, rows, write_run

from mcclab.analysis.compare import compare, compare_command, default_output
from mcclab.analysis.results import load_run


def render(table) -> str:  # noqa: ANN001
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("results") / "webrc-fig9"
    return [demo_run(root / "run1"),
            demo_run(root / "run2", status="interrupted", elapsed_s=71.4)]


def test_table_and_figure(runs, tmp_path):
    table, paths = compare(runs, out=tmp_path / "cmp.png")
    text = render(table)
    assert [p.name for p in paths] == ["cmp.png", "cmp.svg"]
    assert all(p.stat().st_size > 5_000 for p in paths)
    assert "run1" in text and "run2" in text and "(interrupted)" in text
    for label in ("WEBRC throughput", "WEBRC share", "link utilisation", "Jain's index",
                  "WEBRC loss", "WEBRC / TCP"):
        assert label in text, label
    line = next(x for x in text.splitlines() if "WEBRC throughput" in x)
    assert "1.6 Mbit/s" in line and line.count("pass") == 2 and "±10 %" in line


def test_runs_of_different_experiments(runs, tmp_path):
    other = write_run(tmp_path / "other" / "x1", rows("m", "multicast", "r1", 1e6, range(1, 61)),
                      references=[{"kind": "throughput", "label": "WEBRC throughput",
                                   "flow": "m", "paper": "1Mbit", "tolerance": "10%"}])
    table, _ = compare([runs[0], other], out=tmp_path / "cmp.png")
    text = render(table)
    assert "webrc-fig9/run1" in text and "other/x1" in text
    line = next(x for x in text.splitlines() if "WEBRC throughput" in x)
    assert "*" in line  # paper values differ between the experiments
    share = next(x for x in text.splitlines() if "WEBRC share" in x)
    assert "—" in share  # the other run has no such quantity


def test_default_output_is_beside_the_runs(runs):
    loaded = [load_run(r) for r in runs]
    assert default_output(loaded) == runs[0].parent / "compare-run1_run2.png"
    assert default_output([loaded[0], loaded[0]]) == runs[0].parent / "compare-run1_run1.png"


def test_compare_command(runs, capsys, tmp_path):
    compare_command(runs)
    out = capsys.readouterr().out
    assert "overlay figure: " + str(runs[0].parent / "compare-run1_run2.png") in out
    assert (runs[0].parent / "compare-run1_run2.svg").exists()
    with pytest.raises(typer.Exit):
        compare_command([runs[0], tmp_path / "nothing"])
    assert "no run.json" in capsys.readouterr().err
