"""Whether the agents got the CPU: agents.csv from their logs, stalled seconds, the verdict."""

from __future__ import annotations

import json

import pytest
from synthetic_runs import agent_rows, rows, write_run

from mcclab.analysis.rebuild import report_command
from mcclab.analysis.report import build_report
from mcclab.analysis.results import load_run
from mcclab.analysis.stalls import LATE_MS, allowed, assess
from mcclab.experiment.tables import AgentLaunch, agent_timing_table


def steady(first: float, last: float, late: float = 2.0) -> list[tuple[float, float]]:
    """A record every second from ``first`` to ``last`` (inclusive), timers ``late`` ms late."""
    return [(first + k, late) for k in range(round(last - first) + 1)]


def test_agents_table_puts_each_record_on_the_runs_clock(tmp_path):
    log = tmp_path / "a.jsonl"
    records = [{"t": 101.2, "event": "start"},
               {"t": 102.2, "event": "stats", "timer_late_max_ms": 3.5, "core": {}},
               {"t": 103.0, "event": "join", "channel": 1},
               {"t": 111.4, "event": "stats", "timer_late_max_ms": 8200.0},
               {"t": 112.0, "event": "stop", "timer_late_max_ms": 1.0}]
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n{\"t\": 11")  # cut by a kill
    table = agent_timing_table([AgentLaunch(log, "w", "r1", "receiver", 0.5, 30.0),
                                AgentLaunch(tmp_path / "none", "w", "s", "sender", 0.0)],
                               t0=100.0)
    got = [(r.node, r.event, round(r.t, 3), r.timer_late_max_ms) for r in table.itertuples()]
    nan = [g for g in got if g[3] != g[3]]  # lateness is only a stats record's
    assert [g[:3] for g in got] == [
        ("r1", "planned_start", 0.5), ("r1", "planned_stop", 30.0), ("r1", "start", 1.2),
        ("r1", "stats", 2.2), ("r1", "stats", 11.4), ("r1", "stop", 12.0),
        ("s", "planned_start", 0.0)]
    assert [g[3] for g in got if g[1] == "stats"] == [3.5, 8200.0]
    assert len(nan) == 5


def test_an_agent_that_kept_up_has_no_stalled_second():
    table = _table(agent_rows("w", "r1", "receiver", steady(1.05, 60.05)))
    stalls = assess(table, (10.0, 60.0))
    assert not stalls.overloaded
    (agent,) = stalls.agents
    assert (agent.seconds, agent.stalled, agent.worst_late_ms) == (50, 0, 2.0)
    assert agent.start_delay_s == 0.05


def test_a_late_start_counts_every_silent_second_and_overloads_the_run():
    # Planned at 0 s, its first record at 36.05 s: silent until then.
    table = _table(agent_rows("w", "r1", "receiver", steady(36.05, 60.05)))
    (agent,) = assess(table, (10.0, 60.0)).agents
    # Seconds 11..36 are silent: at second k the last record is older than 2 s
    # (or there is none) up to k = 36, whose record comes at 36.05.
    assert agent.stalled == 26 and agent.seconds == 50 and agent.start_delay_s == 35.05
    assert assess(table, (10.0, 60.0)).overloaded


def test_late_timers_count_from_the_threshold_and_one_such_second_is_allowed():
    records = steady(1.05, 60.05)
    records[20] = (21.05, LATE_MS)  # second 22
    one = _table(agent_rows("w", "r1", "receiver", records))
    stalls = assess(one, (10.0, 60.0))
    assert stalls.agents[0].stalled == 1 and stalls.agents[0].worst_late_ms == LATE_MS
    assert allowed(50) == 1 and not stalls.overloaded
    records[30] = (31.05, 450.0)
    records[31] = (32.05, LATE_MS - 0.1)  # just under: not stalled
    two = assess(_table(agent_rows("w", "r1", "receiver", records)), (10.0, 60.0))
    assert two.agents[0].stalled == 2 and two.overloaded


def test_a_gap_between_records_is_stalled_once_it_is_longer_than_two_seconds():
    records = [r for r in steady(1.05, 60.05) if not 30 < r[0] < 38]  # 29.05 .. 38.05
    (agent,) = assess(_table(agent_rows("w", "r1", "receiver", records)), (10.0, 60.0)).agents
    # At k = 32..38 the last record (29.05 s) is more than 2 s old.
    assert agent.stalled == 7


def test_only_the_agents_planned_seconds_after_its_start_up_count():
    late_joiner = agent_rows("w", "r2", "receiver", steady(41.5, 60.5), planned_start=40.0)
    leaver = agent_rows("w", "r3", "receiver", steady(1.05, 30.05), planned_stop=30.0)
    stalls = assess(_table(late_joiner + leaver), (10.0, 60.0))
    r2, r3 = stalls.agents
    assert (r2.node, r2.seconds, r2.stalled) == ("r2", 17, 0)  # 44..60: 3 s of start-up
    assert (r3.node, r3.seconds, r3.stalled) == ("r3", 20, 0)  # 11..30
    assert not stalls.overloaded


def test_no_agents_table_means_unknown_not_kept_up(tmp_path):
    folder = write_run(tmp_path / "e" / "r", rows("m", "multicast", "h1", 1e6, range(1, 61)))
    build_report(folder)
    assert json.loads((folder / "summary.json").read_text())["agent_stalls"] is None
    assert "Not recorded (no tables/agents.csv)" in (folder / "report.html").read_text()


@pytest.mark.parametrize("start", [1.05, 36.05])
def test_the_report_and_the_command_say_when_the_agents_stalled(tmp_path, capsys, start):
    folder = write_run(tmp_path / "e" / f"r{int(start)}",
                       rows("m", "multicast", "h1", 1e6, range(1, 61)),
                       agents=agent_rows("m", "h1", "receiver", steady(start, 60.05)))
    report_command([folder])
    summary = json.loads((folder / "summary.json").read_text())["agent_stalls"]
    page = (folder / "report.html").read_text()
    err = capsys.readouterr().err
    overloaded = start > 2
    assert summary["overloaded"] is overloaded
    assert summary["agents"][0]["stalled"] == (26 if overloaded else 0)
    assert ("The agents stalled" in page) is overloaded
    assert ("machine did not keep up" in err) is overloaded
    assert ("it started 35.0 s after its planned start" in err) is overloaded
    assert "Did the agents get the CPU?" in page


def _table(agent_rows_: list[dict]):
    """The rows as ``load_run`` reads them (numbers as float, NaN for an empty lateness)."""
    import pandas as pd

    from mcclab.resultsdir import AGENT_COLUMNS
    return pd.DataFrame(agent_rows_, columns=AGENT_COLUMNS).astype(
        {"t": float, "timer_late_max_ms": float})


def test_load_run_reads_the_agents_table(tmp_path):
    folder = write_run(tmp_path / "e" / "r", rows("m", "multicast", "h1", 1e6, range(1, 61)),
                       agents=agent_rows("m", "h1", "receiver", steady(1.05, 3.05)))
    run = load_run(folder)
    assert list(run.agents["event"]) == ["planned_start", "start", "stats", "stats", "stats"]
    assert run.agents["timer_late_max_ms"].isna().sum() == 2
