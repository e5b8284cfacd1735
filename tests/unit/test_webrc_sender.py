"""The WEBRC sender core on a simulated clock: channels, header fields, rates per slot."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from agents.runtime.actions import Send, SetTimer
from agents.webrc import WEBRC_EXT, WebrcExt
from agents.webrc.model import LAST_PSN, PSN_MOD
from agents.webrc.params import WebrcParams
from agents.webrc.sender import WebrcSender


def drive(core, duration, start=0.0):
    """Fire the sender's one timer until ``duration``; every Send with its time."""
    now = start
    sends = []
    actions = core.start(now)
    while True:
        sends += [(a, now) for a in actions if isinstance(a, Send)]
        (timer,) = [a for a in actions if isinstance(a, SetTimer)]
        assert timer.at >= now
        if timer.at >= start + duration:
            return sends
        now = timer.at
        actions = core.on_timer(now, timer.timer_id)


def fluid_per_slot(model, cn, slot):
    """The fluid model's packets on channel ``cn`` in slot number ``slot``."""
    if cn == model.base_channel:
        return model.base_per_slot()
    j = model.age_index(cn, slot)
    if j is None:
        return 0.0
    ages, cum = model.wave_cumulative()
    k = model.n - 1 - j  # the wave's k-th slot
    return float(np.interp((k + 1) * model.tsd, ages, cum) - np.interp(k * model.tsd, ages, cum))


@pytest.fixture(scope="module")
def run():
    params = WebrcParams(session_rate="1Mbit")  # Table 1 defaults otherwise
    core = WebrcSender(params)
    model = core.model
    # One whole cycle (T slots) plus a few slots, from a start that is not at zero.
    return params, model, drive(core, (model.t + 3) * model.tsd, start=1000.0)


def test_table_1_defaults_and_channel_numbers(run):
    params, model, sends = run
    assert (params.p, params.tsd, params.quiescent, params.packet_size, params.epoch,
            params.bcr) == (0.75, 10.0, 30, 1024, 0.5, 1.0)
    assert model.t == model.n + 30 and params.channels == model.t + 1
    assert {a.channel for a, _ in sends} == set(range(model.t + 1))  # waves 0..T-1, base T
    assert all(a.ext.cn == a.channel for a, _ in sends)
    assert all(a.size == 1024 for a, _ in sends)


def test_tsi_is_the_slot_index_mod_t(run):
    _, model, sends = run
    for action, t in sends:
        slot = int((t - 1000.0) // model.tsd)
        assert action.ext.tsi == slot % model.t


def test_each_channel_follows_the_fluid_model_within_1_percent_per_slot(run):
    _, model, sends = run
    counts: Counter = Counter()
    for action, t in sends:
        counts[action.channel, int((t - 1000.0) // model.tsd)] += 1
    checked = 0
    for slot in range(model.t + 3):
        total = sum(counts[cn, slot] for cn in range(model.t + 1))
        assert total == pytest.approx(model.sr * model.tsd, rel=0.01)
        for cn in range(model.t + 1):
            fluid = fluid_per_slot(model, cn, slot)
            # Whole packets: the count can be off by one packet from the fluid count
            # (a 1% bound needs 100 packets per slot; most channels have that).
            assert abs(counts[cn, slot] - fluid) <= max(0.01 * fluid, 1.0), (cn, slot)
            checked += fluid >= 100
    assert checked >= 4 * (model.t + 3)  # the 1% bound itself applied in every slot


def test_psn_runs_within_a_wave_and_its_last_packet_is_2_16_minus_1(run):
    _, model, sends = run
    waves: dict[tuple[int, int], list[int]] = defaultdict(list)
    for action, t in sends:
        if action.channel != model.base_channel:
            slot = int((t - 1000.0) // model.tsd)
            start = model.wave_start(action.channel, slot)
            waves[action.channel, start].append(action.ext.psn)
    whole = [psns for (cn, start), psns in waves.items() if start >= 0
             and start + model.n <= model.t + 3]
    assert len(whole) >= model.t - model.n
    for psns in whole:
        assert psns[-1] == LAST_PSN
        assert psns[0] == (PSN_MOD - len(psns)) % PSN_MOD
        assert all((b - a) % PSN_MOD == 1 for a, b in zip(psns, psns[1:], strict=False))
    base = [a.ext.psn for a, _ in sends if a.channel == model.base_channel]
    assert base == [i % PSN_MOD for i in range(len(base))]


def test_header_extension_round_trip_and_bounds():
    ext = WebrcExt(cn=48, tsi=47, psn=LAST_PSN)
    assert WEBRC_EXT.decode(WEBRC_EXT.encode(ext)) == ext
    with pytest.raises(ValueError):
        WEBRC_EXT.encode(WebrcExt(cn=-1, tsi=0, psn=0))
    with pytest.raises(ValueError):
        WEBRC_EXT.decode(b"\x00\x01")


def test_a_stalled_sender_skips_instead_of_bursting():
    core = WebrcSender(WebrcParams(session_rate="1Mbit"))
    core.start(0.0)
    actions = core.on_timer(5.0, "send")  # woken 5 s late
    sends = [a for a in actions if isinstance(a, Send)]
    assert len(sends) < 0.3 * core.model.sr  # at most what was due in the last 0.25 s
    assert core.skipped > 4 * core.model.sr
