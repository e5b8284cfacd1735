"""``mcclab audit bands``: every acceptance criterion of every spec, with its source and width.

A verdict is only as strong as its band. This audit loads every experiment
spec (``experiments/**/*.yaml`` and ``labs/*/experiments/*.yaml``) with the
loader ``mcclab run`` uses, once per profile, and lists each reference
quantity with its source, paper value and band, and three flags:

* ``no-source``: the reference names no source at all;
* ``unmarked``: a judged criterion whose source names no place in a paper
  (figure, table, section, equation, lemma, footnote, appendix) and does not
  say it is a lab check;
* ``wide``: a band that can hardly fail (:func:`hardly_fails`; the rule and its
  rationale are in ``docs/fidelity.md``).

A flag is accepted only when the checked-in allowlist (``audit_allowlist.yaml``
next to this module) names it with a reason; the command exits 1 when a flag
is not allowlisted or an allowlist entry matches nothing, and
``tests/unit/test_audit_bands.py`` runs the same check over the real tree.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import typer
import yaml
from rich.console import Console
from rich.table import Table

from mcclab.model.loader import SpecError
from mcclab.model.quantities import accepted_band
from mcclab.refuse import alert

REPO = Path(__file__).resolve().parents[1]
ALLOWLIST = Path(__file__).with_name("audit_allowlist.yaml")
FLAGS = ("no-source", "unmarked", "wide")

# A source that names one of these points at a place in a paper.
PAPER_PLACE = re.compile(
    r"\b(fig(ure)?s?\b\.?|tables?\b|sec(tion)?s?\b\.?|eqs?\b\.?|equations?\b|lemma|theorem|"
    r"property|footnote|appendix|def(inition)?\b\.?)|§", re.IGNORECASE)
LAB_CHECK = re.compile(r"\blab check\b", re.IGNORECASE)
# A source that only points at the previous reference's ("as above", "as for A").
INHERITS = re.compile(r"\bas (above|for)\b", re.IGNORECASE)

# Dimensionless measures bounded by [0, 1] (a fraction of seconds, packets, instances
# or capacity). Every other quantity that is not a built-in fraction kind is read on
# an open scale (a rate, a time, a count, or a ratio of two of them).
FRACTION_MEASURES = frozenset({
    "ormcc.suppression", "ormcc.cr_share",
    "rlc.fairness", "rlc.router_loss", "rlc.perceived_loss", "rlc.burst_loss",
    "rlc.exploitation", "rlc.eq2_in_band", "rlc.in_sync",
    "webrc.lossp", "webrc.shared_fraction",
})
FRACTION_KINDS = frozenset({"share", "utilisation", "fairness", "loss"})

# The thresholds of hardly_fails (docs/fidelity.md, "Bands that can hardly fail").
HALF_DOMAIN = 0.5    # a fraction band covering more than this part of [low, 1]
ONE_SIDED = 0.2      # a fraction band at an end of [low, 1] spanning more than this part
FACTOR = 2.0         # an open-scale band reaching beyond paper / 2 or paper x 2
MARGINAL = 0.1       # a band within 10 % of a limit passes the rule marginally


@dataclass(frozen=True)
class Scale:
    """What values a quantity can take: ``fraction`` in [low, 1], or ``open`` (0 upwards)."""

    name: str
    low: float = 0.0
    high: float = math.inf


@dataclass
class Criterion:
    """One reference quantity of one spec, as the audit reads it."""

    experiment: str
    spec: str  # the spec file, relative to the repository
    profiles: list[str]
    label: str
    kind: str  # the reference's kind, or the measure's name
    unit: str
    source: str
    paper: float | None  # None: the paper gives no number
    tolerance: float | None
    within: tuple[float, float] | None
    band: tuple[float, float] | None  # None: reported only, no verdict
    scale: Scale
    origin: str  # 'paper', 'lab check', 'lab check (spec)', 'unmarked', 'none'
    wide: str | None = None  # why the band can hardly fail
    near: bool = False  # passes the width rule within 10 % of its limit
    flags: list[str] = field(default_factory=list)
    allowed: dict[str, str] = field(default_factory=dict)  # flag -> the allowlist's reason

    @property
    def judged(self) -> bool:
        """Whether the criterion gives a verdict (a tolerance or a range)."""
        return self.band is not None

    @property
    def open_flags(self) -> list[str]:
        """Flags the allowlist does not accept."""
        return [f for f in self.flags if f not in self.allowed]


def scale_of(kind: str, measure: str | None = None, flows: int = 0) -> Scale:
    """The scale of a quantity: Jain's index of n flows lives in [1/n, 1], the other
    fractions in [0, 1]; rates, times, counts and ratios are open."""
    if kind == "fairness" and flows >= 2:
        return Scale("fraction", 1 / flows, 1.0)
    if kind in FRACTION_KINDS or (kind == "measure" and measure in FRACTION_MEASURES):
        return Scale("fraction", 0.0, 1.0)
    return Scale("open")


def band_load(scale: Scale, paper: float | None,
              accepted: tuple[float, float] | None) -> float | None:
    """How much of the width rule a band uses: above 1 it can hardly fail (None: no band).

    * A fraction in [low, 1]: the band, clipped to that domain, may cover at most
      half of it, and at most a fifth when it touches one of its ends (the ends are
      where degenerate outcomes sit: a flow that takes the whole link, a receiver
      always chosen, nothing lost). The load is the larger of the two quotients.
    * An open-scale quantity (rate, time, count, ratio): the band may reach down to
      half and up to twice the paper value; the load is the farther end's factor
      over 2. A band reaching 0, or a paper value that is not positive, has no
      relative width: infinite load. Without a paper value (the paper gives no
      number; the band is ``within`` alone) the band's geometric centre stands in
      for it, so the same rule allows a band whose ends are at most a factor 4 apart.
    """
    if accepted is None:
        return None
    lo, hi = accepted
    if scale.name == "fraction":
        lo, hi = max(lo, scale.low), min(hi, scale.high)
        part = max(hi - lo, 0.0) / (scale.high - scale.low)
        at_end = lo <= scale.low or hi >= scale.high
        return max(part / HALF_DOMAIN, part / ONE_SIDED if at_end else 0.0)
    if lo <= 0 or (paper is not None and paper <= 0):
        return math.inf
    centre = math.sqrt(lo * hi) if paper is None else paper
    return max(centre / lo, hi / centre) / FACTOR


def hardly_fails(scale: Scale, paper: float | None,
                 accepted: tuple[float, float] | None) -> str | None:
    """Why a band can hardly fail (its :func:`band_load` is above 1), or None."""
    load = band_load(scale, paper, accepted)
    if load is None or load <= 1 + 1e-9:
        return None
    lo, hi = accepted  # type: ignore[misc]  # a load means a band
    if scale.name == "fraction":
        lo, hi = max(lo, scale.low), min(hi, scale.high)
        length = scale.high - scale.low
        part = (hi - lo) / length
        where = f"[{scale.low:.3g}, {scale.high:.3g}]"
        if part > HALF_DOMAIN:
            return f"covers {part:.0%} of {where}, more than half"
        end = scale.low if lo <= scale.low else scale.high
        return f"one-sided at {end:.3g} and spans {part:.0%} of {where}, more than a fifth"
    if paper is not None and paper <= 0:
        return "paper value not positive: no relative width to judge"
    if lo <= 0:
        return "reaches 0: accepts any value up to its upper bound"
    if paper is None:
        return (f"no paper value, and its high end is x{hi / lo:.2f} its low end, beyond "
                f"a factor {FACTOR * FACTOR:g}")
    return (f"spans x{lo / paper:.2f} to x{hi / paper:.2f} of the paper value, beyond "
            f"a factor {FACTOR:g}")


def near_limit(scale: Scale, paper: float | None, accepted: tuple[float, float] | None) -> bool:
    """A band that passes the width rule within 10 % of its limit (a marginal pass)."""
    load = band_load(scale, paper, accepted)
    return load is not None and 1 - MARGINAL < load <= 1 + 1e-9


def origin_of(source: str, spec_reference: str, previous: str | None) -> str:
    """Where a criterion comes from: a paper's place, a marked lab check, or neither."""
    if not source.strip():
        return "none"
    if LAB_CHECK.search(source):
        return "lab check"
    if spec_reference.strip().lower().startswith("lab check"):
        return "lab check (spec)"
    if PAPER_PLACE.search(source):
        return "paper"
    if INHERITS.search(source) and previous is not None:
        return previous
    return "unmarked"


def spec_files(root: Path = REPO) -> list[Path]:
    """Every experiment spec: ``experiments/**`` and the classroom labs' experiments.

    Other YAML under ``experiments/`` (the TCP models) is not a spec: a spec is a
    mapping with ``flows``.
    """
    found = sorted((root / "experiments").rglob("*.yaml"))
    found += sorted((root / "labs").glob("*/experiments/*.yaml"))
    out = []
    for path in found:
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            out.append(path)  # resolve() reports what is wrong with it
            continue
        if isinstance(data, dict) and "flows" in data:
            out.append(path)
    return out


def _criteria(path: Path, profile: str, root: Path) -> list[Criterion]:
    """The criteria of one spec as resolved for one profile."""
    from mcclab.analysis.summary import unit_of
    from mcclab.experiment.loader import resolve

    exp = resolve(str(path), profile=profile).experiment
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    out: list[Criterion] = []
    previous: str | None = None
    for ref in exp.references:
        measure = getattr(ref, "measure", None)
        flows = len(getattr(ref, "flows", []) or [])
        origin = origin_of(ref.source, exp.reference, previous)
        previous = origin
        accepted = accepted_band(ref.paper, ref.tolerance, ref.within)
        scale = scale_of(ref.kind, measure, flows)
        item = Criterion(
            experiment=exp.name, spec=rel, profiles=[profile], label=ref.label,
            kind=measure or ref.kind, unit=unit_of(ref), source=ref.source, paper=ref.paper,
            tolerance=ref.tolerance, within=ref.within, band=accepted, scale=scale,
            origin=origin, wide=hardly_fails(scale, ref.paper, accepted),
            near=near_limit(scale, ref.paper, accepted))
        if origin == "none":
            item.flags.append("no-source")
        if item.judged and origin == "unmarked":
            item.flags.append("unmarked")
        if item.wide:
            item.flags.append("wide")
        out.append(item)
    return out


def _same(a: Criterion, b: Criterion) -> bool:
    """Whether two profiles' readings of a criterion are the same criterion."""
    return (a.label, a.source, a.paper, a.tolerance, a.within) == \
        (b.label, b.source, b.paper, b.tolerance, b.within)


def collect(root: Path = REPO) -> tuple[list[Criterion], list[str]]:
    """Every criterion of every spec under ``root`` (one row per profile where they
    differ), and the specs that could not be loaded (file: message)."""
    out: list[Criterion] = []
    errors: list[str] = []
    for path in spec_files(root):
        data = yaml.safe_load(path.read_text()) or {}
        profiles = ["paper"] + (["quick"] if (data.get("profiles") or {}).get("quick") else [])
        rows: list[Criterion] = []
        for profile in profiles:
            try:
                found = _criteria(path, profile, root)
            except SpecError as exc:
                errors.append(f"{path} ({profile}): {exc}")
                continue
            for item in found:
                twin = next((r for r in rows if _same(r, item)), None)
                if twin is not None:
                    twin.profiles.append(profile)
                else:
                    rows.append(item)
        out += rows
    return out, errors


@dataclass(frozen=True)
class Allowed:
    """One allowlist entry: a flag on the criteria whose experiment and label match."""

    flag: str
    experiment: str  # fnmatch pattern
    label: str  # fnmatch pattern
    why: str

    def matches(self, item: Criterion, flag: str) -> bool:
        """Whether this entry accepts ``flag`` on ``item``."""
        return flag == self.flag and fnmatch.fnmatchcase(item.experiment, self.experiment) \
            and fnmatch.fnmatchcase(item.label, self.label)


def load_allowlist(path: Path = ALLOWLIST) -> list[Allowed]:
    """The allowlist's entries; ValueError names a bad one."""
    data = yaml.safe_load(path.read_text()) or {}
    out = []
    for i, entry in enumerate(data.get("allow") or []):
        missing = [k for k in ("flag", "experiment", "label", "why")
                   if not str((entry or {}).get(k, "")).strip()]
        if missing:
            raise ValueError(f"{path}: allow[{i}]: missing {', '.join(missing)}")
        if entry["flag"] not in FLAGS[1:]:
            raise ValueError(f"{path}: allow[{i}].flag: {entry['flag']!r} is not one of "
                             f"{', '.join(FLAGS[1:])} (a missing source is never allowed)")
        out.append(Allowed(entry["flag"], entry["experiment"], entry["label"], entry["why"]))
    return out


def apply_allowlist(items: list[Criterion], allowed: list[Allowed]) -> list[Allowed]:
    """Mark the flags the allowlist accepts; return the entries that matched nothing."""
    used: set[int] = set()
    for item in items:
        for flag in item.flags:
            for i, entry in enumerate(allowed):
                if entry.matches(item, flag):
                    item.allowed[flag] = entry.why
                    used.add(i)
                    break
    return [entry for i, entry in enumerate(allowed) if i not in used]


def counts(items: list[Criterion]) -> dict[str, int]:
    """How many criteria, judged ones, and flags of each kind (and not allowlisted)."""
    out = {"criteria": len(items), "judged": sum(i.judged for i in items),
           "paper": sum(i.judged and i.origin == "paper" for i in items),
           "lab check": sum(i.judged and i.origin.startswith("lab check") for i in items)}
    out["marginal"] = sum(i.near for i in items)
    for flag in FLAGS:
        out[flag] = sum(flag in i.flags for i in items)
        out[f"{flag} open"] = sum(flag in i.open_flags for i in items)
    return out


# ---------------------------------------------------------------- the command

audit_app = typer.Typer(help="Audit the experiments' acceptance criteria (docs/fidelity.md).",
                        no_args_is_help=True)


def _show(item: Criterion, value: float | None) -> str:
    """A value in the quantity's unit ('–' for no paper value)."""
    from mcclab.analysis.summary import format_value

    if value is None:
        return "–"
    if not math.isfinite(value):
        return "∞" if value > 0 else "-∞"
    kind = "measure" if "." in item.kind else item.kind
    return format_value(kind, value, item.unit)


def _relative(item: Criterion) -> str:
    """The band's ends as multiples of the paper value ('–' without a band or paper value)."""
    if item.band is None or not item.paper:
        return "–"
    lo, hi = (v / abs(item.paper) for v in item.band)
    return f"x{lo:.2f} – x{hi:.2f}"


@audit_app.command("bands")
def bands_command(
    all_rows: bool = typer.Option(False, "--all", help="also list quantities reported "
                                  "without a criterion"),
    flagged: bool = typer.Option(False, "--flagged", help="only flagged criteria and "
                                 "marginal passes of the width rule"),
) -> None:
    """Every criterion: source, paper value, band, its width, and what is flagged."""
    console = Console(soft_wrap=False)
    if not console.is_terminal:
        # A pipe or a file gets the table at a width a log can hold, not 80 columns.
        console = Console(soft_wrap=False, width=200)
    items, errors = collect()
    stale = apply_allowlist(items, load_allowlist())
    shown = [i for i in items if (all_rows or i.judged or i.flags)
             and (i.flags or i.near or not flagged)]
    table = Table(title="acceptance criteria", show_lines=False)
    for name, ratio in (("experiment", None), ("label", 2), ("profile", None), ("source", 3),
                        ("origin", None), ("paper", None), ("band", None), ("vs paper", None),
                        ("flags", 2)):
        table.add_column(name, overflow="fold", ratio=ratio, no_wrap=ratio is None)
    last = None
    for item in shown:
        if last is not None and item.spec != last:
            table.add_section()
        last = item.spec
        accepted = "reported only" if item.band is None else \
            f"[{_show(item, item.band[0])}, {_show(item, item.band[1])}]"
        flags = []
        for flag in item.flags:
            why = item.wide if flag == "wide" else ""
            style = "yellow" if flag in item.allowed else "red"
            mark = " (allowlisted)" if flag in item.allowed else ""
            flags.append(f"[{style}]{flag}{mark}[/{style}]" + (f": {why}" if why else ""))
        if item.near:
            load = band_load(item.scale, item.paper, item.band) or 0.0
            flags.append(f"[cyan]marginal[/cyan]: {load:.0%} of the width rule's limit")
        table.add_row(item.experiment, item.label, "+".join(item.profiles), item.source,
                      item.origin, _show(item, item.paper), accepted, _relative(item),
                      "\n".join(flags))
    console.print(table)
    c = counts(items)
    console.print(
        f"{c['criteria']} quantities in {len({i.spec for i in items})} specs; {c['judged']} "
        f"judged ({c['paper']} from a paper, {c['lab check']} lab checks). Flagged: "
        f"no source {c['no-source']}, unmarked lab check {c['unmarked']} "
        f"({c['unmarked open']} not allowlisted), can hardly fail {c['wide']} "
        f"({c['wide open']} not allowlisted); {c['marginal']} pass the width rule "
        "marginally (within 10 % of its limit).", highlight=False)
    for entry in stale:
        console.print(f"[red]allowlist entry matches nothing:[/red] {entry.flag} "
                      f"{entry.experiment} / {entry.label}", highlight=False)
    for message in errors:
        console.print(alert("cannot load", message, sep=" "), highlight=False)
    if errors or stale or any(i.open_flags for i in items):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``mcclab audit ...`` to the main command line."""
    app.add_typer(audit_app, name="audit")


__all__ = ["Allowed", "Criterion", "Scale", "apply_allowlist", "band_load", "collect",
           "counts", "hardly_fails", "load_allowlist", "near_limit", "origin_of", "register",
           "scale_of", "spec_files"]
