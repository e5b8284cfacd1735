"""Replicated flows: one spec entry with ``count: N`` becomes N flows, and ranges of names.

A flow with ``count: N`` (N >= 1) is written as a template: ``{i}`` in any of
its strings takes the values 1..N (``name: tcp{i}``, ``sender: s{i}``,
``start: "{(i-1)*5}s"``, receiver_params keys and values). A placeholder
holds ``i``, integers and ``+ - * / // ( )``. Independently, a list item
``h{1..8}`` in ``receivers`` becomes ``h1`` … ``h8`` (the bounds may use
``i``: ``h{2*i-1..2*i}``).

References follow: an item of a reference's ``flows``/``of_flows`` (or a
measure's ``args.flows``) equal to a template name (``tcp{i}``) stands for
all its replicas, and range items (``tcp{1..4}``) expand there too; so do the
items of every list of names in a figure's ``args`` (``panels[0].tcp``).

This runs on the raw data after the profile and ``--set`` overrides and
before validation, so ``--set flows.tcp{i}.count=8`` (the template's name as
written) changes the number of flows.
"""

from __future__ import annotations

import ast
import operator
import re
from pathlib import Path
from typing import Any

from mcclab.model.loader import SpecError

_RANGE = re.compile(r"\{([^{}]+?)\.\.([^{}]+?)\}")
_PLACEHOLDER = re.compile(r"\{([^{}]*\bi\b[^{}]*)\}")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv}


def evaluate(expr: str, i: int | None) -> float:
    """Evaluate a placeholder expression in ``i`` (None: ``i`` is not allowed)."""
    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name) and node.id == "i" and i is not None:
            return i
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise ValueError(f"cannot evaluate {{{expr}}}: use i, numbers and + - * / // ( )")

    try:
        return walk(ast.parse(expr.strip(), mode="eval"))
    except (SyntaxError, ZeroDivisionError) as exc:
        raise ValueError(f"cannot evaluate {{{expr}}}: {exc}") from None


def _number(value: float) -> str:
    """A placeholder's value as text: integers without a decimal point."""
    return str(int(value)) if float(value).is_integer() else f"{value:.12g}"


def substitute(text: str, i: int) -> str:
    """Replace every ``{expr}`` placeholder in ``i`` (ranges are left for expand_range)."""
    def one(m: re.Match[str]) -> str:
        if ".." in m.group(1):
            return m.group(0)
        return _number(evaluate(m.group(1), i))
    return _PLACEHOLDER.sub(one, text)


def expand_range(item: str, i: int | None = None) -> list[str]:
    """``h{1..3}`` → ``[h1, h2, h3]``; an item without a range is itself."""
    m = _RANGE.search(item)
    if not m:
        return [item]
    lo, hi = (evaluate(m.group(k), i) for k in (1, 2))
    if not (float(lo).is_integer() and float(hi).is_integer()) or lo > hi:
        raise ValueError(f"{item!r}: a range needs whole bounds, low first")
    head, tail = item[:m.start()], item[m.end():]
    out = []
    for n in range(int(lo), int(hi) + 1):
        out += expand_range(f"{head}{n}{tail}", i)
    return out


def _deep(value: Any, i: int) -> Any:
    """Substitute ``{i}`` in every string (keys included) of nested data."""
    if isinstance(value, str):
        return substitute(value, i)
    if isinstance(value, dict):
        return {_deep(k, i): _deep(v, i) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep(v, i) for v in value]
    return value


def _receivers(flow: dict[str, Any], i: int | None) -> None:
    """Expand range items in a flow's ``receivers`` list, in place."""
    receivers = flow.get("receivers")
    if isinstance(receivers, list):
        flow["receivers"] = [r for item in receivers
                             for r in (expand_range(item, i) if isinstance(item, str) else [item])]


def expand_flows(data: dict[str, Any], path: Path | str) -> dict[str, list[str]]:
    """Replace templated flows in ``data`` by their replicas; return template → replica names.

    Raises SpecError naming ``flows[k].count`` or the field whose placeholder
    cannot be evaluated.
    """
    flows = data.get("flows")
    if not isinstance(flows, list):
        return {}
    out: list[Any] = []
    replicas: dict[str, list[str]] = {}
    problems: list[tuple[str, str]] = []
    for k, flow in enumerate(flows):
        if not isinstance(flow, dict):
            out.append(flow)
            continue
        name = flow.get("name")
        try:
            if "count" not in flow:
                if isinstance(name, str) and _PLACEHOLDER.search(name):
                    problems.append((f"flows[{k}].name", f"{name!r} uses a placeholder but the "
                                     "flow has no count"))
                    continue
                flow = dict(flow)
                _receivers(flow, None)
                out.append(flow)
                continue
            count = flow["count"]
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                problems.append((f"flows[{k}].count", f"must be a whole number >= 1, "
                                 f"got {count!r}"))
                continue
            if count > 1 and not (isinstance(name, str) and re.search(r"\{[^{}]*\bi\b", name)):
                problems.append((f"flows[{k}].name", f"{count} replicas need {{i}} in the "
                                 f"name to tell them apart (got {name!r})"))
                continue
            template = {key: value for key, value in flow.items() if key != "count"}
            names = []
            for i in range(1, count + 1):
                replica = _deep(template, i)
                _receivers(replica, i)
                out.append(replica)
                names.append(replica.get("name"))
            if isinstance(name, str):
                replicas[name] = names
        except ValueError as exc:
            problems.append((f"flows[{k}]", str(exc)))
    if problems:
        raise SpecError(path, problems)
    data["flows"] = out
    _references(data, replicas, path)
    _figures(data, replicas, path)
    return replicas


def _names(items: list[Any], replicas: dict[str, list[str]]) -> list[Any]:
    """A list of flow names with template names and ranges expanded."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, str) and item in replicas:
            out += replicas[item]
        elif isinstance(item, str):
            out += expand_range(item)
        else:
            out.append(item)
    return out


def _references(data: dict[str, Any], replicas: dict[str, list[str]], path: Path | str) -> None:
    """Expand template names and ranges in the references' lists of flows, in place."""
    references = data.get("references")
    if not isinstance(references, list):
        return
    for k, ref in enumerate(references):
        if not isinstance(ref, dict):
            continue
        try:
            for key in ("flows", "of_flows"):
                if isinstance(ref.get(key), list):
                    ref[key] = _names(ref[key], replicas)
            args = ref.get("args")
            if isinstance(args, dict) and isinstance(args.get("flows"), list):
                ref["args"] = {**args, "flows": _names(args["flows"], replicas)}
        except ValueError as exc:
            raise SpecError(path, [(f"references[{k}]", str(exc))]) from None


def _lists_in(value: Any, replicas: dict[str, list[str]]) -> Any:
    """Nested data with every list of names expanded (template names and ranges)."""
    if isinstance(value, dict):
        return {k: _lists_in(v, replicas) for k, v in value.items()}
    if isinstance(value, list):
        if all(isinstance(item, str) for item in value):
            return _names(value, replicas)
        return [_lists_in(item, replicas) for item in value]
    return value


def _figures(data: dict[str, Any], replicas: dict[str, list[str]], path: Path | str) -> None:
    """Expand template names and ranges in every list of names in the figures' args."""
    figures = data.get("figures")
    if not isinstance(figures, list):
        return
    for k, fig in enumerate(figures):
        if isinstance(fig, dict) and isinstance(fig.get("args"), dict):
            try:
                fig["args"] = _lists_in(fig["args"], replicas)
            except ValueError as exc:
                raise SpecError(path, [(f"figures[{k}]", str(exc))]) from None
