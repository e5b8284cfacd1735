"""docs/adding-a-protocol.md, done: a new folder under agents/ and nothing else.

The walkthrough's ``burst`` package (tests/fixtures/burst_protocol/) is dropped
into a copy of agents/; in a fresh interpreter that imports that copy, the
registry must find it, its cores must export exactly the gauges its contract
declares, and its contract case must pass on the simulated clock, as
tests/unit/test_agent_contract_sim.py checks for the protocols in the tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHECK = """
import json, sys
sys.path.insert(1, {tests!r})
from agents.runtime.registry import protocols
from agents.sim import simulate
from test_agent_contract_sim import meets, received_rate, session
found = protocols()
spec = found["burst"]
res = simulate(session("burst", spec.contract_case), sender="snd", receivers=["rcv"],
               duration=3.0)
rate = received_rate(spec)
print(json.dumps({{"protocols": sorted(found), "id": spec.protocol_id,
                   "sender_gauges": sorted(res.sender.agent.core.metrics()),
                   "declared": sorted(spec.sender_gauges), "rate": rate,
                   "meets": meets(spec.contract_case, rate)}}))
"""


def test_a_protocol_folder_alone_registers_and_passes_its_contract(tmp_path):
    shutil.copytree(REPO / "agents", tmp_path / "agents",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "tests" / "fixtures" / "burst_protocol",
                    tmp_path / "agents" / "burst")
    out = subprocess.run([sys.executable, "-c",
                          CHECK.format(tests=str(REPO / "tests" / "unit"))],
                         cwd=tmp_path, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "burst" in got["protocols"] and {"cbr", "ormcc", "pgmcc"} <= set(got["protocols"])
    assert got["id"] == 9
    assert got["sender_gauges"] == got["declared"] == ["target_rate_bps"]
    # one second on, one off: about half of 1 Mbit/s
    assert got["meets"], got["rate"]
