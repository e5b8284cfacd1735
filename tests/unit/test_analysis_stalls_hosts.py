"""The stall check with agent hosts: a host is one unit, named in the verdict."""

from __future__ import annotations

import json

import pandas as pd
from synthetic_runs import agent_rows, rows, write_run

from mcclab.analysis.report import build_report
from mcclab.analysis.stalls import LATE_MS, agent_hosts, assess, describe
from mcclab.resultsdir import AGENT_COLUMNS


def steady(first: float, last: float, late: float = 2.0) -> list[tuple[float, float]]:
    return [(first + k, late) for k in range(round(last - first) + 1)]


def late_at(seconds: list[int], late: float = 450.0) -> list[tuple[float, float]]:
    """A record every second 1.05 .. 60.05, timers ``late`` ms late in ``seconds``."""
    return [(t, late if round(t - 0.05) + 1 in seconds else 2.0) for t, _ in steady(1.05, 60.05)]


def table(*agents: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([r for a in agents for r in a], columns=AGENT_COLUMNS).astype(
        {"t": float, "timer_late_max_ms": float})


HOSTS = {("m", "r1", "receiver"): "agent-host-1", ("m", "r2", "receiver"): "agent-host-1",
         ("m", "s", "sender"): "agent-host-2"}


def test_a_host_is_stalled_in_every_second_one_of_its_agents_is():
    # r1 and r2 each stalled once (allowed alone), in different seconds: their host twice.
    t = table(agent_rows("m", "r1", "receiver", late_at([20])),
              agent_rows("m", "r2", "receiver", late_at([30], late=LATE_MS * 14)),
              agent_rows("m", "s", "sender", steady(1.05, 60.05)))
    alone = assess(t, (10.0, 60.0))
    assert not alone.overloaded and alone.hosts == []
    hosted = assess(t, (10.0, 60.0), hosts=HOSTS)
    one, two = hosted.hosts
    assert (one.host, one.agents, one.seconds, one.stalled) == ("agent-host-1", 2, 50, 2)
    assert one.worst_late_ms == LATE_MS * 14
    assert (two.host, two.agents, two.stalled) == ("agent-host-2", 1, 0)
    assert hosted.overloaded
    assert [a.host for a in hosted.agents] == ["agent-host-1", "agent-host-1", "agent-host-2"]
    text = describe(hosted)
    assert "1 of 2 agent hosts fell behind" in text
    assert "agent-host-1 (2 agents) stalled in 2 of 50 s, timers up to 1.4 s late" in text


def test_the_same_seconds_stalled_in_two_agents_count_once_for_their_host():
    t = table(agent_rows("m", "r1", "receiver", late_at([20])),
              agent_rows("m", "r2", "receiver", late_at([20])))
    (host,) = assess(t, (10.0, 60.0), hosts=HOSTS).hosts
    assert host.stalled == 1 and not assess(t, (10.0, 60.0), hosts=HOSTS).overloaded


def test_the_report_reads_the_hosts_from_run_json(tmp_path):
    folder = write_run(tmp_path / "e" / "r", rows("m", "multicast", "r1", 1e6, range(1, 61)),
                       agents=agent_rows("m", "r1", "receiver", late_at([20, 30]))
                       + agent_rows("m", "r2", "receiver", late_at([40])))
    record = json.loads((folder / "run.json").read_text())
    record["agents"] = {"mode": "host", "hosts": {"agent-host-1": [
        {"flow": "m", "role": "receiver", "node": "r1"},
        {"flow": "m", "role": "receiver", "node": "r2"}]}}
    (folder / "run.json").write_text(json.dumps(record))
    assert agent_hosts(folder) == {("m", "r1", "receiver"): "agent-host-1",
                                   ("m", "r2", "receiver"): "agent-host-1"}
    build_report(folder)
    stalls = json.loads((folder / "summary.json").read_text())["agent_stalls"]
    assert stalls["overloaded"] and stalls["hosts"][0]["stalled"] == 3
    assert "agent-host-1 (2 agents) stalled in 3 of 50 s" in (folder / "report.html").read_text()
