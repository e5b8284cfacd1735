"""`mcclab export emulab`: each link and queue parameter's NS translation, and each refusal."""

from __future__ import annotations

from typing import Any

import pytest

from mcclab.export.common import ExportRefused, build_plan
from mcclab.export.ns import emulab_problems, render_ns
from mcclab.model.loader import resolve_topology

DROPTAIL = {"limit": "50pkt", "discipline": "droptail"}


def topo(*links: dict[str, Any], lan: bool = False, **extra: Any) -> Any:
    """src - r1 - h1 with the given parameters on src-r1 (and r1-h1 plain, 10Mbit)."""
    first = {"endpoints": ["src", "r1"], **(links[0] if links else {})}
    nodes = {"src": {"kind": "host"}, "r1": {"kind": "router"}, "h1": {"kind": "host"}}
    rest = [{"endpoints": ["r1", "h1"], "rate": "10Mbit", "delay": "5ms", "queue": DROPTAIL}]
    if lan:
        nodes.update({"lan1": {"kind": "lan"}, "h2": {"kind": "host"}})
        rest += [{"endpoints": ["h1", "lan1"]}, {"endpoints": ["h2", "lan1"]}]
    return resolve_topology({"name": "t", "nodes": nodes, "links": [first, *rest], **extra},
                            "t.yaml")


def ns(t: Any, **kw: Any) -> str:
    """The NS file of a topology."""
    return render_ns(build_plan(t, "t.yaml", "exp", "paper"), **kw)


def refused(t: Any) -> list[tuple[str, str]]:
    """Emulab's refusals of a topology; render_ns must raise with the same ones."""
    plan = build_plan(t, "t.yaml", "exp", "paper")
    problems = emulab_problems(plan)
    with pytest.raises(ExportRefused) as info:
        render_ns(plan)
    assert info.value.problems == problems
    assert info.value.path == "t.yaml"
    return problems


def test_symmetric_link_rate_delay_and_droptail_limit():
    text = ns(topo({"rate": "3.2Mbit", "delay": "20ms",
                    "queue": {"limit": "40pkt", "discipline": "droptail"}}))
    assert "set link0 [$ns duplex-link $src $r1 3200kb 20ms DropTail]" in text
    assert "[[$ns link $src $r1] queue] set limit_ 40" in text
    assert "[[$ns link $r1 $src] queue] set limit_ 40" in text
    assert "tb-set-link-simplex-params $link0" not in text
    assert "tb-set-link-loss $link0" not in text


def test_whole_megabits_are_written_in_mb_and_the_default_queue_explicitly():
    text = ns(topo({"rate": "100Mbit", "delay": "0ms"}))
    assert "set link0 [$ns duplex-link $src $r1 100Mb 0ms DropTail]" in text
    # No queue block: mcclab's default, ns-2's 50 packets drop-tail, written out.
    assert "[[$ns link $src $r1] queue] set limit_ 50" in text


def test_symmetric_loss_is_the_per_direction_rate():
    # tb-set-link-loss gives each direction the rate it is given.
    text = ns(topo({"rate": "10Mbit", "delay": "10ms", "loss": "1.5%", "queue": DROPTAIL}))
    assert "tb-set-link-loss $link0 0.015" in text


def test_small_loss_is_written_without_an_exponent():
    text = ns(topo({"rate": "10Mbit", "loss": "0.0005%", "queue": DROPTAIL}))
    assert "tb-set-link-loss $link0 0.000005" in text


def test_per_direction_asymmetry_uses_simplex_params_for_each_direction():
    text = ns(topo({"rate": "10Mbit", "delay": "100ms", "queue": DROPTAIL,
                    "forward": {"loss": "1%"},
                    "reverse": {"rate": "2Mbit", "delay": "30ms",
                                "queue": {"limit": "20pkt", "discipline": "droptail"}}}))
    assert "tb-set-link-simplex-params $link0 $src 100ms 10Mb 0.01" in text
    assert "tb-set-link-simplex-params $link0 $r1 30ms 2Mb 0" in text
    assert "[[$ns link $src $r1] queue] set limit_ 50" in text
    assert "[[$ns link $r1 $src] queue] set limit_ 20" in text
    assert "tb-set-link-loss $link0" not in text


def test_red_queue_parameters_per_direction():
    red = {"limit": "60pkt", "discipline": "red",
           "red": {"min_th": "5pkt", "max_th": "15pkt", "max_p": "2%", "weight": 0.004,
                   "gentle": False}}
    gred = {**red, "red": {**red["red"], "gentle": True, "min_th": "7pkt"}}
    text = ns(topo({"rate": "1.5Mbit", "delay": "100ms", "queue": red,
                    "reverse": {"queue": gred}}))
    assert "set link0 [$ns duplex-link $src $r1 1500kb 100ms RED]" in text
    fwd = "[[$ns link $src $r1] queue] set"
    rev = "[[$ns link $r1 $src] queue] set"
    for line in ("limit_ 60", "queue-in-bytes_ 0", "thresh_ 5", "maxthresh_ 15",
                 "q_weight_ 0.004", "linterm_ 50", "gentle_ 0"):
        assert f"{fwd} {line}" in text
    for line in ("thresh_ 7", "gentle_ 1", "linterm_ 50"):
        assert f"{rev} {line}" in text


def test_unshaped_link_gets_the_top_rate_with_shaping_off():
    text = ns(topo({}))
    assert "set link0 [$ns duplex-link $src $r1 1000Mb 0ms DropTail]" in text
    assert "tb-set-noshaping $link0 1" in text
    assert "[[$ns link $src $r1] queue]" not in text


def test_addresses_come_from_the_address_plan():
    text = ns(topo({"rate": "10Mbit"}))
    assert "tb-set-ip-link $src $link0 10.0.0.1" in text
    assert "tb-set-ip-link $r1 $link0 10.0.0.2" in text
    assert "tb-set-ip-link $h1 $link1 10.0.1.2" in text
    assert "tb-set-netmask" not in text


def test_a_narrower_link_prefix_sets_the_netmask():
    text = ns(topo({"rate": "10Mbit"}, addressing={"link_prefix": 30}))
    assert "tb-set-netmask $link0 255.255.255.252" in text


def test_unshaped_lan_with_addresses():
    text = ns(topo({"rate": "10Mbit"}, lan=True))
    assert 'set lan1 [$ns make-lan "$h1 $h2" 1000Mb 0ms]' in text
    assert "tb-set-ip-lan $h1 $lan1 10.0.2.1" in text
    assert "tb-set-ip-lan $h2 $lan1 10.0.2.2" in text
    assert "tb-set-noshaping $lan1 1" in text


def test_shaped_lan_port_per_direction():
    t = topo({"rate": "10Mbit"}, lan=True)
    data = t.model_dump(mode="json")
    data["links"][2].update({"rate": "5Mbit", "delay": "10ms", "reverse": {"delay": "20ms",
                                                                              "loss": "2%"}})
    text = ns(resolve_topology(data, "t.yaml"))
    # to the LAN (h1 -> lan1): 10ms 5Mb 0; from it (lan1 -> h1): 20ms 5Mb 0.02
    assert "tb-set-lan-simplex-params $lan1 $h1 10ms 5Mb 0 20ms 5Mb 0.02" in text
    assert "tb-set-lan-simplex-params $lan1 $h2 0ms 1000Mb 0 0ms 1000Mb 0" in text
    assert "tb-set-noshaping $lan1" not in text


def test_nodes_os_start_commands_and_routing():
    text = ns(topo({"rate": "10Mbit"}), os_image="MY-IMAGE", start_script="/proj/p/start")
    assert text.startswith("# Emulab NS file for the mcclab experiment exp (profile paper)")
    assert "set ns [new Simulator]\nsource tb_compat.tcl\n" in text
    assert "set r1 [$ns node]\ntb-set-node-os $r1 MY-IMAGE" in text
    assert 'tb-set-node-startcmd $r1 "/proj/p/start router r1 exp paper"' in text
    assert 'tb-set-node-startcmd $h1 "/proj/p/start host h1 exp paper"' in text
    assert text.endswith("$ns rtproto Static\n$ns run\n")
    assert "tb-set-node-startcmd" not in ns(topo({"rate": "10Mbit"}))


@pytest.mark.parametrize("params, field, words", [
    ({"rate": "10Mbit", "delay": "10ms", "jitter": "2ms"}, "links[0].jitter", "jitter"),
    ({"rate": "10Mbit", "gilbert_elliott": {"p": "1%", "r": "50%"}},
     "links[0].gilbert_elliott", "Gilbert-Elliott"),
    ({"rate": "10.5kbit"}, "links[0].rate", "whole number of kbit/s"),
    ({"rate": "10Mbit", "delay": "2.5ms"}, "links[0].delay", "whole number of ms"),
    ({"rate": "5kbit"}, "links[0].rate", "[10kbit, 1Gbit]"),
    ({"rate": "2Gbit"}, "links[0].rate", "[10kbit, 1Gbit]"),
    ({"rate": "10Mbit", "delay": "1ms"}, "links[0].delay", "at least 2ms"),
    ({"rate": "10Mbit", "loss": "0.0001%"}, "links[0].loss", "smallest loss"),
    ({"rate": "10Mbit", "queue": {"limit": "101pkt"}}, "links[0].queue.limit", "at most 100"),
    ({"rate": "10Mbit", "queue": {"limit": "50pkt", "discipline": "red", "red": {
        "min_th": "5pkt", "max_th": "15pkt", "max_p": "15%"}}},
     "links[0].queue.red.max_p", "linterm_"),
])
def test_refusals_name_the_field_in_both_directions(params, field, words):
    problems = refused(topo(params))
    assert [f for f, _ in problems] == [field, field]
    assert all(words in reason for _, reason in problems)
    assert "src -> r1" in problems[0][1] and "r1 -> src" in problems[1][1]


def test_refusal_names_the_per_direction_override():
    problems = refused(topo({"rate": "10Mbit", "forward": {"jitter": "1ms", "delay": "5ms"}}))
    assert problems == [("links[0].forward.jitter",
                         "src -> r1: 1ms of jitter; Emulab links have a fixed delay, no jitter")]


def test_red_in_one_direction_only_is_refused():
    red = {"limit": "50pkt", "discipline": "red",
           "red": {"min_th": "5pkt", "max_th": "15pkt", "max_p": "10%"}}
    problems = refused(topo({"rate": "10Mbit", "queue": DROPTAIL, "forward": {"queue": red}}))
    assert problems[0][0] == "links[0].forward.queue.discipline"
    assert "one queue type" in problems[0][1]


def test_non_default_queue_on_a_lan_port_is_refused():
    t = topo({"rate": "10Mbit"}, lan=True)
    data = t.model_dump(mode="json")
    data["links"][2].update({"rate": "5Mbit", "queue": {"limit": "20pkt"}})
    problems = refused(resolve_topology(data, "t.yaml"))
    assert [f for f, _ in problems] == ["links[2].queue", "links[2].queue"]
    assert "LAN port" in problems[0][1]


def test_reserved_node_names_and_wide_prefixes_are_refused():
    data = topo({"rate": "10Mbit"}).model_dump(mode="json")
    data["nodes"]["link7"] = {"kind": "host"}
    data["links"].append({"endpoints": ["r1", "link7"]})
    data["addressing"]["link_prefix"] = 12
    problems = refused(resolve_topology(data, "t.yaml"))
    assert [f for f, _ in problems] == ["nodes.link7", "addressing.link_prefix"]


# A stand-in for Emulab's tb_compat.tcl, written from the commands' documented
# arities: it runs an NS file in tclsh, refuses any command or arity it does not
# know, and prints what the file declared, objects named by their variables.
STUB = r"""
namespace eval stub { variable log {}; variable n 0; variable obj; array set obj {} }
proc stub::mk {kind args} {
    set id "obj[incr stub::n]"
    set stub::obj($id) [list $kind {*}$args]
    proc ::$id {method args} "stub::call $id \$method \$args"
    return $id
}
proc stub::is {id kind} {
    if {![info exists stub::obj($id)] || [lindex $stub::obj($id) 0] ne $kind} {
        error "$id is not a $kind"
    }
}
proc stub::log {args} { lappend stub::log $args }
proc stub::call {id method arglist} {
    set kind [lindex $stub::obj($id) 0]
    switch -- $kind/$method/[llength $arglist] {
        sim/node/0 { return [stub::mk node] }
        sim/duplex-link/5 {
            lassign $arglist a b bw d type
            stub::is $a node; stub::is $b node
            if {$type ni {DropTail RED}} { error "queue type $type" }
            set l [stub::mk link $a $b]
            stub::log duplex-link $l $a $b $bw $d $type
            return $l
        }
        sim/make-lan/3 {
            lassign $arglist members bw d
            foreach m $members { stub::is $m node }
            set l [stub::mk lan]
            stub::log make-lan $l $members $bw $d
            return $l
        }
        sim/link/2 {
            lassign $arglist a b
            foreach {o v} [array get stub::obj] {
                if {[lindex $v 0] eq "link" && [lsort [lrange $v 1 2]] eq [lsort [list $a $b]]} {
                    return [stub::mk simplex $o $a $b]
                }
            }
            error "no link between $a and $b"
        }
        sim/rtproto/1 { stub::log rtproto {*}$arglist }
        sim/run/0 { stub::log run }
        simplex/queue/0 { return [stub::mk queue {*}[lrange $stub::obj($id) 1 end]] }
        queue/set/2 { stub::log queue {*}[lrange $stub::obj($id) 1 end] {*}$arglist }
        default { error "unknown: $kind $method with [llength $arglist] arguments" }
    }
}
proc new {cls} { if {$cls ne "Simulator"} { error "new $cls" }; return [stub::mk sim] }
proc tb-set-node-os {node os} { stub::is $node node; stub::log os $node $os }
proc tb-set-ip-link {node link ip} {
    stub::is $node node; stub::is $link link; stub::log ip $node $link $ip
}
proc tb-set-ip-lan {node lan ip} {
    stub::is $node node; stub::is $lan lan; stub::log ip $node $lan $ip
}
proc tb-set-netmask {l mask} { stub::log netmask $l $mask }
proc tb-set-link-loss {link loss} { stub::is $link link; stub::log loss $link $loss }
proc tb-set-link-simplex-params {link src delay bw loss} {
    stub::is $link link; stub::is $src node; stub::log simplex $link $src $delay $bw $loss
}
proc tb-set-lan-simplex-params {lan node td tb tl fd fb fl} {
    stub::is $lan lan; stub::is $node node; stub::log lan-simplex $lan $node $td $tb $tl $fd $fb $fl
}
proc tb-set-noshaping {l onoff} { stub::log noshaping $l $onoff }
proc tb-set-node-startcmd {node cmd} { stub::is $node node; stub::log startcmd $node $cmd }
rename source stub::source
proc source {file} { if {$file ne "tb_compat.tcl"} { error "source $file" } }
stub::source [lindex $argv 0]
array set name {}
foreach var [info globals] {
    if {[info exists ::$var] && ![array exists ::$var] && [info exists stub::obj([set ::$var])]} {
        set name([set ::$var]) $var
    }
}
foreach entry $stub::log {
    set out {}
    foreach word $entry { lappend out [expr {[info exists name($word)] ? $name($word) : $word}] }
    puts [join $out "\t"]
}
"""


def _kbps(bw: str) -> int:
    """Emulab's bandwidth words as kbit/s."""
    return int(bw[:-2]) * 1000 if bw.endswith("Mb") else int(bw.removesuffix("kb"))


def run_stub(text: str, tmp_path: Any) -> list[list[str]]:
    """Run an NS file through the stub in tclsh; its declarations as rows of words."""
    import shutil
    import subprocess

    if shutil.which("tclsh") is None:
        pytest.skip("tclsh is not installed (Debian package tcl)")
    (tmp_path / "stub.tcl").write_text(STUB)
    (tmp_path / "exp.ns").write_text(text)
    done = subprocess.run(["tclsh", str(tmp_path / "stub.tcl"), str(tmp_path / "exp.ns")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [line.split("\t") for line in done.stdout.splitlines()]


def declared(rows: list[list[str]]) -> dict[str, Any]:
    """Per-direction (kbit/s, ms, loss) and queue settings, as Emulab's commands set them."""
    dirs: dict[tuple[str, str], list[Any]] = {}
    queues: dict[tuple[str, str], dict[str, str]] = {}
    out: dict[str, Any] = {"os": {}, "ip": {}, "noshaping": set(), "start": {}, "types": {}}
    ends: dict[str, tuple[str, str]] = {}
    for row in rows:
        kind, args = row[0], row[1:]
        if kind == "duplex-link":
            link, a, b, bw, d, qtype = args
            ends[link] = (a, b)
            out["types"][link] = qtype
            for key in ((a, b), (b, a)):
                dirs[key] = [_kbps(bw), int(d.removesuffix("ms")), 0.0]
        elif kind == "loss":
            a, b = ends[args[0]]
            dirs[(a, b)][2] = dirs[(b, a)][2] = float(args[1])
        elif kind == "simplex":
            link, src, d, bw, loss = args
            a, b = ends[link]
            dirs[(src, b if src == a else a)] = [_kbps(bw), int(d.removesuffix("ms")),
                                                  float(loss)]
        elif kind == "lan-simplex":
            lan, node, td, tb, tl, fd, fb, fl = args
            dirs[(node, lan)] = [_kbps(tb), int(td.removesuffix("ms")), float(tl)]
            dirs[(lan, node)] = [_kbps(fb), int(fd.removesuffix("ms")), float(fl)]
        elif kind == "queue":
            _link, a, b, key, value = args
            queues.setdefault((a, b), {})[key] = value
        elif kind == "os":
            out["os"][args[0]] = args[1]
        elif kind == "ip":
            out["ip"][(args[0], args[1])] = args[2]
        elif kind == "noshaping":
            out["noshaping"].add(args[0])
        elif kind == "startcmd":
            out["start"][args[0]] = args[1]
    out.update(dirs=dirs, queues=queues, tail=rows[-2:])
    return out


def expected_queue(d: Any) -> dict[str, str]:
    """The queue settings a direction must get."""
    q = d.queue
    if q is None:
        return {}
    want = {"limit_": str(q.limit)}
    if q.red is not None:
        want.update({"queue-in-bytes_": "0", "thresh_": str(q.red.min_th),
                     "maxthresh_": str(q.red.max_th), "q_weight_": f"{q.red.weight:g}",
                     "linterm_": str(round(1 / q.red.max_p)),
                     "gentle_": "1" if q.red.gentle else "0"})
    return want


def check_against_plan(plan: Any, got: dict[str, Any]) -> None:
    """Everything the NS file declared is the plan, direction by direction."""
    assert got["os"] == {n: "UBUNTU22-64-STD" for n in plan.nodes}
    assert got["start"] == {n: f"/s {k} {n} exp paper" for n, k in plan.nodes.items()}
    assert got["tail"] == [["rtproto", "Static"], ["run"]]
    for link in plan.links:
        assert got["ip"][(link.a.node, link.name)] == str(link.a.address.ip)
        assert got["ip"][(link.b.node, link.name)] == str(link.b.address.ip)
        for d in (link.forward, link.reverse):
            kbps = d.rate_kbps() or 1_000_000
            assert got["dirs"][(d.src, d.dst)] == [kbps, d.delay_ms(), d.params.loss], d.label
            assert got["queues"].get((d.src, d.dst), {}) == expected_queue(d), d.label
        assert (link.name in got["noshaping"]) == (not (link.forward.shaped
                                                         or link.reverse.shaped))
    for lan in plan.lans:
        shaped = any(d.shaped for p in lan.ports for d in (p.to_lan, p.from_lan))
        assert (lan.name in got["noshaping"]) == (not shaped)
        for port in lan.ports:
            assert got["ip"][(port.member.node, lan.name)] == str(port.member.address.ip)
            for d in (port.to_lan, port.from_lan) if shaped else ():
                kbps = d.rate_kbps() or 1_000_000
                assert got["dirs"][(d.src, d.dst)] == [kbps, d.delay_ms(), d.params.loss]


def _stub_cases() -> list[Any]:
    """Repository topologies Emulab takes, and synthetic ones with every feature."""
    from pathlib import Path

    from mcclab.model.loader import load_topology

    repo = Path(__file__).resolve().parents[2]
    cases = []
    for path in sorted((repo / "topologies").glob("*.yaml")):
        t = load_topology(path)
        if not emulab_problems(build_plan(t, str(path))):
            cases.append(pytest.param(t, id=path.stem))
    red = {"limit": "60pkt", "discipline": "red",
           "red": {"min_th": "5pkt", "max_th": "15pkt", "max_p": "2%", "weight": 0.004}}
    cases.append(pytest.param(topo({"rate": "1.5Mbit", "delay": "100ms", "queue": red,
                                    "forward": {"loss": "1%"}, "reverse": {"rate": "128kbit"}}),
                              id="asymmetric-red"))
    lan = topo({"rate": "10Mbit", "loss": "0.5%"}, lan=True).model_dump(mode="json")
    lan["links"][2].update({"rate": "5Mbit", "delay": "10ms", "reverse": {"loss": "2%"}})
    cases.append(pytest.param(resolve_topology(lan, "t.yaml"), id="shaped-lan"))
    return cases


@pytest.mark.parametrize("t", _stub_cases())
def test_ns_file_runs_in_tcl_and_declares_the_plan(t, tmp_path):
    plan = build_plan(t, "t.yaml", "exp", "paper")
    check_against_plan(plan, declared(run_stub(render_ns(plan, start_script="/s"), tmp_path)))
