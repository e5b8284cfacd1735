"""Checks of lab 2 (ASM against SSM, RPF, reconvergence): answers against the topology's
shortest paths, and the messages the student's own captures hold."""

from __future__ import annotations

from mcclab.labs.checks import LabContext, Verdict, check
from mcclab.labs.helpers import as_number, captured, neighbour, norm, topology
from mcclab.labs.linkstate import routes_without

SSM_GROUP = "232.2.2.2"
DOWN = {"r2-r4"}


def _rpf(ctx: LabContext, node: str, target: str, down: frozenset[str] = frozenset()) -> str:
    """The neighbour ``node`` routes to ``target``'s address through (links in ``down`` out)."""
    topo, plan = topology(ctx)
    address = plan.address_of(target)
    for route in routes_without(topo, plan, set(down)):
        if route.node == node and address in route.dest:
            return next(i.peer for i in plan.interfaces[node] if i.name == route.dev)
    raise LookupError(f"{node} has no route to {target}")


def _neighbour_answer(ctx: LabContext, qid: str, expected: str, why: str, step: str) -> Verdict:
    """Compare an answer naming a neighbour of r4 with ``expected``."""
    answer = ctx.answer(qid)
    if answer is None:
        return Verdict.pending(f"write the neighbour as {qid} ({step})")
    _, plan = topology(ctx)
    named = neighbour(plan, "r4", answer)
    if named == expected:
        return Verdict.passed(why)
    if named is None:
        return Verdict.failed(f"{answer!r} is not a neighbour of r4: give r2 or r3")
    return Verdict.failed(
        f"not {named}: {step} shows it; r4 uses the interface of its unicast route back"
    )


@check("q1")
def rpf_rp(ctx: LabContext) -> Verdict:
    topo, _ = topology(ctx)
    return _neighbour_answer(
        ctx,
        "q1",
        _rpf(ctx, "r4", topo.rp),
        "the RP's address is routed through r3",
        "step 2: ip route get 10.0.2.2, the RP's address",
    )


@check("q2")
def rpf_source(ctx: LabContext) -> Verdict:
    return _neighbour_answer(
        ctx,
        "q2",
        _rpf(ctx, "r4", "src"),
        "two equal paths to the source: the tie goes to r2",
        "step 2: ip route get 10.0.0.1",
    )


@check("q3")
def ssm_without_source(ctx: LabContext) -> Verdict:
    answer = as_number(ctx.answer("q3"))
    if answer is None:
        return Verdict.pending("write the number of packets h4 got as q3 (step 4)")
    if answer == 0:
        return Verdict.passed(
            "a group of the SSM range is only joined per source: a join without one builds no tree"
        )
    return Verdict.failed(
        f"{answer:g} packets: was the group 232.2.2.2, joined without "
        "--source, and did the receiver wait its 10 s? Read the last line "
        "it printed"
    )


def _channel_records(ctx: LabContext) -> list[str]:
    """Record types of h4's reports that include the source for the SSM group."""
    _, plan = topology(ctx)
    h4, src = str(plan.address_of("h4")), str(plan.address_of("src"))
    return [
        r.split()[0]
        for _, ms in captured(ctx)
        for m in ms
        if m.protocol == "IGMP" and m.src == h4
        for r in m.records
        if r.split()[1:2] == [SSM_GROUP] and src in r and r.split()[0] in ("ALLOW", "IS_IN")
    ]


@check("q4")
def channel_join(ctx: LabContext) -> Verdict:
    if not ctx.captures():
        return Verdict.pending("capture r4-h4 while h4 joins the channel first (step 5)")
    if not _channel_records(ctx):
        return Verdict.failed(
            "none of your captures holds h4's join of (10.0.0.1, "
            "232.2.2.2): capture r4-h4 with --filter igmp and start the "
            "receiver with --source 10.0.0.1 while it runs"
        )
    answer = norm(ctx.answer("q4")).replace(" ", "_")
    if not answer:
        return Verdict.pending("write the record type as q4")
    if answer in ("allow", "allow_new_sources", "5"):
        return Verdict.passed("INCLUDE {} to INCLUDE {S}: the change is ALLOW(S)")
    return Verdict.failed(
        f"{ctx.answer('q4')!r} is not the join's record: look at h4's first "
        "report after it joined (later ones answer queries)"
    )


@check("q5")
def channel_tree(ctx: LabContext) -> Verdict:
    return _neighbour_answer(
        ctx,
        "q5",
        _rpf(ctx, "r4", "src"),
        "the (S,G) tree follows the route to the source, through r2",
        "step 5: show ip mroute on r4",
    )


@check("q6")
def reconverged(ctx: LabContext) -> Verdict:
    topo, plan = topology(ctx)
    after = _rpf(ctx, "r4", "src", frozenset(DOWN))
    r4_side = str(plan.iface_towards("r4", after).address.ip)
    src = str(plan.address_of("src"))
    joins = [
        m
        for _, ms in captured(ctx)
        for m in ms
        if m.kind == "join/prune"
        and m.src == r4_side
        and any(e.group == SSM_GROUP and e.source == src for e in m.joins)
    ]
    if not ctx.captures():
        return Verdict.pending("capture r3-r4 with --filter pim while r2-r4 goes down (step 6)")
    if not joins:
        return Verdict.failed(
            f"no join of (10.0.0.1, 232.2.2.2) from r4 to {after} in your "
            "captures: with h4 joined to the channel, capture r3-r4 with "
            "--filter pim and run 'mcclab link r2 r4 down' while it runs"
        )
    return _neighbour_answer(
        ctx,
        "q6",
        after,
        f"the route to the source now goes through {after}, and r4 joined there",
        "step 6: show ip mroute on r4",
    )


@check("q7")
def asm_stays(ctx: LabContext) -> Verdict:
    answer = norm(ctx.answer("q7"))
    if not answer:
        return Verdict.pending("write yes or no as q7")
    topo, _ = topology(ctx)
    moved = _rpf(ctx, "r4", topo.rp) != _rpf(ctx, "r4", topo.rp, frozenset(DOWN))
    if answer not in ("yes", "no"):
        return Verdict.failed("answer yes or no")
    if (answer == "yes") == moved:
        return Verdict.passed(
            "the (*,G) tree follows the route to the RP, which did not use r2-r4"
            if not moved
            else "the route to the RP moved too"
        )
    return Verdict.failed(
        "compare q1 (r4's RPF towards the RP) with the link that went "
        "down: the shared tree follows the route to the RP, not to the "
        "source"
    )
