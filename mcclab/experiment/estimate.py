"""How long a run should take, for the estimate printed before long work starts.

A sweep (``mcclab sweep``) and a reproduction (``mcclab reproduce``) print it
before their first run and as they go on. It is the run's duration plus an
allowance for everything else a run does (bring-up, routing readiness, export,
teardown, analysis, and the command's own start): a fixed part and a part per node.

The two parts are a least-squares fit to the 30 quick-profile runs of one
`mcclab reproduce` on a 2-core machine (5 to 135 nodes; a step took 14 to 56 s
more than its duration, the fit's worst miss 11 s). Each run's ``run.json``
records what it really took (``phase_s``).
"""

from __future__ import annotations

from mcclab.experiment.loader import Resolved

BRINGUP_FIXED_S = 16.0
BRINGUP_PER_NODE_S = 0.3


def run_estimate_s(resolved: Resolved) -> float:
    """Seconds one run of ``resolved`` should take, bring-up and teardown included."""
    nodes = len(resolved.topology.nodes)
    return resolved.experiment.duration + BRINGUP_FIXED_S + BRINGUP_PER_NODE_S * nodes
