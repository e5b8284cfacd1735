"""JSON Schema generated from the spec models (never kept by hand)."""

from __future__ import annotations

from typing import Any

from mcclab.model.loader import TopologyFile

SCHEMA_ID = "https://mcclab.invalid/schema/topology.schema.json"


def topology_schema() -> dict[str, Any]:
    """The JSON Schema of a topology file."""
    schema = TopologyFile.model_json_schema(mode="validation")
    schema["$id"] = SCHEMA_ID
    schema["title"] = "mcclab topology"
    return schema
