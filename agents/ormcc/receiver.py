"""The ORMCC receiver (Appendix I-B) as a pure state machine.

On every packet that reveals a sequence gap the receiver measures its TRAC (its
output rate averaged over ``trac_window``, footnote 1), folds it into its own
E(U), and sends one CI(mu) (however many packets the gap spans) if no CR is
valid, if it is the CR, or if E(U) < E(mu^cr) - sigma^cr; otherwise the CI is
suppressed. Both outcomes are counted.
"""

from __future__ import annotations

from collections import deque

from agents.ormcc.estimators import Ewma
from agents.ormcc.params import OrmccParams
from agents.ormcc.wire import Ci, OrmccExt, encode_ci
from agents.runtime.actions import Action, Feedback, Join
from agents.runtime.core import ReceiverCore
from agents.runtime.header import Header

_HALF = 1 << 31
_MOD = 1 << 32


class OrmccReceiver(ReceiverCore):
    """Measures TRAC at losses and decides whether its CI(mu) goes to the source.

    ``rid`` is this receiver's 32-bit id, carried in its CIs and echoed by the
    source in the CR field of data packets (the factory draws it at random).
    """

    def __init__(self, params: OrmccParams, session: object | None = None, *, rid: int):
        self.params = params
        self.rid = rid & (_MOD - 1)
        self.avg = Ewma(params.alpha)  # E(U); no deviation is used at a receiver
        self.window: deque[tuple[float, int]] = deque()
        self.window_bytes = 0
        self.first_arrival: float | None = None
        self.expected: int | None = None
        self.cr = OrmccExt(0, 0, 0.0, 0.0)
        self.last_trac = 0.0
        self.counts = {"loss_events": 0, "lost_packets": 0, "ci_sent": 0, "ci_suppressed": 0}

    def start(self, now: float) -> list[Action]:
        return [Join(0)]

    def on_packet(self, now: float, header: Header, payload_len: int, group: str) -> list[Action]:
        self._account(now, payload_len)
        if isinstance(header.ext, OrmccExt):
            self.cr = header.ext
        if self.expected is None:
            self.expected = (header.seq + 1) % _MOD
            return []
        gap = (header.seq - self.expected) % _MOD
        if gap >= _HALF:  # late or duplicate: not a loss, not progress
            return []
        self.expected = (header.seq + 1) % _MOD
        if gap == 0:
            return []
        self.counts["loss_events"] += 1
        self.counts["lost_packets"] += gap
        trac = self.trac(now)
        self.last_trac = trac
        self.avg.update(trac)
        if not self.should_send():
            self.counts["ci_suppressed"] += 1
            return []
        self.counts["ci_sent"] += 1
        return [Feedback(encode_ci(Ci(self.rid, header.seq, header.send_ns, trac)))]

    def should_send(self) -> bool:
        """Appendix I-B's test, plus the CR itself (it must keep reporting)."""
        cr = self.cr
        if not cr.valid or cr.cr == self.rid:
            return True
        assert self.avg.mean is not None
        return self.avg.mean < cr.mu_cr - cr.sigma_cr

    def trac(self, now: float) -> float:
        """Output rate over the last ``trac_window`` (or since the first packet, if shorter)."""
        assert self.first_arrival is not None
        span = min(self.params.trac_window, max(now - self.first_arrival, 0.1))
        return self.window_bytes * 8 / span

    def metrics(self) -> dict[str, float]:
        out = {"trac_avg_bps": self.avg.mean or 0.0, "trac_last_bps": self.last_trac,
               "is_cr": float(bool(self.cr.valid) and self.cr.cr == self.rid),
               "rid": float(self.rid)}
        out.update({k: float(v) for k, v in self.counts.items()})
        return out

    def _account(self, now: float, size: int) -> None:
        if self.first_arrival is None:
            self.first_arrival = now
        self.window.append((now, size))
        self.window_bytes += size
        horizon = now - self.params.trac_window
        while self.window and self.window[0][0] <= horizon:
            self.window_bytes -= self.window.popleft()[1]
