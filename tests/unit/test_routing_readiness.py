"""The readiness loop the lab's and the SSH backend's routers share."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mcclab.routing.readiness import poll_readiness


def plans(**checks):  # noqa: ANN003, ANN201 - router -> list of (name, predicate)
    return {node: SimpleNamespace(readiness=[SimpleNamespace(name=n, argv=(n,), predicate=p)
                                             for n, p in items])
            for node, items in checks.items()}


class Boom(RuntimeError):
    pass


def test_polls_only_pending_checks_until_all_pass():
    seen: list[tuple[str, str]] = []
    answers = {"nbr": iter(["", "", "up"]), "rp": iter(["yes"])}

    def probe(node, check):  # noqa: ANN001, ANN202
        seen.append((node, check.name))
        return next(answers[check.name])

    steps: list[tuple[int, int]] = []
    took = poll_readiness(plans(r1=[("nbr", lambda o: o == "up")],
                                r2=[("rp", lambda o: o == "yes")]),
                          probe, lambda node: None, 5.0,
                          lambda step, done, total: steps.append((done, total)), 0.0, Boom)
    assert seen == [("r1", "nbr"), ("r2", "rp"), ("r1", "nbr"), ("r1", "nbr")]
    assert steps == [(1, 2), (1, 2), (2, 2)] and took >= 0


def test_a_dead_router_stops_the_wait_at_once():
    def dead(node):  # noqa: ANN001, ANN202
        raise Boom(f"{node} died")

    with pytest.raises(Boom, match="r1 died"):
        poll_readiness(plans(r1=[("nbr", lambda o: True)]), lambda n, c: "", dead, 5.0,
                       lambda *a: None, 0.0, Boom)


def test_the_timeout_names_every_pending_check_with_its_last_output():
    with pytest.raises(Boom) as caught:
        poll_readiness(plans(r1=[("nbr", lambda o: False)], r2=[("rp", lambda o: True)]),
                       lambda n, c: f"{n} says no", lambda node: None, 0.0,
                       lambda *a: None, 0.0, Boom)
    text = str(caught.value)
    assert "routing not ready after 0 s" in text
    assert "r1: nbr not ready; last output: r1 says no" in text and "r2" not in text
