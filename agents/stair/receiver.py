"""The STAIR receiver (sec. V): per-receiver AIMD over CLs, NCLs and one stair layer.

* Loss: a gap in any joined channel's sequence numbers.
* Additive increase: when a subscribed stair layer recycles (a packet of a new
  stair cycle) after a whole stair period of that layer without loss, increase the
  static layers by one unit (Fib1's one join and two leaves, or one CL join and the
  NCL leaves when the rate reaches a power of alpha), compensating that layer's
  drop (Fig. 7). With the complex option's two layers each one's recycles are
  compensated, so the two staircases add up: the combined increase.
* Multiplicative decrease (sec. V-A): "if there is a packet loss event in a stair
  period (of one or more losses), then one round of multiplicative decrease is
  performed" at once (leave the top CL and the top NCL): the first loss of a period
  of the primary (fastest subscribed) stair layer decreases, later losses of the
  same period do not. ``md_holdoff`` (default 0) also holds a decrease for that
  long after the previous one, across a period's end.
* RTT: a ping-like probe to the sender every ``probe_interval`` (EWMA), the
  join latency of each join (``mrtt``), or a fixed value.
* Stair layer: the simple or complex option of sec. V-C, re-chosen at the end of
  each stair period.
"""

from __future__ import annotations

from agents.runtime.actions import Action, Join, Leave, Log, Reject, SetTimer
from agents.runtime.core import ReceiverCore
from agents.runtime.header import Header
from agents.runtime.session import Session
from agents.stair.config import SL, Layout, StairParams
from agents.stair.layering import Subscription
from agents.stair.probe import parse_echo, probe, rtt_sample
from agents.stair.stairs import select_complex, select_simple

PROBE = "probe"
SEQ_MASK = 0xFFFFFFFF


class StairReceiver(ReceiverCore):
    """One STAIR receiver; all state is here and every input is ``(now, event)``."""

    def __init__(self, params: StairParams, session: Session | None = None):
        self.p = params
        self.layout = Layout(params)
        self.scheme = self.layout.scheme
        self.sub: Subscription = self.scheme.initial()
        self.stairs: tuple[int, ...] = ()
        self.rtt: float | None = params.rtt
        self.mrtt: float | None = None
        self.joined: set[int] = set()
        self.expected: dict[int, int] = {}
        self.join_time: dict[int, float] = {}
        # per subscribed stair layer: its current cycle, whether the period running now
        # is a whole one (not joined mid-way), whether it has seen a loss
        self.cycles: dict[int, int | None] = {}
        self.full: dict[int, bool] = {}
        self.lossy: dict[int, bool] = {}
        self.period_loss = False  # the primary layer's current period has seen a loss
        self.last_md = float("-inf")
        self.probe_seq = 0
        self.last_sample = 0.0  # last probe RTT sample (s)
        self.host_delay = 0.0  # host-side wait removed from it (s): receiver + sender
        self.counts = dict.fromkeys(
            ("increases", "decreases", "loss_events", "lost_packets", "joins", "leaves",
             "periods", "probes_sent", "probe_replies", "bad_ext"), 0)

    # --- helpers -----------------------------------------------------------------

    @property
    def units(self) -> int:
        """Current static rate (CLs + NCLs) in base units."""
        return self.scheme.rate(self.sub)

    def _join(self, now: float, ch: int) -> Join:
        self.joined.add(ch)
        self.expected.pop(ch, None)
        self.join_time[ch] = now
        self.counts["joins"] += 1
        return Join(ch)

    def _leave(self, ch: int) -> Leave:
        self.joined.discard(ch)
        self.expected.pop(ch, None)
        self.join_time.pop(ch, None)
        self.counts["leaves"] += 1
        return Leave(ch)

    def _move(self, now: float, new: Subscription) -> list[Action]:
        """Joins first (the new layer should flow as early as possible), then leaves."""
        ch = self.layout.group_channel
        actions: list[Action] = [self._join(now, ch(g)) for g in sorted(new - self.sub)]
        actions += [self._leave(ch(g)) for g in sorted(self.sub - new)]
        self.sub = new
        return actions

    def _select(self) -> tuple[int, ...]:
        pick = select_simple if self.p.subscription == "simple" else select_complex
        return pick(self.rtt, self.layout.rtts) if self.rtt is not None else ()

    def _set_stairs(self, now: float, want: tuple[int, ...]) -> list[Action]:
        sl = self.layout.channel
        actions: list[Action] = [self._leave(sl(SL, s)) for s in self.stairs if s not in want]
        actions += [self._join(now, sl(SL, s)) for s in want if s not in self.stairs]
        self.stairs = want
        self.cycles = dict.fromkeys(want)
        self.full = dict.fromkeys(want, False)
        self.lossy = dict.fromkeys(want, False)
        actions.append(Log("stair", {"layers": list(want), "rtt_s": self.rtt,
                                     "emulated_s": [self.layout.rtts[s] for s in want]}))
        return actions

    def _event(self, name: str, now: float, joins: int, leaves: int, before: int) -> Log:
        cls, ncls = self.scheme.split(self.sub)
        return Log(name, {"units_before": before, "units": self.units, "cl": cls,
                          "ncl": sorted(i for _, i in ncls), "joins": joins, "leaves": leaves})

    def _rtt_sample(self, now: float, sample: float) -> list[Action]:
        first = self.rtt is None
        self.rtt = sample if first else self.rtt + self.p.rtt_gain * (sample - self.rtt)
        return self._set_stairs(now, self._select()) if first else []

    # --- events ------------------------------------------------------------------

    def start(self, now: float) -> list[Action]:
        channel = self.layout.group_channel
        actions: list[Action] = [self._join(now, channel(g)) for g in sorted(self.sub)]
        if self.rtt is not None:
            actions += self._set_stairs(now, self._select())
        if self.p.rtt_source == "probe":
            actions += self.on_timer(now, PROBE)
        actions.append(self._event("subscription", now, len(self.joined), 0, self.units))
        return actions

    def on_timer(self, now: float, timer_id: str) -> list[Action]:
        if timer_id != PROBE:
            return []
        self.counts["probes_sent"] += 1
        self.probe_seq += 1
        return [probe(self.probe_seq, now), SetTimer(PROBE, now + self.p.probe_interval)]

    def on_feedback(self, now: float, data: bytes, peer: str) -> list[Action]:
        """A probe echoed by the sender, handled as it arrives: one RTT sample."""
        return self.on_feedback_at(now, now, data, peer)

    def on_feedback_at(self, now: float, arrival: float, data: bytes, peer: str
                       ) -> list[Action]:
        """A probe echoed by the sender: one RTT sample, from the echo's ``arrival`` (the
        kernel's timestamp) less the sender's hold time, so neither host's scheduling
        delay counts (the paper's ping measures the network). Anything but an echo of a
        probe sent before ``now`` is rejected (a counted drop)."""
        got = parse_echo(data)
        if got is None or got[1] > now:
            return [Reject()]
        self.counts["probe_replies"] += 1
        sample = rtt_sample(got[1], got[2], arrival)
        if sample is None:
            return []
        self.last_sample = sample
        self.host_delay = (now - arrival) + got[2]
        if self.p.rtt_source != "probe":
            return []
        return self._rtt_sample(now, sample)

    def on_packet(self, now: float, header: Header, payload_len: int, group: str) -> list[Action]:
        ch = header.channel
        if ch not in self.joined:
            return []
        ext = header.ext
        if ext is None or (ext.kind, ext.index) != self.layout.layer(ch):
            self.counts["bad_ext"] += 1
            return [Reject()]  # a layer other than the channel's: forged or misrouted
        actions: list[Action] = []
        joined_at = self.join_time.pop(ch, None)
        if joined_at is not None:
            self.mrtt = now - joined_at
            if self.p.rtt_source == "mrtt":
                actions += self._rtt_sample(now, self.mrtt)
        expected = self.expected.get(ch)
        self.expected[ch] = (header.seq + 1) & SEQ_MASK
        if expected is not None:
            gap = (header.seq - expected) & SEQ_MASK
            if 0 < gap < 1 << 31:
                self.counts["lost_packets"] += gap
                actions += self._on_loss(now)
        sl = ext.index
        if ext.kind == SL and sl in self.cycles:
            if self.cycles[sl] is None:
                self.cycles[sl] = ext.cycle
            elif ext.cycle != self.cycles[sl]:
                self.cycles[sl] = ext.cycle
                actions += self._period_end(now, sl)
        return actions

    def _on_loss(self, now: float) -> list[Action]:
        for sl in self.lossy:
            self.lossy[sl] = True
        if self.period_loss or now - self.last_md < self.p.md_holdoff:
            return []  # this period has had its decrease
        self.period_loss = True
        self.last_md = now
        self.counts["loss_events"] += 1
        before = self.units
        step = self.scheme.multiplicative_decrease(self.sub)
        if step.sub == self.sub:
            return []
        self.counts["decreases"] += 1
        actions = self._move(now, step.sub)
        return [*actions, self._event("decrease", now, len(step.joins), len(step.leaves), before)]

    def _period_end(self, now: float, sl: int) -> list[Action]:
        """Stair layer ``sl`` recycled: compensate its drop unless its period was lossy
        (or joined mid-way); the primary layer's period end also opens a new decrease
        period and re-chooses the stair layers."""
        self.counts["periods"] += 1
        actions: list[Action] = []
        if self.full[sl] and not self.lossy[sl] and self.units < self.p.units:
            before = self.units
            step = self.scheme.increase(self.sub)
            self.counts["increases"] += 1
            actions += self._move(now, step.sub)
            actions.append(self._event("increase", now, len(step.joins), len(step.leaves),
                                       before))
        self.full[sl] = True
        self.lossy[sl] = False
        if sl != self.stairs[0]:
            return actions
        self.period_loss = False
        want = self._select()
        if want and want != self.stairs:
            actions += self._set_stairs(now, want)
        return actions

    def metrics(self) -> dict[str, float]:
        cls, ncls = self.scheme.split(self.sub)
        primary = self.stairs[0] if self.stairs else -1
        out: dict[str, float] = {
            "subscription_level": self.units,
            "static_rate_bps": self.units * self.p.base_rate,
            "cumulative_layers": cls,
            "noncumulative_mask": sum(1 << i for _, i in ncls),
            "stair_layer": primary,
            "stair_rtt_ms": self.layout.rtts[primary] * 1e3 if primary >= 0 else 0.0,
            "rtt_ms": (self.rtt or 0.0) * 1e3,
            "mrtt_ms": (self.mrtt or 0.0) * 1e3,
            "rtt_sample_ms": self.last_sample * 1e3,
            "probe_host_ms": self.host_delay * 1e3,
        }
        # joins and leaves are the runtime's own counters (mcc_agent_joins_total)
        out.update({k: float(v) for k, v in self.counts.items() if k not in ("joins", "leaves")})
        return out
