"""Helpers for labs' checks: the lab's topology, answers compared leniently, captures read.

Checks stay short and say what is wrong in a student's words; these helpers do
the reading.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

from mcclab.analysis.results import Run, RunError, load_run
from mcclab.capture import Message, read_pcap
from mcclab.labs.checks import LabContext, Verdict
from mcclab.model.addressing import AddressPlan, plan_addresses
from mcclab.model.loader import SpecError
from mcclab.model.topology import Topology


@functools.lru_cache(maxsize=16)
def _load(lab_dir: Path) -> tuple[Topology, AddressPlan]:
    from mcclab.labs.catalogue import REPO
    from mcclab.labs.model import load_spec, resolve_path
    from mcclab.model.loader import load_topology

    spec = load_spec(lab_dir, REPO)
    topo = load_topology(resolve_path(spec.topology, lab_dir, REPO))
    return topo, plan_addresses(topo)


def topology(ctx: LabContext) -> tuple[Topology, AddressPlan]:
    """The lab's topology and its address plan."""
    return _load(ctx.lab_dir)


def norm(value: Any) -> str:
    """An answer as lower-case text without spaces at the ends ('' for None)."""
    return "" if value is None else str(value).strip().lower()


def as_number(value: Any) -> float | None:
    """An answer as a number ('2', '2 s', 2.0 -> 2.0), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    text = norm(value).split()
    try:
        return float(text[0].rstrip("s")) if text else None
    except ValueError:
        return None


def neighbour(plan: AddressPlan, node: str, answer: Any) -> str | None:
    """The neighbour an answer names: a node name, or one of ``node``'s interface names,
    or the neighbour's address on the shared link; None if it names none of them."""
    text = norm(answer)
    for iface in plan.interfaces[node]:
        peer_ifaces = [i for i in plan.interfaces.get(iface.peer, []) if i.peer == node]
        names = {iface.peer, iface.name, *(str(i.address.ip) for i in peer_ifaces)}
        if text in {n.lower() for n in names}:
            return iface.peer
    return None


def captured(ctx: LabContext) -> list[tuple[Path, list[Message]]]:
    """Every pcap of the lab with its IGMP and PIM messages (unreadable ones skipped)."""
    out = []
    for path in ctx.captures():
        try:
            out.append((path, read_pcap(path)))
        except (OSError, ValueError):
            continue
    return out


def mroutes(ctx: LabContext, node: str) -> dict[str, dict[str, Any]]:
    """``show ip mroute json`` of a router: group -> source ('*' for (*,G)) -> entry."""
    data = ctx.vtysh_json(node, "show ip mroute json")
    if not isinstance(data, dict):
        return {}
    return {g: v for g, v in data.items() if isinstance(v, dict)}


# ---- answers compared with a student's own run (labs 03 on) -----------------------


def answer_number(value: Any, *, percent: bool = False) -> float | None:
    """A finite number from an answer: 0.41, "0.41" or "0,41" (a comma as decimal point);
    with ``percent``, "41 %" too (-> 0.41). None if it is not one.

    Stricter than :func:`as_number`: the whole text must be the number, since these
    answers are compared with measured values and a unit left in them is a mistake."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().replace(",", ".")
        scale = 1.0
        if percent and text.endswith("%"):
            text, scale = text[:-1].strip(), 0.01
        try:
            number = float(text) * scale
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def numeric_answer(
    ctx: LabContext, qid: str, what: str, *, percent: bool = False
) -> tuple[float | None, Verdict | None]:
    """The answer to ``qid`` as a number (see :func:`answer_number`), or the verdict to
    return instead: pending if there is none, failed if it is not a number. ``what`` says
    what to write, in the student's words."""
    raw = ctx.answer(qid)
    if raw is None:
        return None, Verdict.pending(f"write {what} as {qid}: in answers.yaml")
    value = answer_number(raw, percent=percent)
    if value is None:
        return None, Verdict.failed(f"{qid}: {raw!r} is not a number; write {what}")
    return value, None


def newest_run(
    ctx: LabContext, lab: int, experiment: str, step: int, *, name_in_unreadable: bool = True
) -> tuple[Run | None, Verdict | None]:
    """The newest run of ``experiment`` (run at the handout's ``step`` of lab ``lab``),
    loaded, or the verdict saying why there is none: pending if there is no run yet or it
    is still running, failed if it cannot be read or did not complete.

    ``name_in_unreadable`` names the experiment in the "cannot be read" message (a lab
    with one experiment leaves it out)."""
    folder: Path | None = ctx.latest_run(experiment)
    if folder is None:
        return None, Verdict.pending(
            f"no run of {experiment} yet: do step {step} (mcclab lab run {lab} {experiment})"
        )
    try:
        run = load_run(folder)
    except (RunError, SpecError) as exc:
        of = f" of {experiment}" if name_in_unreadable else ""
        return None, Verdict.failed(
            f"your run {folder.name}{of} cannot be read ({exc}); run step {step} again"
        )
    if run.info.status == "running":
        return None, Verdict.pending(
            f"your newest run of {experiment} ({folder.name}) is still "
            "running (or waiting for the lab lock): wait until it ends"
        )
    if run.info.status != "complete":
        return None, Verdict.failed(
            f"your newest run of {experiment} ({folder.name}) is "
            f"{run.info.status}, not complete; run step {step} again "
            "and let it finish"
        )
    return run, None


def within(answer: float, measured: float, rel: float, floor: float) -> bool:
    """Whether ``answer`` is within ``rel`` of ``measured`` (relative) or ``floor``
    (absolute), whichever is larger."""
    return abs(answer - measured) <= max(rel * measured, floor)


def list_answer(
    ctx: LabContext, qid: str, sizes: Collection[int], pending: str, shape: str
) -> tuple[list[Any] | None, Verdict | None]:
    """The answer to ``qid`` as a list of one of the lengths ``sizes``, or the verdict to
    return instead: ``pending`` (the whole message) if there is none, failed with
    "``qid`` must be a list ``shape``; got ..." if it is not such a list."""
    raw = ctx.answer(qid)
    if raw is None:
        return None, Verdict.pending(pending)
    if not isinstance(raw, list) or len(raw) not in sizes:
        return None, Verdict.failed(f"{qid} must be a list {shape}; got {raw!r}")
    return raw, None


def answer_and_run(
    ctx: LabContext,
    qid: str,
    what: str,
    lab: int,
    experiment: str,
    step: int,
    *,
    percent: bool = False,
) -> tuple[float | None, Run | None, Verdict | None]:
    """The numeric answer to ``qid`` (:func:`numeric_answer`) and the newest run of
    ``experiment`` (:func:`newest_run`), or the first verdict to return instead."""
    answer, verdict = numeric_answer(ctx, qid, what, percent=percent)
    if verdict:
        return None, None, verdict
    run, verdict = newest_run(ctx, lab, experiment, step)
    return answer, run, verdict
