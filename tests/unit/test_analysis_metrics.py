"""The shared metrics, each against cases computed by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from synthetic_runs import rows

from mcclab.analysis import metrics


def table(data: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(data)
    frame["level"] = pd.to_numeric(frame["level"], errors="coerce")
    return frame


@pytest.mark.parametrize(("window", "seconds"), [
    ((10, 15), [11, 12, 13, 14, 15]),     # interval ending at 10 is the warm-up's last
    ((10.5, 15.2), [12, 13, 14, 15]),     # only whole intervals inside the window
    ((0, 3), [1, 2, 3]),
    ((10, 10), []),
    ((10, 5), []),                        # stopped before the warm-up ended
])
def test_window_seconds(window, seconds):
    assert metrics.window_seconds(window) == seconds


def test_mean_rate_counts_missing_seconds_as_zero():
    series = pd.Series({10: 999.0, 11: 100.0, 12: 200.0, 14: 300.0, 15: 999.0})
    # window (10, 14): seconds 11..14, the 13th missing -> (100 + 200 + 0 + 300) / 4
    assert metrics.mean_rate(series, (10, 14)) == 150.0
    assert math.isnan(metrics.mean_rate(series, (14, 14)))


def test_throughput_at_a_node_and_over_receivers():
    data = table(rows("m", "multicast", "r1", 1e6, range(1, 21))
                 + rows("m", "multicast", "r2", 2e6, range(1, 21))
                 + rows("t", "tcp", "r3", 5e5, range(1, 21)))
    assert metrics.throughput(data, "m", (10, 20), node="r1") == 1e6
    assert metrics.throughput(data, "m", (10, 20)) == 1.5e6  # mean of 1 and 2 Mbit/s
    assert metrics.throughput(data, "t", (10, 20)) == 5e5
    assert math.isnan(metrics.throughput(data, "nope", (10, 20)))
    assert math.isnan(metrics.throughput(data, "m", (10, 20), node="r3"))
    assert metrics.receivers(data, "m") == ["r1", "r2"]


def test_throughput_with_headers_counts_them_per_received_packet():
    # 1 Mbit/s of 1000-B payloads is 125 packets a second, 2 Mbit/s 250
    data = table(rows("m", "multicast", "r1", 1e6, range(1, 21))
                 + rows("m", "multicast", "r2", 2e6, range(1, 21)))
    ip = metrics.throughput(data, "m", (10, 20), node="r1", header_bytes=metrics.IP_UDP)
    assert ip == 1e6 + 125 * 28 * 8
    both = metrics.throughput(data, "m", (10, 20), header_bytes=metrics.IP_UDP)
    assert both == 1.5e6 + 187.5 * 28 * 8


def test_throughput_without_headers_ignores_missing_packet_counts():
    data = table(rows("t", "tcp", "r3", 5e5, range(1, 21)))
    data["packets"] = math.nan
    assert metrics.throughput(data, "t", (10, 20)) == 5e5


def test_throughput_of_a_receiver_that_stopped():
    # r2 received for the first 15 s only: its seconds 16..20 count as zero.
    data = table(rows("m", "multicast", "r1", 1e6, range(1, 21))
                 + rows("m", "multicast", "r2", 1e6, range(1, 16)))
    assert metrics.throughput(data, "m", (10, 20), node="r2") == 0.5e6
    assert metrics.throughput(data, "m", (10, 20)) == 0.75e6


@pytest.mark.parametrize(("values", "index"), [
    ([1, 1], 1.0),
    ([3, 3, 3, 3], 1.0),
    ([1, 0], 0.5),
    ([5, 0, 0, 0], 0.25),              # one flow gets everything: 1/N
    ([1, 2, 3], 36 / (3 * 14)),        # (1+2+3)^2 / (3 * (1+4+9))
    ([2e6, 1e6], 9 / 10),              # (3)^2 / (2 * 5), scale-free
])
def test_jain_index(values, index):
    assert metrics.jain_index(values) == pytest.approx(index)


@pytest.mark.parametrize("values", [[], [0, 0], [1, math.nan]])
def test_jain_index_undefined(values):
    assert math.isnan(metrics.jain_index(values))


def test_utilisation():
    assert metrics.utilisation([1e6, 2e6], 4e6) == 0.75
    assert math.isnan(metrics.utilisation([1e6, math.nan], 4e6))
    assert math.isnan(metrics.utilisation([], 4e6))


def test_link_utilisation_from_a_byte_counter():
    counter = pd.Series({t: 125_000 * t for t in range(0, 11)})  # 1 Mbit/s
    assert metrics.link_utilisation(counter, 2e6, (2, 8)) == pytest.approx(0.5)
    # Sampled only until second 6 (interrupted): measured over 2..6.
    assert metrics.link_utilisation(counter[counter.index <= 6], 2e6, (2, 10)) \
        == pytest.approx(0.5)
    assert math.isnan(metrics.link_utilisation(counter, 2e6, (20, 30)))


def test_loss_rate():
    assert metrics.loss_rate(90, 10) == 0.1
    assert metrics.loss_rate(100, 0) == 0.0
    assert math.isnan(metrics.loss_rate(0, 0))


def test_flow_loss_sums_over_receivers_and_window():
    data = table(rows("m", "multicast", "r1", 800_000, range(1, 11), loss=0.1)
                 + rows("m", "multicast", "r2", 800_000, range(1, 11)))
    # per second: r1 received 100 and lost 11 (10 % of 111); r2 received 100, lost 0
    assert data.loc[data["node"] == "r1", ["packets", "lost"]].iloc[0].tolist() == [100, 11]
    assert metrics.flow_loss(data, "m", (0, 10), node="r1") == pytest.approx(11 / 111)
    assert metrics.flow_loss(data, "m", (0, 10)) == pytest.approx(11 / 211)
    assert math.isnan(metrics.flow_loss(data, "m", (10, 10)))


def test_convergence_time():
    series = pd.Series([0, 50, 90, 100, 105, 98, 100, 102], index=range(1, 9), dtype=float)
    # final mean: last 2 samples -> 101; band +-10.1 -> [90.9, 111.1]; 90 at t=3 is out
    assert metrics.convergence_time(series, band=0.1, final=0.25) == 4.0
    # a 20 % band lets the 90 in; 50 at t=2 stays out
    assert metrics.convergence_time(series, band=0.2, final=0.25) == 3.0


def test_convergence_time_smoothed_and_undefined():
    series = pd.Series([0, 100, 100, 100], index=[1, 2, 3, 4], dtype=float)
    # moving average over 2: 0, 50, 100, 100; final mean 100; in band from t=3
    assert metrics.convergence_time(series, band=0.1, final=0.5, smooth=2) == 3.0
    assert metrics.convergence_time(series, band=0.1, final=0.5) == 2.0
    # the last sample is out of the band of the final mean (50): never settled
    falling = pd.Series([100, 100, 100, 0], index=[1, 2, 3, 4], dtype=float)
    assert math.isnan(metrics.convergence_time(falling, band=0.1, final=0.5))
    assert math.isnan(metrics.convergence_time(pd.Series([], dtype=float)))
    # a flat series has converged from its first sample
    assert metrics.convergence_time(pd.Series([5.0] * 4, index=[7, 8, 9, 10])) == 7.0
