"""Quantities with mandatory units: rates, durations, sizes, probabilities.

Every physical quantity in a topology or experiment file must carry its unit
("10Mbit", "20ms", "50pkt", "1%"). A bare number is rejected, because a bare
``delay: 20`` could mean seconds or milliseconds and the papers mix both.
The parsed value is stored in one canonical unit (bit/s, seconds, bytes or
packets, probability in [0, 1]).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, WithJsonSchema

_NUMBER = r"(-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"

_RATE_UNITS = {
    "bit": 1.0, "bps": 1.0,
    "kbit": 1e3, "kbps": 1e3,
    "mbit": 1e6, "mbps": 1e6,
    "gbit": 1e9, "gbps": 1e9,
}
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}
_SIZE_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1_000_000, "mib": 1 << 20}


def _split(value: object, what: str, example: str) -> tuple[float, str]:
    """Split '12.5 Mbit' into (12.5, 'mbit'); reject bare numbers."""
    if isinstance(value, bool | int | float):
        raise ValueError(f"{what} needs a unit, e.g. {example!r} (got bare number {value!r})")
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string with a unit, e.g. {example!r}")
    m = re.fullmatch(_NUMBER + r"\s*([A-Za-z%/]+)", value.strip())
    if not m:
        raise ValueError(f"cannot parse {value!r} as a {what}; write it like {example!r}")
    return float(m.group(1)), m.group(2)


def parse_rate(value: object) -> float:
    """Parse a bit rate such as '3.2Mbit' or '320 kbit/s' into bit/s."""
    number, unit = _split(value, "rate", "10Mbit")
    key = unit.lower().removesuffix("/s")
    if unit.endswith(("Bps", "B/s")) or key not in _RATE_UNITS:
        raise ValueError(
            f"unknown rate unit {unit!r} in {value!r}; use bit, kbit, Mbit or Gbit (per second)"
        )
    return number * _RATE_UNITS[key]


def parse_duration(value: object) -> float:
    """Parse a duration such as '20ms' or '1.5s' into seconds."""
    number, unit = _split(value, "duration", "20ms")
    if unit not in _TIME_UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {value!r}; use us, ms, s or min")
    return number * _TIME_UNITS[unit]


def parse_size(value: object) -> int:
    """Parse a byte size such as '1000B' or '50kB' into bytes."""
    number, unit = _split(value, "size", "1000B")
    key = unit.lower()
    if key not in _SIZE_UNITS:
        raise ValueError(f"unknown size unit {unit!r} in {value!r}; use B, kB, KiB, MB or MiB")
    size = number * _SIZE_UNITS[key]
    if size < 0:
        raise ValueError(f"size {value!r} is negative; a size is at least 0B")
    if size != int(size):
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return int(size)


def parse_packets(value: object) -> int:
    """Parse a packet count such as '50pkt' into an int."""
    number, unit = _split(value, "packet count", "50pkt")
    if unit not in ("pkt", "pkts", "packets"):
        raise ValueError(f"unknown packet unit {unit!r} in {value!r}; use pkt")
    if number != int(number):
        raise ValueError(f"packet count {value!r} is not a whole number")
    return int(number)


def parse_probability(value: object) -> float:
    """Parse '1%' into 0.01. A bare number is refused: is ``loss: 1`` 1% or 100%?"""
    number, unit = _split(value, "probability", "1%")
    if unit != "%":
        raise ValueError(f"probability {value!r} must be a percentage like '1%'")
    prob = number / 100.0
    if not 0.0 <= prob <= 1.0:
        raise ValueError(f"probability {value!r} is outside [0%, 100%]")
    return prob


def format_rate(bps: float) -> str:
    """Render bit/s with the largest unit that keeps a short number."""
    for unit, scale in (("Gbit", 1e9), ("Mbit", 1e6), ("kbit", 1e3)):
        if abs(bps) >= scale:
            return f"{bps / scale:.12g}{unit}"
    return f"{bps:.12g}bit"


def format_duration(seconds: float) -> str:
    """Render seconds as ms below one second."""
    return f"{seconds * 1e3:.12g}ms" if abs(seconds) < 1 else f"{seconds:.12g}s"


def show_duration(seconds: float) -> str:
    """A duration for messages: as :func:`format_duration`, but zero reads '0s'."""
    return "0s" if seconds == 0 else format_duration(seconds)


def format_size(size: float) -> str:
    """Render bytes as written in specs ('1000B')."""
    return f"{size:.12g}B"


def format_packets(count: float) -> str:
    """Render a packet count as written in specs ('50pkt')."""
    return f"{count:.12g}pkt"


def format_probability(prob: float) -> str:
    """Render a probability as a percentage ('1%')."""
    return f"{prob * 100:.12g}%"


def span(show: Callable[[float], str], low: float | None, high: float | None,
         low_open: bool = False, high_open: bool = False) -> str:
    """An interval in a spec's units: '(0bit, 1000Gbit]', '[0s, inf)'."""
    left = "(-inf" if low is None else ("(" if low_open else "[") + show(low)
    right = "inf)" if high is None else show(high) + (")" if high_open else "]")
    return f"{left}, {right}"


def in_range(show: Callable[[float], str], low: float | None = None, high: float | None = None,
             *, low_open: bool = False, high_open: bool = False,
             why: str = "") -> AfterValidator:
    """A field check refusing a parsed value outside an interval, named in the field's unit.

    pydantic's own ``gt``/``le`` messages print the canonical number without its
    unit ("less than or equal to 60"); this one prints the value and the
    allowed range as a spec writes them ("90s is outside the allowed range
    [0s, 60s]"), and why.
    """
    def check(value: float) -> float:
        below = low is not None and (value <= low if low_open else value < low)
        above = high is not None and (value >= high if high_open else value > high)
        if below or above:
            reason = f" ({why})" if why else ""
            raise ValueError(f"{show(value)} is outside the allowed range "
                             f"{span(show, low, high, low_open, high_open)}{reason}")
        return value
    return AfterValidator(check)


def _schema(pattern: str, example: str) -> WithJsonSchema:
    """JSON Schema for a unit-bearing string (the schema must not claim 'number')."""
    return WithJsonSchema({"type": "string", "pattern": pattern, "examples": [example]})


_NUM = r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?\s*"

# Annotated types used by the pydantic models: parse on input, and serialise
# back to the unit-bearing form so a dumped spec re-validates.
Rate = Annotated[
    float,
    BeforeValidator(parse_rate),
    PlainSerializer(format_rate),
    _schema(_NUM + r"([kMG]?bit|[kMG]?bps)(/s)?$", "10Mbit"),
]
Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration),
    _schema(_NUM + r"(us|ms|s|min)$", "20ms"),
]
Size = Annotated[
    int,
    BeforeValidator(parse_size),
    PlainSerializer(lambda b: f"{b}B"),
    _schema(_NUM + r"([kKM]i?B|B)$", "1000B"),
]
Packets = Annotated[
    int,
    BeforeValidator(parse_packets),
    Field(ge=0),
    PlainSerializer(lambda n: f"{n}pkt"),
    _schema(_NUM + r"(pkt|pkts|packets)$", "50pkt"),
]
Probability = Annotated[
    float,
    BeforeValidator(parse_probability),
    PlainSerializer(format_probability),
    _schema(_NUM + "%$", "1%"),
]

# The ranges most fields need. A rate or a period of zero or less, or a time
# offset before the run's start, describes nothing a lab can do.
PositiveRate = Annotated[Rate, in_range(format_rate, 0, low_open=True)]
NonNegRate = Annotated[Rate, in_range(format_rate, 0)]
PositiveDuration = Annotated[Duration, in_range(show_duration, 0, low_open=True)]
NonNegDuration = Annotated[Duration, in_range(show_duration, 0)]
