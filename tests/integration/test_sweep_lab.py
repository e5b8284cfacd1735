"""Acceptance: a two-point sweep of a short CBR experiment across real routers."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from labrun import run_mcclab

# timeout: 3x the measured 40.4 s for both runs (2-core VM)
pytestmark = [pytest.mark.root, pytest.mark.timeout(150)]

RATES = {"300kbit": 300e3, "600kbit": 600e3}


def test_two_point_sweep_runs_both_and_writes_the_sweep_folder(tmp_path):
    spec = tmp_path / "sweep-cbr.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "sweep-cbr", "topology": "topologies/dumbbell.yaml",
        "duration": "6s", "warmup": "2s",
        "flows": [{"name": "cbr", "type": "multicast", "protocol": "cbr", "sender": "s1",
                   "receivers": ["d1"], "params": {"rate": "300kbit", "packet_size": "1000B"}}],
        "references": [{"kind": "measure", "label": "CBR rate", "measure": "generic.mean_rate",
                        "args": {"flow": "cbr", "node": "d1"}, "paper": "450kbit",
                        "within": ["290kbit", "310kbit"]}],
        "sweeps": {"rate": {"over": {"flows.cbr.params.rate": list(RATES)},
                            "figures": [{"figure": "generic.sweep_quantity",
                                         "args": {"label": "CBR rate"}}]}},
    }))
    # --wait: each run queues for the machine-wide lab lock instead of failing (it is
    # shared by every engineer on this machine, hence the long wait).
    out = run_mcclab(["sweep", str(spec), "--sweep", "rate",
                      "--results", str(tmp_path / "results"), "--wait", "1800"], timeout=3900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "run 2 of 2" in out.stdout + out.stderr
    (folder,) = (tmp_path / "results" / "sweep-cbr").glob("sweep-*")
    record = json.loads((folder / "sweep.json").read_text())
    assert record["status"] == "complete" and record["planned"] == 2
    assert [r["set"]["flows.cbr.params.rate"] for r in record["runs"]] == list(RATES)
    for run in record["runs"]:
        assert run["status"] == "complete", run
        run_json = json.loads((folder / run["dir"] / "run.json").read_text())
        assert run_json["status"] == "complete"
    table = pd.read_csv(folder / "sweep.csv")
    assert len(table) == 2 and set(table["label"]) == {"CBR rate"}
    for value, measured in zip(table["flows.cbr.params.rate"], table["measured"], strict=True):
        # CBR is not congestion controlled: each run gets its configured rate (within 3 %)
        assert measured == pytest.approx(RATES[value], rel=0.03), (value, measured)
    # the reference's band holds the 300 kbit/s run only
    assert list(table["verdict"]) == ["pass", "fail"]
    assert (folder / "figures" / "sweep-cbr-rate.svg").is_file()
    page = (folder / "report.html").read_text()
    assert page.count("<tr>") == 3 and "<svg" in page
