"""Protocol names -> (sender core factory, receiver core factory, parameter model, wire id).

Protocol modules call :func:`register` when imported; the built-in ones are
imported on first lookup, so ``get("cbr")`` works without importing ``agents.cbr``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agents.runtime.core import ReceiverCore, SenderCore
from agents.runtime.header import PROTOCOL_FLAGS, Extension, HeaderParser, NoExtension

if TYPE_CHECKING:
    from agents.runtime.session import Session

BUILTIN_MODULES = ("agents.cbr", "agents.layered_cbr", "agents.stair")

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

    def parser(self, session_id: int, channels: int) -> HeaderParser:
        """A header parser for one session of this protocol."""
        return HeaderParser(self.protocol_id, session_id, channels, self.extension, self.flags)


_REGISTRY: dict[str, ProtocolSpec] = {}
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
    """Remove a protocol (for tests that register throw-away protocols)."""
    _REGISTRY.pop(name, None)


def _load_builtins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def get(name: str) -> ProtocolSpec:
    """The registered protocol ``name``; KeyError names the known ones."""
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise KeyError(f"unknown protocol {name!r} (registered: {known})") from None


def protocols() -> dict[str, ProtocolSpec]:
    """All registered protocols by name."""
    _load_builtins()
    return dict(sorted(_REGISTRY.items()))
