"""Drive a sender core that keeps one timer on a bare simulated clock (no network)."""

from __future__ import annotations

from agents.runtime.actions import Send, SetTimer
from agents.runtime.core import SenderCore


def drive_sender(core: SenderCore, duration: float) -> list[tuple[float, Send]]:
    """Every packet the core sends before ``duration``, with its send time."""
    now, out = 0.0, []
    actions = core.start(now)
    while True:
        out += [(now, a) for a in actions if isinstance(a, Send)]
        (timer,) = [a for a in actions if isinstance(a, SetTimer)]
        assert timer.at > now
        if timer.at >= duration:
            return out
        now = timer.at
        actions = core.on_timer(now, timer.timer_id)
