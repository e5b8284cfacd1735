"""Load YAML spec files into validated models, with errors that name file and field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError, model_validator

from mcclab.model.generators import GeneratorSpec
from mcclab.model.topology import (
    Addressing,
    Link,
    Node,
    NodeName,
    Routing,
    StrictModel,
    Topology,
)

M = TypeVar("M", bound=BaseModel)


class SpecError(Exception):
    """A spec file is invalid. ``problems`` holds (field path, reason) pairs.

    ``note`` (optional) is a last line of context, e.g. the profile's overrides
    the values were resolved with.
    """

    def __init__(self, path: Path | str, problems: list[tuple[str, str]], note: str = ""):
        self.path = str(path)
        self.problems = problems
        self.note = note
        lines = [f"{self.path}: {field}: {reason}" for field, reason in problems]
        if note:
            lines.append(f"{self.path}: {note}")
        super().__init__("\n".join(lines))


# libyaml's parser where PyYAML was built with it: the pure-Python one took 11 of the
# 13 s of resolving one experiment's 125 sweep points (stair-fig10). The constructor
# (and so the duplicate-key check below) is the same Python code either way.
_SafeBase = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeBase):
    """SafeLoader that refuses duplicate mapping keys (PyYAML keeps the last one silently)."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    """Construct a mapping, failing on a repeated key."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def read_yaml(path: Path | str) -> dict[str, Any]:
    """Read a YAML mapping, turning syntax errors into a SpecError."""
    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=_StrictLoader)  # noqa: S506 (strict safe loader)
    except FileNotFoundError:
        raise SpecError(path, [("(file)", "no such file")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(yaml)"
        reason = getattr(exc, "problem", None) or str(exc)
        raise SpecError(path, [(where, f"YAML syntax: {reason}")]) from None
    if not isinstance(data, dict):
        raise SpecError(path, [("(top level)", "expected a mapping of keys to values")])
    return data


# Tags of discriminated unions, by the field holding the union: pydantic puts the
# tag in error paths ("flows[0].tcp.cc"), where it adds nothing.
_UNION_TAGS = {
    "generate": frozenset({"star", "tree", "chain", "dumbbell"}),
    "flows": frozenset({"multicast", "tcp", "udp", "onoff"}),
    "references": frozenset({"throughput", "share", "utilisation", "fairness", "loss", "ratio",
                             "measure"}),
}


def field_path(loc: tuple[int | str, ...]) -> str:
    """Render a pydantic error location as 'links[2].queue.red.min_th'."""
    out, holder = "", None  # holder: the field whose union the next part may tag
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        if part in _UNION_TAGS.get(holder or "", ()) or part == "[key]":
            holder = None
            continue  # union tags and pydantic's key marker add noise, not information
        holder = part if part in _UNION_TAGS else None
        out += f".{part}" if out else str(part)
    return out or "(top level)"


# A path's parts are field names, list indices and mapping keys such as node
# names ("flows[0].receiver_start.h1").
_INNER_PATH = re.compile(r"^Value error, ((?:[a-z_][a-z0-9_]*(?:\[\d+\])?\.?)+): (.*)$", re.S)


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(field, reason) pairs from a ValidationError."""
    out = []
    for err in exc.errors(include_url=False):
        field, reason = field_path(err["loc"]), err["msg"]
        if err["type"] == "extra_forbidden":
            reason = "unknown key (check the spelling; see the JSON Schema in schema/)"
        # Cross-field checks run on the whole model and name the field in their
        # message ("links[1].endpoints: unknown node"); lift it into the path.
        inner = _INNER_PATH.match(reason)
        if inner:
            prefix = "" if field == "(top level)" else field + "."
            field, reason = prefix + inner.group(1), inner.group(2)
        out.append((field, reason.removeprefix("Value error, ")))
    return out


def validate(model: type[M], data: dict[str, Any], path: Path | str) -> M:
    """Validate ``data`` as ``model``, raising SpecError naming ``path`` and each field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SpecError(path, _problems(exc)) from None


class TopologyFile(StrictModel):
    """The on-disk form of a topology: explicit nodes and links, or a generator."""

    name: str
    description: str = ""
    reference: str = ""
    nodes: dict[NodeName, Node] | None = None
    links: list[Link] | None = None
    generate: GeneratorSpec | None = None
    routing: Routing = Routing()
    addressing: Addressing = Addressing()
    link_backend: Literal["auto", "kernel", "userspace"] = "auto"

    @model_validator(mode="after")
    def _one_form(self) -> TopologyFile:
        explicit = self.nodes is not None or self.links is not None
        if explicit and self.generate is not None:
            raise ValueError("give either 'nodes' and 'links', or 'generate', but not both")
        if not explicit and self.generate is None:
            raise ValueError("give the topology as 'nodes' and 'links', or as 'generate'")
        if explicit and (self.nodes is None or self.links is None):
            raise ValueError("an explicit topology needs both 'nodes' and 'links'")
        return self


def resolve_topology(data: dict[str, Any], path: Path | str = "<memory>") -> Topology:
    """Validate raw topology data (explicit or generated) into a Topology."""
    spec = validate(TopologyFile, data, path)
    raw = dict(data)
    if spec.generate is not None:
        raw.pop("generate")
        raw.update(spec.generate.expand())
    return validate(Topology, raw, path)


def load_topology(path: Path | str) -> Topology:
    """Load and validate a topology YAML file, including that it can be addressed."""
    from mcclab.model.addressing import plan_addresses

    topo = resolve_topology(read_yaml(path), path)
    try:
        plan_addresses(topo)
    except ValueError as exc:
        raise SpecError(path, [("addressing", str(exc))]) from None
    return topo
