"""Render a lab's handout.md to one self-contained HTML page, its topology drawn by Graphviz.

Only ``handout.md`` and ``lab.yaml`` are read: the instructor folder never
reaches the student's page. Raw HTML in the Markdown is escaped (markdown-it's
``html`` option is off) and the page template autoescapes; the one piece of
markup taken as is, the topology's SVG, is Graphviz's output for the graph of
``mcclab topo show --dot``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

from mcclab.labs.catalogue import LabEntry

_LINK = re.compile(r"^[a-z][a-z0-9+.-]*:|^#|^/", re.I)


def markdown_html(text: str, base: Path) -> str:
    """Markdown to HTML (CommonMark with tables); relative links point into the repository
    through file:// URLs resolved from ``base``, so they work wherever the page is."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text)
    for token in tokens:
        for child in token.children or []:
            if child.type == "link_open":
                href = str(child.attrGet("href") or "")
                if href and not _LINK.match(href):
                    path, _, anchor = href.partition("#")
                    uri = (base / path).resolve().as_uri()
                    child.attrSet("href", uri + (f"#{anchor}" if anchor else ""))
    return md.renderer.render(tokens, md.options, {})


def topology_svg(topology: Path, dot: str = "dot") -> str:
    """The topology as an SVG drawing ('' when Graphviz is missing or the file is invalid)."""
    from mcclab.model.loader import SpecError, load_topology
    from mcclab.topo_view import dot_graph

    if shutil.which(dot) is None:
        return ""
    try:
        graph = dot_graph(load_topology(topology))
    except SpecError:
        return ""
    out = subprocess.run(
        [dot, "-Tsvg"], input=graph, capture_output=True, text=True, check=False, timeout=30
    )
    if out.returncode != 0:
        return ""
    # Drop the XML prolog and DOCTYPE: the SVG goes inline into the HTML page.
    svg = out.stdout
    return svg[svg.find("<svg") :] if "<svg" in svg else ""


def render_html(lab: LabEntry) -> str:
    """The handout page of ``lab`` as HTML text."""
    env = Environment(
        loader=PackageLoader("mcclab.labs", "templates"), autoescape=select_autoescape(["html"])
    )
    text = (lab.dir / "handout.md").read_text()
    body = markdown_html(text, lab.dir)
    # The drawing goes right under the handout's title (its first heading), if it has one.
    cut = body.find("</h1>")
    head, rest = (body[: cut + 5], body[cut + 5 :]) if cut >= 0 else ("", body)
    return env.get_template("handout.html").render(
        spec=lab.spec,
        topology_name=_topology_name(lab.topology),
        head=Markup(head),
        body=Markup(rest),  # noqa: S704 - markdown-it escapes raw HTML
        svg=Markup(topology_svg(lab.topology)),  # noqa: S704 - Graphviz output of our own graph
    )


def _topology_name(path: Path) -> str:
    """The topology's name, or its file name when it does not load."""
    from mcclab.model.loader import SpecError, load_topology

    try:
        return load_topology(path).name
    except SpecError:
        return path.name


def render_lab(lab: LabEntry, work_dir: Path, out: Path | None = None) -> Path:
    """Write the handout page (default ``work_dir/handout.html``) and return its path."""
    path = out or work_dir / "handout.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(lab))
    return path
