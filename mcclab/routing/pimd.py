"""troglobit pimd 2.3.2 backend, run from a private prefix (it conflicts with smcroute).

pimd 2.3.2 has no option for its pid file or dump file: both are fixed
under /var/run (= /run). To keep routers apart, each pimd runs in its own
mount namespace where the router's private directory is bind-mounted over
/run. From the root namespace the same files are then visible at
``<run_dir>/pimd/pimd.pid`` and ``<run_dir>/pimd/pimd/pimd.dump``. 2.3.2
ships no pimctl; ``pimd -r`` (signal the running pimd, print its dump),
run through the same wrapper, is the only status query.
"""

from __future__ import annotations

import ipaddress
import re

from mcclab.routing.common import (
    ALL_MULTICAST,
    DEFAULT_SSM_RANGE,
    DaemonPlan,
    DirSpec,
    ReadinessCheck,
    RouterSpec,
    bind_over,
    join,
)

PIMD_BIN = "/opt/mcclab/pimd/usr/sbin/pimd"
# Inside the private mount namespace the router's dir *is* /run.
CONF_IN_NS = "/run/pimd.conf"
# pimd's fixed IGMP query response interval and robustness (not configurable in 2.3.2).
QUERY_RESPONSE_S = 10
ROBUSTNESS = 3
# pimd 2.3.2 adds a static RP to its RP set only when its main loop turns more
# than 15 whole seconds (time()) after it booted: at the first packet or 5 s
# timer tick after that, so by the 20 s tick at the latest (main.c). IGMP joins
# taken before are dropped until the next query (125 s). Measured: joins up to
# 13 s after start were lost, from 16 s on they worked; CI once timed out on
# joins made 20 s after the *first* router started (docs/routing.md). 22 s after
# the last router started leaves 2 s for the ticks' drift and pimd's start-up.
STATIC_RP_SETTLE_S = 22.0


def pimd_dir(spec: RouterSpec) -> str:
    """The router's pimd directory, seen as /run by pimd."""
    return join(spec.run_dir, "pimd")


def paths(spec: RouterSpec) -> dict[str, str]:
    """Host-side paths of pimd's files for this router."""
    d = pimd_dir(spec)
    return {
        "dir": d,
        "conf": join(d, "pimd.conf"),
        "pid": join(d, "pimd.pid"),  # pimd writes /var/run/pimd.pid
        "dump": join(d, "pimd", "pimd.dump"),  # and /var/run/pimd/pimd.dump
    }


def private_run(spec: RouterSpec, *argv: str) -> tuple[str, ...]:
    """Wrap ``argv`` so it sees the router's pimd dir as /run (and nothing leaks out).

    Binding over /run also hides /run/systemd's syslog socket: pimd's syslog
    lines are lost, which is acceptable since it keeps no other log.
    """
    return bind_over("/run", pimd_dir(spec), "mcclab-pimd", *argv)


def querier_timeout_s(query_interval_s: int) -> int:
    """RFC 3376 other-querier-present interval with pimd's robustness of 3."""
    return max(8, min(65535, ROBUSTNESS * query_interval_s + (QUERY_RESPONSE_S + 1) // 2))


def pimd_conf(spec: RouterSpec) -> str:
    """pimd.conf: static RP, IGMP query interval, one phyint line per enabled interface.

    pimd 2.3.2 cannot set the query response time or last-member-query
    interval/count; those fields of the spec are not used.
    """
    if ipaddress.IPv4Network(spec.ssm_range) != ipaddress.IPv4Network(DEFAULT_SSM_RANGE):
        raise ValueError("pimd 2.3.2 has a fixed SSM range of 232.0.0.0/8")
    qi = spec.igmp.query_interval_s
    lines = [
        f"# mcclab: pimd for {spec.name}",
        f"igmp-query-interval {qi}",
        # Default 42 s assumes a 12 s query interval; keep it consistent with ours.
        f"igmp-querier-timeout {querier_timeout_s(qi)}",
    ]
    igmp = f"igmpv{spec.igmp.version}"
    for iface in spec.ifaces:
        # pimd cannot run IGMP without PIM on a vif; an interface is either in or out.
        if iface.pim or iface.igmp:
            lines.append(f"phyint {iface.name} enable {igmp}")
    if spec.rp is not None:
        lines.append(f"rp-address {spec.rp} {ALL_MULTICAST}")
    # No bsr-candidate/rp-candidate lines: pimd only falls back to being a
    # candidate BSR and RP when it finds no config file at all.
    return "\n".join(lines) + "\n"


def plan(spec: RouterSpec, pimd_bin: str = PIMD_BIN) -> DaemonPlan:
    """Files, argvs and readiness checks for pimd on one router."""
    p = paths(spec)
    # -f: foreground; -N: only the phyint-enabled interfaces become vifs.
    start = private_run(spec, pimd_bin, "-f", "-N", "-c", CONF_IN_NS)
    neighbors = spec.pim_neighbors
    return DaemonPlan(
        backend="pimd",
        dirs=(DirSpec(p["dir"]),),
        files={p["conf"]: pimd_conf(spec)},
        start=(start,),
        pidfiles=(p["pid"],),
        readiness=(ReadinessCheck("pim-neighbors", show_argv(spec, pimd_bin),
                                  lambda out: neighbors_up(out, neighbors)),),
        settle_s=STATIC_RP_SETTLE_S if spec.rp is not None else 0.0,
    )


def show_argv(spec: RouterSpec, pimd_bin: str = PIMD_BIN) -> tuple[str, ...]:
    """``pimd -r`` for this router: signals its pimd (via the private pid file), prints the dump."""
    return private_run(spec, pimd_bin, "-r")


# ---- parsers over the pimd -r dump (pure) ----

_QUAD = r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}"


def parse_vifs(dump: str) -> dict[str, dict[str, object]]:
    """The Virtual Interface Table of a dump -> {local address or 'register_vif0': row}.

    Rows are keyed by vif index too (``row['vif']``); the ``neighbors`` list
    collects continuation lines, which pimd uses when a LAN has several
    PIM neighbours.
    """
    rows: dict[str, dict[str, object]] = {}
    in_table = False
    current: dict[str, object] | None = None
    for line in dump.splitlines():
        if line.startswith("Virtual Interface Table"):
            in_table = True
            continue
        if not in_table:
            continue
        if not line.strip() or line.startswith(" Vif  SSM") or line.startswith("Multicast"):
            if rows:
                break
            continue
        m = re.match(rf"^\s*(\d+)\s+({_QUAD})\s+(\S+)\s+(\d+)\s*(.*)$", line)
        if m:
            rest = m.group(5).split()
            nbrs = [w for w in rest if re.fullmatch(_QUAD, w)]
            flags = [w for w in rest if not re.fullmatch(_QUAD, w)]
            key = m.group(3) if m.group(3).startswith("register_vif") else m.group(2)
            current = {"vif": int(m.group(1)), "address": m.group(2), "subnet": m.group(3),
                       "flags": flags, "neighbors": nbrs}
            rows[key] = current
            continue
        cont = re.fullmatch(rf"\s+({_QUAD})\s*", line)
        if cont and current is not None:
            current["neighbors"].append(cont.group(1))  # type: ignore[union-attr]
    return rows


def neighbors_up(dump: str, expected: tuple[str, ...] | list[str]) -> bool:
    """True when the dump has a vif table and shows every expected PIM neighbour."""
    vifs = parse_vifs(dump)
    if not vifs:
        return False
    seen = {n for row in vifs.values() for n in row["neighbors"]}  # type: ignore[attr-defined]
    return set(expected) <= seen
