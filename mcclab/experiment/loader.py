"""Resolve an experiment: profile and --set overrides, its topology, and cross-checks.

Everything here runs before anything is created, so a bad spec fails with a
message naming the file and the field, and the lab is never touched.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from mcclab.experiment.replicate import expand_flows
from mcclab.experiment.spec import Experiment, MulticastFlow, flow_nodes
from mcclab.model.loader import SpecError, load_topology, read_yaml, resolve_topology, validate
from mcclab.model.topology import Topology

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"
PROFILES = ("quick", "paper")


@dataclass
class Resolved:
    """An experiment ready to run: the spec after overrides, and its topology."""

    experiment: Experiment
    topology: Topology
    profile: str
    path: Path
    raw: dict[str, Any]


def find_experiment(name_or_path: str) -> Path:
    """A spec file from a path, or from a name under experiments/."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    candidate = EXPERIMENTS / f"{name_or_path}.yaml"
    if candidate.is_file():
        return candidate
    known = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml"))
    raise SpecError(name_or_path, [("(file)", f"no such experiment; known: {', '.join(known)}")])


def parse_set(items: list[str], path: Path | str) -> dict[str, Any]:
    """``key=value`` pairs from the command line; values are YAML scalars or lists."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(path, [("--set", f"{item!r} is not key=value")])
        out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


class NoEntry(SpecError):
    """A dotted key names a list entry (a flow) that does not exist."""


def apply_dotted(data: dict[str, Any], key: str, value: Any, path: Path | str) -> None:
    """Set ``a.b.c`` in nested data; ``flows.NAME.x`` addresses a flow by its name."""
    parts = key.split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, list):
            match = [f for f in node if isinstance(f, dict) and f.get("name") == part]
            if not match:
                raise NoEntry(path, [(key, f"no list entry named {part!r}")])
            node = match[0]
        elif isinstance(node, dict):
            node = node.setdefault(part, {})
        else:
            raise SpecError(path, [(key, f"{'.'.join(parts[:i + 1])} is not a mapping")])
    if not isinstance(node, dict):
        raise SpecError(path, [(key, "cannot set a key inside a non-mapping")])
    node[parts[-1]] = value


def apply_overrides(data: dict[str, Any], overrides: list[tuple[str, Any]],
                    path: Path | str) -> dict[str, list[str]]:
    """Apply dotted overrides in order and expand replicated flows; return their replicas.

    Templated flows are addressed by the name as written (``flows.tcp{i}.count``),
    since overrides apply before expansion. A key naming a flow that only
    exists after expansion (``flows.tcp3.cc``) is applied to that replica
    afterwards.
    """
    deferred = []
    for key, value in overrides:
        try:
            apply_dotted(data, key, value, path)
        except NoEntry:
            deferred.append((key, value))
    replicas = expand_flows(data, path)
    for key, value in deferred:
        apply_dotted(data, key, value, path)
    return replicas


def _topology_for(exp: Experiment, path: Path) -> Topology:
    """Load the experiment's topology and apply its overrides."""
    topo_path = REPO / exp.topology
    if not topo_path.is_file():
        raise SpecError(path, [("topology", f"no such topology file {exp.topology!r}")])
    topo = load_topology(topo_path)
    data = topo.model_dump(mode="json")
    ov = exp.overrides
    for i, change in enumerate(ov.links):
        wanted = set(change.endpoints)
        match = [link for link in data["links"] if set(link["endpoints"]) == wanted]
        if not match:
            raise SpecError(path, [(f"overrides.links[{i}].endpoints",
                                    f"{exp.topology} has no link {list(change.endpoints)}")])
        flip = match[0]["endpoints"][0] != change.endpoints[0]
        update = change.model_dump(mode="json", exclude={"endpoints"}, exclude_none=True)
        if flip:
            fwd, rev = update.pop("forward", None), update.pop("reverse", None)
            update.update({k: v for k, v in (("forward", rev), ("reverse", fwd)) if v})
        match[0].update(update)
    if ov.routing_backend:
        data["routing"]["backend"] = ov.routing_backend
    if ov.link_backend:
        data["link_backend"] = ov.link_backend
    if ov.igmp is not None:
        # Only the keys the experiment wrote; the topology's other timers stay.
        data["routing"]["igmp"].update(ov.igmp.model_dump(mode="json", exclude_unset=True))
    return resolve_topology(data, f"{path} (topology {exp.topology} with overrides)")


def _cross_check(exp: Experiment, topo: Topology, path: Path) -> None:
    """Flows name existing hosts; multicast protocols are registered with valid params."""
    from agents.runtime.registry import get

    problems = []
    for i, flow in enumerate(exp.flows):
        for node in flow_nodes(flow):
            if node not in topo.nodes:
                problems.append((f"flows[{i}]", f"unknown node {node!r} in {exp.topology}"))
            elif topo.kind_of(node) != "host":
                problems.append((f"flows[{i}]", f"{node!r} is a {topo.kind_of(node)}, not a host"))
        if isinstance(flow, MulticastFlow):
            try:
                spec = get(flow.protocol)
            except KeyError as exc:
                problems.append((f"flows[{i}].protocol", str(exc.args[0])))
                continue
            for who, extra in [("params", {}), *[(f"receiver_params.{n}", p) for n, p in
                                                  flow.receiver_params.items()]]:
                try:
                    spec.params.model_validate({**flow.params, **extra})
                except ValidationError as exc:
                    for e in exc.errors(include_url=False):
                        where = ".".join(str(p) for p in e["loc"])
                        problems.append((f"flows[{i}].{who}", f"{where}: {e['msg']}"))
            for node in [*flow.receiver_params, *flow.receiver_start]:
                if node not in flow.receivers:
                    problems.append((f"flows[{i}]", f"{node!r} is not one of the receivers"))
            problem = _groups_problem(spec, flow)
            if problem:
                problems.append((f"flows[{i}].groups", problem))
    from mcclab.experiment.captures import target_problems

    problems += target_problems(exp, topo)
    if problems:
        raise SpecError(path, problems)


def _groups_problem(spec: Any, flow: MulticastFlow) -> str | None:
    """Why the flow's explicit groups do not match its protocol's channels (None: they do)."""
    if not flow.groups or spec.channels is None:
        return None
    try:
        channels = spec.channels(spec.params.model_validate(flow.params))
    except ValidationError:
        return None  # the params' own problem is reported above
    if len(flow.groups) == channels:
        return None
    return (f"{len(flow.groups)} groups given, but {flow.protocol} with these params uses "
            f"{channels} channels, one group each")


def _with_overrides(exc: SpecError, profile: str, layers: list[tuple[str, dict[str, Any]]],
                    ) -> SpecError:
    """The error with the overrides it was found under, when any applied.

    A profile may scale durations and times ('quick' shortens the run), so a
    value that is valid as written can fall outside the run once resolved;
    the message says which resolved values it was checked against.
    """
    said = []
    for label, values in layers:
        if values:
            shown = [f"{k}={v}" for k, v in list(values.items())[:6]]
            more = ", ..." if len(values) > 6 else ""
            said.append(f"{label} {', '.join(shown)}{more}")
    if not said:
        return exc
    note = f"(checked as resolved for profile {profile!r}: {'; '.join(said)})"
    return SpecError(exc.path, exc.problems, note)


def resolve(name_or_path: str, profile: str = "paper", sets: list[str] | None = None,
            extra: dict[str, Any] | None = None) -> Resolved:
    """Load a spec, apply the profile and ``--set`` overrides, and check it all.

    ``extra`` holds overrides with values as data (a sweep point), applied
    last, after the command line's.
    """
    path = find_experiment(name_or_path)
    raw = read_yaml(path)
    if profile not in PROFILES:
        raise SpecError(path, [("--profile", f"unknown profile {profile!r}; use quick or paper")])
    data = copy.deepcopy(raw)
    chosen = (data.get("profiles") or {}).get(profile) or {}
    if profile == "quick" and not chosen:
        raise SpecError(path, [("profiles.quick", "this experiment defines no quick profile")])
    from_profile = (chosen.get("set") or {}) if isinstance(chosen, dict) else {}
    from_cli = parse_set(sets or [], path)
    layers = [("the profile sets", dict(from_profile)), ("--set", from_cli),
              ("the sweep point sets", dict(extra or {}))]
    overrides = [item for _, values in layers for item in values.items()]
    apply_overrides(data, overrides, path)
    try:
        exp = validate(Experiment, data, path)
        topo = _topology_for(exp, path)
        _cross_check(exp, topo, path)
    except SpecError as exc:
        raise _with_overrides(exc, profile, layers) from None
    return Resolved(exp, topo, profile, path, data)
