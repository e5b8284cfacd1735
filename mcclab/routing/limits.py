"""Kernel limits a routing backend runs into, checked before a lab is built.

Linux keeps one IPv4 multicast routing table of ``MAXVIFS`` = 32 virtual
interfaces per namespace (``include/uapi/linux/mroute.h``). FRR's and pimd's
PIM take one of them for the register interface ``pimreg``; an interface that
finds the table full stays up in PIM's own view but gets no vif, so the kernel
never forwards multicast to or from it. Nothing fails loudly: FRR only logs
"Attempting to configure more than MAXVIFS=32", and the readiness checks pass.
"""

from __future__ import annotations

from collections.abc import Mapping

MAXVIFS = 32
# Vifs a backend takes for itself before the interfaces get theirs.
RESERVED_VIFS = {"frr": 1, "frr10": 1, "pimd": 1, "smcroute": 0}


def max_router_interfaces(backend: str) -> int:
    """How many interfaces one router can give to multicast routing under ``backend``."""
    return MAXVIFS - RESERVED_VIFS.get(backend, 1)


def vif_problems(backend: str, interfaces: Mapping[str, int]) -> list[str]:
    """One sentence per router with more interfaces than the kernel has vifs for.

    ``interfaces`` maps a router to its interface count (one per link, LANs included).
    """
    limit = max_router_interfaces(backend)
    return [f"router {name} has {count} interfaces but the kernel's multicast routing "
            f"table holds {MAXVIFS} vifs ({limit} usable with {backend}): interfaces "
            f"beyond the {limit}th would silently carry no multicast; split the router "
            "or put hosts on a LAN"
            for name, count in sorted(interfaces.items()) if count > limit]
