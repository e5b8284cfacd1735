"""``mcclab compare`` on Fig. 4's three schemes: Table III's drop-to-zero for each of them.

Synthetic runs carry the references of the real specs (``ormcc-fig4`` and its PGMCC and
TFMCC comparisons, quick profile), so the table reads what a lab run of them would.
"""

from __future__ import annotations

import pytest
from rich.console import Console
from synthetic_runs import rows, write_run

from mcclab.analysis.compare import compare
from mcclab.analysis.summary import NO_PAPER
from mcclab.experiment.loader import resolve
from mcclab.jsonout import compare_record

pytestmark = pytest.mark.filterwarnings("ignore:constrained_layout not applied")

LEAVES = 8
SECONDS = range(1, 121)
# Per leaf, kbit/s: the multicast flow, the scheme's single-receiver flow, TCP. The
# multicast over single-receiver ratios are 0.85, 0.60 and 0.75.
RATES = {"ormcc": (297e3, 349.4e3, 322e3), "pgmcc": (260e3, 433.3e3, 273e3),
         "tfmcc": (275e3, 366.7e3, 325e3)}
SPECS = {"ormcc": "ormcc-fig4", "pgmcc": "ormcc-fig4-pgmcc", "tfmcc": "ormcc-fig4-tfmcc"}


def _leaf_ratio_refs(name: str) -> list[dict]:
    """The spec's rate ratios per leaf, as the runner writes them into spec.yaml."""
    refs = resolve(name, "quick").experiment.model_dump(mode="json")["references"]
    return [r for r in refs if r.get("measure") == "ormcc.leaf_ratio"]


def _fig4_run(root, scheme: str):
    multi, uni, tcp = RATES[scheme]
    data = []
    for i in range(1, LEAVES + 1):
        leaf = f"h{i}"
        data += rows("multi", "multicast", leaf, multi, SECONDS)
        data += rows(f"uni{i}", "multicast", leaf, uni, SECONDS)
        data += rows(f"tcp{i}", "tcp", leaf, tcp, SECONDS)
    flows = [{"name": "multi", "type": "multicast", "protocol": scheme}]
    flows += [{"name": f"uni{i}", "type": "multicast", "protocol": scheme}
              for i in range(1, LEAVES + 1)]
    flows += [{"name": f"tcp{i}", "type": "tcp"} for i in range(1, LEAVES + 1)]
    return write_run(root / SPECS[scheme] / "run1", data, flows=flows,
                     references=_leaf_ratio_refs(SPECS[scheme]), duration_s=120,
                     warmup_s=20)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    return [_fig4_run(root, scheme) for scheme in ("ormcc", "pgmcc", "tfmcc")]


def _drop_to_zero(record: dict) -> dict[str, tuple]:
    """Per run: (label, paper, measured, verdict) of its multicast / single-receiver row."""
    out = {}
    for q in record["quantities"]:
        if "/ single" not in q["label"]:
            continue
        for name, cell in q["runs"].items():
            if cell is not None:
                assert name not in out, f"two drop-to-zero rows for {name}"
                out[name] = (q["label"], q["paper"], cell["measured"], cell["verdict"])
    return out


def test_each_scheme_has_its_drop_to_zero_cell(runs, tmp_path):
    record = compare_record(runs, out=tmp_path / "cmp.png")
    found = _drop_to_zero(record)
    names = [f"{SPECS[s]}/run1" for s in ("ormcc", "pgmcc", "tfmcc")]
    assert sorted(found) == sorted(names)
    label, paper, measured, verdict = found[names[0]]
    assert label == f"multi-ORMCC / single-ORMCC, mean over the {LEAVES} receivers"
    assert (paper, verdict) == (1.0, "pass") and measured == pytest.approx(297 / 349.4)
    for name, want in zip(names[1:], (0.60, 0.75), strict=True):
        _, paper, measured, verdict = found[name]
        assert paper is None and verdict == "n/a"  # the paper gives the baselines no number
        assert measured == pytest.approx(want, abs=0.001)


def test_the_table_shows_no_paper_value_for_the_baselines(runs, tmp_path):
    table, _ = compare(runs, out=tmp_path / "cmp.png")
    console = Console(record=True, width=300)
    console.print(table)
    text = console.export_text()
    pgmcc = next(x for x in text.splitlines() if "PGMCC multicast / single-receiver" in x)
    assert f"0.6 {NO_PAPER}" in pgmcc and " 1 " not in pgmcc
    ormcc = next(x for x in text.splitlines() if "multi-ORMCC / single-ORMCC" in x)
    assert "0.85 pass" in ormcc and "[0.7, 1.3]" in ormcc
