"""Poll routers' readiness checks until every one passes: the loop the lab and the
SSH backend share (they differ only in how a probe runs and what error they raise)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from mcclab.routing.common import DaemonPlan, ReadinessCheck

Progress = Callable[[str, int, int], None]
Remedied = Callable[[str, ReadinessCheck, float], None]


def remedy_note(node: str, check: ReadinessCheck, pending: float) -> str:
    """How a runner reports a readiness remedy it ran (``ReadinessCheck.remedy``)."""
    return f"{node} {check.name} remedied after {pending:.0f} s"


def poll_readiness(plans: dict[str, DaemonPlan], probe: Callable[[str, ReadinessCheck], str],
                   check_alive: Callable[[str], None], timeout: float, progress: Progress,
                   interval: float, error: Callable[[str], Exception],
                   explain: Callable[[str], str] | None = None,
                   remedied: Remedied = lambda node, check, pending: None,
                   clock: Callable[[], float] = time.monotonic) -> float:
    """Run every pending check of every router, round after round, until all pass.

    ``probe(node, check)`` returns the check's output ('' when it could not run);
    ``check_alive(node)`` raises when a router's daemon has died, so a crash is not
    waited out. A check with a ``remedy`` that has stayed pending for its
    ``remedy_after`` seconds (again after each as many) has its remedy run through
    ``probe``, and ``remedied(node, check, seconds pending)`` hears of it. Past
    ``timeout`` seconds raises ``error(message)`` naming every check still pending
    with its last output, and, with ``explain``, what ``explain(node)`` says of each
    router that has one pending (its routes, its daemons' logs: what a rare timeout
    needs to be understood after the lab is gone). Returns the seconds it took on
    ``clock``.
    """
    start = clock()
    pending = {(node, i) for node, plan in plans.items() for i in range(len(plan.readiness))}
    total = len(pending)
    last: dict[tuple[str, int], str] = {}
    waited_from: dict[tuple[str, int], float] = {}  # since start or the last remedy
    while pending:
        for node, i in sorted(pending):
            check_alive(node)
            check = plans[node].readiness[i]
            out = probe(node, check)
            last[(node, i)] = out
            if check.predicate(out):
                pending.discard((node, i))
                continue
            now = clock()
            if check.remedy and now - waited_from.get((node, i), start) >= check.remedy_after:
                probe(node, replace(check, argv=check.remedy))
                waited_from[(node, i)] = now
                remedied(node, check, now - start)
        progress("waiting for routing", total - len(pending), total)
        if not pending:
            break
        if clock() - start > timeout:
            details = "\n".join(
                f"  {node}: {plans[node].readiness[i].name} not ready; last output: "
                f"{last.get((node, i), '').strip()[:300] or '(none)'}"
                for node, i in sorted(pending))
            if explain is not None:
                details += "".join(f"\n{node}, as it stood:\n{explain(node)}"
                                   for node in sorted({node for node, _ in pending}))
            raise error(f"routing not ready after {timeout:g} s:\n{details}")
        time.sleep(interval)
    return clock() - start
