"""MCCLAB_TIMEOUT_SCALE stretches readiness waits (slow CPUs, the VM check), never targets;
the multicast reach window is measured per node from its counter reads' timestamps."""

from __future__ import annotations

import time

import pytest

from mcclab.monitoring import lifecycle
from mcclab.probes.reach import ReachReport, Snapshot, node_windows
from mcclab.slowdown import ENV, scaled, timeout_scale


def test_scale_is_one_unless_set_and_refuses_nonsense(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert timeout_scale() == 1.0 and scaled(15) == 15
    monkeypatch.setenv(ENV, "10")
    assert scaled(15) == 150
    for bad in ("ten", "0.5", "1000"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(ValueError, match=ENV):
            timeout_scale()


class _Alive:
    def alive(self) -> bool:
        return True


def test_monitoring_readiness_wait_is_scaled_and_its_error_names_the_knob(
        monkeypatch, tmp_path):
    monkeypatch.setattr(lifecycle, "READY_TIMEOUT", 0.2)
    monkeypatch.setenv(ENV, "3")
    start = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        lifecycle.wait_ready(lambda: False, [_Alive()], "the exporter", tmp_path / "x.log")
    took = time.monotonic() - start
    assert 0.6 <= took < 2.0
    assert "not ready within 0.6s" in str(err.value) and ENV in str(err.value)


def test_each_node_s_window_spans_its_own_reads():
    # src read fast; h3 read last, after slow reads of the others
    before = Snapshot(read={"src": (0.0, 0.1), "h3": (0.9, 1.0)})
    after = Snapshot(read={"src": (2.0, 2.1), "h3": (3.5, 3.6)})
    w = node_windows(before, after)
    assert w["src"] == pytest.approx((1.9, 2.1))
    assert w["h3"] == pytest.approx((2.5, 2.7))


def test_full_rate_is_judged_on_the_measured_window_with_the_same_tolerance():
    report = ReachReport(window_s=2.0, rate_pps=200.0, iface_node={"h3-eth0": "h3"},
                         node_window={"h3": (2.5, 2.7)})
    report.arrived = {("h3-eth0", "g"): 520}
    assert report.expected("h3", 0.15) == pytest.approx((425.0, 621.0))
    assert report.full_rate("h3", "g", 0.15)
    # the same 520 packets over a nominal 2 s would have been 30% too many
    nominal = ReachReport(window_s=2.0, rate_pps=200.0, iface_node={"h3-eth0": "h3"},
                          arrived={("h3-eth0", "g"): 520})
    assert not nominal.full_rate("h3", "g", 0.15)
    report.arrived = {("h3-eth0", "g"): 400}  # below 85% of 200 pkt/s x 2.5 s
    assert not report.full_rate("h3", "g", 0.15)


def test_exporter_readiness_probe_waits_a_scaled_time_for_a_slow_scrape(monkeypatch):
    seen = []

    class _Resp:
        status = 200

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def fake_urlopen(url, timeout):
        seen.append(timeout)
        return _Resp()

    monkeypatch.setattr(lifecycle.urllib.request, "urlopen", fake_urlopen)
    assert lifecycle.answers("http://x/metrics", 10.0)
    assert seen == [10.0]
