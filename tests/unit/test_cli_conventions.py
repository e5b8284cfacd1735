"""The command line's conventions: --version, and help on every positional argument."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import typer
from typer.testing import CliRunner

from mcclab.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def positionals(command: object, path: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """(command path, argument name, help) of every positional argument under ``command``."""
    out = []
    subcommands = getattr(command, "commands", None)
    if subcommands is not None:  # a group: walk its commands
        for name, sub in subcommands.items():
            out += positionals(sub, (*path, name))
        return out
    for param in command.params:
        if param.param_type_name == "argument":
            out.append((" ".join(path), param.name, getattr(param, "help", None) or ""))
    return out


def test_every_positional_argument_has_help():
    found = positionals(typer.main.get_command(app))
    # The walk reaches the nested groups too: a bug there would pass vacuously.
    assert {("topo show", "file"), ("lab run", "lab"), ("report", "runs")} <= {
        (cmd, name) for cmd, name, _ in found}
    missing = [f"mcclab {cmd} {name.upper()}" for cmd, name, text in found if not text.strip()]
    assert not missing, f"positional arguments without help: {missing}"


def test_help_text_shows_the_positional_help():
    result = runner.invoke(app, ["check", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "topology file" in result.output


def test_version_is_the_package_version():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"mcclab {declared}"


def _profile_run_takes(monkeypatch, tmp_path, *args: str) -> tuple[int, str | None]:
    """The profile ``mcclab run ARGS`` resolves, stopped before any lab (as a refused run)."""
    import mcclab.experiment.runner
    from mcclab.lab import PreflightError

    taken: dict[str, str] = {}

    def execute(resolved, options):  # noqa: ANN001, ANN202
        taken["profile"] = resolved.profile
        raise PreflightError("refused by the test: no lab")

    monkeypatch.setattr(mcclab.experiment.runner, "execute", execute)
    result = runner.invoke(app, ["run", *args, "--results", str(tmp_path / "results")])
    return result.exit_code, taken.get("profile")


def test_run_defaults_to_the_profile_make_experiment_uses(monkeypatch, tmp_path):
    makefile = (REPO / "Makefile").read_text()
    make_default = re.search(r"^PROFILE\s*\?=\s*(\S+)", makefile, re.M).group(1)
    assert _profile_run_takes(monkeypatch, tmp_path, "default") == (1, make_default)
    assert _profile_run_takes(monkeypatch, tmp_path, "default", "--profile", "paper") == (
        1, "paper")


def test_a_spec_without_a_quick_profile_runs_as_written(monkeypatch, tmp_path):
    spec = tmp_path / "short.yaml"
    spec.write_text("name: short\ntopology: topologies/webrc-dumbbell.yaml\nduration: 30s\n"
                    "flows: [{name: t, type: tcp, sender: s2, receiver: d2}]\n")
    assert _profile_run_takes(monkeypatch, tmp_path, str(spec)) == (1, "paper")


def test_sweep_takes_the_same_default_profile(monkeypatch, tmp_path):
    import mcclab.experiment.sweep
    from mcclab.model.loader import SpecError

    taken: list[str] = []

    def run_sweep(experiment, name, profile, options):  # noqa: ANN001, ANN202
        taken.append(profile)
        raise SpecError(experiment, [("sweeps", "stopped by the test: no lab")])

    monkeypatch.setattr(mcclab.experiment.sweep, "run_sweep", run_sweep)
    for extra in ([], ["--profile", "paper"]):
        result = runner.invoke(app, ["sweep", "default", "--sweep", "tcp-cc", *extra,
                                     "--results", str(tmp_path / "results")])
        assert result.exit_code == 2 and "stopped by the test" in result.output
    assert taken == ["quick", "paper"]
