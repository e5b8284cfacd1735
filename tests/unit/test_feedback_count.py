"""feedback.count: feedback totals by kind from any protocol's cumulative counters."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from mcclab.analysis.plugins import get_measure
from mcclab.analysis.protocols import feedback
from mcclab.analysis.results import load_run


def _write_run(folder, proto_rows):
    """A 10-s run (window after 4 s) of one multicast flow 'm' with receivers a and b."""
    (folder / "run.json").write_text(json.dumps({
        "experiment": "x", "run_id": "r", "profile": "quick", "status": "complete",
        "duration_s": 10.0, "warmup_s": 4.0, "elapsed_s": 10.0}))
    tables = folder / "tables"
    tables.mkdir()
    pd.DataFrame([{"t": t, "flow": "m", "kind": "multicast", "node": n,
                   "throughput_bps": 8000, "packets": 1, "lost": 0, "level": ""}
                  for t in range(1, 11) for n in ("a", "b")]).to_csv(
        tables / "per_second.csv", index=False)
    pd.DataFrame(proto_rows, columns=["t", "flow", "node", "role", "name", "value"]).to_csv(
        tables / "protocol.csv", index=False)
    return load_run(folder)


@pytest.fixture
def run(tmp_path):
    """PGMCC-like counters: receiver a sends 3 NAKs and 10 ACKs a second, b 1 NAK a
    second but reports only from t = 3 (started late); the sender counts what came in.
    Another flow 'other' has counters of the same names that must not be counted."""
    rows = []
    for t in range(1, 11):
        rows += [{"t": t, "flow": "m", "node": "a", "role": "receiver", "name": "naks_sent",
                  "value": 3 * t},
                 {"t": t, "flow": "m", "node": "a", "role": "receiver", "name": "acks_sent",
                  "value": 10 * t},
                 {"t": t, "flow": "m", "node": "src", "role": "sender", "name": "naks_rx",
                  "value": 4 * t},
                 {"t": t, "flow": "other", "node": "a", "role": "receiver",
                  "name": "naks_sent", "value": 1000 * t}]
        if t >= 3:
            rows.append({"t": t, "flow": "m", "node": "b", "role": "receiver",
                         "name": "naks_sent", "value": t - 2})
    return _write_run(tmp_path, rows)


def test_whole_run_sums_each_counter_over_the_receivers(run):
    # a: 30 NAKs and 100 ACKs by t = 10; b: 8 NAKs (t - 2 at t = 10).
    assert feedback.count(run, "m", ["naks_sent"]) == pytest.approx(38)
    assert feedback.count(run, "m", ["acks_sent"]) == pytest.approx(100)
    assert feedback.count(run, "m", ["naks_sent", "acks_sent"]) == pytest.approx(138)


def test_role_selects_the_senders_counters(run):
    assert feedback.count(run, "m", ["naks_rx"], role="sender") == pytest.approx(40)
    with pytest.raises(ValueError, match="no receiver of flow 'm' reported a gauge 'naks_rx'"):
        feedback.count(run, "m", ["naks_rx"])
    with pytest.raises(ValueError, match="role 'source'"):
        feedback.count(run, "m", ["naks_rx"], role="source")


def test_the_window_counts_only_after_the_warmup(run):
    # (4, 10]: a 3 * 6 = 18, b (10 - 2) - (4 - 2) = 6.
    assert feedback.count(run, "m", ["naks_sent"], whole_run=False) == pytest.approx(24)


def test_an_unknown_counter_is_an_error_naming_the_known_ones(run):
    with pytest.raises(ValueError, match=r"'ci_sent'.*acks_sent, naks_sent"):
        feedback.count(run, "m", ["naks_sent", "ci_sent"])
    with pytest.raises(ValueError, match="at least one"):
        feedback.count(run, "m", [])


def test_no_protocol_table_measures_nothing(tmp_path):
    assert math.isnan(feedback.count(_write_run(tmp_path, []), "m", ["naks_sent"]))


def test_registered_by_name_for_specs():
    plugin = get_measure("feedback.count")
    assert plugin.unit == "1" and plugin.fn is feedback.count
