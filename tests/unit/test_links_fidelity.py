"""The statistics behind the link measurements: percentiles, intervals, RED's curve, queues."""

from __future__ import annotations

import math
import random

import pytest

from mcclab.model.topology import RedParams
from mcclab.probes import fidelity as fx

RED = RedParams(min_th="5pkt", max_th="15pkt", max_p="10%")


def test_nearest_rank_percentiles():
    xs = list(range(1, 201))
    assert fx.nearest_rank(xs, 50) == 100
    assert fx.nearest_rank(xs, 99) == 198
    assert fx.nearest_rank([3.0], 99) == 3.0
    assert math.isnan(fx.nearest_rank([], 50))


def test_parse_ping_reads_every_reply():
    out = ("64 bytes from 10.0.1.2: icmp_seq=1 ttl=63 time=20.4 ms\n"
           "64 bytes from 10.0.1.2: icmp_seq=2 ttl=63 time=100 ms\n")
    assert fx.parse_ping(out) == [20.4, 100.0]


def test_wilson_interval_covers_the_truth_about_99_percent_of_the_time():
    rng = random.Random(7)
    n, p, covered = 2000, 0.05, 0
    for _ in range(400):
        k = sum(rng.random() < p for _ in range(n))
        lo, hi = fx.wilson(k, n)
        covered += lo <= p <= hi
    assert covered >= 390
    lo, hi = fx.wilson(100, 10000)
    assert lo < 0.01 < hi and hi - lo < 0.006


def test_red_pb_is_ns2s_curve_with_the_gentle_ramp():
    assert fx.red_pb(4.9, RED) == 0
    assert fx.red_pb(10, RED) == pytest.approx(0.05)
    assert fx.red_pb(15, RED) == pytest.approx(0.1)
    assert fx.red_pb(22.5, RED) == pytest.approx(0.1 + 0.9 * 0.5)
    assert fx.red_pb(30, RED) == 1
    hard = RedParams(min_th="5pkt", max_th="15pkt", max_p="10%", gentle=False)
    assert fx.red_pb(15, hard) == 1


def test_count_spaced_drops_are_about_2pb_or_2pb_over_3():
    # Floyd: gaps uniform on [1, 1/pb] -> mean (1 + 1/pb)/2; ns-2 wait_: on [1/pb, 2/pb].
    assert fx.red_drop_fraction(0.01, wait=False) == pytest.approx(2 * 0.01 / 1.01, rel=0.02)
    assert fx.red_drop_fraction(0.01, wait=True) == pytest.approx(2 * 0.01 / 3, rel=0.02)
    assert fx.red_drop_fraction(0, wait=True) == 0
    assert fx.red_drop_fraction(1, wait=True) == 1


def test_linux_reds_spacing_reaches_a_fraction_at_a_lower_average():
    # Linux's red drops at the n-th arrival with n = ceil(U / p_b), U uniform (red.h), so
    # the mean gap is 1/(2 p_b) + 1/2: Floyd's rule without wait_, within 2 %. The
    # fraction is ~2 p_b, where ns-2's wait_ gives ~2 p_b / 3. At min 5, max 15,
    # max_p 0.1 and f = 3 %: p_b ~ 0.015 -> avg ~ 6.5; ns-2: ~ 9.5.
    red = RedParams(min_th="5pkt", max_th="15pkt", max_p="10%", gentle=False)
    assert fx.red_drop_fraction(0.015, wait=False) == pytest.approx(2 * 0.015 / 1.015, rel=0.02)
    assert fx.red_avg_for_fraction(0.03, red, wait=False) == pytest.approx(6.5, abs=0.05)
    assert fx.red_avg_for_fraction(0.03, red) == pytest.approx(9.5, abs=0.1)


def test_inverting_the_curve():
    for fraction in (0.01, 0.03, 0.1, 0.2):
        avg = fx.red_avg_for_fraction(fraction, RED)
        # integer inter-drop counts make the curve a fine staircase: invert to within a step
        assert fx.red_expected_fraction(avg, RED) == pytest.approx(fraction, rel=0.02)
    assert 5 < fx.red_avg_for_fraction(0.03, RED) < 15 < fx.red_avg_for_fraction(0.2, RED)


def simulate(limit: int, rate_pps: float, service: float, count: int, wake: float = 0.0,
             delay: float = 0.01) -> fx.Probe:
    """A drop-tail queue with the emulator's semantics fed by a constant-rate flow.

    ``wake`` is extra receive latency of a packet that finds the path idle (a
    receiver woken from an idle CPU), which the base-delay estimate must see
    through: the smallest delay is then not the base.
    """
    seq, sent, recv = [], [], []
    starts: list[float] = []
    link_free = -1.0
    for i in range(count):
        t = i / rate_pps
        waiting = sum(1 for s in starts if s > t)
        if waiting >= limit:
            continue
        idle = link_free <= t
        start = max(t, link_free)
        link_free = start + service
        starts.append(start)
        seq.append(i)
        sent.append(int(t * 1e9))
        recv.append(int((link_free + delay + (wake if idle else 0.0)) * 1e9))
    return fx.Probe(count, seq, sent, recv)


@pytest.mark.parametrize("limit", [4, 40])
@pytest.mark.parametrize("wake", [0.0, 0.9])
def test_queue_at_drops_finds_the_limit(limit, wake):
    service = 1000 * 8 / 10e6
    pps = 1.25 / service
    p = simulate(limit, pps, service, int(pps * 3), wake=wake * service)
    q = fx.queue_at_drops(p, 10e6, 1000, skip=1.0, pps=pps)
    assert q["drops"] > 100
    assert q["queue_at_drop"] == limit


def simulate_htb(limit: int, rate_pps: float, service: float, count: int, bucket: float,
                 delay: float = 0.01) -> fx.Probe:
    """A pfifo of ``limit`` packets under a token bucket of ``bucket`` seconds, as htb.

    A packet leaves the pfifo once the tokens are not negative and takes one
    service time of them, so the bucket lets the first packets of an overload
    through unqueued, and the packet "in service" has already left.
    """
    seq, sent, recv, leaves = [], [], [], []
    tokens, updated, free = bucket, None, -1.0
    for i in range(count):
        t = i / rate_pps
        if sum(1 for d in leaves if d > t) >= limit:
            continue
        leave = max(t, free)
        if updated is not None:
            tokens = min(bucket, tokens + leave - updated)
        if tokens < 0:
            leave, tokens = leave - tokens, 0.0
        tokens, updated, free = tokens - service, leave, leave
        leaves.append(leave)
        seq.append(i)
        sent.append(int(t * 1e9))
        recv.append(int((leave + delay) * 1e9))
    return fx.Probe(count, seq, sent, recv)


def test_queue_at_drops_sees_through_the_kernel_backends_token_bucket():
    # 1 Mbit/s, 1000-byte packets, htb's 1500-byte bucket (htb_burst_bytes): 12 ms of
    # tokens let the first packets of a 25 % overload through unqueued. Measured on
    # this host's htb + pfifo 40: 42 without the bucket in the recursion, while 39
    # packets arrived after the last one was sent (the pfifo held its 40).
    service = 1000 * 8 / 1e6
    pps = 1.25 / service
    p = simulate_htb(40, pps, service, int(pps * 5), bucket=1500 * 8 / 1e6)
    assert fx.queue_at_drops(p, 1e6, 1000, skip=1.5, pps=pps)["queue_at_drop"] == 42
    q = fx.queue_at_drops(p, 1e6, 1000, skip=1.5, pps=pps, bucket_bytes=1500)
    assert q["drops"] > 50 and q["queue_at_drop"] == 40
    # without a bucket the two recursions agree
    p0 = simulate_htb(40, pps, service, int(pps * 5), bucket=0.0)
    assert fx.queue_at_drops(p0, 1e6, 1000, skip=1.5, pps=pps)["queue_at_drop"] == 40


def test_mean_queue_from_delays_of_a_steady_full_queue():
    service = 1000 * 8 / 10e6
    pps = 1.25 / service
    p = simulate(20, pps, service, int(pps * 2))
    assert fx.queue_from_owd(p, 10e6, 1000, skip=1.0)["mean"] == pytest.approx(19, abs=0.05)
    lost, sent = fx.drop_fraction_after(p, skip=1.0, pps=pps)
    assert lost / sent == pytest.approx(0.2, abs=0.01)


def test_mean_queue_from_delays_with_a_base_measured_apart_sees_through_an_early_stall():
    # A machine stall that holds every packet before the first loss (the only ones the
    # base is otherwise estimated from) raises that base by the stall and reads the
    # queue short by as many packet times: as a RED burst once did on CI's kind of VM.
    service, delay = 1000 * 8 / 10e6, 0.01
    pps = 1.25 / service
    p = simulate(20, pps, service, int(pps * 2), delay=delay)
    first_loss = min(set(range(p.count)) - set(p.seq))
    held = fx.Probe(p.count, p.seq, p.sent_ns,
                    [r + (5_000_000 if q < first_loss else 0)
                     for q, r in zip(p.seq, p.recv_ns, strict=True)])
    assert fx.queue_from_owd(held, 10e6, 1000, skip=1.0)["mean"] < 19 - 5
    idle = simulate(20, 0.1 / service, service, 50, wake=0.2e-3, delay=delay)
    base = fx.idle_base_ns(idle)
    assert base == pytest.approx((service + delay + 0.2e-3) * 1e9)
    # the wake-up from idle the base carries reads the queue at most a quarter short
    assert fx.queue_from_owd(held, 10e6, 1000, skip=1.0, base_ns=base)["mean"] == \
        pytest.approx(19, abs=0.3)
    with pytest.raises(ValueError, match="received nothing"):
        fx.idle_base_ns(fx.Probe(5, [], [], []))


def test_rate_windows_leave_out_the_clients_last_second():
    # The server's intervals of a 10-s TCP test in the VM (1 Mbit/s, 50 ms): the one
    # starting at 9 s held 63 % of a second's bytes, because the client, whose clock
    # started first, stopped inside it; counting it read 0.946 Mbit/s for a full link.
    full, last = 120184, 75296
    server = [{"sum": {"start": float(k), "seconds": 1.0, "bytes": full}} for k in range(9)]
    server += [{"sum": {"start": 9.0, "seconds": 1.0, "bytes": last}},
               {"sum": {"start": 10.0, "seconds": 0.4, "bytes": 30000}}]
    sums = fx._server_intervals({"server_output_json": {"intervals": server}}, skip=3.0,
                                seconds=10.0)
    assert [s["start"] for s in sums] == [3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    goodput = sum(s["bytes"] for s in sums) * 8 / sum(s["seconds"] for s in sums)
    assert goodput * fx.TCP_IP_BYTES / fx.TCP_PAYLOAD == pytest.approx(0.996e6, rel=0.001)


def test_echoes_in_flight_during_a_machine_stall_are_set_aside():
    from mcclab.probes.fidelity import clear_of_stalls

    ms = 1_000_000
    # echoes sent every 10 ms, 40 ms in flight; one stall from 25 to 27 ms
    echoes = [fx.Echo(k, k * 10 * ms, 40.0 + k / 10) for k in range(8)]
    stalls = [(25 * ms, 27 * ms)]
    # in flight at 25-27 ms: those sent at 0 (reply at 40), 10 and 20 ms; not 30 ms
    assert clear_of_stalls(echoes, stalls) == [40.3, 40.4, 40.5, 40.6, 40.7]
    assert clear_of_stalls(echoes, []) == [e.rtt_ms for e in echoes]


def test_echo_trouble_names_the_runs_of_lost_and_slow_echoes():
    ms = 1_000_000
    # a path that held echoes 3-5 for up to 0.9 s, then dropped 6-8 in the burst
    rtts = {0: 40.1, 1: 40.2, 2: 40.3, 3: 900.0, 4: 890.0, 5: 880.0, 9: 40.2, 10: 55.0}
    echoes = [fx.Echo(k, k * 10 * ms, rtt) for k, rtt in rtts.items()]
    assert fx.echo_trouble(echoes, 12, slow_ms=50.0) == (
        "lost 4 (seq 6-8, 11); slower than 50 ms 4 (seq 3-5, 10; worst 900.0 ms at seq 3)")
    assert fx.echo_trouble(echoes[:3], 3, slow_ms=50.0) == "lost 0; slower than 50 ms 0"


def test_arp_cache_counters_sum_the_cpus_but_not_the_table_size(tmp_path):
    stat = tmp_path / "arp_cache"
    stat.write_text("entries  allocs   unresolved_discards\n"
                    "00000003 0000000a 00000001\n"
                    "00000003 00000010 00000000\n")
    assert fx.arp_cache_counters(stat) == {"entries": 3, "allocs": 26, "unresolved_discards": 1}
    real = fx.arp_cache_counters()
    assert {"allocs", "unresolved_discards"} <= real.keys()


def test_stalled_seconds_is_the_union_of_the_spans_inside_the_window():
    from mcclab.probes.fidelity import stalled_seconds

    ms = 1_000_000
    # two CPUs' overlapping stalls count once; parts outside the window not at all
    stalls = [(10 * ms, 30 * ms), (20 * ms, 40 * ms), (90 * ms, 120 * ms), (200 * ms, 210 * ms)]
    assert stalled_seconds(stalls, 0, 100 * ms) == pytest.approx(0.040)
    assert stalled_seconds(stalls, 25 * ms, 35 * ms) == pytest.approx(0.010)
    assert stalled_seconds([], 0, 100 * ms) == 0.0


def _queue(name, total, events):  # noqa: ANN001, ANN202 - one queue of an emulator's stats
    return {"name": name, "late_events_total": total, "late_events": events}


def test_late_spans_are_the_emulators_late_verdicts_since_the_mark():
    mark = fx.LateMark(1_000, {("r", "l1:r-d"): 5, ("r", "l1:d-r"): 0})
    stats = {"r": {"queues": {"0": _queue("l1:r-d", 7, [[900, 950], [990, 1_200], [2_000, 3_000]]),
                              "1": _queue("l1:d-r", 0, [])}}}
    # an event over before the mark is not this measurement's; one spanning it is
    assert fx.late_spans(stats, mark) == [(990, 1_200), (2_000, 3_000)]


def test_late_spans_cover_the_events_a_full_log_lost():
    # 300 late verdicts since the mark, 256 kept: the 44 lost came before the oldest kept
    kept = [[5_000 + 10 * i, 5_005 + 10 * i] for i in range(256)]
    mark = fx.LateMark(1_000, {("r", "q"): 10})
    spans = fx.late_spans({"r": {"queues": {"0": _queue("q", 310, kept)}}}, mark)
    assert spans[0] == (1_000, 5_000) and len(spans) == 257
    # an emulator met for the first time since the mark counts all it holds as new
    assert fx.late_spans({"s": {"queues": {"0": _queue("q", 2, kept[:2])}}}, mark) == [
        (5_000, 5_005), (5_010, 5_015)]



def test_quiet_rounds_wait_long_for_the_first_and_stop_when_the_caller_has_enough(monkeypatch):
    waits: list[tuple[float, float]] = []
    monkeypatch.setattr(fx, "wait_for_quiet_machine",
                        lambda timeout, threshold: waits.append((timeout, threshold)) or 2.5)
    got = list(fx.quiet_rounds(3, threshold=0.002))
    assert [(r.number, r.waited, r.budget) for r in got] == [(1, 2.5, 60.0), (2, 2.5, 15.0),
                                                             (3, 2.5, 15.0)]
    assert waits == [(60.0, 0.002), (15.0, 0.002), (15.0, 0.002)]
    waits.clear()
    for r in fx.quiet_rounds(3):
        if r.number == 2:
            break
    assert len(waits) == 2  # no wait for a round the caller did not need
