"""JSON Schema of experiment specs, generated from :class:`mcclab.experiment.spec.Experiment`.

The model validates a spec after :mod:`mcclab.experiment.replicate` has expanded
its templates and after pydantic's lax conversions, so the schema of the file
*as written* differs from the model's in three generated steps (never by hand):

- a flow may carry ``count: N``, and while it does any of its values may be a
  template with ``{...}`` placeholders (``name: tcp{i}``, ``receivers: [h{1..8}]``,
  ``start: "{i}s"``); a range item (``h{1..8}``) is also allowed in any flow's
  list and in a reference's or figure's lists of flow names;
- a number may be written as a numeric string (PyYAML reads ``2.16e6`` as text,
  and pydantic takes it as the number);
- a ``measure`` quantity's ``paper`` and ``within`` are written in the measure's
  own unit (``100ms``), which only its plugin knows.
"""

from __future__ import annotations

import copy
from typing import Any

from mcclab.experiment.spec import Experiment

SCHEMA_ID = "https://mcclab.invalid/schema/experiment.schema.json"
FLOW_DEFS = ("MulticastFlow", "TcpFlow", "UdpFlow", "OnOffFlow")
TEMPLATE = {"type": "string", "pattern": r"\{[^{}]+\}",
            "description": "a template with {...} placeholders, expanded before validation"}
NUMERIC_STRING = {"type": "string",
                  "pattern": r"^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$"}
COUNT = {"type": "integer", "minimum": 1, "title": "Count",
         "description": "replicate this flow N times; {i} in its values takes 1..N"}


def _numbers(node: Any) -> Any:
    """Every ``number`` schema under ``node`` also accepts a numeric string."""
    if isinstance(node, list):
        return [_numbers(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _numbers(value) for key, value in node.items()}
    if out.get("type") == "number":
        return {"anyOf": [out, NUMERIC_STRING]}
    return out


def _templated(node: dict[str, Any]) -> dict[str, Any]:
    """A value schema that also takes a template, and so do its items and map entries."""
    node = dict(node)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            node[key] = _templated(node[key])
    if "anyOf" in node:
        node["anyOf"] = [_templated(alt) for alt in node["anyOf"]]
    if "propertyNames" in node:
        node["propertyNames"] = {"anyOf": [node["propertyNames"], TEMPLATE]}
    return {"anyOf": [node, TEMPLATE]}


def _ranged_lists(node: Any) -> Any:
    """Every list of strings under ``node`` also takes range items (``tcp{1..4}``)."""
    if isinstance(node, list):
        return [_ranged_lists(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _ranged_lists(value) for key, value in node.items()}
    items = out.get("items")
    if out.get("type") == "array" and isinstance(items, dict) and items.get("type") == "string":
        out["items"] = {"anyOf": [items, TEMPLATE]}
    return out


def experiment_schema() -> dict[str, Any]:
    """The JSON Schema of an experiment file as written (templates not yet expanded)."""
    schema = copy.deepcopy(Experiment.model_json_schema(mode="validation"))
    defs = schema["$defs"]
    for name in FLOW_DEFS:
        props = defs[name]["properties"]
        for key in [k for k in props if k != "type"]:
            props[key] = _templated(props[key])
        props["count"] = COUNT
    measure = defs["MeasureRef"]["properties"]
    measure["paper"] = {"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "null"}],
                        "description": "in the measure's unit, e.g. 0.2s; left out where "
                                       "the paper gives no number"}
    measure["within"] = {"anyOf": [{"type": "array", "minItems": 2, "maxItems": 2,
                                    "items": {"type": ["number", "string"]}}, {"type": "null"}],
                         "description": "[low, high] in the measure's unit"}
    schema = _ranged_lists(_numbers(schema))
    schema["$id"] = SCHEMA_ID
    schema["title"] = "mcclab experiment"
    return schema
