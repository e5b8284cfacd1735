"""FRR backends: zebra + pimd per router namespace, fully private paths.

Two builds of FRR can run a lab. ``frr`` is Debian 12's package (8.4);
``frr10`` is FRR 10.7 built by the playbook from Debian's own source archive
into a private prefix, for what 8.4 lacks: IGMP immediate leave (10.4) and the
transit-router prune fix (10.1). Both read the same configuration language,
so one planner serves both, told which build by a :class:`FrrBuild`.

FRR 10's zebra reports interface state to the management daemon mgmtd, and
without one it retries every 10 ms for ever (about 90 failed notifications
and 270 error lines a second per router, measured). So a 10.x router also
runs mgmtd, and each of its daemons sees the router's own directory as
/run/frr (a private mount namespace, as for pimd): mgmtd's sockets have no
command-line option and would otherwise be one path for every router.

Every path a daemon would otherwise take from /etc/frr or /var/run/frr is
given on the command line (config, pid file, zserv socket, vty socket dir),
so any number of routers run side by side without sharing a file. The
daemons drop to the ``frr`` user, which must be able to write the per-node
directory: running them as root does not work out of the box because root
is not in the ``frrvty`` group the daemons insist on.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from mcclab.routing.common import (
    ALL_MULTICAST,
    DEFAULT_SSM_RANGE,
    DaemonPlan,
    DirSpec,
    IgmpTimers,
    ReadinessCheck,
    RouterSpec,
    bind_over,
    join,
)

FRR_BIN_DIR = "/usr/lib/frr"
VTYSH = "vtysh"
SSM_PREFIX_LIST = "mcclab-ssm"
# FRR 8.4's (S,G) keepalive timer, in seconds (FRR's default is 210). A transit
# router's prune waits for it in 8.4 (see pimd_conf), and FRR restarts it every
# time it runs out while traffic still flows to a joined interface, so a short
# one bounds that wait without letting forwarding state lapse.
KEEPALIVE_S = 1
# Where the playbook installs its FRR 10 build (ansible/roles/routers).
FRR10_PREFIX = "/opt/mcclab/frr10"


@dataclass(frozen=True)
class FrrBuild:
    """One installed FRR: where its daemons and vtysh are, and what it can do.

    ``keepalive_s`` is the (S,G) keepalive timer the planner sets (None keeps
    FRR's 210 s); ``immediate_leave`` says whether ``ip igmp immediate-leave``
    exists in this build.
    """

    backend: str
    bin_dir: str
    vtysh: str
    keepalive_s: int | None
    immediate_leave: bool
    mgmtd: bool = False  # 10.x: run mgmtd, and every daemon over a private /run/frr

    @property
    def binaries(self) -> tuple[str, ...]:
        """The executables a lab needs for this build."""
        daemons = ("mgmtd", "zebra", "pimd") if self.mgmtd else ("zebra", "pimd")
        wrapper = ("unshare", "mount") if self.mgmtd else ()
        return (*(join(self.bin_dir, d) for d in daemons), self.vtysh, *wrapper)


DEBIAN = FrrBuild("frr", FRR_BIN_DIR, VTYSH, keepalive_s=KEEPALIVE_S, immediate_leave=False)
# 10.1 fixed the transit router's prune (FRR commit fdb1a6fed5), so FRR's own
# keepalive timer is kept.
SOURCE = FrrBuild("frr10", join(FRR10_PREFIX, "sbin"), join(FRR10_PREFIX, "bin", "vtysh"),
                  keepalive_s=None, immediate_leave=True, mgmtd=True)
BUILDS = {b.backend: b for b in (DEBIAN, SOURCE)}
# FRR's run-state directory (configure --runstatedir plus "frr"), which a 10.x
# router's daemons see replaced by the router's own directory.
RUNSTATE_DIR = "/run/frr"


def frr_dir(spec: RouterSpec) -> str:
    """The frr-owned subdirectory of the router's run dir."""
    return join(spec.run_dir, "frr")


def paths(spec: RouterSpec) -> dict[str, str]:
    """Every file FRR uses for this router (configs, pids, logs, sockets)."""
    d = frr_dir(spec)
    return {
        "dir": d,
        "zebra_conf": join(d, "zebra.conf"),
        "pimd_conf": join(d, "pimd.conf"),
        "zebra_pid": join(d, "zebra.pid"),
        "pimd_pid": join(d, "pimd.pid"),
        "zebra_log": join(d, "zebra.log"),
        "pimd_log": join(d, "pimd.log"),
        "mgmtd_pid": join(d, "mgmtd.pid"),
        "mgmtd_log": join(d, "mgmtd.log"),
        # mgmtd makes this in its run-state dir, which is ``d`` seen from outside.
        "mgmtd_be": join(d, "mgmtd_be.sock"),
        "zserv": join(d, "zserv.api"),
        # --vty_socket takes a directory; daemons create <dir>/<daemon>.vty in it.
        "vty_dir": d,
    }


def zebra_conf(spec: RouterSpec) -> str:
    """zebra needs nothing beyond a hostname: the namespace's kernel routes are its RIB."""
    return f"! mcclab: zebra for {spec.name}\nhostname {spec.name}\n"


def pimd_conf(spec: RouterSpec, spt_switchover: bool = False,
              keepalive_s: int | None = KEEPALIVE_S) -> str:
    """pimd config: static RP, SSM range, keepalive timer, PIM/IGMP per interface.

    ``spt_switchover`` False keeps ASM traffic on the shared tree. FRR 8.4's
    last-hop router, when its last member leaves a group it had switched to
    the SPT, sends a stale (*,G) Join together with the (S,G,rpt) Prune; the
    upstream router then keeps forwarding the group for the full 210 s join
    holdtime. Measured in docs/routing.md; staying on the RPT avoids it.

    ``keepalive_s`` (None: FRR's 210 s): a transit router in FRR 8.4 decides
    whether to prune before it takes the pruned interface out of its olist,
    so while the keepalive timer runs it stays joined upstream, and only the
    timer's expiry sends the prune: up to 210 s of forwarding to nobody
    (docs/routing.md, fixed in FRR 10.1).

    ``spec.igmp.immediate_leave`` writes ``ip igmp immediate-leave`` on every
    IGMP interface; only FRR >= 10.4 parses it (8.4 would refuse the line).
    """
    t = spec.igmp
    lines = [f"! mcclab: pimd for {spec.name}", f"hostname {spec.name}"]
    if spec.rp is not None:
        lines.append(f"ip pim rp {spec.rp} {ALL_MULTICAST}")
    if not spt_switchover:
        lines.append("ip pim spt-switchover infinity-and-beyond")
    if keepalive_s is not None:
        lines.append(f"ip pim keep-alive-timer {keepalive_s}")
    if ipaddress.IPv4Network(spec.ssm_range) != ipaddress.IPv4Network(DEFAULT_SSM_RANGE):
        # FRR's SSM range is 232/8 unless a prefix-list says otherwise; "ge 32"
        # because the list is matched against single groups (/32 prefixes).
        lines.append(f"ip prefix-list {SSM_PREFIX_LIST} seq 5 permit {spec.ssm_range} ge 32")
        lines.append(f"ip pim ssm prefix-list {SSM_PREFIX_LIST}")
    for iface in spec.ifaces:
        if not (iface.pim or iface.igmp):
            continue
        lines.append(f"interface {iface.name}")
        if iface.pim:
            lines.append(" ip pim")
        if iface.igmp:
            # Units differ per knob: seconds for the interval, deciseconds for the rest.
            interval = f" ip igmp query-interval {t.query_interval_s}"
            response = f" ip igmp query-max-response-time {t.query_max_response_ms // 100}"
            lines += [
                " ip igmp",
                f" ip igmp version {t.version}",
                # FRR refuses (and skips) an interval not above the response time in
                # force, and a response time not below the interval in force: set the
                # one that moves away from the other's default first (defaults 125 s
                # and 10 s). In the other order a 10-s interval met the default 10-s
                # response time and stayed at 125 s.
                *((interval, response)
                  if t.query_interval_s * 1000 > IgmpTimers().query_max_response_ms
                  else (response, interval)),
                f" ip igmp last-member-query-interval {t.last_member_query_interval_ms // 100}",
                f" ip igmp last-member-query-count {t.last_member_query_count}",
            ]
            if t.immediate_leave:
                lines.append(" ip igmp immediate-leave")
        lines.append("exit")
    return "\n".join(lines) + "\n"


def _daemon_argv(spec: RouterSpec, daemon: str, build: FrrBuild, user: str, group: str
                 ) -> tuple[str, ...]:
    """One daemon's argv, every path private; 10.x's in its own mount namespace."""
    p = paths(spec)
    # mgmtd takes neither a config file (it has none to read here) nor zebra's
    # socket (it is no zebra client); both options make it exit.
    own = (() if daemon == "mgmtd" else ("-f", p[f"{daemon}_conf"], "-z", p["zserv"]))
    # No -d: the daemon stays in the foreground so the runner owns its process
    # group. -P 0 closes the TCP vty port; vtysh reaches the unix socket instead.
    argv = (
        join(build.bin_dir, daemon),
        "-u", user, "-g", group,
        "-P", "0",
        *own,
        "-i", p[f"{daemon}_pid"],
        "--vty_socket", p["vty_dir"],
        "--log", f"file:{p[f'{daemon}_log']}",
    )
    return bind_over(RUNSTATE_DIR, p["dir"], f"mcclab-{daemon}", *argv) if build.mgmtd else argv


def vtysh_argv(spec: RouterSpec, command: str, vtysh: str = VTYSH) -> tuple[str, ...]:
    """vtysh talking to this router's pimd only, through its private socket dir."""
    return (vtysh, "--vty_socket", paths(spec)["vty_dir"], "-d", "pimd", "-c", command)


def rp_reapply_argv(spec: RouterSpec, vtysh: str = VTYSH) -> tuple[str, ...]:
    """vtysh removing and adding this router's static RP again, so pimd resolves it anew.

    A pimd (10.7) whose first RPF lookups found zebra not yet answering ("zclient
    lookup socket is not connected" in its log) kept its static RP with no RPF
    interface for as long as it was watched (40 and 60 s), route or not; the RP
    taken out and put back was resolved at once (docs/routing.md, FRR 10,
    "Start-up race").
    """
    rp = f"{spec.rp} {ALL_MULTICAST}"
    return (*vtysh_argv(spec, "configure terminal", vtysh),
            "-c", f"no ip pim rp {rp}", "-c", f"ip pim rp {rp}")


def plan(spec: RouterSpec, build: FrrBuild = DEBIAN, user: str = "frr", group: str = "frr",
         spt_switchover: bool = False) -> DaemonPlan:
    """Files, argvs and readiness checks for zebra + pimd (and mgmtd in 10.x) on one router.

    ``build`` says which FRR runs it. ``user``/``group`` must own the run dir
    (see ``dirs``); FRR refuses to run as root unless root is in the frrvty
    group.
    """
    if spec.igmp.immediate_leave and not build.immediate_leave:
        raise ValueError(f"{spec.name}: IGMP immediate leave needs FRR >= 10.4 "
                         f"(backend frr10), not {build.backend}")
    p, vtysh = paths(spec), build.vtysh
    checks = [
        ReadinessCheck("pim-interfaces", vtysh_argv(spec, "show ip pim interface json", vtysh),
                       lambda out: pim_interfaces_up(out, [i.name for i in spec.ifaces if i.pim])),
        ReadinessCheck("pim-neighbors", vtysh_argv(spec, "show ip pim neighbor json", vtysh),
                       lambda out: neighbors_up(out, spec.pim_neighbors)),
    ]
    if spec.rp is not None:
        rp = spec.rp
        checks.append(ReadinessCheck("rp-reachable",
                                     vtysh_argv(spec, "show ip pim rp-info json", vtysh),
                                     lambda out: rp_reachable(out, rp),
                                     remedy=rp_reapply_argv(spec, vtysh)))
    daemons = (("mgmtd",) if build.mgmtd else ()) + ("zebra", "pimd")
    files = {p["zebra_conf"]: zebra_conf(spec),
             p["pimd_conf"]: pimd_conf(spec, spt_switchover, build.keepalive_s)}
    # Each daemon starts once the one it connects to has made its socket (zebra
    # to mgmtd, pimd to zebra): they would retry on their own, but noisily.
    waits = {"zebra": p["mgmtd_be"] if build.mgmtd else "", "pimd": p["zserv"]}
    return DaemonPlan(
        backend=build.backend,
        # The daemons write pid, log and sockets here after dropping to `user`.
        dirs=(DirSpec(p["dir"], owner=user, group=group, mode=0o755),),
        files=files,
        start=tuple(_daemon_argv(spec, d, build, user, group) for d in daemons),
        pidfiles=tuple(p[f"{d}_pid"] for d in daemons),
        readiness=tuple(checks),
        logs=tuple(p[f"{d}_log"] for d in daemons),
        await_paths=tuple(waits.get(d, "") for d in daemons),
    )


# ---- parsers over vtysh JSON (pure; unit-tested on captured output) ----

def _load(out: str) -> Any:
    """JSON from vtysh, or None when the daemon was not up (vtysh prints prose then)."""
    try:
        return json.loads(out)
    except (ValueError, TypeError):
        return None


def parse_neighbors(out: str) -> dict[str, set[str]]:
    """``show ip pim neighbor json`` -> {interface: {neighbor address, ...}}."""
    data = _load(out)
    if not isinstance(data, dict):
        return {}
    return {ifname: set(nbrs) for ifname, nbrs in data.items() if isinstance(nbrs, dict)}


def neighbors_up(out: str, expected: tuple[str, ...] | list[str]) -> bool:
    """True when every expected neighbour address is seen (on any interface)."""
    data = _load(out)
    if not isinstance(data, dict):
        return False
    seen = set().union(*parse_neighbors(out).values()) if data else set()
    return set(expected) <= seen


def parse_rp_info(out: str) -> list[dict[str, Any]]:
    """``show ip pim rp-info json`` -> flat list of RP entries (one per group range)."""
    data = _load(out)
    if not isinstance(data, dict):
        return []
    return [entry for entries in data.values() if isinstance(entries, list)
            for entry in entries if isinstance(entry, dict)]


def rp_reachable(out: str, rp: str, group: str = ALL_MULTICAST) -> bool:
    """True when ``rp`` serves ``group`` and is either us or has an RPF interface.

    FRR keeps a configured RP even without a route to it; it then shows
    ``outboundInterface: "Unknown"`` and joins go nowhere.
    """
    for entry in parse_rp_info(out):
        if entry.get("rpAddress") != rp or entry.get("group") != group:
            continue
        if entry.get("iAmRP") is True:
            return True
        return entry.get("outboundInterface", "Unknown") not in ("Unknown", "", None)
    return False


def pim_interfaces_up(out: str, names: list[str]) -> bool:
    """``show ip pim interface json``: every named interface is up with an address."""
    data = _load(out)
    if not isinstance(data, dict):
        return False
    for name in names:
        row = data.get(name)
        if not isinstance(row, dict) or row.get("state") != "up":
            return False
        if row.get("address") in (None, "", "0.0.0.0"):
            return False
    return True
