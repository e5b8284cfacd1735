"""The kernel feature probe reports what this kernel really has.

On this project's CI machine the kernel lacks sch_netem, sch_red and Open
vSwitch but has tbf, htb, NFQUEUE, nftables and IPv4 multicast routing with
PIM. The test checks the probe against an independent source, the kernel's
own config (/proc/config.gz), rather than hard-coding the answer, so it holds
on a stock Debian kernel too.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from mcclab.features import KERNEL_LINK_FEATURES

pytestmark = pytest.mark.root

CONFIG = Path("/proc/config.gz")
# feature -> kernel config symbols, any of which (=y or =m) provides it
SYMBOLS = {
    "netem": ["CONFIG_NET_SCH_NETEM"],
    "red": ["CONFIG_NET_SCH_RED"],
    "tbf": ["CONFIG_NET_SCH_TBF"],
    "htb": ["CONFIG_NET_SCH_HTB"],
    "prio": ["CONFIG_NET_SCH_PRIO"],
    "u32": ["CONFIG_NET_CLS_U32"],
    "ip_mroute": ["CONFIG_IP_MROUTE"],
    "pim": ["CONFIG_IP_PIMSM_V2"],
    "openvswitch": ["CONFIG_OPENVSWITCH"],
    "nfqueue": ["CONFIG_NETFILTER_XT_TARGET_NFQUEUE"],
    "nft_numgen": ["CONFIG_NFT_NUMGEN"],
}


def kernel_config() -> dict[str, str]:
    """The running kernel's config symbols."""
    if not CONFIG.exists():
        pytest.skip("the kernel does not expose /proc/config.gz to compare against")
    values = {}
    for line in gzip.decompress(CONFIG.read_bytes()).decode().splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
    return values


@pytest.mark.parametrize("feature", sorted(SYMBOLS))
def test_probe_agrees_with_kernel_config(feature, kernel_features):
    config = kernel_config()
    configured = any(config.get(sym) in ("y", "m") for sym in SYMBOLS[feature])
    built_in = any(config.get(sym) == "y" for sym in SYMBOLS[feature])
    found = getattr(kernel_features, feature)
    if built_in:
        assert found, f"{feature} is built in but the probe did not find it"
    elif not configured:
        assert not found, f"{feature} is not configured but the probe claims it"
    # =m: a module that may or may not be installed; the probe's answer stands.


def test_link_backend_auto_follows_the_qdiscs(kernel_features):
    has_kernel_qdiscs = all(getattr(kernel_features, f) for f in KERNEL_LINK_FEATURES)
    expected = "kernel" if has_kernel_qdiscs else "userspace"
    assert kernel_features.link_backend("auto") == expected
    assert kernel_features.link_backend("userspace") == "userspace"
