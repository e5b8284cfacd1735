"""The readiness loop the lab's and the SSH backend's routers share."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mcclab.routing.common import ReadinessCheck
from mcclab.routing.readiness import poll_readiness


def plans(**checks):  # noqa: ANN003, ANN201 - router -> list of (name, predicate)
    return {node: SimpleNamespace(readiness=[ReadinessCheck(n, (n,), p) for n, p in items])
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


def test_the_timeout_says_what_explain_knows_of_each_router_still_pending():
    # A rare timeout (FRR 10's RP with no RPF interface for 60 s, once in a whole suite)
    # cannot be looked into once the lab is down: the message carries each pending
    # router's own account, and only theirs.
    asked: list[str] = []

    def explain(node):  # noqa: ANN001, ANN202
        asked.append(node)
        return f"  routes of {node}"

    with pytest.raises(Boom) as caught:
        poll_readiness(plans(r1=[("nbr", lambda o: False), ("rp", lambda o: False)],
                             r2=[("rp", lambda o: True)]),
                       lambda n, c: "", lambda node: None, 0.0, lambda *a: None, 0.0, Boom,
                       explain=explain)
    assert asked == ["r1"]
    assert str(caught.value).endswith("r1, as it stood:\n  routes of r1")


def test_a_check_pending_past_its_remedy_time_runs_the_remedy_once_each_time():
    # FRR 10's pimd can keep its static RP unresolved for good if zebra did not answer
    # its first lookups; the check carries the command that makes pimd look again.
    clock = iter(range(100))
    ran: list[tuple[str, ...]] = []
    heard: list[tuple[str, str, float]] = []

    def probe(node, check):  # noqa: ANN001, ANN202
        ran.append(check.argv)
        return "ok" if len([a for a in ran if a == ("fix",)]) == 2 else ""

    rp = ReadinessCheck("rp", ("show",), lambda o: o == "ok", remedy=("fix",), remedy_after=3)
    other = ReadinessCheck("nbr", ("nbrs",), lambda o: True, remedy=("never",), remedy_after=0)
    poll_readiness({"r3": SimpleNamespace(readiness=[rp, other])}, probe, lambda n: None,
                   99.0, lambda *a: None, 0.0, Boom,
                   remedied=lambda node, check, after: heard.append((node, check.name, after)),
                   clock=lambda: float(next(clock)))
    # a passing check is never remedied; the pending one is, every 3 s it stays pending
    assert ("never",) not in ran
    assert ran.count(("fix",)) == 2
    assert [(n, c) for n, c, _ in heard] == [("r3", "rp"), ("r3", "rp")]
    gaps = [b - a for (_, _, a), (_, _, b) in zip(heard, heard[1:], strict=False)]
    assert heard[0][2] >= 3 and all(g >= 3 for g in gaps), heard


def test_frr_plans_reapply_the_static_rp_as_the_rp_checks_remedy():
    from mcclab.routing import frr
    from mcclab.routing.common import RouterIface, RouterSpec

    spec = RouterSpec(name="r3", ifaces=(RouterIface("r3-eth0", "10.0.2.2/30"),),
                      run_dir="/tmp/mcclab-test/r3", rp="10.0.0.2", pim_neighbors=("10.0.2.1",))
    check = next(c for c in frr.plan(spec).readiness if c.name == "rp-reachable")
    argv = check.remedy
    assert argv[:len(frr.vtysh_argv(spec, "configure terminal"))] == frr.vtysh_argv(
        spec, "configure terminal")
    assert argv[-4:] == ("-c", "no ip pim rp 10.0.0.2 224.0.0.0/4",
                         "-c", "ip pim rp 10.0.0.2 224.0.0.0/4")
    no_rp = RouterSpec(name="r3", ifaces=spec.ifaces, run_dir=spec.run_dir,
                       pim_neighbors=spec.pim_neighbors)
    assert all(not c.remedy for c in frr.plan(no_rp).readiness)


def test_a_lab_router_explains_itself_by_its_routes_and_its_daemons_logs(tmp_path):
    from mcclab.routing.runner import RouterSet

    class Runner:  # what the namespace would answer to `ip -4 route show`
        def argv(self, command):  # noqa: ANN001, ANN202
            assert command.argv == ("ip", "-4", "route", "show") and command.netns == "mcl-r3"
            return ("printf", "10.0.0.0/30 dev r3-eth0\\n10.0.0.4/30 via 10.0.0.1\\n")

    log = tmp_path / "pimd.log"
    log.write_text("".join(f"line {i}\n" for i in range(20)))
    routers = RouterSet(None, None, None, Runner())
    routers.plans["r3"] = SimpleNamespace(logs=(str(log), str(tmp_path / "zebra.log")))
    said = routers._explain("r3")
    assert said.splitlines()[0] == "  ip route: 10.0.0.0/30 dev r3-eth0; 10.0.0.4/30 via 10.0.0.1"
    assert "  pimd.log:\n    line 12\n" in said and "line 11" not in said
    assert said.endswith("  zebra.log:\n    (no log)")


def test_a_testbed_router_runs_the_remedy_over_ssh_and_reports_it(tmp_path):
    from mcclab.testbed.routers import RemoteRouters

    class Ssh:  # r3's host: the RP resolves once the remedy has run there
        def __init__(self) -> None:
            self.ran: list[tuple[str, tuple[str, ...]]] = []

        def run(self, node, argv, check=True, timeout=None):  # noqa: ANN001, ANN202
            self.ran.append((node, tuple(argv)))
            return "ok" if (node, ("fix-rp",)) in self.ran else ""

    ssh = Ssh()
    routers = RemoteRouters(None, None, ssh, "/tmp/mcclab-test", tmp_path)
    rp = ReadinessCheck("rp-reachable", ("show-rp",), lambda out: out == "ok",
                        remedy=("fix-rp",), remedy_after=0.05)
    routers.plans["r3"] = SimpleNamespace(readiness=(rp,), settle_s=0.0)
    routers.wait_ready(timeout=5.0)
    assert ("r3", ("fix-rp",)) in ssh.ran and ssh.ran[-1] == ("r3", ("show-rp",))
    assert len(routers.remedies) == 1
    assert routers.remedies[0].startswith("r3 rp-reachable remedied after ")


def test_a_runs_environment_records_how_the_routers_came_up():
    from mcclab.experiment.runner import environment

    lab = SimpleNamespace(topo=SimpleNamespace(routing=SimpleNamespace(backend="frr10")),
                          link_backend="userspace", features=None,
                          routers=SimpleNamespace(ready_after=11.2,
                                                  remedies=["r3 rp-reachable remedied after 10 s"]))
    env = environment(lab)
    assert env["routing_ready"] == {"seconds": 11.2,
                                    "remedies": ["r3 rp-reachable remedied after 10 s"]}
    lab.routers = None  # a lab that failed before its routers started
    assert "routing_ready" not in environment(lab)
