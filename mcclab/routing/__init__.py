"""Multicast routing: pure planners (config text and argv lists) and the one runner.

The plan/run split is the same as in ``mcclab.links``. The planners
(``frr``, ``pimd``, ``smcroute``, and ``plan``, which derives their inputs
from a topology) do no I/O: build a :class:`RouterSpec` per router, call
:func:`plan_router`, and hand the :class:`DaemonPlan` to
``mcclab.routing.runner``, which writes the files, starts the daemons and polls
readiness. Importing this package loads the planners alone (no topology
model, no processes); ``plan`` and ``runner`` are imported by name. See
docs/routing.md for the measured behaviour of each backend.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcclab.routing import frr, pimd, smcroute
from mcclab.routing.common import (
    DaemonPlan,
    DirSpec,
    IgmpTimers,
    ReadinessCheck,
    RouterIface,
    RouterSpec,
    StaticMroute,
)

BACKENDS = ("frr", "frr10", "pimd", "smcroute")

# Binaries each backend needs on the machine (preflight checks).
BINARIES = {
    **{name: build.binaries for name, build in frr.BUILDS.items()},
    "pimd": (pimd.PIMD_BIN, "unshare", "mount"),
    "smcroute": (smcroute.SMCROUTED, smcroute.SMCROUTECTL),
}


def plan_router(backend: str, spec: RouterSpec, routes: Iterable[StaticMroute] = ()) -> DaemonPlan:
    """The plan for one router; ``routes`` only matter (and are only allowed) for smcroute."""
    routes = tuple(routes)
    if backend == "smcroute":
        return smcroute.plan(spec, routes)
    if routes:
        raise ValueError(f"static routes are only supported by smcroute, not {backend}")
    if backend in frr.BUILDS:
        return frr.plan(spec, frr.BUILDS[backend])
    if backend == "pimd":
        return pimd.plan(spec)
    raise ValueError(f"unknown routing backend {backend!r}; choose one of {BACKENDS}")


__all__ = [
    "BACKENDS", "BINARIES", "DaemonPlan", "DirSpec", "IgmpTimers", "ReadinessCheck",
    "RouterIface", "RouterSpec", "StaticMroute", "plan_router",
]
