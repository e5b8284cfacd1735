"""smcroute 2.5 backend: static (S,G) and (*,G) multicast routes, no IGMP, no pruning.

smcrouted takes every path on the command line (-f config, -P pid file,
-u control socket), so no mount tricks are needed. Routes are static:
traffic matching a route is forwarded to all its outbound interfaces
whether or not anyone downstream joined. A (*,G) route is installed in the
kernel as an (S,G) entry when the first packet from a new source arrives.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcclab.routing.common import (
    DaemonPlan,
    DirSpec,
    ReadinessCheck,
    RouterSpec,
    StaticMroute,
    join,
)

SMCROUTED = "smcrouted"
SMCROUTECTL = "smcroutectl"


def paths(spec: RouterSpec) -> dict[str, str]:
    """Every file smcrouted uses for this router."""
    d = join(spec.run_dir, "smcroute")
    return {"dir": d, "conf": join(d, "smcroute.conf"), "pid": join(d, "smcroute.pid"),
            "sock": join(d, "smcroute.sock")}


def _route_words(route: StaticMroute) -> list[str]:
    """``from IIF [source S] group G`` words shared by the conf file syntax."""
    words = ["from", route.inbound]
    if route.source is not None:
        words += ["source", route.source]
    return words + ["group", route.group]


def smcroute_conf(spec: RouterSpec, routes: Iterable[StaticMroute]) -> str:
    """smcroute.conf: enable each interface as a vif, then one mroute line per route.

    phyint lines must precede the mroutes that name them (smcroute parses
    in order and rejects routes over unknown vifs).
    """
    routes = list(routes)
    names = {i.name for i in spec.ifaces}
    for r in routes:
        unknown = {r.inbound, *r.outbound} - names
        if unknown:
            raise ValueError(f"route {r} uses interfaces not on {spec.name}: {sorted(unknown)}")
    lines = [f"# mcclab: smcroute for {spec.name}"]
    lines += [f"phyint {i.name} enable" for i in spec.ifaces]
    lines += [" ".join(["mroute", *_route_words(r), "to", *r.outbound]) for r in routes]
    return "\n".join(lines) + "\n"


def ctl_argv(spec: RouterSpec, *args: str, smcroutectl: str = SMCROUTECTL) -> tuple[str, ...]:
    """smcroutectl bound to this router's private socket (-p: plain headings, no escapes)."""
    return (smcroutectl, "-p", "-u", paths(spec)["sock"], *args)


def add_argv(spec: RouterSpec, route: StaticMroute) -> tuple[str, ...]:
    """Add a route at run time: ``add IIF [SOURCE] GROUP OIF...``."""
    src = [route.source] if route.source is not None else []
    return ctl_argv(spec, "add", route.inbound, *src, route.group, *route.outbound)


def remove_argv(spec: RouterSpec, route: StaticMroute) -> tuple[str, ...]:
    """Remove a route added at run time (or from the config file)."""
    src = [route.source] if route.source is not None else []
    return ctl_argv(spec, "remove", route.inbound, *src, route.group)


def plan(spec: RouterSpec, routes: Iterable[StaticMroute] = (),
         smcrouted: str = SMCROUTED, smcroutectl: str = SMCROUTECTL) -> DaemonPlan:
    """Files, argv and readiness check for smcrouted on one router."""
    p = paths(spec)
    names = [i.name for i in spec.ifaces]
    start = (smcrouted,
             "-n",  # foreground: the runner owns the process group
             "-N",  # only phyint-enabled interfaces become vifs
             "-f", p["conf"], "-P", p["pid"], "-u", p["sock"],
             # Identity names the syslog tag and default paths; all paths are explicit anyway.
             "-i", f"mcclab-{spec.name}",
             "-l", "info")
    return DaemonPlan(
        backend="smcroute",
        dirs=(DirSpec(p["dir"]),),
        files={p["conf"]: smcroute_conf(spec, routes)},
        start=(start,),
        pidfiles=(p["pid"],),
        readiness=(ReadinessCheck("vifs", ctl_argv(spec, "show", "interfaces",
                                                   smcroutectl=smcroutectl),
                                  lambda out: interfaces_up(out, names)),),
    )


# ---- parsers over smcroutectl output (pure) ----

def parse_interfaces(out: str) -> dict[str, int]:
    """``smcroutectl -p show interfaces`` -> {interface: vif index}; -1 when not a vif.

    Rows are ``INDEX PHYINT VIF MIF`` with ``N/A`` for interfaces that are
    not enabled (e.g. ``lo`` under -N).
    """
    found: dict[str, int] = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 4 and words[0].isdigit():
            found[words[1]] = int(words[2]) if words[2].isdigit() else -1
    return found


def interfaces_up(out: str, names: list[str]) -> bool:
    """True when smcrouted answers and every named interface is a vif."""
    vifs = parse_interfaces(out)
    return all(vifs.get(n, -1) >= 0 for n in names)
