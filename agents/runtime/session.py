"""The session description an agent is launched with (JSON, validated by pydantic).

It names the protocol, the channels (group and port each, one per layer or
wave), the source, the protocol parameters (validated by the protocol's own
model) and, per node, the data-plane address, the control-net metrics address
and parameter overrides (e.g. a receiver's subscription level).
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agents.runtime.registry import ProtocolSpec, get

_LINK_LOCAL = IPv4Network("224.0.0.0/24")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Channel(_Strict):
    """One channel (layer, wave): a multicast group and a UDP port."""

    group: IPv4Address
    port: int = Field(ge=1, le=65535)

    @field_validator("group")
    @classmethod
    def _multicast(cls, value: IPv4Address) -> IPv4Address:
        if not value.is_multicast:
            raise ValueError(f"{value} is not a multicast group (224.0.0.0/4)")
        if value in _LINK_LOCAL:
            raise ValueError(f"{value} is link-local (224.0.0.0/24) and is never routed")
        return value


class NodeSpec(_Strict):
    """Per-node settings.

    ``address``: the node's data-plane address: the sender's outgoing multicast
    interface, a receiver's join interface (default: chosen by the kernel's routes).
    ``metrics``: ``ADDR:PORT`` on the control net for ``/metrics`` (``--metrics``
    overrides it). ``params``: overrides merged onto the session's ``params``.
    """

    address: IPv4Address | None = None
    metrics: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class Session(_Strict):
    """One multicast session: one sender, any number of receivers."""

    protocol: str
    flow: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="the metrics' flow label")
    session_id: int = Field(ge=0, le=0xFFFFFFFF)
    source: IPv4Address = Field(description="the sender's address (the SSM source)")
    ssm: bool = Field(default=False, description="receivers join source-specifically (IGMPv3)")
    ttl: int = Field(default=32, ge=1, le=255)
    channels: list[Channel] = Field(min_length=1, max_length=65536)
    feedback_port: int | None = Field(
        default=None, ge=1, le=65535,
        description="UDP port the sender listens on for unicast feedback (None: no feedback)")
    params: dict[str, Any] = Field(default_factory=dict)
    nodes: dict[str, NodeSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Session:
        try:
            spec = get(self.protocol)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        pairs = [(c.group, c.port) for c in self.channels]
        if len(set(pairs)) != len(pairs):
            raise ValueError("two channels share a group and port")
        if spec.feedback and self.feedback_port is None:
            raise ValueError(f"{spec.name} uses unicast feedback: the session needs a "
                             "feedback_port")
        self._validate_params(spec, None)
        for node in self.nodes:
            self._validate_params(spec, node)
        return self

    def _validate_params(self, spec: ProtocolSpec, node: str | None) -> None:
        try:
            params = self.params_for(node)
        except ValidationError as exc:
            where = "params" if node is None else f"nodes.{node}.params (merged)"
            raise ValueError(f"{where}: {exc}") from None
        if spec.channels is not None and spec.channels(params) != len(self.channels):
            where = "" if node is None else f" (node {node})"
            raise ValueError(f"{spec.name} needs {spec.channels(params)} channels with these "
                             f"params{where}, the session declares {len(self.channels)}")

    @property
    def spec(self) -> ProtocolSpec:
        """The registered protocol."""
        return get(self.protocol)

    def params_for(self, node: str | None) -> Any:
        """The protocol's parameter model for ``node`` (session params + node overrides)."""
        merged = dict(self.params)
        if node is not None and node in self.nodes:
            merged.update(self.nodes[node].params)
        return self.spec.params.model_validate(merged)

    def node(self, name: str) -> NodeSpec:
        """The node's settings (defaults if the session does not list it)."""
        return self.nodes.get(name, NodeSpec())

