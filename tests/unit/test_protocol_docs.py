"""The protocol documents are reference: no run-by-run history.

A protocol doc (docs/<protocol>.md) states the scheme, the choices, a criterion table
and the known misses; dated entries (a day, a run id, a working session) belong in the
results folders and the project's issue notes, not in docs/.
"""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PROTOCOL_DOCS = ["ormcc", "stair", "webrc", "rlc"]

# What dates an entry: a day of a month, a run folder's id, a numbered working session.
DATED = re.compile(
    r"\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{1,2}\b"
    r"|\b20\d{6}-\d{6}(?:-[0-9a-f]{4})?\b"
    r"|\bsessions? \d+\b")


def dated_lines(text: str) -> list[str]:
    """Lines of ``text`` that carry a date, a run id or a session number."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
            if DATED.search(line)]


def test_the_dated_pattern_catches_what_a_notebook_entry_carries():
    assert dated_lines("### Table I once more (session 13, 25 Nov)")
    assert dated_lines("run `20261125-220434-fb10`: 5 of 5")
    assert dated_lines("measured on Nov 22")
    assert not dated_lines("Table I with RED: 5 of 5 in the paper profile (sec. V-C)")
    assert not dated_lines("an ORMCC session of 1000 s, 16 sessions per link")


@pytest.mark.parametrize("protocol", PROTOCOL_DOCS)
def test_protocol_doc_has_a_criterion_table_and_no_dated_entries(protocol: str):
    text = (DOCS / f"{protocol}.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert any(h.startswith("## Criteria") for h in headings), \
        f"{protocol}.md has no '## Criteria' section"
    assert "## Known misses and their causes" in headings
    assert not dated_lines(text), f"{protocol}.md carries dated entries:\n" + "\n".join(
        dated_lines(text))


def test_no_history_folder_under_docs_and_nothing_points_into_one():
    assert not (DOCS / "notebook").exists()
    pointers = [str(p.relative_to(REPO)) for folder in ("docs", "experiments", "topologies", "labs")
                for p in (REPO / folder).rglob("*") if p.is_file()
                and p.suffix in (".md", ".yaml") and "docs/notebook" in p.read_text()]
    assert not pointers, pointers
