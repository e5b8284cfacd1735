"""The plugin registry: protocol-specific measures and figures, registered by name.

A spec names plugins (a ``measure`` quantity, a ``figures`` entry) and is
checked against this registry when it is loaded, by the runner and by the
analysis alike; so the registry lives beside the spec's models and imports
neither the experiment nor the analysis package. Plugin modules are found by
name and imported on demand (below), the way a protocol package is found.
Plugin authors import the decorators from :mod:`mcclab.analysis.plugins`.

A protocol's analysis lives in its own package, ``agents/<prefix>/analysis.py``
(``<prefix>`` is the package's name), and registers functions with the decorators
below under names ``<prefix>.<what>`` (``webrc.artt``); measures for any protocol
live in ``mcclab/analysis/protocols/<prefix>.py`` (``generic``). Lookups import
that module on demand from the name's prefix, so a spec can name any plugin
without the analysis importing every protocol::

    @measure("webrc.artt", unit="s")
    def artt(run: Run, flow: str, node: str | None = None) -> float: ...

    @figure("webrc.artt")
    def artt_figure(run: Run, folder: Path, flow: str) -> list[Path]: ...

    @sweep_figure("webrc.fig5")
    def fig5(sweep: Sweep, folder: Path, label: str) -> list[Path]: ...

A measure returns a float in its declared ``unit`` (``nan`` when there is
nothing to measure); figures write PNG and SVG pairs into ``folder`` (name
them after the figure) and return the paths. Functions registered elsewhere
(a test, a notebook) are found too, as long as they are registered before
the lookup.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcclab.model import units

F = TypeVar("F", bound=Callable[..., Any])
PROTOCOLS_PACKAGE = "mcclab.analysis.protocols"
AGENTS_PACKAGE = "agents"  # protocol packages: agents/<prefix>/analysis.py
_NAME = re.compile(r"^([a-z][a-z0-9_]*)\.([A-Za-z0-9_.-]+)$")


class PluginError(LookupError):
    """An unknown plugin name, or arguments the plugin does not take."""


def _dimensionless(value: object) -> float:
    """A plain number, or a percentage ('12%' is 0.12)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number or a percentage, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            pass
    raise ValueError(f"expected a number or a percentage like '12%', got {value!r}")


def _packet_rate(value: object) -> float:
    """A packet rate such as '250pkt/s' or '250pps', in packets per second."""
    m = re.fullmatch(r"\s*(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s*(pkt/s|pkts/s|pps)\s*", str(value)) \
        if isinstance(value, str) else None
    if not m:
        raise ValueError(f"packet rate {value!r} needs its unit, e.g. '250pkt/s'")
    return float(m.group(1))


def _fmt(value: float) -> str:
    """A number in the shortest exact form."""
    return f"{value:.12g}"


@dataclass(frozen=True)
class Unit:
    """How a measure's values are parsed from specs, written back and shown."""

    name: str
    parse: Callable[[object], float]
    write: Callable[[float], Any]
    show: Callable[[float], str]


def _show_seconds(value: float) -> str:
    """Seconds for people: '150 ms', '2.5 s'."""
    return f"{value * 1e3:.3g} ms" if abs(value) < 1 else f"{value:.3g} s"


def _show_rate(value: float) -> str:
    """bit/s for people."""
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} bit/s"


UNITS: dict[str, Unit] = {u.name: u for u in (
    Unit("1", _dimensionless, float, lambda v: f"{v:.3g}"),
    Unit("bit/s", units.parse_rate, units.format_rate, _show_rate),
    Unit("s", units.parse_duration, units.format_duration, _show_seconds),
    Unit("B", lambda v: float(units.parse_size(v)), lambda v: f"{_fmt(v)}B",
         lambda v: f"{v:.4g} B"),
    Unit("pkt", lambda v: float(units.parse_packets(v)), lambda v: f"{_fmt(v)}pkt",
         lambda v: f"{v:.4g} pkt"),
    Unit("pkt/s", _packet_rate, lambda v: f"{_fmt(v)}pkt/s", lambda v: f"{v:.3g} pkt/s"),
)}
"""The units a measure may declare: '1' (dimensionless), bit/s, s, B, pkt, pkt/s."""


@dataclass(frozen=True)
class Plugin:
    """A registered function, its name and (for measures) its unit and domain."""

    name: str
    fn: Callable[..., Any]
    unit: str = ""
    # The values a measure can take (a fraction: (0, 1)); None when it declares none.
    # A band edge at or beyond it cannot be crossed (mcclab.analysis.summary.margin).
    domain: tuple[float, float] | None = None

    @property
    def doc(self) -> str:
        """The first line of the function's docstring ('' without one)."""
        return (inspect.getdoc(self.fn) or "").split("\n", 1)[0]

    def check_args(self, args: dict[str, Any], leading: int) -> None:
        """Raise PluginError if the function cannot be called with these keyword arguments.

        ``leading`` is the number of positional parameters the caller passes
        (the run or sweep, and the folder for figures).
        """
        try:
            inspect.signature(self.fn).bind(*([None] * leading), **args)
        except TypeError as exc:
            raise PluginError(f"{self.name}: {exc}") from None


MEASURES: dict[str, Plugin] = {}
FIGURES: dict[str, Plugin] = {}
SWEEP_FIGURES: dict[str, Plugin] = {}
_KINDS = {"measure": MEASURES, "figure": FIGURES, "sweep figure": SWEEP_FIGURES}


def _register(registry: dict[str, Plugin], plugin: Plugin) -> None:
    """Add a plugin, refusing a second function under the same name."""
    if not _NAME.match(plugin.name):
        raise ValueError(f"plugin name {plugin.name!r} must look like 'prefix.name' "
                         "(prefix: a protocol package under agents/ or a module under "
                         "mcclab/analysis/protocols/)")
    old = registry.get(plugin.name)
    # Re-registering the same function (a reloaded module) is harmless.
    if old is not None and (old.fn.__module__, old.fn.__qualname__) != (
            plugin.fn.__module__, plugin.fn.__qualname__):
        raise ValueError(f"{plugin.name!r} is already registered by "
                         f"{old.fn.__module__}.{old.fn.__qualname__}")
    registry[plugin.name] = plugin


def measure(name: str, unit: str = "1",
            domain: tuple[float, float] | None = None) -> Callable[[F], F]:
    """Register ``fn(run: Run, **args) -> float`` as measure ``name``, valued in ``unit``.

    ``unit`` is one of :data:`UNITS`; the paper value of a spec's reference
    is parsed in it ('0.2s' for 's', '12%' or 0.12 for '1'). ``domain`` is the
    closed range of values the measure can take, where it has one ((0, 1) for a
    fraction; an end may be infinite): a band edge at or beyond it is one no
    measurement can cross, so a value on it is not a marginal verdict.
    """
    if unit not in UNITS:
        raise ValueError(f"measure {name!r}: unknown unit {unit!r}; use one of "
                         f"{', '.join(UNITS)}")
    if domain is not None and not domain[0] < domain[1]:
        raise ValueError(f"measure {name!r}: domain {domain!r} is empty (low must be below "
                         "high)")

    def register(fn: F) -> F:
        _register(MEASURES, Plugin(name, fn, unit,
                                   None if domain is None else (float(domain[0]),
                                                                float(domain[1]))))
        return fn
    return register


def figure(name: str) -> Callable[[F], F]:
    """Register ``fn(run: Run, folder: Path, **args) -> list[Path]`` as run figure ``name``."""
    def register(fn: F) -> F:
        _register(FIGURES, Plugin(name, fn))
        return fn
    return register


def sweep_figure(name: str) -> Callable[[F], F]:
    """Register ``fn(sweep: Sweep, folder: Path, **args) -> list[Path]`` as sweep figure."""
    def register(fn: F) -> F:
        _register(SWEEP_FIGURES, Plugin(name, fn))
        return fn
    return register


def _modules(prefix: str) -> list[str]:
    """The modules that may hold plugins named ``<prefix>.*``."""
    return [f"{PROTOCOLS_PACKAGE}.{prefix}", f"{AGENTS_PACKAGE}.{prefix}.analysis"]


def _import_prefix(prefix: str) -> None:
    """Import the analysis modules for a name prefix, if there are any."""
    for module in _modules(prefix):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            # Missing is fine (no such protocol, or no analysis); a module that exists but
            # imports something missing is an error.
            if exc.name is None or not (module == exc.name
                                        or module.startswith(exc.name + ".")):
                raise


def _prefixes() -> list[str]:
    """Every prefix with a generic module or a protocol package, found without importing."""
    generic = importlib.import_module(PROTOCOLS_PACKAGE)
    agents = importlib.import_module(AGENTS_PACKAGE)
    names = {info.name for info in pkgutil.iter_modules(generic.__path__)}
    names |= {info.name for info in pkgutil.iter_modules(agents.__path__) if info.ispkg}
    return sorted(names)


def _import_all() -> None:
    """Import every analysis module (to list what is known); broken ones are skipped."""
    for prefix in _prefixes():
        try:
            _import_prefix(prefix)
        except Exception:  # noqa: BLE001,S112 - a broken module must not hide the others
            continue


def known(kind: str) -> list[str]:
    """Every registered name of a kind ('measure', 'figure', 'sweep figure'), sorted."""
    _import_all()
    return sorted(_KINDS[kind])


def _lookup(kind: str, name: str) -> Plugin:
    """Find a plugin, importing its protocol module first; PluginError lists the known ones."""
    registry = _KINDS[kind]
    if name not in registry:
        m = _NAME.match(name)
        if m:
            _import_prefix(m.group(1))
    if name not in registry:
        names = known(kind)
        raise PluginError(f"unknown {kind} {name!r}; known: {', '.join(names) or 'none'}")
    return registry[name]


def get_measure(name: str) -> Plugin:
    """The measure registered as ``name``."""
    return _lookup("measure", name)


def get_figure(name: str) -> Plugin:
    """The run figure registered as ``name``."""
    return _lookup("figure", name)


def get_sweep_figure(name: str) -> Plugin:
    """The sweep figure registered as ``name``."""
    return _lookup("sweep figure", name)


def show(value: float | None, unit: str) -> str:
    """A measured value in a unit, for people ('–' when there is none)."""
    if value is None or not math.isfinite(value):
        return "–"
    return UNITS[unit].show(value) if unit in UNITS else f"{value:.3g} {unit}"
