"""Paper versus measured: every reference kind, tolerance and within, n/a, partial runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from synthetic_runs import rows, write_run

from mcclab.analysis.results import load_run
from mcclab.analysis.summary import (
    format_criterion,
    format_value,
    judge,
    margin,
    summarise,
    write_summary,
)

# Over the window (10, 60]: m is 1 Mbit/s at r1 and 2 Mbit/s at r2 (mean 1.5),
# t is 1.5 Mbit/s at r3, u is 0.5 Mbit/s at r1. Each second, m receives 125
# packets at r1 and loses 25 (1/6 of 150); r2 receives 250 and loses none.
FLOWS = (rows("m", "multicast", "r1", 1e6, range(1, 61), 1000, loss=1 / 6)
         + rows("m", "multicast", "r2", 2e6, range(1, 61), 1000)
         + rows("t", "tcp", "r3", 1.5e6, range(1, 61), 1000)
         + rows("u", "udp", "r1", 0.5e6, range(1, 61), 1000))


def measure(tmp_path: Path, reference: dict, **kwargs):
    """The single quantity of a run with one reference."""
    folder = write_run(tmp_path / "exp" / "run", FLOWS, references=[reference], **kwargs)
    (quantity,) = summarise(load_run(folder)).quantities
    return quantity


CASES = [
    # throughput: receiver mean, then one node
    ({"kind": "throughput", "flow": "m", "paper": "1.5Mbit", "tolerance": "1%"}, 1.5e6, "pass"),
    ({"kind": "throughput", "flow": "m", "node": "r2", "paper": "1.5Mbit",
      "tolerance": "10%"}, 2e6, "fail"),
    ({"kind": "throughput", "flow": "m", "node": "r2", "paper": "1.5Mbit",
      "within": [1.9e6, 2.1e6]}, 2e6, "pass"),
    # share of a capacity and of a set of flows
    ({"kind": "share", "flow": "t", "capacity": "3Mbit", "paper": 0.5, "tolerance": "5%"},
     0.5, "pass"),
    ({"kind": "share", "flow": "m", "of_flows": ["m", "t"], "paper": 0.5,
      "within": [0.45, 0.55]}, 0.5, "pass"),
    # at r1, m is 1 Mbit/s; t is not received at r1 so its receiver mean is used
    ({"kind": "share", "flow": "m", "node": "r1", "of_flows": ["m", "t"], "paper": 0.5,
      "within": [0.45, 0.55]}, 0.4, "fail"),
    # share in IP bits: each received 1000-B packet also counts 28 B of IPv4 and UDP
    # header; m gets 125 packets a second at r1 and 250 at r2
    ({"kind": "share", "flow": "m", "node": "r1", "capacity": "2Mbit", "bits": "ip",
      "paper": 0.5, "within": [0.5, 0.52]}, (1e6 + 125 * 28 * 8) / 2e6, "pass"),
    ({"kind": "share", "flow": "m", "capacity": "3Mbit", "bits": "ip", "paper": 0.5,
      "within": [0.45, 0.51]}, (1.5e6 + 187.5 * 28 * 8) / 3e6, "fail"),
    ({"kind": "share", "flow": "m", "capacity": "3Mbit", "bits": "payload", "paper": 0.5,
      "within": [0.45, 0.51]}, 0.5, "pass"),
    # utilisation: (1.5 + 1.5) / 4
    ({"kind": "utilisation", "flows": ["m", "t"], "capacity": "4Mbit", "paper": 0.8,
      "tolerance": "10%"}, 0.75, "pass"),
    ({"kind": "utilisation", "flows": ["m", "t"], "capacity": "4Mbit", "paper": 0.9,
      "tolerance": "10%"}, 0.75, "fail"),
    # fairness of m (1.5), t (1.5), u (0.5): 3.5^2 / (3 * 4.75)
    ({"kind": "fairness", "flows": ["m", "t"], "paper": 1.0, "within": [0.99, 1.0]}, 1.0, "pass"),
    ({"kind": "fairness", "flows": ["m", "t", "u"], "paper": 0.95, "within": [0.9, 1.0]},
     3.5 ** 2 / (3 * 4.75), "fail"),
    # loss: 25 of 150 at r1; over both receivers 25 of 400
    ({"kind": "loss", "flow": "m", "node": "r1", "paper": 0.1, "tolerance": "10%"}, 1 / 6,
     "fail"),
    ({"kind": "loss", "flow": "m", "paper": 0.06, "within": [0.0, 0.1]}, 1 / 16, "pass"),
    # ratio: numerator at r1 (1 Mbit/s) over u, which is received at r1 too
    ({"kind": "ratio", "numerator": "m", "denominator": "u", "node": "r1", "paper": 2.0,
      "tolerance": "1%"}, 2.0, "pass"),
    # denominator t is not received at r1: its receiver mean (1.5) is used
    ({"kind": "ratio", "numerator": "m", "denominator": "t", "node": "r1", "paper": 1.0,
      "tolerance": "20%"}, 1 / 1.5, "fail"),
]


@pytest.mark.parametrize(("reference", "value", "verdict"), CASES)
def test_quantities(tmp_path, reference, value, verdict):
    q = measure(tmp_path, {"label": "q", "source": "Fig. 1"} | reference)
    assert q.measured == pytest.approx(value)
    assert q.verdict == verdict, q.note
    assert q.unit == ("bit/s" if reference["kind"] == "throughput" else "fraction")
    assert q.source == "Fig. 1"


def test_loss_of_the_synthetic_rows():
    r1 = [r for r in FLOWS if r["flow"] == "m" and r["node"] == "r1"][0]
    assert (r1["packets"], r1["lost"]) == (125, 25)


def test_judge_boundaries():
    assert judge(1.1, 1.0, 0.1, None) == "pass"        # exactly 10 % off
    assert judge(0.9, 1.0, 0.1, None) == "pass"
    assert judge(1.1001, 1.0, 0.1, None) == "fail"
    assert judge(0.5, 0.5, None, (0.5, 0.6)) == "pass"  # bounds are inclusive
    assert judge(0.61, 0.5, None, (0.5, 0.6)) == "fail"
    # both criteria given: both must hold
    assert judge(0.55, 0.5, 0.2, (0.5, 0.6)) == "pass"
    assert judge(0.59, 0.5, 0.1, (0.5, 0.6)) == "fail"
    assert judge(0.0, 0.0, 0.1, None) == "pass"         # zero paper value, zero measured
    assert judge(math.nan, 1.0, 0.1, None) == "n/a"
    assert judge(1.0, 1.0, None, None) == "n/a"         # nothing to judge against


def test_no_data_is_na(tmp_path):
    folder = write_run(tmp_path / "e" / "r", FLOWS, flows=[
        {"name": n, "type": "x"} for n in ("m", "t", "u", "late")], references=[
        {"kind": "throughput", "label": "a", "flow": "late", "paper": "1Mbit", "tolerance": "5%"},
        {"kind": "throughput", "label": "b", "flow": "m", "node": "r9", "paper": "1Mbit",
         "tolerance": "5%"},
        {"kind": "fairness", "label": "c", "flows": ["m", "late"], "paper": 1,
         "within": [0.9, 1]},
        {"kind": "throughput", "label": "d", "flow": "m", "paper": "1Mbit"},
    ])
    a, b, c, d = summarise(load_run(folder)).quantities
    assert (a.verdict, a.measured) == ("n/a", None) and "late" in a.note
    assert (b.verdict, b.measured) == ("n/a", None) and "node r9" in b.note
    assert (c.verdict, c.measured) == ("n/a", None) and "late" in c.note
    assert (d.verdict, d.measured) == ("n/a", 1.5e6) and "no tolerance" in d.note


def test_interrupted_run_uses_the_partial_window(tmp_path):
    # Rate 1 Mbit/s until second 30, then 2 Mbit/s; interrupted at 40.7 s.
    data = rows("m", "multicast", "r1", [1e6] * 30 + [2e6] * 10, range(1, 41))
    folder = write_run(tmp_path / "e" / "r", data, status="interrupted", elapsed_s=40.7,
                       references=[{"kind": "throughput", "label": "m", "flow": "m",
                                    "paper": "1.5Mbit", "tolerance": "1%"}])
    summary = summarise(load_run(folder))
    assert summary.status == "interrupted"
    assert summary.window == (10.0, 40.0)
    # seconds 11..40: 20 at 1 Mbit/s and 10 at 2 Mbit/s
    assert summary.quantities[0].measured == pytest.approx(4e6 / 3)
    assert summary.quantities[0].verdict == "fail"


def test_run_stopped_in_warmup_is_all_na(tmp_path):
    folder = write_run(tmp_path / "e" / "r", rows("m", "multicast", "r1", 1e6, range(1, 5)),
                       status="failed", elapsed_s=4.2, references=[
                           {"kind": "throughput", "label": "m", "flow": "m", "paper": "1Mbit",
                            "tolerance": "10%"}])
    (q,) = summarise(load_run(folder)).quantities
    assert q.verdict == "n/a" and "window" in q.note


def test_summary_json_is_the_contract(tmp_path):
    folder = write_run(tmp_path / "exp" / "run1", FLOWS, references=[
        {"kind": "throughput", "label": "m", "flow": "m", "paper": "1.5Mbit", "tolerance": "10%"},
        {"kind": "share", "label": "s", "flow": "m", "of_flows": ["m", "t"], "paper": 0.5,
         "within": [0.4, 0.6]},
        {"kind": "throughput", "label": "none", "flow": "m", "node": "r3", "paper": "1Mbit",
         "tolerance": "10%"},
    ])
    path = write_summary(load_run(folder))
    data = json.loads(path.read_text())
    assert set(data) == {"experiment", "run_id", "status", "window", "quantities",
                         "agent_stalls"}
    assert data["agent_stalls"] is None  # this run has no tables/agents.csv
    assert (data["experiment"], data["run_id"], data["status"]) == ("exp", "run1", "complete")
    assert data["window"] == [10.0, 60.0]
    keys = {"label", "kind", "source", "paper", "measured", "unit", "tolerance", "within",
            "verdict", "margin", "marginal"}
    assert all(set(q) == keys for q in data["quantities"])
    first, second, third = data["quantities"]
    assert first == {"label": "m", "kind": "throughput", "source": "", "paper": 1.5e6,
                     "measured": 1.5e6, "unit": "bit/s", "tolerance": 0.1, "within": None,
                     "verdict": "pass", "margin": 1.0, "marginal": False}
    assert second["within"] == [0.4, 0.6] and second["tolerance"] is None
    assert third["measured"] is None and third["verdict"] == "n/a"
    assert third["margin"] is None and third["marginal"] is False


def test_wording(tmp_path):
    assert format_value("throughput", 2.912e6) == "2.91 Mbit/s"
    assert format_value("throughput", 320e3) == "320 kbit/s"
    assert format_value("share", 0.934) == "93.4 %"
    assert format_value("loss", 0.0054) == "0.54 %"
    assert format_value("fairness", 0.9871) == "0.987"
    assert format_value("ratio", None) == "–"
    q = measure(tmp_path, {"kind": "share", "label": "s", "flow": "t", "capacity": "3Mbit",
                           "paper": 0.55, "tolerance": "5%", "within": [0.4, 0.6]})
    assert format_criterion(q) == "±5 % and [40 %, 60 %]"
    assert q.note == "9.09 % below the paper's value; allowed ±5 %; inside [40 %, 60 %]"


def test_margin_is_the_distance_to_the_band_edge_over_its_half_width():
    assert margin(1.0, 1.0, 0.1, None) == pytest.approx(1.0)  # the centre
    assert margin(1.1, 1.0, 0.1, None) == pytest.approx(0.0)  # on the edge
    assert margin(1.2, 1.0, 0.1, None) == pytest.approx(-1.0)  # a half-width outside
    assert margin(0.55, 0.5, None, (0.45, 0.65)) == pytest.approx(1.0)  # the middle is 0.55
    assert margin(0.45 + 0.004, 0.5, None, (0.45, 0.65)) == pytest.approx(0.04)
    # both criteria: the band is their intersection, [0.9, 1.05]
    assert margin(1.04, 1.0, 0.1, (0.0, 1.05)) == pytest.approx(0.01 / 0.075)
    assert margin(math.nan, 1.0, 0.1, None) is None
    assert margin(1.0, 1.0, None, None) is None  # no band


@pytest.mark.parametrize(("paper", "tolerance", "verdict", "marginal"), [
    ("1.5Mbit", "10%", "pass", False),   # m at 1.5 Mbit/s: the centre of the band
    ("1.37Mbit", "10%", "pass", True),   # 1.5 is 5 % of a half-width inside the edge
    ("1.36Mbit", "10%", "fail", True),   # 1.5 is 2.9 % of a half-width outside it
    ("1.2Mbit", "10%", "fail", False),   # far outside
])
def test_a_verdict_near_the_band_edge_is_marginal(tmp_path, paper, tolerance, verdict, marginal):
    q = measure(tmp_path, {"kind": "throughput", "label": "q", "flow": "m", "paper": paper,
                           "tolerance": tolerance})
    assert q.verdict == verdict
    assert q.marginal is marginal
    assert ("marginal" in q.note) is marginal
    assert q.margin == pytest.approx(margin(1.5e6, q.paper, q.tolerance, q.within))


def test_an_unjudged_quantity_is_never_marginal(tmp_path):
    q = measure(tmp_path, {"kind": "throughput", "label": "q", "flow": "m", "paper": "1.5Mbit"})
    assert q.verdict == "n/a" and q.marginal is False and q.margin is None
