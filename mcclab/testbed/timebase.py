"""Times crossing between the controller's clocks and a host's, moved by the measured offsets.

The runner keeps a run's schedule on the controller's ``CLOCK_MONOTONIC``. A
testbed host's monotonic clock counts from its own boot, so it differs from the
controller's by seconds to days; a time handed to a host as is would be in its
past or far in its future. Commands stay data, so the translation is a rewrite
of the argv the SSH backend sends (:func:`to_host_argv`), and of the files it
copies back (:func:`marks_to_controller`; agents' event logs are moved by
``mcclab.testbed.lab.shift_event_times``). A host clock ``offset`` ahead of the
controller's (``mcclab.testbed.clocks``) means

    host time = controller time + offset.

Every translation is kept as a :class:`Translation`, with the uncertainty of
the offset it used, and written into ``clocks.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mcclab.experiment.starts import armed_argv

# Options whose value is a time on the controller's CLOCK_MONOTONIC: the run's time 0
# given to agent hosts (agents.host) and on/off UDP sources (mcclab.traffic.udp_onoff).
MONOTONIC_OPTIONS = frozenset({"--t0"})
# How an armed wrapper (mcclab.experiment.starts.armed_argv) begins: its marks file is
# its sixth word after these four, after the delay and the key.
_ARMED_PREFIX = armed_argv((), 0.0, "0", Path("/marks"))[:4]
_ARMED_MARKS = 6


@dataclass(frozen=True)
class Translation:
    """One time value or file moved between a host's clock and the controller's.

    ``direction`` is ``to-host`` (a value sent in a command) or ``to-controller``
    (values in a file copied back); ``clock`` names the clock the offset is of.
    """

    node: str
    direction: str
    clock: str
    what: str
    offset_s: float
    uncertainty_s: float
    controller_s: float | None = None  # a single value sent: its two readings
    host_s: float | None = None
    values: int | None = None  # a file: how many values it moved

    def record(self) -> dict[str, object]:
        """The row of ``clocks.json``'s ``translations`` (unset fields left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def program(argv: Sequence[str]) -> str:
    """A short name of what ``argv`` runs: the module after ``-m``, else the program's
    file name (for the translation records)."""
    words = list(argv)
    if "-m" in words[:-1]:
        return words[words.index("-m") + 1]
    return Path(words[0]).name if words else ""


Moved = tuple[str, float, float]  # an option, its value on the controller's clock, on the host's


def to_host_argv(argv: Sequence[str], offset: float) -> tuple[list[str], list[Moved]]:
    """``argv`` with every controller-monotonic time (the value of an option in
    :data:`MONOTONIC_OPTIONS`, as ``--t0 T`` or ``--t0=T``) moved onto a host clock
    ``offset`` seconds ahead; and what was moved, as ``(option, controller, host)``.

    Other words, and an option's value that is no number, are left as they are.
    """
    out: list[str] = []
    moved: list[Moved] = []
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, inline = word.partition("=")
        if name in MONOTONIC_OPTIONS and (eq or i + 1 < len(words)):
            value = inline if eq else words[i + 1]
            try:
                controller = float(value)
            except ValueError:
                controller = None
            if controller is not None:
                host = controller + offset
                moved.append((name, controller, host))
                out += [f"{name}={host:.6f}"] if eq else [name, f"{host:.6f}"]
                i += 1 if eq else 2
                continue
        out.append(word)
        i += 1
    return out, moved


def armed_marks(argv: Sequence[str]) -> str | None:
    """The marks file an armed wrapper writes its start to (None: ``argv`` is no
    armed wrapper)."""
    words = tuple(argv)
    if words[:len(_ARMED_PREFIX)] == _ARMED_PREFIX and len(words) > _ARMED_MARKS:
        return words[_ARMED_MARKS]
    return None


def marks_to_controller(text: str, offset: float) -> tuple[str, int]:
    """An armed-start marks file (``key boot-time`` lines, the host's CLOCK_BOOTTIME)
    with every time moved onto the controller's boot clock, from a host ``offset``
    seconds ahead; and how many times were moved. Other lines are kept."""
    out = []
    moved = 0
    for line in text.splitlines():
        key, sep, value = line.partition(" ")
        try:
            host = float(value)
        except ValueError:
            out.append(line)
            continue
        out.append(f"{key}{sep}{host - offset:.6f}")
        moved += 1
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), moved
