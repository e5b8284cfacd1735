"""Per link-direction counters, the same record for both backends (tidy: one row each)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class LinkCounters:
    """Counters of one emulated direction at one moment.

    Bytes are IP bytes on both backends (the kernel backend subtracts the
    Ethernet header with a size table). Fields a backend cannot measure are
    None: the kernel keeps no RED average or maximum queue, for example.
    """

    link: int
    src: str
    dst: str
    backend: str
    node: str | None  # namespace where the direction is emulated (None: root namespace)
    iface: str
    hook: str
    time: float  # CLOCK_MONOTONIC seconds (userspace: when the emulator wrote its stats)
    pkts_in: int  # arrived at the emulated link, including those it dropped
    bytes_in: int | None  # None on the kernel backend (tc does not count dropped bytes)
    pkts_sent: int  # delivered to the far end
    bytes_sent: int
    drops_queue: int  # drop-tail overflow and RED (early and forced)
    drops_loss: int  # random loss (Bernoulli or Gilbert-Elliott)
    qlen_pkts: int  # packets waiting for the link now (not the one being serialised)
    qlen_bytes: int
    in_flight: int  # admitted, not yet delivered (queue + serialisation + propagation)
    max_qlen: int | None = None
    red_avg: float | None = None
    # IGMP and PIM packets the link admitted whatever its queue and loss (userspace's
    # protect_control; the kernel backend's control band, which counts ARP too)
    control_in: int | None = None
    errors: int = 0  # emulator-side losses that are not part of the model (should stay 0)

    def as_dict(self) -> dict[str, object]:
        """Plain dict (for tables, JSON and a Prometheus exporter)."""
        return asdict(self)
