"""Checks of lab 1 (IGMP and PIM-SM on a chain): answers against the topology, and the
messages the student's own captures hold."""

from __future__ import annotations

from mcclab.labs.checks import LabContext, Verdict, check
from mcclab.labs.helpers import as_number, captured, neighbour, norm, topology

GROUP = "239.1.1.1"
RECORD_NAMES = {
    "to_ex": "TO_EX",
    "change_to_exclude_mode": "TO_EX",
    "change_to_exclude": "TO_EX",
    "4": "TO_EX",
    "is_ex": "IS_EX",
    "mode_is_exclude": "IS_EX",
    "2": "IS_EX",
    "to_in": "TO_IN",
    "is_in": "IS_IN",
    "allow": "ALLOW",
    "block": "BLOCK",
}


def _pim_neighbours(ctx: LabContext, node: str) -> int:
    """Routers that share a link with ``node`` (each runs PIM on it)."""
    topo, plan = topology(ctx)
    return sum(topo.kind_of(i.peer) == "router" for i in plan.interfaces[node])


@check("q1")
def neighbours(ctx: LabContext) -> Verdict:
    answer = as_number(ctx.answer("q1"))
    if answer is None:
        return Verdict.pending("write the number of r2's PIM neighbours as q1 (step 2)")
    expected = _pim_neighbours(ctx, "r2")
    if answer == expected:
        return Verdict.passed(f"r2 has {expected} PIM neighbours")
    return Verdict.failed(
        f"{answer:g} is not right: count the rows of 'show ip pim "
        "neighbor' on r2 (one per router on a link of r2; hosts run no PIM)"
    )


@check("q2")
def rp_address(ctx: LabContext) -> Verdict:
    answer = norm(ctx.answer("q2"))
    if not answer:
        return Verdict.pending("write the RP's address as q2 (step 2: show ip pim rp-info)")
    topo, plan = topology(ctx)
    rp = str(plan.address_of(topo.rp))
    if answer == rp:
        return Verdict.passed(f"the RP of 239.1.1.1 is {topo.rp} at {rp}")
    if answer == topo.rp:
        return Verdict.failed(
            "that is the RP's name: give its address, as 'show ip pim rp-info' prints it"
        )
    return Verdict.failed(
        f"{answer} is not the RP's address: read the RP column of 'show ip pim rp-info' on r2"
    )


def _joins_seen(ctx: LabContext, host: str) -> list[str]:
    """The IGMPv3 record types of host's reports joining GROUP, over all captures."""
    _, plan = topology(ctx)
    address = str(plan.address_of(host))
    kinds = []
    for _, messages in captured(ctx):
        for m in messages:
            if m.protocol == "IGMP" and m.src == address and m.kind == "report":
                kinds += [
                    r.split()[0]
                    for r in m.records
                    if r.split()[1:2] == [GROUP] and r.split()[0] in ("TO_EX", "IS_EX")
                ]
    return kinds


@check("q3")
def join_record(ctx: LabContext) -> Verdict:
    seen = _joins_seen(ctx, "h2a")
    if not ctx.captures():
        return Verdict.pending("capture r2-h2a while h2a joins 239.1.1.1 first (step 3)")
    if not seen:
        return Verdict.failed(
            "none of your captures holds h2a's report joining 239.1.1.1: "
            "start 'mcclab capture r2-h2a --filter igmp' first, then make "
            "h2a join while it runs"
        )
    answer = RECORD_NAMES.get(norm(ctx.answer("q3")).replace(" ", "_").replace("-", "_"))
    if answer is None:
        return Verdict.pending("write the record type you saw as q3 (e.g. TO_IN, ALLOW)")
    # The join itself is a state change (TO_EX); answers to later queries are IS_EX.
    if answer == "TO_EX":
        return Verdict.passed(
            "a join is a state change to EXCLUDE mode with no source excluded: TO_EX {}"
        )
    return Verdict.failed(
        f"{answer} is not the record of the join: look at h2a's first "
        "report after it joined (later reports answer queries)"
    )


@check("q4")
def shared_tree(ctx: LabContext) -> Verdict:
    answer = ctx.answer("q4")
    if answer is None:
        return Verdict.pending("write the neighbour as q4 (step 4: show ip mroute on r2)")
    topo, plan = topology(ctx)
    named = neighbour(plan, "r2", answer)
    upstream = plan.next_hop("r2", plan.address_of(topo.rp))[1]
    towards_rp = next(i.peer for i in plan.interfaces["r2"] if i.name == upstream)
    if named == towards_rp:
        return Verdict.passed(
            f"(*,G) follows the shared tree: its RPF neighbour is the next "
            f"hop towards the RP, {towards_rp}"
        )
    if named is None:
        return Verdict.failed(f"{answer!r} is not a neighbour of r2: give a router name (r1 or r3)")
    return Verdict.failed(
        f"{named} is towards the source: a (*,G) entry is on the shared "
        "tree, so it points towards the RP"
    )


@check("q5")
def register(ctx: LabContext) -> Verdict:
    if not ctx.captures():
        return Verdict.pending("capture r2-r3 with --filter pim while the source starts (step 5)")
    if not any(m.kind == "register" for _, ms in captured(ctx) for m in ms):
        return Verdict.failed(
            "your captures hold no PIM Register: with h2a joined, start the capture of r2-r3 "
            "(--filter pim) first, then the source, and keep it running 10 s (step 5)"
        )
    answer = norm(ctx.answer("q5"))
    if not answer:
        return Verdict.pending("write the message's name as q5")
    if "register" in answer and "stop" not in answer:
        return Verdict.passed(
            "r1, the source's DR, encapsulates the first packets in unicast Registers to the RP"
        )
    return Verdict.failed(
        f"{answer!r}: look for the unicast PIM message from r1 to the RP that carries a "
        "multicast packet inside"
    )


@check("q6")
def spt_prune(ctx: LabContext) -> Verdict:
    _, plan = topology(ctx)
    r2_to_r3 = str(plan.iface_towards("r2", "r3").address.ip)
    prunes = [
        e
        for _, ms in captured(ctx)
        for m in ms
        if m.kind == "join/prune" and m.src == r2_to_r3
        for e in m.prunes
        if e.group == GROUP and e.rpt
    ]
    if not ctx.captures():
        return Verdict.pending("capture r2-r3 with --filter pim while the source starts (step 5)")
    if not prunes:
        return Verdict.failed(
            "no (S,G,rpt) prune from r2 to r3 in your captures: with h2a joined, start the "
            "capture of r2-r3 (--filter pim, 10 s) first, then the source (step 5)"
        )
    answer = norm(ctx.answer("q6")).replace(" ", "")
    if not answer:
        return Verdict.pending("write the message as q6, e.g. '(*,G) join'")
    if "prune" in answer and "rpt" in answer:
        return Verdict.passed(f"r2 prunes {prunes[0]} off the shared tree")
    if "prune" in answer:
        return Verdict.failed(
            "a prune, yes, but of which entry? r2 still wants the group from the RP for "
            "other sources: read the entry in the capture"
        )
    return Verdict.failed(
        f"{ctx.answer('q6')!r}: r2 asks the RP to stop sending this source down the shared "
        "tree; find r2's Join/Prune in the r2-r3 capture"
    )


def _leave_to_last_query(ctx: LabContext) -> float | None:
    """Seconds from h2a's first leave of GROUP to r2's last query for it, in the first
    capture holding a leave (None: no capture holds one)."""
    _, plan = topology(ctx)
    h2a, r2 = str(plan.address_of("h2a")), str(plan.iface_towards("r2", "h2a").address.ip)
    for _, ms in captured(ctx):
        leaves = [m.time for m in ms if m.src == h2a and any(e.group == GROUP for e in m.prunes)]
        if not leaves:
            continue
        queries = [
            m.time
            for m in ms
            if m.kind == "query"
            and m.src == r2
            and m.time >= leaves[0]
            and any(e.group == GROUP for e in m.joins)
        ]
        if queries:
            return max(queries) - leaves[0]
    return None


@check("q7")
def last_member(ctx: LabContext) -> Verdict:
    if not ctx.captures():
        return Verdict.pending("capture r2-h2a while h2a leaves first (step 6)")
    measured = _leave_to_last_query(ctx)
    if measured is None:
        return Verdict.failed(
            "no capture holds h2a's leave and r2's queries after it: capture r2-h2a with "
            "--filter igmp (10 s) and stop h2a's receiver while it runs (step 6)"
        )
    answer = as_number(ctx.answer("q7"))
    if answer is None:
        return Verdict.pending("write the number of seconds as q7")
    topo, _ = topology(ctx)
    igmp = topo.routing.igmp
    lmqt = igmp.last_member_query_interval * igmp.last_member_query_count
    if abs(answer - measured) <= 0.3:
        return Verdict.passed(
            f"{measured:.1f} s in your capture: last_member_query_count "
            f"({igmp.last_member_query_count}) x last_member_query_interval "
            f"({igmp.last_member_query_interval:g} s) = {lmqt:g} s"
        )
    return Verdict.failed(
        f"{answer:g} s is not what your capture shows: take the time of h2a's first TO_IN "
        "report and of r2's last query for 239.1.1.1 (the first column of the summary)"
    )
