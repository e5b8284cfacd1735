"""Backend-neutral inputs and outputs of the routing planners ("commands as data").

The planners in ``frr``, ``pimd`` and ``smcroute`` are pure: they turn a
:class:`RouterSpec` into a :class:`DaemonPlan` (files to write, argv lists to
start, pid files, readiness probes) and never touch the system. A separate
runner creates the directories, writes the files, starts every argv inside
the router's network namespace in its own process group, polls readiness and
finally stops each process group (``mcclab.routing.runner``). Inputs are plain
frozen dataclasses so the planners do not depend on the topology model; only
``mcclab.routing.plan`` reads a topology.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# Group ranges, reused by every backend.
ALL_MULTICAST = "224.0.0.0/4"
DEFAULT_SSM_RANGE = "232.0.0.0/8"



@dataclass(frozen=True)
class RouterIface:
    """One layer-3 interface of a router.

    ``pim`` enables PIM (hellos, joins) on the link, ``igmp`` makes the router
    an IGMP querier there (needed where receivers live). Both default to on:
    routers that see no PIM neighbour or no member on a link just stay quiet.
    """

    name: str
    address: str  # CIDR, e.g. "10.0.1.1/30"
    pim: bool = True
    igmp: bool = True

    def __post_init__(self) -> None:
        ipaddress.IPv4Interface(self.address)  # fail early on a typo
        if not 0 < len(self.name) <= 15:  # IFNAMSIZ - 1
            raise ValueError(f"bad interface name {self.name!r}")

    @property
    def ip(self) -> str:
        """The address without its prefix length."""
        return str(ipaddress.IPv4Interface(self.address).ip)


@dataclass(frozen=True)
class IgmpTimers:
    """IGMP querier settings; the defaults are RFC 3376's, which FRR also uses.

    Milliseconds are the input unit everywhere; each backend converts to its own
    unit (FRR: seconds for the query interval, deciseconds for the others).
    """

    query_interval_s: int = 125
    query_max_response_ms: int = 10_000
    last_member_query_interval_ms: int = 1_000
    last_member_query_count: int = 2
    version: int = 3
    # Drop a group (or an IGMPv3 source) at once on the last leave, skipping the
    # last-member queries. Only FRR >= 10.4 has it (the ``frr10`` backend).
    immediate_leave: bool = False

    def __post_init__(self) -> None:
        if self.version not in (2, 3):
            raise ValueError("IGMP version must be 2 or 3")
        if not 1 <= self.query_interval_s <= 65535:
            raise ValueError("query_interval_s must be in 1..65535")
        for name in ("query_max_response_ms", "last_member_query_interval_ms"):
            value = getattr(self, name)
            # FRR only takes whole deciseconds; refuse rather than silently round.
            if value % 100 or not 100 <= value <= 6_553_500:
                raise ValueError(f"{name} must be a multiple of 100 ms in 100..6553500")
        if not 1 <= self.last_member_query_count <= 255:
            raise ValueError("last_member_query_count must be in 1..255")
        if self.query_max_response_ms >= self.query_interval_s * 1000:
            raise ValueError("query_max_response_ms must be shorter than the query interval")

    @property
    def leave_latency_ms(self) -> int:
        """Time a querier needs to give up a group after the last leave (interval x count)."""
        return self.last_member_query_interval_ms * self.last_member_query_count


@dataclass(frozen=True)
class RouterSpec:
    """Everything a planner needs to know about one router.

    ``run_dir`` is the router's private directory (e.g.
    ``/run/mcclab/<run>/nodes/<node>``); every file, pid file and control
    socket of every backend lives below it, so routers never share state.
    ``pim_neighbors`` lists the addresses of the PIM routers expected on the
    router's links: readiness waits until all of them are seen.
    """

    name: str
    ifaces: tuple[RouterIface, ...]
    run_dir: str
    rp: str | None = None
    ssm_range: str = DEFAULT_SSM_RANGE
    igmp: IgmpTimers = IgmpTimers()
    pim_neighbors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.run_dir.startswith("/") or self.run_dir.rstrip("/") in ("", "/run", "/var/run"):
            raise ValueError(f"run_dir must be a private absolute directory, got {self.run_dir!r}")
        if self.rp is not None:
            ipaddress.IPv4Address(self.rp)
        ssm = ipaddress.IPv4Network(self.ssm_range)
        if not ssm.subnet_of(ipaddress.IPv4Network(ALL_MULTICAST)):
            raise ValueError(f"ssm_range {self.ssm_range} is not multicast")
        names = [i.name for i in self.ifaces]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate interface on router {self.name}")


@dataclass(frozen=True)
class StaticMroute:
    """A static multicast route: traffic to ``group`` (from ``source``, or any source
    when None) arriving on ``inbound`` is copied to every ``outbound`` interface."""

    group: str
    inbound: str
    outbound: tuple[str, ...]
    source: str | None = None

    def __post_init__(self) -> None:
        net = ipaddress.IPv4Network(self.group)  # a group or a group/len range
        if not net.subnet_of(ipaddress.IPv4Network(ALL_MULTICAST)):
            raise ValueError(f"{self.group} is not a multicast group")
        if self.source is not None:
            ipaddress.IPv4Network(self.source)
        if not self.outbound or self.inbound in self.outbound:
            raise ValueError("outbound must be non-empty and exclude the inbound interface")


@dataclass(frozen=True)
class DirSpec:
    """A directory the runner must create before starting anything."""

    path: str
    owner: str = "root"
    group: str = "root"
    mode: int = 0o755


@dataclass(frozen=True)
class ReadinessCheck:
    """One probe to poll until ``predicate(stdout)`` is true.

    ``in_netns`` says whether ``argv`` must run inside the router's network
    namespace. Control sockets are filesystem paths, which are reachable from
    any namespace, so the built-in checks can run from the root namespace.

    ``remedy``, when set, is a command run the same way each time the check has
    stayed pending for ``remedy_after`` seconds: for a known daemon state that
    does not pass on its own; the runner reports each use.
    """

    name: str
    argv: tuple[str, ...]
    predicate: Callable[[str], bool] = field(compare=False)
    in_netns: bool = False
    remedy: tuple[str, ...] = ()
    remedy_after: float = 10.0


@dataclass(frozen=True)
class DaemonPlan:
    """What a runner needs to bring one router's routing daemons up and down.

    ``start`` argvs run in order inside the router's netns, each in its own
    process group (new session), and stay in the foreground; stop each by
    signalling its process group (SIGTERM). ``pidfiles`` are the daemons' own
    pid files, for diagnostics. Nothing here is a shared system path.
    """

    backend: str
    dirs: tuple[DirSpec, ...]
    files: Mapping[str, str]
    start: tuple[tuple[str, ...], ...]
    pidfiles: tuple[str, ...]
    readiness: tuple[ReadinessCheck, ...]
    logs: tuple[str, ...] = ()
    # Before start[i] the runner waits for the file await_paths[i] to exist
    # ("" or a missing entry: start at once), e.g. zebra's socket before pimd.
    await_paths: tuple[str, ...] = ()
    # Extra wait after the checks pass, for daemon-internal state no command
    # shows (pimd resolves its path to a static RP only on a periodic timer).
    settle_s: float = 0.0


def bind_over(mount_point: str, source: str, name: str, *argv: str) -> tuple[str, ...]:
    """``argv`` in a private mount namespace where ``source`` is bind-mounted over
    ``mount_point`` (nothing leaks out to other routers).

    ``unshare`` execs in place (no --fork) and ``sh`` execs too, so the pid the
    runner starts is the daemon's own pid and its process group is the daemon's.
    ``name`` is the shell's $0, which shows in ``ps``.
    """
    script = f'mount --bind "$1" {mount_point} && shift && exec "$@"'
    return ("unshare", "--mount", "--propagation", "private", "--",
            "sh", "-ec", script, name, source, *argv)


def join(*parts: str) -> str:
    """Join path parts with single slashes (pure; no os.path normalisation surprises)."""
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts))
