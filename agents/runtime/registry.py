"""Protocol names -> (sender core factory, receiver core factory, parameter model, wire id).

Protocols are discovered: every package directly under ``agents/`` (``runtime``
aside) that exposes a ``SPEC`` (a :class:`ProtocolSpec`) is a protocol. The
packages are imported on first lookup, so ``get("cbr")`` works without importing
``agents.cbr``, and a new protocol needs no edit outside its own folder. A
package may also :func:`register` its spec itself on import (all of them do, so
importing one package is enough for code that needs only that protocol); other
specs (a test's throw-away protocol) are registered the same way.
See docs/protocols.md for what a protocol package holds.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agents.runtime.core import ReceiverCore, SenderCore
from agents.runtime.header import PROTOCOL_FLAGS, Extension, HeaderParser, NoExtension

if TYPE_CHECKING:
    from agents.runtime.session import Session

PACKAGE = "agents"
# Packages under agents/ that hold shared code, not a protocol.
NOT_PROTOCOLS = frozenset({"runtime"})

SenderFactory = Callable[[Any, "Session"], SenderCore]
ReceiverFactory = Callable[[Any, "Session"], ReceiverCore]


@dataclass(frozen=True)
class ProtocolSpec:
    """Everything the runtime needs to know about one protocol.

    ``sender`` and ``receiver`` build a core from the node's validated parameters
    (an instance of ``params``) and the session. ``channels``, if given, says how
    many channels a session with those parameters must declare. ``flags`` are the
    high-nibble header flag bits the protocol uses. ``feedback`` asks the runner
    for a unicast feedback port (receivers' ``Feedback`` actions reach the sender's
    ``on_feedback``). ``example_params`` is a minimal
    valid parameter set (for documentation, fuzzing and smoke tests).

    The protocol's part of the metric contract: ``sender_gauges`` and
    ``receiver_gauges`` map each gauge its cores return from ``metrics()`` (without
    the ``mcc_agent_`` prefix) to its meaning; the contract test checks that the
    cores export exactly these. ``contract_case`` is the session the lab's agent
    contract test runs for it (tests/integration/test_agent_contract.py describes
    its keys).
    """

    name: str
    protocol_id: int
    params: type[BaseModel]
    sender: SenderFactory
    receiver: ReceiverFactory
    extension: Extension = field(default_factory=NoExtension)
    flags: int = 0
    channels: Callable[[Any], int] | None = None
    feedback: bool = False
    example_params: dict[str, Any] = field(default_factory=dict)
    sender_gauges: dict[str, str] = field(default_factory=dict)
    receiver_gauges: dict[str, str] = field(default_factory=dict)
    contract_case: dict[str, Any] = field(default_factory=dict)

    def parser(self, session_id: int, channels: int) -> HeaderParser:
        """A header parser for one session of this protocol."""
        return HeaderParser(self.protocol_id, session_id, channels, self.extension, self.flags)


_REGISTRY: dict[str, ProtocolSpec] = {}
_PACKAGES: dict[str, str] = {}  # protocol name -> the package that exposes its SPEC
_loaded = False


def register(spec: ProtocolSpec) -> ProtocolSpec:
    """Add a protocol; names and wire ids must be unique (re-registering the same spec is a
    no-op, so a module may be imported twice)."""
    if not 1 <= spec.protocol_id <= 255:
        raise ValueError(f"protocol id {spec.protocol_id} outside 1..255")
    if spec.flags & ~PROTOCOL_FLAGS:
        raise ValueError(f"protocol flags {spec.flags:#04x} outside the protocol nibble 0xf0")
    old = _REGISTRY.get(spec.name)
    if old is not None:
        if old.protocol_id == spec.protocol_id and old.params is spec.params:
            return old
        raise ValueError(f"protocol {spec.name!r} is already registered")
    for other in _REGISTRY.values():
        if other.protocol_id == spec.protocol_id:
            raise ValueError(f"protocol id {spec.protocol_id} is taken by {other.name!r}")
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a protocol registered by hand (a test's throw-away protocol).

    A discovered protocol stays: its package is in the tree, so every lookup must see it
    (the contract tests check each one), whoever asked for it to go.
    """
    if name not in _PACKAGES:
        _REGISTRY.pop(name, None)


def protocol_packages() -> tuple[str, ...]:
    """The packages that may hold a protocol, by module name, found without importing
    them (the fork server preloads these)."""
    package = importlib.import_module(PACKAGE)
    return tuple(sorted(f"{PACKAGE}.{info.name}" for info in pkgutil.iter_modules(package.__path__)
                        if info.ispkg and info.name not in NOT_PROTOCOLS
                        and not info.name.startswith("_")))


def _discover() -> None:
    """Import every protocol package and register the SPEC it exposes (once)."""
    global _loaded
    if not _loaded:
        _loaded = True
        for name in protocol_packages():
            spec = getattr(importlib.import_module(name), "SPEC", None)
            if isinstance(spec, ProtocolSpec):
                register(spec)
                _PACKAGES[spec.name] = name


def package(name: str) -> str:
    """The package a discovered protocol lives in ('agents.rlc'); KeyError otherwise."""
    get(name)
    return _PACKAGES[name]


def get(name: str) -> ProtocolSpec:
    """The registered protocol ``name``; KeyError names the known ones."""
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(f"unknown protocol {name!r} (registered: {known})") from None


def protocols() -> dict[str, ProtocolSpec]:
    """All registered protocols by name."""
    _discover()
    return dict(sorted(_REGISTRY.items()))
