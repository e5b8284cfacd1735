"""How long a run should take, for the estimate printed before long work starts.

A sweep (``mcclab sweep``) and a reproduction (``mcclab reproduce``) print it
before their first run and as they go on. It is the run's duration plus a rough
allowance for bringing the lab up and down: a fixed part and a part per node (a
2-core machine takes a little less than this for single runs; each run's
``run.json`` records what it really took).
"""

from __future__ import annotations

from mcclab.experiment.loader import Resolved

BRINGUP_FIXED_S = 25.0
BRINGUP_PER_NODE_S = 0.5


def run_estimate_s(resolved: Resolved) -> float:
    """Seconds one run of ``resolved`` should take, bring-up and teardown included."""
    nodes = len(resolved.topology.nodes)
    return resolved.experiment.duration + BRINGUP_FIXED_S + BRINGUP_PER_NODE_S * nodes
