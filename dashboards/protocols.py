"""The protocols' dashboards, collected from their packages.

A protocol with a dashboard has a ``dashboard`` module in its package
(``agents/<package>/dashboard.py``) whose ``build()`` returns it; every panel
filters on ``protocol``, so a run without that protocol shows "No data". The
registry discovers the packages, so a new protocol's dashboard needs no edit here.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable

from grafana_foundation_sdk.builders import dashboard as db

from agents.runtime.registry import package, protocols


def builders() -> dict[str, Callable[[], db.Dashboard]]:
    """``mcclab-<protocol>`` -> the builder of every discovered protocol that has a dashboard."""
    out: dict[str, Callable[[], db.Dashboard]] = {}
    for name in protocols():
        try:
            module = f"{package(name)}.dashboard"
        except KeyError:  # registered by hand (a test), not discovered: no package
            continue
        if importlib.util.find_spec(module) is not None:
            out[f"mcclab-{name}"] = importlib.import_module(module).build
    return out
