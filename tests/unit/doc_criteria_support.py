"""Reading the opening criterion table of a protocol doc, and the specs it must match.

Each of docs/webrc.md, rlc.md, ormcc.md and stair.md opens with a table titled
"## Criteria: paper against lab": one row per paper result with a band, with the
paper's value and band as ``mcclab audit bands`` prints them, the runs behind the
measured value out of the paper's number of trials, the measured value, its margin
and its verdict. This module holds what ``test_doc_criteria.py`` needs to check the
table against the specs: the criteria of a protocol's paper specs, the table's rows
(grouped rows expanded), the measured values, and the margin and verdict the index
would give them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from mcclab.analysis.index import paper_of
from mcclab.analysis.summary import is_marginal, judge, margin
from mcclab.audit import Criterion, _show, collect
from mcclab.experiment.loader import resolve
from mcclab.model.quantities import REFERENCE_KINDS, domain_of
from mcclab.reproduce import paper_experiments, plan

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PROTOCOLS = ("webrc", "rlc", "ormcc", "stair")
HEADING = "## Criteria: paper against lab"
TCP_HEADING = "### TCP readings"
COLUMNS = ("spec", "result", "source", "paper", "band", "runs", "measured", "margin", "verdict")
VERDICTS = ("met", "missed", "marginal met", "marginal missed", "not run")
NOT_RUN = "not run"

# A measured cell: "<profile>[, qualifiers]: <number> [unit] [footnote marks]".
# Anything else (a range, a count of periods) is evidence in words, with no margin.
MEASURED = re.compile(
    r"^(?P<profile>quick|paper)\b[^:]*:\s*(?P<value>-?\d+(?:\.\d+)?)\s*"
    r"(?P<unit>%|Mbit/s|kbit/s|bit/s|ms|s)?(?P<marks>[\sᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ]*)$")
UNITS = {None: 1.0, "%": 0.01, "Mbit/s": 1e6, "kbit/s": 1e3, "bit/s": 1.0, "ms": 1e-3, "s": 1.0}
MARGIN = re.compile(r"^(?P<sign>[+-]?)(?P<value>\d+) %$")
RUNS = re.compile(r"^(?P<done>≥?\d+) of (?P<trials>\d+)$")
SPEC = re.compile(r"^`(?P<name>[^`]+)`(?: \((?P<profile>quick)\))?$")
BRACES = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Key:
    """One criterion: an experiment's reference label under one profile."""

    experiment: str
    label: str
    profile: str = "paper"


@dataclass(frozen=True)
class DocRow:
    """One row of a doc's criterion table, with its brace groups expanded."""

    key: Key
    cells: dict[str, str]
    line: int


@functools.cache
def _all_criteria() -> tuple[Criterion, ...]:
    """Every criterion of every spec (``mcclab audit bands``' reading), loaded once."""
    items, errors = collect()
    if errors:
        raise RuntimeError("specs that cannot be loaded: " + "; ".join(errors))
    return tuple(items)


@functools.cache
def protocol_of(experiment: str) -> str:
    """The paper an experiment reproduces, from its multicast flows (as the index reads it)."""
    exp = resolve(experiment, "paper").experiment
    return paper_of([str(getattr(f, "protocol", "")) for f in exp.flows])


@functools.cache
def tcp_model_of(experiment: str) -> str | None:
    """The TCP model an experiment names, None when no TCP competes."""
    tcp = resolve(experiment, "paper").experiment.tcp
    if isinstance(tcp, dict):
        return tcp.get("model")
    return getattr(tcp, "model", None)


@functools.cache
def trials_of(experiment: str) -> int:
    """The paper profile's number of trials: its ``trials`` sweep's size, 1 without one."""
    return plan("paper", [experiment])[0].runs


def paper_criteria(protocol: str) -> dict[Key, Criterion]:
    """Every judged criterion of the protocol's paper specs, one key per profile.

    A quantity without a band (reported only) or without a paper value is not a
    criterion of the table. The quick profile's key is kept only where its criterion
    differs from the paper profile's (WEBRC Fig. 11's bound with fewer receivers).
    """
    papers = set(paper_experiments())
    out: dict[Key, Criterion] = {}
    for item in _all_criteria():
        if item.band is None or item.paper is None or item.experiment not in papers:
            continue
        if protocol_of(item.experiment) != protocol:
            continue
        for profile in item.profiles:
            out[Key(item.experiment, item.label, profile)] = item
    # One item covers both profiles when they agree (collect() merges them).
    return {k: v for k, v in out.items()
            if k.profile == "paper" or out.get(Key(k.experiment, k.label, "paper")) is not v}


def criterion_for(criteria: dict[Key, Criterion], key: Key, profile: str) -> Criterion | None:
    """The criterion a value measured in ``profile`` is judged against on row ``key``."""
    return criteria.get(Key(key.experiment, key.label, profile)) or criteria.get(key)


def show_paper(item: Criterion) -> str:
    """The paper value as ``mcclab audit bands`` prints it."""
    return _show(item, item.paper)


def show_band(item: Criterion) -> str:
    """The band as ``mcclab audit bands`` prints it."""
    lo, hi = item.band  # type: ignore[misc]  # only judged criteria reach the table
    return f"[{_show(item, lo)}, {_show(item, hi)}]"


def parse_measured(cell: str) -> tuple[str, float] | None:
    """(profile, value in the quantity's base unit) of a numeric measured cell, else None."""
    found = MEASURED.match(cell.strip())
    if found is None:
        return None
    return found["profile"], float(found["value"]) * UNITS[found["unit"]]


def domain(item: Criterion) -> tuple[float, float] | None:
    """The values the criterion's quantity can take, as the index reads them (the audit's
    ``kind`` is the reference's kind, or the measure's name for a measure)."""
    if item.kind in REFERENCE_KINDS:
        return domain_of(item.kind)
    return domain_of("measure", item.kind)


def margin_of(item: Criterion, value: float) -> float | None:
    """The margin the index gives ``value`` (docs/reproduce.md, *The margin*); None when
    no edge of the band can be crossed."""
    return margin(value, item.paper, item.tolerance, item.within, domain(item))


def verdict_of(item: Criterion, value: float) -> str:
    """The verdict word of the table for ``value``: met or missed, marginal when the index
    says so."""
    verdict = judge(value, item.paper, item.tolerance, item.within)
    word = {"pass": "met", "fail": "missed"}.get(verdict, verdict)
    return f"marginal {word}" if is_marginal(verdict, margin_of(item, value)) else word


def show_margin(value: float) -> str:
    """A margin as the table shows it: a signed whole percentage."""
    return f"{value * 100:+.0f} %"


def parse_margin(cell: str) -> float | None:
    """A margin cell's value as a fraction, None when the cell is empty."""
    if not cell.strip():
        return None
    found = MARGIN.match(cell.strip())
    if found is None:
        raise ValueError(f"margin {cell!r} is not a signed whole percentage")
    return (-1 if found["sign"] == "-" else 1) * int(found["value"]) / 100


def expand(text: str) -> list[str]:
    """The texts a cell with brace groups stands for. Every group of a row expands in
    lockstep (the i-th choice of each), so they must have as many choices each."""
    groups = [g.split(",") for g in BRACES.findall(text)]
    if not groups:
        return [text]
    if len({len(g) for g in groups}) != 1:
        raise ValueError(f"brace groups of different sizes in {text!r}")
    out = []
    for i in range(len(groups[0])):
        choices = iter(g[i] for g in groups)
        out.append(BRACES.sub(lambda _m, c=choices: next(c), text))
    return out


def _split(line: str) -> list[str]:
    """The cells of a markdown table line."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def section(text: str, heading: str) -> list[tuple[int, str]]:
    """The numbered lines from ``heading`` to the next heading of the same or a higher level."""
    lines = text.splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    start = lines.index(heading)
    out = []
    for n, line in enumerate(lines[start + 1:], start + 2):
        hashes = len(line) - len(line.lstrip("#"))
        if line.startswith("#") and hashes <= level and line[hashes:hashes + 1] == " ":
            break
        out.append((n, line))
    return out


def first_table(lines: list[tuple[int, str]]) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and body rows of the first markdown table in ``lines``."""
    header: list[str] | None = None
    body: list[tuple[int, list[str]]] = []
    for n, line in lines:
        if not line.startswith("|"):
            if header is not None:
                break
            continue
        cells = _split(line)
        if header is None:
            header = cells
        elif not all(set(c) <= set("-: ") for c in cells):
            body.append((n, cells))
    if header is None:
        raise ValueError("no table")
    return header, body


def doc_rows(text: str) -> list[DocRow]:
    """The rows of a doc's opening criterion table, brace groups expanded."""
    lines = section(text, HEADING)
    header, body = first_table(lines)
    if tuple(header) != COLUMNS:
        raise ValueError(f"columns {header} are not {list(COLUMNS)}")
    out = []
    for n, cells in body:
        row = dict(zip(COLUMNS, cells, strict=True))
        found = SPEC.match(row["spec"])
        if found is None:
            raise ValueError(f"line {n}: spec cell {row['spec']!r} is not `name` or "
                             "`name` (quick)")
        profile = found["profile"] or "paper"
        names, labels = _lockstep(found["name"], row["result"], n)
        for name, label in zip(names, labels, strict=True):
            out.append(DocRow(Key(name, label, profile), row, n))
    return out


def _lockstep(name: str, label: str, line: int) -> tuple[list[str], list[str]]:
    """Expand a row's spec and result cells together (their brace groups in lockstep)."""
    sep = "\x00"
    both = expand(name + sep + label)
    if any(item.count(sep) != 1 for item in both):
        raise ValueError(f"line {line}: a brace group spans the spec and result cells")
    names, labels = zip(*(item.split(sep) for item in both), strict=True)
    return list(names), list(labels)


def tcp_specs(text: str) -> set[str]:
    """The specs the "TCP readings" table under the criterion table names."""
    lines = section(text, HEADING)
    start = next(i for i, (_, line) in enumerate(lines) if line == TCP_HEADING)
    _, body = first_table(lines[start + 1:])
    out: set[str] = set()
    for _, cells in body:
        found = SPEC.match(cells[0])
        if found is not None:
            out.update(expand(found["name"]))
    return out
