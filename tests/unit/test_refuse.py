"""Refusals and warnings print their detail as written: brackets in an error message, a
spec's text or a path are not Rich markup (mcclab/refuse.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from mcclab.cli import app
from mcclab.refuse import alert, refuse

REPO = Path(__file__).resolve().parents[2]
MALFORMED = REPO / "tests" / "fixtures" / "malformed"
runner = CliRunner()


def test_alert_keeps_brackets_and_styles_only_the_headline():
    text = alert("invalid topology", "x.yaml: pattern '^[a-z][a-z0-9]{0,7}$' [/etc] [bold]")
    assert text.plain == "invalid topology\nx.yaml: pattern '^[a-z][a-z0-9]{0,7}$' [/etc] [bold]"
    (span,) = text.spans
    assert (span.start, span.end, str(span.style)) == (0, len("invalid topology"), "red")
    # a headline that is itself the message (an exception), in another colour
    text = alert(ValueError("[red]x[/red]"), "no run was started", style="yellow")
    assert text.plain == "[red]x[/red]\nno run was started"
    assert str(text.spans[0].style) == "yellow"


def test_refuse_prints_the_literal_text_and_exits_with_the_code_without_chaining():
    console = Console(record=True, width=200, color_system=None)
    with pytest.raises(typer.Exit) as caught:
        try:
            raise ValueError("window [warmup, duration] is empty")
        except ValueError as exc:
            refuse(console, "cannot resume", exc, code=2, sep=": ")
    assert caught.value.exit_code == 2
    assert caught.value.__suppress_context__
    assert console.export_text() == "cannot resume: window [warmup, duration] is empty\n"


def test_validate_prints_a_name_pattern_whole():
    # Read as markup, '[a-z]' and '[a-z0-9]' were tags: the user saw "pattern '^{0,7}$'".
    result = runner.invoke(app, ["topo", "validate", str(MALFORMED / "node-name-uppercase.yaml")])
    assert result.exit_code == 2
    assert "nodes.R1: String should match pattern '^[a-z][a-z0-9]{0,7}$'" in result.stderr


def test_validate_of_a_path_with_a_closing_tag_shape_still_refuses_cleanly(tmp_path):
    # "a[/x].yaml" read as markup is a closing tag with no opening one: a MarkupError
    # traceback (exit 1) in place of the validation message.
    folder = tmp_path / "a["
    folder.mkdir()
    bad = folder / "x].yaml"
    shutil.copy(MALFORMED / "node-name-uppercase.yaml", bad)
    result = runner.invoke(app, ["topo", "show", str(bad)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"invalid topology\n{bad}: nodes.R1" in result.stderr


def test_a_malformed_experiment_in_the_catalogue_keeps_its_bracketed_range(tmp_path):
    shutil.copy(REPO / "tests" / "fixtures" / "malformed_experiments"
                / "warmup-longer-than-run.yaml", tmp_path / "bad.yaml")
    result = runner.invoke(app, ["list", "--experiments", str(tmp_path)])
    assert result.exit_code == 2
    assert ("warmup: 25s is outside the allowed range [0s, 20s) (the measurement window "
            "[warmup, duration] must not be empty)") in result.stderr


def test_lab_check_shows_a_students_bracketed_answer_as_typed(tmp_path):
    # The checks quote the answer back; '[/x]' read as markup was a MarkupError
    # traceback in place of the grades, '[bold]' vanished into a style.
    answers = tmp_path / "answers.yaml"
    answers.write_text('q1: "[/x] r9"\nq2: "[bold]r9"\n')
    result = runner.invoke(app, ["lab", "check", "2", "--answers", str(answers),
                                 "--results", str(tmp_path / "results")])
    assert result.exit_code == 0, result.output
    assert "'[/x] r9' is not a neighbour of r4" in result.stdout
    assert "'[bold]r9' is not a neighbour of r4" in result.stdout
