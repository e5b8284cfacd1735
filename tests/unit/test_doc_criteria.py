"""Each protocol doc opens with a criterion table that agrees with the specs.

docs/webrc.md, rlc.md, ormcc.md and stair.md open with "## Criteria: paper against
lab": one row per paper result with a band. The table is written by hand from
measured values, so it drifts when a spec's paper value, band or trials change, or
when a margin is copied wrong. These tests hold it to the specs: every criterion has
a row and every row a criterion; the paper value and band read as `mcclab audit
bands` prints them; a numeric measured value has the margin and verdict the index
would give it; the runs column counts out of the paper profile's trials; and every
spec with TCP has a row in the "TCP readings" table under it.
"""

from __future__ import annotations

import math

import pytest
from doc_criteria_support import (
    DOCS,
    MEASURED,
    NOT_RUN,
    PROTOCOLS,
    RUNS,
    VERDICTS,
    DocRow,
    criterion_for,
    doc_rows,
    expand,
    margin_of,
    paper_criteria,
    parse_margin,
    parse_measured,
    show_band,
    show_paper,
    tcp_model_of,
    tcp_specs,
    trials_of,
    verdict_of,
)


@pytest.fixture(scope="module", params=PROTOCOLS)
def doc(request: pytest.FixtureRequest) -> tuple[str, list[DocRow], dict]:
    """(protocol, the doc's expanded rows, the protocol's criteria)."""
    protocol = request.param
    text = (DOCS / f"{protocol}.md").read_text()
    return protocol, doc_rows(text), paper_criteria(protocol)


def _where(row: DocRow) -> str:
    return f"line {row.line}: {row.key.experiment} / {row.key.label}"


def test_every_criterion_has_one_row_and_every_row_a_criterion(doc):
    protocol, rows, criteria = doc
    keys = [r.key for r in rows]
    twice = sorted({f"{k.experiment} / {k.label}" for k in keys if keys.count(k) > 1})
    assert not twice, f"{protocol}.md names these more than once: {twice}"
    missing = sorted(f"{k.experiment} / {k.label} ({k.profile})" for k in criteria
                     if k not in keys)
    assert not missing, f"{protocol}.md has no row for: {missing}"
    unknown = [_where(r) for r in rows if r.key not in criteria]
    assert not unknown, f"{protocol}.md names criteria no spec has: {unknown}"


def test_paper_value_and_band_read_as_the_audit_prints_them(doc):
    protocol, rows, criteria = doc
    wrong = []
    for row in rows:
        item = criteria.get(row.key)
        if item is None:
            continue  # reported by the test above
        expected = (show_paper(item), show_band(item))
        if (row.cells["paper"], row.cells["band"]) != expected:
            wrong.append(f"{_where(row)}: {row.cells['paper']} {row.cells['band']}, "
                         f"the spec says {expected[0]} {expected[1]}")
    assert not wrong, f"{protocol}.md:\n" + "\n".join(wrong)


def test_margin_and_verdict_are_the_index_s_for_the_measured_value(doc):
    protocol, rows, criteria = doc
    wrong = []
    for row in rows:
        cells = row.cells
        verdict = cells["verdict"]
        if verdict not in VERDICTS:
            wrong.append(f"{_where(row)}: verdict {verdict!r} is not one of {VERDICTS}")
            continue
        shown = parse_margin(cells["margin"])
        measured = parse_measured(cells["measured"])
        if cells["measured"].startswith(NOT_RUN) or verdict == NOT_RUN:
            if not (cells["measured"].startswith(NOT_RUN) and verdict == NOT_RUN
                    and shown is None):
                wrong.append(f"{_where(row)}: 'not run' needs the measured cell, the "
                             "verdict and an empty margin to agree")
            continue
        if measured is None:
            # Evidence in words (a range, periods held): no margin, no 'marginal'.
            if shown is not None or verdict.startswith("marginal"):
                wrong.append(f"{_where(row)}: a margin needs a single measured number")
            continue
        item = criterion_for(criteria, row.key, measured[0])
        if item is None:
            continue
        value = margin_of(item, measured[1])
        if value is None:
            # No edge of the band can be crossed: no margin, and never marginal.
            if shown is not None:
                wrong.append(f"{_where(row)}: margin {cells['margin']!r}, but no edge of "
                             "the band can be crossed: the index gives none")
        elif not math.isfinite(value) or shown is None \
                or abs(value * 100 - shown * 100) > 0.5 + 1e-9:
            wrong.append(f"{_where(row)}: margin {cells['margin']!r}, the index gives "
                         f"{value * 100:+.1f} %")
        if verdict != verdict_of(item, measured[1]):
            wrong.append(f"{_where(row)}: verdict {verdict!r}, the index gives "
                         f"{verdict_of(item, measured[1])!r}")
    assert not wrong, f"{protocol}.md:\n" + "\n".join(wrong)


def test_runs_count_out_of_the_paper_profile_s_trials(doc):
    protocol, rows, _ = doc
    wrong = []
    for row in rows:
        found = RUNS.match(row.cells["runs"])
        if found is None:
            wrong.append(f"{_where(row)}: runs {row.cells['runs']!r} is not 'N of M'")
            continue
        trials = trials_of(row.key.experiment)
        if int(found["trials"]) != trials:
            wrong.append(f"{_where(row)}: {row.cells['runs']!r}, the paper profile runs "
                         f"{trials}")
        if row.cells["verdict"] == NOT_RUN and found["done"] != "0":
            wrong.append(f"{_where(row)}: not run, but {found['done']} runs")
    assert not wrong, f"{protocol}.md:\n" + "\n".join(wrong)


def test_every_spec_with_tcp_has_its_readings_under_the_table(doc):
    protocol, rows, _ = doc
    text = (DOCS / f"{protocol}.md").read_text()
    named = tcp_specs(text)
    with_tcp = {r.key.experiment for r in rows if tcp_model_of(r.key.experiment)}
    assert with_tcp <= named, f"{protocol}.md: no TCP readings for {sorted(with_tcp - named)}"


# ------------------------------------------------------------ the reading itself


def test_braces_expand_in_lockstep_and_refuse_uneven_groups():
    assert expand("ormcc-fig4{,-n16} over the {8,16} receivers") == [
        "ormcc-fig4 over the 8 receivers", "ormcc-fig4-n16 over the 16 receivers"]
    assert expand("no braces") == ["no braces"]
    with pytest.raises(ValueError):
        expand("{a,b} and {c,d,e}")


def test_measured_cells_parse_to_base_units_and_words_stay_words():
    assert parse_measured("quick: 35.3 %") == ("quick", pytest.approx(0.353))
    assert parse_measured("paper, mean of 10: 313 kbit/s ᵖ") == ("paper", 313e3)
    assert parse_measured("paper (300 s): 0.205 s ᵈ") == ("paper", 0.205)
    assert parse_measured("quick: 1.44 Mbit/s") == ("quick", 1.44e6)
    assert parse_measured("paper: 95–99 % ᵈ") is None
    assert parse_measured("quick: the CR held ᵍ") is None
    assert parse_measured("not run") is None
    assert MEASURED.match("sim: 0.5") is None  # only the two profiles

