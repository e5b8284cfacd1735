"""Parametric topology generators: star, k-ary tree, linear chain, dumbbell.

A generator expands into the same raw form a hand-written file uses (nodes
and links with unit-bearing strings), so generated and explicit topologies go
through one validation path and produce identical error messages.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from mcclab.model.topology import LinkParams, StrictModel

RawTopology = dict[str, Any]


def _raw(params: LinkParams | None) -> dict[str, Any]:
    """Link parameters back in their unit-bearing input form."""
    if params is None:
        return {}
    return params.model_dump(mode="json", exclude_defaults=True)


def _link(a: str, b: str, params: LinkParams | None) -> dict[str, Any]:
    """A raw link between a and b."""
    return {"endpoints": [a, b], **_raw(params)}


class StarSpec(StrictModel):
    """A source host behind a hub router with ``leaves`` receiver hosts on it.

    With ``hub_size``, the hub router r0 keeps the first ``hub_size`` leaves,
    and each further group of ``hub_size`` leaves hangs off one more router (r1,
    r2, ...) joined to r0 by ``hub_link``: a router routes multicast on at most
    31 interfaces (the kernel's vifs, :mod:`mcclab.routing.limits`).
    """

    kind: Literal["star"]
    leaves: int = Field(ge=1, le=999)
    leaf_link: LinkParams = LinkParams()
    source_link: LinkParams = LinkParams()
    hub_size: int | None = Field(default=None, ge=1, description="leaves per router")
    hub_link: LinkParams = LinkParams()

    def expand(self) -> RawTopology:
        """Nodes src, r0 (r1.. with hub_size) and h1..hN; links src-r0, r0-rK, rK-hI."""
        nodes = {"src": {"kind": "host"}, "r0": {"kind": "router"}}
        links = [_link("src", "r0", self.source_link)]
        size = self.hub_size or self.leaves
        for i in range(1, self.leaves + 1):
            hub = f"r{(i - 1) // size}"
            if hub not in nodes:
                nodes[hub] = {"kind": "router"}
                links.append(_link("r0", hub, self.hub_link))
            nodes[f"h{i}"] = {"kind": "host"}
            links.append(_link(hub, f"h{i}", self.leaf_link))
        return {"nodes": nodes, "links": links}


class TreeSpec(StrictModel):
    """A k-ary tree of routers ``depth`` levels deep with receiver hosts as leaves.

    ``levels[i]`` gives the link parameters between depth i and depth i+1
    (level 0 links the root router to its children). The source host hangs off
    the root router through ``source_link``.
    """

    kind: Literal["tree"]
    depth: int = Field(ge=1, le=6)
    fanout: int = Field(ge=1, le=16)
    levels: list[LinkParams] = Field(default_factory=list)
    source_link: LinkParams = LinkParams()

    @model_validator(mode="after")
    def _levels_match_depth(self) -> TreeSpec:
        if self.levels and len(self.levels) != self.depth:
            raise ValueError(f"levels: has {len(self.levels)} entries but depth is {self.depth}")
        if self.fanout**self.depth > 999:
            raise ValueError("fanout: the tree would have more than 999 leaves")
        return self

    def expand(self) -> RawTopology:
        """Routers r0 (root), r1.. in breadth-first order; leaf hosts h1..hN."""
        nodes: dict[str, Any] = {"src": {"kind": "host"}, "r0": {"kind": "router"}}
        links = [_link("src", "r0", self.source_link)]
        frontier, next_router, next_host = ["r0"], 1, 1
        for level in range(self.depth):
            params = self.levels[level] if self.levels else None
            leaf_level = level == self.depth - 1
            children: list[str] = []
            for parent in frontier:
                for _ in range(self.fanout):
                    if leaf_level:
                        child, next_host = f"h{next_host}", next_host + 1
                        nodes[child] = {"kind": "host"}
                    else:
                        child, next_router = f"r{next_router}", next_router + 1
                        nodes[child] = {"kind": "router"}
                    links.append(_link(parent, child, params))
                    children.append(child)
            frontier = children
        return {"nodes": nodes, "links": links}


class ChainSpec(StrictModel):
    """A linear chain of routers (multi-bottleneck), hosts hanging off each router.

    ``hops[i]`` links router i+1 to router i+2; a single entry is reused for
    every hop. The source host attaches to the first router.
    """

    kind: Literal["chain"]
    routers: int = Field(ge=1, le=64)
    hosts_per_router: int = Field(1, ge=0, le=99)
    hops: list[LinkParams] = Field(default_factory=list)
    access_link: LinkParams = LinkParams()
    source_link: LinkParams = LinkParams()

    @model_validator(mode="after")
    def _hops_match(self) -> ChainSpec:
        if len(self.hops) not in (0, 1, self.routers - 1):
            raise ValueError(
                f"hops: has {len(self.hops)} entries; give 1 or routers-1 = {self.routers - 1}"
            )
        return self

    def expand(self) -> RawTopology:
        """Routers r1..rN, source src on r1, hosts h<router>n<j> on each router."""
        nodes: dict[str, Any] = {"src": {"kind": "host"}}
        links = []
        for r in range(1, self.routers + 1):
            nodes[f"r{r}"] = {"kind": "router"}
        links.append(_link("src", "r1", self.source_link))
        for r in range(1, self.routers):
            hop = self.hops[0] if len(self.hops) == 1 else (self.hops[r - 1] if self.hops else None)
            links.append(_link(f"r{r}", f"r{r + 1}", hop))
        for r in range(1, self.routers + 1):
            for j in range(1, self.hosts_per_router + 1):
                name = f"h{r}n{j}"
                nodes[name] = {"kind": "host"}
                links.append(_link(f"r{r}", name, self.access_link))
        return {"nodes": nodes, "links": links}


class DumbbellSpec(StrictModel):
    """``pairs`` senders and receivers on either side of one bottleneck."""

    kind: Literal["dumbbell"]
    pairs: int = Field(ge=1, le=99)
    bottleneck: LinkParams = LinkParams()
    access_link: LinkParams = LinkParams()

    def expand(self) -> RawTopology:
        """Senders s1..sN on router rl, receivers d1..dN on router rr, bottleneck rl-rr."""
        nodes: dict[str, Any] = {"rl": {"kind": "router"}, "rr": {"kind": "router"}}
        links = [_link("rl", "rr", self.bottleneck)]
        for i in range(1, self.pairs + 1):
            nodes[f"s{i}"] = {"kind": "host"}
            nodes[f"d{i}"] = {"kind": "host"}
            links.append(_link(f"s{i}", "rl", self.access_link))
            links.append(_link("rr", f"d{i}", self.access_link))
        return {"nodes": nodes, "links": links}


GeneratorSpec = Annotated[
    StarSpec | TreeSpec | ChainSpec | DumbbellSpec, Field(discriminator="kind")
]
