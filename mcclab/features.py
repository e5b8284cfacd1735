"""Detect what this kernel can do, by trying it in a throwaway network namespace.

Kernel configs differ (this project's CI kernel has no sch_netem or sch_red, a
stock Debian kernel has both), and modules may load on demand, so the only
reliable answer is to attempt each feature. Probes run in a private netns so
they never touch the host's interfaces.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from dataclasses import asdict, dataclass, fields

from mcclab.net.setns import NETNS_DIR, setns_fd

_QDISC_PROBES = {
    "netem": ["netem", "delay", "1ms"],
    "red": ["red", "limit", "60000", "min", "3000", "max", "9000", "avpkt", "1000",
            "burst", "4", "bandwidth", "1mbit", "probability", "0.1"],
    "tbf": ["tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms"],
    "htb": ["htb", "default", "1"],
    "pfifo": ["pfifo", "limit", "10"],
    # The kernel tree's own form (mcclab/links/kernel.py): with 2 bands, prio refuses
    # tc's default priomap (it names band 2), so the probe must give one.
    "prio": ["prio", "bands", "2", "priomap", *["1"] * 16],
}
# What the kernel link backend's tree needs (mcclab/links/kernel.py): the qdiscs, and
# u32 to send IGMP, PIM and ARP to the prio's control band.
KERNEL_LINK_FEATURES = ("netem", "red", "htb", "pfifo", "prio", "u32")

MRT_INIT, MRT_PIM = 200, 207


@dataclass(frozen=True)
class KernelFeatures:
    """Which kernel features a probe found."""

    netns: bool
    veth: bool
    bridge: bool
    netem: bool
    red: bool
    tbf: bool
    htb: bool
    pfifo: bool
    prio: bool
    u32: bool
    nfqueue: bool
    nft_numgen: bool
    ip_mroute: bool
    pim: bool
    openvswitch: bool

    def link_backend(self, requested: str = "auto") -> str:
        """Resolve 'auto' to 'kernel' when every needed qdisc exists, else 'userspace'."""
        if requested != "auto":
            return requested
        kernel_ok = all(getattr(self, f) for f in KERNEL_LINK_FEATURES)
        return "kernel" if kernel_ok else "userspace"

    def missing_for(self, backend: str) -> list[str]:
        """Features the given link backend needs that this kernel lacks."""
        need = {
            "kernel": list(KERNEL_LINK_FEATURES),
            "userspace": ["nfqueue"],
        }[backend]
        base = ["netns", "veth", "ip_mroute"]
        return [f for f in base + need if not getattr(self, f)]

    def as_dict(self) -> dict[str, bool]:
        """Plain dict, for run records."""
        return asdict(self)


def _run(argv: list[str]) -> bool:
    """True when the command exits 0."""
    try:
        return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _in_ns(ns: str, *argv: str) -> bool:
    """Run argv inside the probe namespace."""
    return _run(["ip", "netns", "exec", ns, *argv])


def _mroute_probe(ns: str) -> tuple[bool, bool]:
    """(IP_MROUTE, PIM) by opening the multicast routing socket inside the probe netns."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(NETNS_DIR / ns, os.O_RDONLY)
    try:
        try:
            setns_fd(target, ns)
        except OSError:
            return False, False
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_IGMP)
        except OSError:
            return False, False
        with sock:
            try:
                sock.setsockopt(socket.IPPROTO_IP, MRT_INIT, 1)
            except OSError:
                return False, False
            try:
                sock.setsockopt(socket.IPPROTO_IP, MRT_PIM, 1)
                return True, True
            except OSError:
                return True, False
    finally:
        setns_fd(own, "back to the caller's namespace")
        os.close(own)
        os.close(target)


def _u32_probe(ns: str) -> bool:
    """True when a u32 filter (IP protocol match) attaches under an htb root in ``ns``."""
    if not _in_ns(ns, "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb"):
        return False
    try:
        return _in_ns(ns, "tc", "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip",
                      "prio", "1", "u32", "match", "ip", "protocol", "2", "0xff",
                      "flowid", "1:1")
    finally:
        _in_ns(ns, "tc", "qdisc", "del", "dev", "lo", "root")


def _openvswitch() -> bool:
    """True when the openvswitch datapath generic-netlink family exists (or autoloads)."""
    try:
        from pyroute2.netlink.generic import GenericNetlinkSocket
    except ImportError:
        return os.path.isdir("/sys/module/openvswitch")
    sock = GenericNetlinkSocket()
    try:
        sock.bind("ovs_datapath", None)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False
    finally:
        sock.close()


def probe() -> KernelFeatures:
    """Probe the running kernel. Needs root; runs entirely inside a temporary netns."""
    ns = f"mclprobe-{uuid.uuid4().hex[:8]}"
    if not _run(["ip", "netns", "add", ns]):
        return KernelFeatures(*([False] * len(fields(KernelFeatures))))
    try:
        _in_ns(ns, "ip", "link", "set", "lo", "up")
        qdiscs = {}
        for name, args in _QDISC_PROBES.items():
            qdiscs[name] = _in_ns(ns, "tc", "qdisc", "add", "dev", "lo", "root", *args)
            _in_ns(ns, "tc", "qdisc", "del", "dev", "lo", "root")
        u32 = _u32_probe(ns)
        veth = _in_ns(ns, "ip", "link", "add", "pa", "type", "veth", "peer", "name", "pb")
        bridge = _in_ns(ns, "ip", "link", "add", "pbr", "type", "bridge")
        nfqueue = _in_ns(ns, "iptables", "-t", "mangle", "-A", "POSTROUTING", "-o", "lo",
                         "-j", "NFQUEUE", "--queue-num", "7")
        numgen = _in_ns(ns, "nft", "add table ip p; add chain ip p c; "
                        "add rule ip p c numgen random mod 100 < 1 counter")
        mroute, pim = _mroute_probe(ns)
        return KernelFeatures(
            netns=True, veth=veth, bridge=bridge, nfqueue=nfqueue, nft_numgen=numgen,
            ip_mroute=mroute, pim=pim, openvswitch=_openvswitch(), u32=u32, **qdiscs,
        )
    finally:
        _run(["ip", "netns", "del", ns])
