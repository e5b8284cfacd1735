"""Handout rendering: Markdown to one HTML page, escaped, topology drawn, no instructor notes."""

from __future__ import annotations

import pytest

from mcclab.labs import catalogue
from mcclab.labs.handout import markdown_html, render_html, render_lab

TOPO = """\
name: tiny
nodes: {src: {kind: host}, r1: {kind: router}, h1: {kind: host}}
links: [{endpoints: [src, r1]}, {endpoints: [r1, h1]}]
"""
LAB = """\
id: 9
slug: tiny
title: Tiny <lab>
level: intro
minutes: 10
topology: ./topology.yaml
questions:
  - {id: q1, text: "the answer & more"}
  - {id: q2, text: discuss, checked: false}
"""


@pytest.fixture
def lab(tmp_path):
    folder = tmp_path / "labs" / "09-tiny"
    (folder / "instructor").mkdir(parents=True)
    (folder / "lab.yaml").write_text(LAB)
    (folder / "topology.yaml").write_text(TOPO)
    (folder / "handout.md").write_text(
        "# Tiny\n\nSee [the routing notes](../../docs/routing.md#pim) and "
        "[RFC 3376](https://www.rfc-editor.org/rfc/rfc3376).\n\n"
        "<script>alert(1)</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "1. Start.\n2. Check.\n"
    )
    (folder / "instructor" / "solutions.md").write_text("SECRET-SOLUTION-TEXT")
    return catalogue.find(9, tmp_path / "labs", tmp_path)


def test_page_has_handout_metadata_and_escapes(lab):
    page = render_html(lab)
    assert "<title>Lab 9: Tiny &lt;lab&gt;</title>" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<table>" in page and "<ol>" in page
    assert "the answer &amp; more" in page and "(discussion, not checked)" in page
    assert "SECRET-SOLUTION-TEXT" not in page
    assert "https://www.rfc-editor.org/rfc/rfc3376" in page
    # A relative link points into the repository wherever the page is saved.
    assert (lab.repo / "docs" / "routing.md").resolve().as_uri() + "#pim" in page


def test_topology_is_drawn_inline(lab, tmp_path):
    page = render_html(lab)
    assert "<svg" in page and ">r1</text>" in page and "<?xml" not in page
    out = render_lab(lab, tmp_path / "work")
    assert out == tmp_path / "work" / "handout.html" and out.read_text() == page


def test_markdown_html_keeps_absolute_and_anchor_links(tmp_path):
    html = markdown_html("[a](#x) [b](/etc/hosts) [c](mailto:x@y)", tmp_path)
    assert 'href="#x"' in html and 'href="/etc/hosts"' in html and 'href="mailto:x@y"' in html
