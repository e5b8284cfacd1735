"""Routing planners: generated configs/argvs and readiness parsers (samples captured from
FRR 8.4.4, pimd 2.3.2 and smcroute 2.5.6 running in network namespaces)."""

from __future__ import annotations

import pytest

from mcclab.routing import frr, pimd, plan_router, smcroute
from mcclab.routing.common import (
    IgmpTimers,
    RouterIface,
    RouterSpec,
    StaticMroute,
)

RUN = "/run/mcclab/lab1/nodes/r2"


def spec(**kw) -> RouterSpec:
    base = dict(
        name="r2",
        ifaces=(RouterIface("eth-r1", "10.0.12.2/30"), RouterIface("eth-r3", "10.0.23.1/30"),
                RouterIface("eth-h2", "10.0.4.1/24", pim=False)),
        run_dir=RUN,
        rp="10.0.12.2",
        pim_neighbors=("10.0.12.1", "10.0.23.2"),
    )
    base.update(kw)
    return RouterSpec(**base)


def all_words(plan) -> list[str]:
    words = [w for argv in plan.start for w in argv]
    words += [w for c in plan.readiness for w in c.argv]
    return words + list(plan.files) + list(plan.pidfiles) + [d.path for d in plan.dirs]


def absolute_paths(plan) -> list[str]:
    """Every absolute path a plan mentions (argv words, --opt=/path forms, file keys)."""
    out = []
    for w in all_words(plan):
        for part in w.replace("=", " ").replace(":", " ").split():
            if part.startswith("/"):
                out.append(part)
    return out


# ---------------------------------------------------------------- inputs

def test_igmp_timers_validate_units():
    with pytest.raises(ValueError):
        IgmpTimers(last_member_query_interval_ms=150)  # FRR only has deciseconds
    with pytest.raises(ValueError):
        IgmpTimers(query_interval_s=5, query_max_response_ms=5000)
    with pytest.raises(ValueError):
        IgmpTimers(version=1)
    assert IgmpTimers().leave_latency_ms == 2000


def test_spec_rejects_shared_run_dir():
    for bad in ("/run", "/var/run/", "relative/dir"):
        with pytest.raises(ValueError):
            spec(run_dir=bad)


def test_static_mroute_validation():
    with pytest.raises(ValueError):
        StaticMroute("10.1.1.1", "eth0", ("eth1",))
    with pytest.raises(ValueError):
        StaticMroute("239.1.1.1", "eth0", ("eth0",))


# ---------------------------------------------------------------- FRR

def test_frr_pimd_conf_rp_ssm_and_timer_units():
    s = spec(igmp=IgmpTimers(query_interval_s=20, query_max_response_ms=5000,
                             last_member_query_interval_ms=300, last_member_query_count=3))
    conf = frr.pimd_conf(s)
    assert "ip pim rp 10.0.12.2 224.0.0.0/4" in conf.splitlines()
    # Default SSM range needs no prefix-list.
    assert "ssm prefix-list" not in conf
    assert " ip igmp query-interval 20" in conf  # seconds
    assert " ip igmp query-max-response-time 50" in conf  # deciseconds
    assert " ip igmp last-member-query-interval 3" in conf  # deciseconds
    assert " ip igmp last-member-query-count 3" in conf
    assert " ip igmp version 3" in conf
    # Stay on the shared tree by default (FRR 8.4 stale-join bug on SPT leave).
    assert "ip pim spt-switchover infinity-and-beyond" in conf
    assert "spt-switchover" not in frr.pimd_conf(s, spt_switchover=True)


@pytest.mark.parametrize(("interval_s", "response_ms", "first"), [
    (20, 5000, "query-interval"),  # above the default 10-s response time: interval first
    (10, 2000, "query-max-response-time"),  # the labs' 10 s: not above 10 s, response first
    (2, 1000, "query-max-response-time"),
    (200, 150_000, "query-interval"),  # above the default 125-s interval: interval first
])
def test_frr_sets_the_igmp_interval_and_response_in_an_order_frr_accepts(
        interval_s, response_ms, first):
    # FRR skips an interval not above the response time in force and a response time
    # not below the interval in force; both start at FRR's defaults (125 s, 10 s).
    conf = frr.pimd_conf(spec(igmp=IgmpTimers(query_interval_s=interval_s,
                                              query_max_response_ms=response_ms)))
    order = [line.split()[2] for line in conf.splitlines()
             if line.startswith((" ip igmp query-interval", " ip igmp query-max-response-time"))]
    assert order and len(order) % 2 == 0 and order[0] == first
    in_force = {"query-interval": 125_000, "query-max-response-time": 10_000}
    for name in order[:2]:  # replay FRR's check on the first IGMP interface's lines
        value = interval_s * 1000 if name == "query-interval" else response_ms
        if name == "query-interval":
            assert value > in_force["query-max-response-time"]
        else:
            assert value < in_force["query-interval"]
        in_force[name] = value


def test_frr_keepalive_timer_is_short_unless_asked_for_the_default():
    # FRR 8.4's transit router prunes only when this timer runs out (docs/routing.md).
    conf = frr.pimd_conf(spec())
    assert f"ip pim keep-alive-timer {frr.KEEPALIVE_S}" in conf.splitlines()
    assert frr.KEEPALIVE_S <= 2
    assert "keep-alive-timer" not in frr.pimd_conf(spec(), keepalive_s=None)


def test_frr10_build_runs_from_its_prefix_with_frrs_own_keepalive():
    p = plan_router("frr10", spec())
    d = f"{RUN}/frr"
    assert p.backend == "frr10"
    daemons = [argv[argv.index("mcclab-" + name) + 2:] for argv, name
               in zip(p.start, ("mgmtd", "zebra", "pimd"), strict=True)]
    assert [argv[0] for argv in daemons] == [f"{frr.FRR10_PREFIX}/sbin/{n}"
                                            for n in ("mgmtd", "zebra", "pimd")]
    for argv in p.start:
        # Each in its own mount namespace with the router's dir over /run/frr,
        # where mgmtd puts its sockets (no option names them).
        assert argv[:2] == ("unshare", "--mount")
        assert argv[argv.index("sh") + 2].startswith("mount --bind \"$1\" /run/frr")
        assert d in argv
    mgmtd = daemons[0]
    assert "-f" not in mgmtd and "-z" not in mgmtd  # mgmtd exits on either
    # mgmtd first; zebra once mgmtd's socket exists, pimd once zebra's does.
    assert p.await_paths == ("", f"{d}/mgmtd_be.sock", f"{d}/zserv.api")
    assert p.pidfiles[0] == f"{d}/mgmtd.pid" and len(p.logs) == 3
    assert all(c.argv[0] == f"{frr.FRR10_PREFIX}/bin/vtysh" for c in p.readiness)
    # 10.1 fixed the transit prune, so no short keepalive timer is written.
    assert "keep-alive-timer" not in p.files[f"{RUN}/frr/pimd.conf"]
    assert "keep-alive-timer" in plan_router("frr", spec()).files[f"{RUN}/frr/pimd.conf"]


def test_frr_immediate_leave_on_every_igmp_interface_only_with_frr10():
    s = spec(igmp=IgmpTimers(immediate_leave=True))
    conf = plan_router("frr10", s).files[f"{RUN}/frr/pimd.conf"]
    blocks = conf.split("interface ")[1:]
    assert len(blocks) == 3 and all(" ip igmp immediate-leave\n" in b for b in blocks)
    assert "immediate-leave" not in frr.pimd_conf(spec())
    # Debian's 8.4 has no such command; planning it there is an error, not a dropped line.
    with pytest.raises(ValueError, match="immediate leave needs FRR >= 10.4"):
        plan_router("frr", s)


def test_frr_interface_flags():
    conf = frr.pimd_conf(spec())
    block = conf.split("interface eth-h2\n", 1)[1].split("exit", 1)[0]
    assert " ip igmp\n" in block and " ip pim" not in block
    block = conf.split("interface eth-r1\n", 1)[1].split("exit", 1)[0]
    assert " ip pim\n" in block


def test_frr_custom_ssm_range_uses_prefix_list():
    conf = frr.pimd_conf(spec(ssm_range="232.1.0.0/16"))
    assert "ip prefix-list mcclab-ssm seq 5 permit 232.1.0.0/16 ge 32" in conf
    assert "ip pim ssm prefix-list mcclab-ssm" in conf


def test_frr_no_rp_means_no_rp_line_and_no_rp_check():
    p = frr.plan(spec(rp=None))
    assert "ip pim rp" not in p.files[f"{RUN}/frr/pimd.conf"]
    assert [c.name for c in p.readiness] == ["pim-interfaces", "pim-neighbors"]


def test_frr_argv_private_paths():
    p = frr.plan(spec())
    zebra, pim = p.start
    d = f"{RUN}/frr"
    assert zebra[0] == "/usr/lib/frr/zebra" and pim[0] == "/usr/lib/frr/pimd"
    assert p.await_paths == ("", f"{RUN}/frr/zserv.api")  # pimd after zebra's socket
    for argv, name in ((zebra, "zebra"), (pim, "pimd")):
        assert "-d" not in argv  # foreground: the runner owns the process group
        assert argv[argv.index("-f") + 1] == f"{d}/{name}.conf"
        assert argv[argv.index("-i") + 1] == f"{d}/{name}.pid"
        assert argv[argv.index("-z") + 1] == f"{d}/zserv.api"
        assert argv[argv.index("--vty_socket") + 1] == d
        assert argv[argv.index("-u") + 1] == "frr"
        assert argv[argv.index("-P") + 1] == "0"
    assert p.pidfiles == (f"{d}/zebra.pid", f"{d}/pimd.pid")
    assert p.dirs[0].path == d and p.dirs[0].owner == "frr"
    assert set(p.files) == {f"{d}/zebra.conf", f"{d}/pimd.conf"}
    for c in p.readiness:
        assert c.argv[:5] == ("vtysh", "--vty_socket", d, "-d", "pimd")
        assert not c.in_netns


@pytest.mark.parametrize("backend", ["frr", "pimd", "smcroute"])
def test_no_shared_system_paths(backend):
    p = plan_router(backend, spec())
    paths = absolute_paths(p)
    assert paths
    allowed_bins = ("/usr/lib/frr/", "/opt/mcclab/pimd/")
    for path in paths:
        if path.startswith(allowed_bins):
            continue
        # pimd's wrapper mounts the node dir over /run; its in-namespace config path is /run/...
        if backend == "pimd" and path in ("/run", pimd.CONF_IN_NS):
            continue
        assert path.startswith(RUN + "/"), path
    for banned in ("/var/run/frr", "/etc/frr", "/etc/pimd.conf", "/run/smcroute"):
        assert not any(x.startswith(banned) for x in paths)


def test_two_routers_share_nothing():
    a = plan_router("frr", spec(name="r1", run_dir="/run/mcclab/lab1/nodes/r1"))
    b = plan_router("frr", spec(name="r2", run_dir="/run/mcclab/lab1/nodes/r2"))
    binaries = {"/usr/lib/frr/zebra", "/usr/lib/frr/pimd"}
    assert not (set(absolute_paths(a)) - binaries) & set(absolute_paths(b))


# Captured from FRR 8.4.4 (r2 of the s-r1-r2-r3-h chain, plus a sibling host link).
FRR_NEIGHBORS = """{
  "eth-h2":{
  },
  "eth-r1":{
    "10.0.12.1":{
      "interface":"eth-r1",
      "neighbor":"10.0.12.1",
      "upTime":"00:00:41",
      "holdTime":"00:01:34",
      "holdTimeMax":105,
      "drPriority":1
    }
  },
  "eth-r3":{
    "10.0.23.2":{
      "interface":"eth-r3",
      "neighbor":"10.0.23.2",
      "upTime":"00:00:40",
      "holdTime":"00:01:34",
      "holdTimeMax":105,
      "drPriority":1
    }
  }
}"""

FRR_RP_REMOTE = """{
  "10.0.12.2":[
    {
      "rpAddress":"10.0.12.2",
      "outboundInterface":"eth-r2",
      "iAmRP":false,
      "group":"224.0.0.0/4",
      "source":"Static",
      "groupType":"ASM"
    }
  ]
}"""

FRR_RP_SELF = FRR_RP_REMOTE.replace('"eth-r2"', '"eth-r1"').replace('"iAmRP":false',
                                                                     '"iAmRP":true')

FRR_RP_UNREACHABLE = """{
  "10.99.99.99":[
    {
      "rpAddress":"10.99.99.99",
      "outboundInterface":"Unknown",
      "iAmRP":false,
      "group":"224.0.0.0/4",
      "source":"Static",
      "groupType":"ASM"
    }
  ]
}"""

FRR_PIM_IFACES = """{
  "eth-h":{
    "name":"eth-h",
    "state":"up",
    "address":"10.0.3.1",
    "index":3,
    "flagMulticast":true,
    "flagBroadcast":true,
    "lanDelayEnabled":true,
    "pimNeighbors":0,
    "pimIfChannels":0,
    "firstHopRouterCount":0,
    "pimDesignatedRouter":"10.0.3.1",
    "pimDesignatedRouterLocal":true
  },
  "eth-r2":{
    "name":"eth-r2",
    "state":"up",
    "address":"10.0.23.2",
    "index":2,
    "flagMulticast":true,
    "flagBroadcast":true,
    "lanDelayEnabled":true,
    "pimNeighbors":1,
    "pimIfChannels":0,
    "firstHopRouterCount":0,
    "pimDesignatedRouter":"10.0.23.2",
    "pimDesignatedRouterLocal":true
  },
  "pimreg":{
    "name":"pimreg",
    "state":"up",
    "address":"0.0.0.0",
    "index":7,
    "lanDelayEnabled":true,
    "pimNeighbors":0,
    "pimIfChannels":0,
    "firstHopRouterCount":0,
    "pimDesignatedRouter":"*",
    "pimDesignatedRouterLocal":true
  }
}"""

VTYSH_NOT_RUNNING = "Exiting: failed to connect to any daemons.\n"


def test_frr_parse_neighbors():
    assert frr.parse_neighbors(FRR_NEIGHBORS) == {
        "eth-h2": set(), "eth-r1": {"10.0.12.1"}, "eth-r3": {"10.0.23.2"}}
    assert frr.neighbors_up(FRR_NEIGHBORS, ("10.0.12.1", "10.0.23.2"))
    assert not frr.neighbors_up(FRR_NEIGHBORS, ("10.0.12.1", "10.0.99.1"))
    assert frr.neighbors_up('{\n  "eth0":{\n  }\n}', ())
    assert not frr.neighbors_up(VTYSH_NOT_RUNNING, ())
    assert not frr.neighbors_up("", ())


def test_frr_rp_reachable():
    assert frr.rp_reachable(FRR_RP_REMOTE, "10.0.12.2")
    assert frr.rp_reachable(FRR_RP_SELF, "10.0.12.2")
    assert not frr.rp_reachable(FRR_RP_UNREACHABLE, "10.99.99.99")
    assert not frr.rp_reachable(FRR_RP_REMOTE, "10.0.12.9")  # a different RP
    assert not frr.rp_reachable(FRR_RP_REMOTE, "10.0.12.2", group="239.0.0.0/8")
    assert not frr.rp_reachable(VTYSH_NOT_RUNNING, "10.0.12.2")


def test_frr_pim_interfaces_up():
    assert frr.pim_interfaces_up(FRR_PIM_IFACES, ["eth-h", "eth-r2"])
    assert not frr.pim_interfaces_up(FRR_PIM_IFACES, ["eth-h", "eth-x"])
    down = FRR_PIM_IFACES.replace('"state":"up",\n    "address":"10.0.3.1"',
                                  '"state":"down",\n    "address":"10.0.3.1"')
    assert not frr.pim_interfaces_up(down, ["eth-h"])
    # An interface without its address yet shows 0.0.0.0 (like pimreg).
    assert not frr.pim_interfaces_up(FRR_PIM_IFACES, ["pimreg"])
    assert not frr.pim_interfaces_up(VTYSH_NOT_RUNNING, ["eth-h"])


def test_frr_readiness_predicates_wired_to_spec():
    checks = {c.name: c for c in frr.plan(spec()).readiness}
    assert checks["pim-neighbors"].predicate(FRR_NEIGHBORS)
    assert checks["rp-reachable"].predicate(FRR_RP_SELF)
    assert not checks["rp-reachable"].predicate(FRR_RP_UNREACHABLE)
    assert checks["rp-reachable"].argv[-1] == "show ip pim rp-info json"


# ---------------------------------------------------------------- pimd

def test_pimd_conf():
    conf = pimd.pimd_conf(spec(igmp=IgmpTimers(query_interval_s=20, version=2)))
    lines = conf.splitlines()
    assert "rp-address 10.0.12.2 224.0.0.0/4" in lines
    assert "igmp-query-interval 20" in lines
    assert "igmp-querier-timeout 65" in lines  # 3 x 20 + 10/2
    # -N disables every vif by default, so each interface needs its phyint line.
    assert [ln for ln in lines if ln.startswith("phyint")] == [
        "phyint eth-r1 enable igmpv2", "phyint eth-r3 enable igmpv2", "phyint eth-h2 enable igmpv2"]
    assert "rp-address" not in pimd.pimd_conf(spec(rp=None))
    with pytest.raises(ValueError):
        pimd.pimd_conf(spec(ssm_range="232.1.0.0/16"))


def test_pimd_argv_wraps_private_run():
    p = pimd.plan(spec())
    (argv,) = p.start
    assert argv[:5] == ("unshare", "--mount", "--propagation", "private", "--")
    d = f"{RUN}/pimd"
    assert argv[argv.index("mcclab-pimd") + 1] == d
    tail = argv[argv.index(d) + 1:]
    assert tail == (pimd.PIMD_BIN, "-f", "-N", "-c", "/run/pimd.conf")
    assert p.files == {f"{d}/pimd.conf": pimd.pimd_conf(spec())}
    assert p.pidfiles == (f"{d}/pimd.pid",)
    (check,) = p.readiness
    assert check.argv[-2:] == (pimd.PIMD_BIN, "-r") and d in check.argv


# Captured from pimd 2.3.2 via `pimd -r` on r2 (two neighbours) and at start (none yet).
# pimd pads its table cells with trailing blanks; they are stripped here for the linter and
# put back in test_pimd_parse_vifs_with_padding.
PIMD_DUMP = """Virtual Interface Table ======================================================
Vif  Local Address    Subnet              Thresh  Flags      Neighbors
---  ---------------  ------------------  ------  ---------  -----------------
  0  10.0.12.2        10.0.12/30               1  DR PIM     10.0.12.1
  1  10.0.23.1        10.0.23/30               1  PIM        10.0.23.2
  2  10.0.4.1         10.0.4/24                1  DR NO-NBR
  3  10.0.12.2        register_vif0            1

 Vif  SSM Group        Sources

Multicast Routing Table ======================================================
----------------------------------- (*,G) ------------------------------------
Source           Group            RP Address       Flags
---------------  ---------------  ---------------  ---------------------------
INADDR_ANY       239.1.1.1        10.0.12.2        WC RP
Joined   oifs: .j..
Pruned   oifs: ....
Leaves   oifs: ....
Asserted oifs: ....
Outgoing oifs: .o..
Incoming     : ...I

TIMERS:  Entry    JP    RS  Assert VIFS:  0  1  2  3
           190    45     0       0        0 190  0  0
--------------------------------- (*,*,G) ------------------------------------
Number of Groups: 1
Number of Cache MIRRORs: 0
------------------------------------------------------------------------------
"""

PIMD_DUMP_START = """Virtual Interface Table ======================================================
Vif  Local Address    Subnet              Thresh  Flags      Neighbors
---  ---------------  ------------------  ------  ---------  -----------------
  0  10.0.12.2        10.0.12/30               1  DR NO-NBR
  1  10.0.23.1        10.0.23/30               1  DR NO-NBR
  2  10.0.4.1         10.0.4/24                1  DR NO-NBR
  3  10.0.12.2        register_vif0            1

 Vif  SSM Group        Sources

Multicast Routing Table ======================================================
--------------------------------- (*,*,G) ------------------------------------
Number of Groups: 0
Number of Cache MIRRORs: 0
------------------------------------------------------------------------------
"""


def test_pimd_parse_vifs():
    vifs = pimd.parse_vifs(PIMD_DUMP)
    assert vifs["10.0.12.2"]["neighbors"] == ["10.0.12.1"]
    assert vifs["10.0.23.1"]["flags"] == ["PIM"]
    assert vifs["10.0.4.1"]["neighbors"] == []
    assert vifs["register_vif0"]["vif"] == 3
    # Several neighbours on one LAN continue on the following lines.
    cont = " " * 56 + "10.0.23.3"
    lan = PIMD_DUMP.replace("10.0.23.2\n", f"10.0.23.2\n{cont}\n")
    assert pimd.parse_vifs(lan)["10.0.23.1"]["neighbors"] == ["10.0.23.2", "10.0.23.3"]


def test_pimd_parse_vifs_with_padding():
    padded = "\n".join(line + "      " for line in PIMD_DUMP.splitlines())
    assert pimd.parse_vifs(padded) == pimd.parse_vifs(PIMD_DUMP)


def test_pimd_neighbors_up():
    assert pimd.neighbors_up(PIMD_DUMP, ("10.0.12.1", "10.0.23.2"))
    assert not pimd.neighbors_up(PIMD_DUMP_START, ("10.0.12.1",))
    assert pimd.neighbors_up(PIMD_DUMP_START, ())
    assert not pimd.neighbors_up("", ())  # no dump: pimd not answering


# ---------------------------------------------------------------- smcroute

ROUTES = (StaticMroute("239.1.1.0/24", "eth-r1", ("eth-r3",)),
          StaticMroute("232.1.1.1", "eth-r1", ("eth-r3", "eth-h2"), source="10.0.1.2"))


def test_smcroute_conf_and_argv():
    p = smcroute.plan(spec(), ROUTES)
    d = f"{RUN}/smcroute"
    conf = p.files[f"{d}/smcroute.conf"]
    lines = conf.splitlines()
    assert lines[1:4] == ["phyint eth-r1 enable", "phyint eth-r3 enable", "phyint eth-h2 enable"]
    assert "mroute from eth-r1 group 239.1.1.0/24 to eth-r3" in lines
    assert "mroute from eth-r1 source 10.0.1.2 group 232.1.1.1 to eth-r3 eth-h2" in lines
    (argv,) = p.start
    assert argv[0] == "smcrouted" and "-n" in argv and "-N" in argv
    assert argv[argv.index("-f") + 1] == f"{d}/smcroute.conf"
    assert argv[argv.index("-P") + 1] == f"{d}/smcroute.pid"
    assert argv[argv.index("-u") + 1] == f"{d}/smcroute.sock"
    assert smcroute.add_argv(spec(), ROUTES[1]) == (
        "smcroutectl", "-p", "-u", f"{d}/smcroute.sock",
        "add", "eth-r1", "10.0.1.2", "232.1.1.1", "eth-r3", "eth-h2")
    assert smcroute.remove_argv(spec(), ROUTES[0])[-3:] == ("remove", "eth-r1", "239.1.1.0/24")
    with pytest.raises(ValueError):
        smcroute.plan(spec(), (StaticMroute("239.1.1.1", "eth9", ("eth-r3",)),))


# Captured from smcroute 2.5.6 (`smcroutectl -p -u SOCK show interfaces`, daemon started -N).
SMC_INTERFACES = """===============================================================================
 INDEX PHYINT  VIF  MIF
===============================================================================
     1 lo      N/A  N/A
     2 eth0      0    0
     3 eth1      1    1

"""
SMC_NOT_RUNNING = ""  # stdout is empty; stderr says "Cannot find IPC socket ..."


def test_smcroute_parse_interfaces():
    assert smcroute.parse_interfaces(SMC_INTERFACES) == {"lo": -1, "eth0": 0, "eth1": 1}
    assert smcroute.interfaces_up(SMC_INTERFACES, ["eth0", "eth1"])
    assert not smcroute.interfaces_up(SMC_INTERFACES, ["eth0", "lo"])
    assert not smcroute.interfaces_up(SMC_NOT_RUNNING, ["eth0"])
    (check,) = smcroute.plan(spec(ifaces=(RouterIface("eth0", "10.9.0.1/24"),
                                          RouterIface("eth1", "10.9.1.1/24")))).readiness
    assert check.predicate(SMC_INTERFACES)
    assert check.argv[-2:] == ("show", "interfaces")


def test_pimd_settles_only_with_static_rp():
    assert pimd.plan(spec()).settle_s == pimd.STATIC_RP_SETTLE_S
    assert pimd.plan(spec(rp=None)).settle_s == 0
    assert frr.plan(spec()).settle_s == 0


def test_plan_router_dispatch():
    assert plan_router("frr", spec()).backend == "frr"
    with pytest.raises(ValueError):
        plan_router("frr", spec(), ROUTES)
    with pytest.raises(ValueError):
        plan_router("mrouted", spec())


def test_stair_fig13_states_the_fastest_frr_leave():
    """Figs. 13-14 emulate ns-2's prompt prune: the experiment's own IGMP timers reach
    every router's pimd.conf as one 100 ms last-member query (FRR's minimum)."""
    from mcclab.experiment.loader import resolve
    from mcclab.model.addressing import plan_addresses
    from mcclab.routing.plan import router_spec

    topo = resolve("stair-fig13", "quick").topology
    plan = plan_addresses(topo)
    for node in topo.names("router"):
        conf = frr.pimd_conf(router_spec(topo, plan, node, "/run/mcclab-test/x"))
        igmp = [line for line in conf.splitlines() if "last-member" in line]
        assert igmp, node
        assert set(igmp) == {" ip igmp last-member-query-interval 1",  # deciseconds
                             " ip igmp last-member-query-count 1"}
