"""A scale factor for readiness timeouts on a slow CPU (``MCCLAB_TIMEOUT_SCALE``).

Readiness waits (a daemon answering, a first packet arriving) are written for
this project's lab machine. Under software emulation (the VM check runs QEMU's
TCG, about 10x slower) the same start-ups take longer, so a wait for readiness
may be stretched. It never scales an assertion's target: a measured time is
still judged against the same limit.
"""

from __future__ import annotations

import os

ENV = "MCCLAB_TIMEOUT_SCALE"


def timeout_scale() -> float:
    """The factor from ``MCCLAB_TIMEOUT_SCALE`` (1 when unset); a bad value is an error."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{ENV}={text!r} is not a number") from None
    if not 1.0 <= value <= 100.0:
        raise ValueError(f"{ENV}={text!r} must be between 1 and 100")
    return value


def scaled(seconds: float) -> float:
    """A readiness timeout of ``seconds`` on the reference machine, scaled for this one."""
    return seconds * timeout_scale()
