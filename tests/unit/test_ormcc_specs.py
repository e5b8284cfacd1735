"""The ORMCC experiment specs validate in both profiles and match their generator."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from mcclab.experiment.loader import resolve

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted(p.stem for p in (REPO / "experiments").glob("ormcc-*.yaml"))


def load_generator():
    """experiments/gen/ormcc.py as a module (a script, not a package), for its constants."""
    spec = importlib.util.spec_from_file_location("ormcc_gen", REPO / "experiments/gen/ormcc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = load_generator()


def scheme_of(name: str) -> str | None:
    """The baseline a comparison spec runs (``ormcc-fig6-pgmcc``: pgmcc), None for ORMCC's."""
    tail = name.rsplit("-", 1)[-1]
    return tail if tail in GEN.SCHEMES else None


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_spec_validates(name, profile):
    """ORMCC's specs run ORMCC; each comparison runs its scheme and no ORMCC at all."""
    spec = resolve(name, profile)
    spec = getattr(spec, "experiment", spec)
    protocols = {f.protocol for f in spec.flows if f.type == "multicast"}
    if scheme_of(name):
        assert protocols == {scheme_of(name)}
    else:
        assert "ormcc" in protocols


def test_generated_specs_are_up_to_date(tmp_path):
    subprocess.run([sys.executable, str(REPO / "experiments" / "gen" / "ormcc.py"),
                    str(tmp_path)], check=True)
    generated = sorted(tmp_path.rglob("*.yaml"))
    assert len(generated) >= 12
    for path in generated:
        committed = REPO / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), (
            f"{committed} is stale: run experiments/gen/ormcc.py and commit its output")
    # Every committed file that says it is generated is one the generator still writes.
    marked = {p.relative_to(REPO) for folder in ("experiments", "topologies")
              for p in (REPO / folder).glob("*.yaml") if p.read_text().startswith(GEN.HEADER)}
    assert marked == {p.relative_to(tmp_path) for p in generated}


FIG4_TRIALS = 10  # sec. V-D: "In totally ten simulations" of Fig. 4's configuration


def fig4_name(n: int) -> str:
    """The Fig. 4 spec at n leaves (n = 8 has no suffix)."""
    return "ormcc-fig4" if n == 8 else f"ormcc-fig4-n{n}"


@pytest.mark.parametrize("n", GEN.FIG4_SIZES)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_fig4_has_one_tcp_and_one_single_receiver_ormcc_per_leaf(n, profile):
    """Fig. 4 at n leaves: the multi-receiver flow reaches h1..hn, and leaf i has uni<i>
    and tcp<i> from its own source s<i>; the trials sweep has the paper's ten seeds."""
    res = resolve(fig4_name(n), profile)
    exp, topo = res.experiment, res.topology
    leaves = [f"h{i}" for i in range(1, n + 1)]
    assert sorted(h for h in topo.nodes if h.startswith("h")) == sorted(leaves)
    by_name = {f.name: f for f in exp.flows}
    assert len(by_name) == len(exp.flows) == 2 * n + 1
    assert (by_name["multi"].sender, by_name["multi"].receivers) == ("src", leaves)
    for i in range(1, n + 1):
        uni, tcp = by_name[f"uni{i}"], by_name[f"tcp{i}"]
        assert (uni.type, uni.protocol, uni.sender, uni.receivers) == (
            "multicast", "ormcc", f"s{i}", [f"h{i}"])
        assert (tcp.type, tcp.sender, tcp.receiver) == ("tcp", f"s{i}", f"h{i}")
    leaf_ratios = [r for r in exp.references if getattr(r, "measure", "") == "ormcc.leaf_ratio"]
    assert len(leaf_ratios) == 7
    over = {tuple(r.args["flows"]) for r in leaf_ratios}
    assert over == {tuple(f"{f}{i}" for i in range(1, n + 1)) for f in ("tcp", "uni")}
    assert all(f"over the {n} receivers" in r.label for r in leaf_ratios)
    ratios = {(r.numerator, r.denominator, r.node) for r in exp.references if r.kind == "ratio"}
    assert ratios == {(num, f"tcp{i}", f"h{i}") for i in (1, n) for num in ("multi", f"uni{i}")}
    assert exp.sweeps["trials"].over == {"seed": list(range(1, FIG4_TRIALS + 1))}


@pytest.mark.parametrize(("profile", "size"), [("quick", 4), ("paper", 16)])
def test_fig6_groups_have_their_profiles_receivers(profile, size):
    """Fig. 6: 16 receivers per group, 4 in the quick profile's cut (ormcc-fig5-n4)."""
    exp = resolve("ormcc-fig6", profile).experiment
    groups = {f.name: f.receivers for f in exp.flows}
    assert groups == {name: [f"g{g}h{i}" for i in range(1, size + 1)]
                      for g, name in ((1, "long"), (2, "short2"), (3, "short3"))}


def test_table1_quick_profile_scales_every_period_by_one_fifth():
    quick = getattr(resolve("ormcc-table1", "quick"), "experiment", None) or resolve(
        "ormcc-table1", "quick")
    paper = getattr(resolve("ormcc-table1", "paper"), "experiment", None) or resolve(
        "ormcc-table1", "paper")
    assert quick.duration == pytest.approx(0.2 * paper.duration)
    for q, p in zip(quick.flows[1:], paper.flows[1:], strict=True):
        assert q.start == pytest.approx(0.2 * p.start)
        assert (q.stop or quick.duration) == pytest.approx(0.2 * (p.stop or paper.duration))


@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_every_profile_fits_the_kernels_multicast_vifs(name, profile):
    """A router beyond 31 interfaces gets no vif for the rest: their receivers see nothing."""
    from mcclab.lab import router_interfaces
    from mcclab.routing.limits import vif_problems

    topo = resolve(name, profile).topology
    assert vif_problems(topo.routing.backend, router_interfaces(topo)) == []


def test_fig4_sources_behind_a_second_router_keep_the_100_ms_base_rtt():
    topo = resolve("ormcc-fig4-n24", "quick").topology
    assert topo.nodes["r1"].kind == "router"
    by_pair = {frozenset(link.endpoints): link for link in topo.links}
    up = by_pair[frozenset(("r0", "r1"))]
    down = by_pair[frozenset(("r0", "h24"))]
    assert 2 * (up.delay + down.delay) == pytest.approx(0.100)
    assert by_pair[frozenset(("r1", "s24"))].rate is None
    assert up.queue.limit >= 1000  # shared by 24 sources: never the bottleneck


NS2_TCP = [n for n in SPECS if n.startswith(("ormcc-fig4", "ormcc-table1", "ormcc-table2"))]
EMULAB = [n for n in SPECS if n.startswith("ormcc-fig11")]


def tcp_windows(name: str) -> set:
    """The window ceilings of a spec's TCP flows."""
    from mcclab.experiment.spec import carries_tcp, tcp_model

    exp = resolve(name, "paper").experiment
    return {tcp_model(exp, f).max_window for f in exp.flows if carries_tcp(f)}


@pytest.mark.parametrize("name", NS2_TCP)
def test_ns2_simulations_cap_tcp_at_ns2s_default_window(name):
    """The paper's ns-2 runs get ns-2's default window_, 20 packets."""
    assert tcp_windows(name) == {20}


@pytest.mark.parametrize("name", EMULAB)
def test_the_emulab_run_keeps_the_kernels_window(name):
    """Fig. 11 ran on Emulab with kernel TCP: no ceiling."""
    assert tcp_windows(name) == {None}


def test_every_spec_with_tcp_is_an_ns2_or_an_emulab_run():
    """A new ORMCC spec with TCP flows must say which kind of run it reproduces."""
    with_tcp = {n for n in SPECS if tcp_windows(n)} - {"ormcc-smoke"}
    assert with_tcp == set(NS2_TCP) | set(EMULAB)
    assert len(NS2_TCP) >= 5 and len(EMULAB) == 3


@pytest.mark.parametrize(("name", "receivers"), [("ormcc-table2", 64), ("ormcc-table2-n6", 6)])
def test_table2_paths_and_cross_traffic_on_every_link(name, receivers):
    """A 200 ms link at level 1, 2 or 3, or none, on some receiver's path (the n6 cut keeps
    one branch of each kind); two on/off TCP and UDP flows on every tree link."""
    res = resolve(name, "quick")
    topo, exp = res.topology, res.experiment
    links = {frozenset(link.endpoints): link for link in topo.links}
    parent = {}
    for link in topo.links:
        a, b = link.endpoints
        if a.startswith("r") and b[0] in "rh":
            parent[b] = a
    kinds = set()
    assert len(exp.flows[0].receivers) == receivers
    for host in exp.flows[0].receivers:
        hops, node = [], host
        while node in parent:
            hops.append(links[frozenset((parent[node], node))].delay)
            node = parent[node]
        assert node == "r0" and len(hops) == 3, (host, hops)
        slow = [3 - i for i, d in enumerate(hops) if d == pytest.approx(0.2)]  # level of it
        assert len(slow) <= 1, host  # at most one 200 ms link per path, as in Fig. 9
        kinds.add(slow[0] if slow else None)
    assert kinds == {1, 2, 3, None}
    # Two TCP and two UDP on/off flows on every tree link, from the parent's x host.
    onoff = [f for f in exp.flows if f.type == "onoff"]
    assert len(onoff) == 4 * len(parent)
    for child, up in parent.items():
        dst = child if child.startswith("h") else "x" + child[1:]
        mine = [f for f in onoff if (f.sender, f.receiver) == ("x" + up[1:], dst)]
        assert sorted(f.carrier for f in mine) == ["tcp", "tcp", "udp", "udp"], child


COMPARISONS = [n for n in SPECS if scheme_of(n)]


def test_every_comparison_the_issue_names_exists():
    """Fig. 4(b)(c) at every size, Fig. 6, Fig. 8 / Table I (drop-tail and RED) and Table II
    (both cuts), for both baselines."""
    bases = [f"ormcc-fig4{'' if n == 8 else f'-n{n}'}" for n in GEN.FIG4_SIZES]
    bases += ["ormcc-fig6", "ormcc-table1", "ormcc-table1-red", "ormcc-table2",
              "ormcc-table2-n6"]
    assert sorted(COMPARISONS) == sorted(f"{b}-{s}" for b in bases for s in GEN.SCHEMES)


# What a comparison may change in its ORMCC base: identity, the paper's values, figures
# and sweeps, and the multicast flows' protocol and params (Table II's also its name).
OWN = ("name", "description", "reference", "references", "figures", "sweeps")


def _configuration(exp, renames: dict[str, str]) -> dict:
    """The experiment without what a comparison may change; multicast flows by role."""
    data = exp.model_dump(mode="json", exclude=set(OWN))
    for flow in data["flows"]:
        if flow["type"] == "multicast":
            flow["name"] = renames.get(flow["name"], flow["name"])
            flow.pop("protocol")
            flow.pop("params")
    return data


@pytest.mark.parametrize("name", COMPARISONS)
@pytest.mark.parametrize("profile", ["quick", "paper"])
def test_a_comparison_runs_its_bases_configuration(name, profile):
    """Same topology, flows, times, TCP model and profile scaling as the ORMCC spec: only the
    multicast scheme changes, with the paper's 1000-byte packets and the scheme's defaults."""
    scheme = scheme_of(name)
    base = name.removesuffix(f"-{scheme}")
    mine, theirs = resolve(name, profile), resolve(base, profile)
    assert mine.topology == theirs.topology
    renames = {"ormcc": scheme} if base.startswith("ormcc-table2") else {}
    assert _configuration(mine.experiment, {}) == _configuration(theirs.experiment, renames)
    multicast = [f for f in mine.experiment.flows if f.type == "multicast"]
    assert multicast and all(f.params == {"packet_size": "1000B"} for f in multicast)
    assert mine.experiment.name == name


def _counter_names(scheme: str) -> tuple[dict[str, str], dict[str, str]]:
    """The scheme's receiver and sender gauges with their meanings (its contract.py)."""
    contract = importlib.import_module(f"agents.{scheme}.contract")
    return contract.RECEIVER_GAUGES, contract.SENDER_GAUGES


@pytest.mark.parametrize("name", [*(n for n in COMPARISONS
                                    if "fig6" not in n and "table1" not in n),
                                  "ormcc-fig4", "ormcc-table2"])
def test_feedback_counts_name_cumulative_counters_the_scheme_exports(name):
    """Each feedback reference counts gauges the flow's protocol declares as cumulative."""
    exp = resolve(name, "quick").experiment
    protocol = {f.name: f.protocol for f in exp.flows if f.type == "multicast"}
    counts = [r for r in exp.references if getattr(r, "measure", "") in
              ("feedback.count", "ormcc.ci_sent")]
    assert counts
    for ref in counts:
        if ref.measure == "ormcc.ci_sent":
            continue
        receiver, sender = _counter_names(protocol[ref.args["flow"]])
        gauges = sender if ref.args.get("role") == "sender" else receiver
        for counter in ref.args["counters"]:
            assert "cumulative" in gauges[counter], (ref.label, counter)


@pytest.mark.parametrize("n", GEN.FIG4_SIZES)
@pytest.mark.parametrize("scheme", sorted(GEN.SCHEMES))
def test_fig4_comparison_reports_without_bands_and_counts_by_kind(n, scheme):
    """The text gives no value for the baselines' ratios: no band. Sec. V-D's counts are the
    paper values (PGMCC by kind, NAK + ACK = total), with no band either."""
    stem = "ormcc-fig4" if n == 8 else f"ormcc-fig4-n{n}"
    exp = resolve(f"{stem}-{scheme}", "paper").experiment
    assert all(r.tolerance is None and r.within is None for r in exp.references)
    ratios = [r for r in exp.references if getattr(r, "measure", "") == "ormcc.leaf_ratio"]
    assert len(ratios) == 5 and all(f"over the {n} receivers" in r.label for r in ratios)
    # The paper gives the baselines' ratios no number: 1.0 is an ideal, not a paper value.
    assert all(r.paper is None for r in ratios)
    counts = {r.label: (r.args["counters"], r.paper) for r in exp.references
              if getattr(r, "measure", "") == "feedback.count"}
    sent = counts["feedback packets sent by the multicast flow's receivers (whole run)"]
    got = counts["feedback packets received by the multicast flow's source (whole run)"]
    if scheme == "pgmcc":
        assert sent == (["naks_sent", "acks_sent"], 74830)
        assert got == (["acks_rx", "naks_rx"], 74830)
        assert counts["NAKs sent by the multicast flow's receivers (whole run)"] == (
            ["naks_sent"], 55222)
        assert counts["ACKs sent by the multicast flow's receivers (whole run)"] == (
            ["acks_sent"], 19608)
    else:
        assert sent == (["fb_sent"], 5344) and got == (["fb_rx"], 5344)
    assert "trials" not in exp.sweeps  # the paper's one "typical" simulation


@pytest.mark.parametrize("n", GEN.FIG4_SIZES)
def test_ormcc_fig4_judges_drop_to_zero_with_the_comparisons_measure(n):
    """Table III's drop-to-zero: ORMCC's spec measures multicast over single-receiver with
    the arguments of the baselines' row, judged by Fig. 4(a)'s band of its other ratios."""
    stem = fig4_name(n)
    refs = resolve(stem, "quick").experiment.references
    mine = [r for r in refs if getattr(r, "measure", "") == "ormcc.leaf_ratio"
            and r.args["numerator"] == "multi" and r.args["flows"][0] == "uni1"]
    assert len(mine) == 1
    tcp_band = {r.within for r in refs if r.kind == "ratio"}
    assert (mine[0].paper, {mine[0].within}) == (1.0, tcp_band)
    for scheme in GEN.SCHEMES:
        theirs = next(r for r in resolve(f"{stem}-{scheme}", "quick").experiment.references
                      if "multicast / single-receiver" in r.label)
        assert (theirs.measure, theirs.args) == (mine[0].measure, mine[0].args)


def test_ormcc_fig4_reports_its_feedback_under_the_comparisons_labels():
    """`mcclab compare` lines quantities up by label: ORMCC's 816 CIs sit in the same rows."""
    labels = {r.label: r for r in resolve("ormcc-fig4", "quick").experiment.references}
    for scheme in GEN.SCHEMES:
        theirs = {r.label for r in resolve(f"ormcc-fig4-{scheme}", "quick").experiment.references
                  if getattr(r, "measure", "") == "feedback.count"}
        assert {label for label in theirs if "packets" in label} <= set(labels)
    sent = labels["feedback packets sent by the multicast flow's receivers (whole run)"]
    assert (sent.args["counters"], sent.paper) == (["ci_sent"], 816)


@pytest.mark.parametrize("scheme", sorted(GEN.SCHEMES))
def test_fig6_and_table2_comparisons_carry_the_papers_values(scheme):
    """Fig. 6: proportional fairness for all three schemes (the caption), ORMCC's band.
    Table II: the scheme's column, throughput with ORMCC's 30 % and its feedback count."""
    def long_share(name):
        return next(r for r in resolve(name, "quick").experiment.references
                    if r.kind == "share" and r.flow == "long")
    mine, ormccs = long_share(f"ormcc-fig6-{scheme}"), long_share("ormcc-fig6")
    assert (mine.paper, mine.within) == (0.33, ormccs.within) and mine.within is not None
    table = {"pgmcc": (126.6e3, 5009.6, ["naks_sent"]), "tfmcc": (226.7e3, 3312.9, ["fb_sent"])}
    for name in (f"ormcc-table2-{scheme}", f"ormcc-table2-n6-{scheme}"):
        refs = resolve(name, "quick").experiment.references
        tput = next(r for r in refs if r.kind == "throughput")
        count = next(r for r in refs if getattr(r, "measure", "") == "feedback.count")
        assert (tput.flow, tput.paper, tput.tolerance) == (scheme, table[scheme][0], 0.3)
        assert (count.paper, count.args["counters"]) == table[scheme][1:]
        assert count.tolerance is None and count.within is None


@pytest.mark.parametrize("scheme", sorted(GEN.SCHEMES))
@pytest.mark.parametrize("base", ["ormcc-table1", "ormcc-table1-red"])
def test_fig8_comparison_reads_the_tracked_receiver_per_table1_period(scheme, base):
    """Fig. 8(b)(c)(e)(f): per Table I period, the share and the lead of the supposed CR over
    the same seconds as ORMCC's CR shares, and the switches; the paper gives no number for
    the baselines, so no band. The tracked id is a sender gauge the scheme exports, matched
    against a receiver gauge (rid)."""
    refs = resolve(f"{base}-{scheme}", "quick").experiment.references
    ormccs = [r for r in resolve(base, "quick").experiment.references
              if getattr(r, "measure", "") == "ormcc.cr_share"]
    assert all(r.tolerance is None and r.within is None for r in refs)
    receiver, sender = _counter_names(scheme)
    for kind in ("tracking.share", "tracking.lead"):
        mine = [r for r in refs if getattr(r, "measure", "") == kind]
        assert [(r.args["node"], r.args["start_frac"], r.args["end_frac"], r.paper)
                for r in mine] == [(r.args["node"], r.args["start_frac"], r.args["end_frac"],
                                    r.paper) for r in ormccs]
        assert [r.args["node"] for r in mine] == ["h1", "h2", "h3", "h2", "h1"]
    switches = [r for r in refs if getattr(r, "measure", "") == "tracking.switches"]
    assert [r.paper for r in switches] == [4]  # Table I: h1, h2, h3, h2, h1
    # ORMCC's spec counts its CR switches under the same label, so `mcclab compare` lines
    # the three schemes up in one row; its CR is valid only while cr_valid is set.
    ormcc = [r for r in resolve(base, "quick").experiment.references
             if getattr(r, "measure", "") == "tracking.switches"]
    assert [(r.label, r.paper) for r in ormcc] == [(r.label, r.paper) for r in switches]
    assert ormcc[0].args == {"flow": "multi", "tracked": "cr_id", "valid": "cr_valid"}
    assert ormcc[0].tolerance is None and ormcc[0].within is None
    # "In time": the mean and max settle delay after Table I's four changes, from each
    # sender's event log, under ORMCC's labels; no paper number, so no paper value.
    settles = [r for r in refs if getattr(r, "measure", "") == "tracking.settle_stat"]
    ormcc_settles = [r for r in resolve(base, "quick").experiment.references
                     if getattr(r, "measure", "") == "tracking.settle_stat"]
    assert [r.label for r in settles] == [r.label for r in ormcc_settles]
    assert [r.args["stat"] for r in settles] == ["mean", "max"]
    for ref in [*settles, *ormcc_settles]:
        assert ref.paper is None and ref.tolerance is None and ref.within is None
        assert ref.source.startswith("lab check")
        assert [list(c) for c in ref.args["changes"]] == [[0.2, "h2"], [0.4, "h3"],
                                                          [0.6, "h2"], [0.8, "h1"]]
    core = (REPO / "agents" / scheme / "sender.py").read_text()
    for ref in settles:  # the records the measure reads are ones the sender writes
        for name in [ref.args["event"], *ref.args["drops"]]:
            assert f'"{name}"' in core, f"agents/{scheme}/sender.py never logs {name!r}"
    for ref in (r for r in refs if r not in settles):
        assert ref.args["flow"] == "multi" and ref.args["tracked"] in sender
        assert sender[ref.args["tracked"]].startswith("id of the current")
        assert ref.args.get("rid", "rid") in receiver
        assert "valid" not in ref.args  # -1 means none for both baselines


@pytest.mark.parametrize("n", [8, 29, 30, 64, 96, 128, 160])
def test_the_star_generator_keeps_every_router_within_the_multicast_vifs(n):
    """r0 holds its own leaves, src, r1 and a link to each other leaf router; at 128
    leaves n / 29 groups of 26 would give it 32 interfaces, one beyond the 31 usable."""
    groups, size = GEN.star_groups(n)
    assert groups * size >= n  # every leaf has a router
    assert size + groups + 1 <= GEN.ONE_HUB_MAX + 2  # r0: group 0, src, r1, other routers
    assert size + groups <= GEN.ONE_HUB_MAX + 2  # r1: group 0's sources, r0, other routers
    assert size <= GEN.ONE_HUB_MAX
