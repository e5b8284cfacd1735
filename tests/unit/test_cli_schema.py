"""The experiment JSON Schema: generated from the models, committed, and true to the specs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from mcclab.cli import app
from mcclab.experiment.schema import experiment_schema

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "schema" / "experiment.schema.json"
runner = CliRunner()
validator = jsonschema.Draft202012Validator(experiment_schema())
SPECS = sorted((REPO / "experiments").glob("*.yaml"))


def test_committed_schema_matches_the_models():
    result = runner.invoke(app, ["experiment", "schema", "--check", str(COMMITTED)])
    assert result.exit_code == 0, result.output


def test_a_stale_schema_fails_the_check(tmp_path):
    stale = json.loads(COMMITTED.read_text())
    del stale["properties"]["duration"]
    path = tmp_path / "experiment.schema.json"
    path.write_text(json.dumps(stale, indent=2, sort_keys=True) + "\n")
    result = runner.invoke(app, ["experiment", "schema", "--check", str(path)])
    assert result.exit_code == 1 and "out of date" in result.output


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(experiment_schema())


@pytest.mark.parametrize("spec", SPECS, ids=[p.stem for p in SPECS])
def test_every_spec_of_the_tree_is_valid_under_the_schema(spec):
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in validator.iter_errors(yaml.safe_load(spec.read_text()))]
    assert not errors


def _default() -> dict:
    return yaml.safe_load((REPO / "experiments" / "default.yaml").read_text())


@pytest.mark.parametrize("change", [
    lambda d: d.update(bogus=1),                             # unknown top-level key
    lambda d: d["flows"][1].update(windw="20pkt"),           # unknown key in a flow
    lambda d: d["flows"][1].update(count=0),                 # a count below one
    lambda d: d["flows"][1].update(type="sctp"),             # no such flow type
    lambda d: d.update(duration="5 parsecs"),                # not a duration
    lambda d: d["references"][0].update(paper="half"),       # a share is a number
    lambda d: d.pop("topology"),                             # a required key
], ids=["top-key", "flow-key", "count", "flow-type", "duration", "share", "required"])
def test_the_schema_refuses_what_the_models_refuse(change):
    data = copy.deepcopy(_default())
    change(data)
    assert list(validator.iter_errors(data))


def test_a_templated_flow_takes_placeholders_only_with_the_template_syntax():
    data = copy.deepcopy(_default())
    data["flows"][1].update(name="tcp{i}", count=3, start="{i*5}s", receiver="d{i}")
    assert not list(validator.iter_errors(data))
    data["flows"][1]["receiver"] = "d i"  # neither a node name nor a template
    assert list(validator.iter_errors(data))
