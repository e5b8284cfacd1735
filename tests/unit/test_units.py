"""Unit parsing: every quantity needs its unit, and values land in canonical units."""

import pytest

from mcclab.model import units


@pytest.mark.parametrize(
    ("text", "bps"),
    [("10Mbit", 10e6), ("320kbit", 320e3), ("3.2 Mbit/s", 3.2e6), ("1Gbps", 1e9), ("64bit", 64)],
)
def test_rates(text, bps):
    assert units.parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("bad", [10, 10.0, "10", "10MB", "10 furlongs", True, None, "Mbit"])
def test_rate_rejects_missing_or_wrong_unit(bad):
    with pytest.raises(ValueError):
        units.parse_rate(bad)


@pytest.mark.parametrize(("text", "s"), [("20ms", 0.02), ("1.5s", 1.5), ("250us", 250e-6),
                                         ("2min", 120.0)])
def test_durations(text, s):
    assert units.parse_duration(text) == pytest.approx(s)


def test_duration_bare_number_message_names_an_example():
    with pytest.raises(ValueError, match="needs a unit"):
        units.parse_duration(5)


def test_sizes_and_packets():
    assert units.parse_size("50kB") == 50_000
    assert units.parse_size("2KiB") == 2048
    assert units.parse_packets("40pkt") == 40
    with pytest.raises(ValueError):
        units.parse_packets("4.5pkt")
    with pytest.raises(ValueError):
        units.parse_size("0.5B")


def test_probability():
    assert units.parse_probability("1%") == pytest.approx(0.01)
    assert units.parse_probability("25%") == 0.25
    for bad in ("101%", "-1%", 2, "0.5", 0.5):
        with pytest.raises(ValueError):
            units.parse_probability(bad)


@pytest.mark.parametrize("bps", [1e3, 320e3, 3.2e6, 10e6, 1.5e6, 128e3, 64])
def test_rate_round_trips_through_its_format(bps):
    assert units.parse_rate(units.format_rate(bps)) == pytest.approx(bps)


@pytest.mark.parametrize("s", [0.0125, 0.198, 0.2, 1.0, 300.0, 1e-4])
def test_duration_round_trips_through_its_format(s):
    assert units.parse_duration(units.format_duration(s)) == pytest.approx(s)
