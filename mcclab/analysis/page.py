"""What every report page shares: the Jinja2 environment and the embedded figures.

A run's report (:mod:`.report`) and a sweep's (:mod:`.sweep_report`) are
self-contained pages in the same style. Both are Jinja2 templates in
``templates/`` that extend ``page.html.j2`` (the style sheet) and use the
macros of ``macros.html.j2`` (badges, definition lists, figures), so the two
cannot drift apart. Every value is escaped by the environment; only the SVG
figures, which matplotlib wrote, go in as markup.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader
from markupsafe import Markup, escape

CAPTIONS = {
    "throughput": "Throughput of each flow at each receiver (shaded: warm-up, "
                  "not measured).",
    "references": "Paper (grey) versus measured (coloured by verdict); the yellow band "
                  "is the accepted range.",
    "links": "Per link direction: sending rate, queue length and drops per second "
             "(the busiest directions; idle ones and ACK paths are left out).",
}


def keep_units(text: object) -> Markup:
    """Escape, and glue units to their numbers so '60 %' never breaks across lines."""
    return Markup(re.sub(r" (%|[kMG]?bit/s)", r"&nbsp;\1", str(escape(text))))


@cache
def environment() -> Environment:
    """The report pages' Jinja2 environment: templates from the package, HTML escaped."""
    env = Environment(loader=PackageLoader("mcclab.analysis", "templates"), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["keep_units"] = keep_units
    return env


def render_page(template: str, **context: Any) -> str:
    """Render one of the report templates with these values."""
    return environment().get_template(template).render(**context)


def inline_svg(path: Path) -> str:
    """An SVG file's ``<svg>`` element for embedding: natural size, shrunk to fit the page."""
    text = path.read_text()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE
    # Fixed width/height would overflow a narrow window; the viewBox keeps the
    # aspect ratio, and max-width keeps small figures (and their fonts) at
    # their natural size instead of blowing them up.
    return re.sub(r'<svg([^>]*?) width="([^"]*)" height="[^"]*"',
                  r'<svg\1 style="max-width: \2"', text, count=1)


def figure_items(paths: list[Path], extra: dict[str, str] | None = None,
                 base: str = "figures") -> list[dict[str, Any]]:
    """The SVG figures to embed, each with its caption and its PNG's link (or None).

    ``extra`` holds plugin figures' captions by file stem; ``base`` is the
    figures' folder relative to the page. The SVG is markup (matplotlib's own
    output, its text already escaped); caption and link are escaped by the page.
    """
    captions = {**CAPTIONS, **(extra or {})}
    return [{"svg": Markup(inline_svg(path)), "caption": captions.get(path.stem, ""),
             "png": (f"{base}/{path.stem}.png" if path.with_suffix(".png").is_file()
                     else None)}
            for path in paths if path.suffix == ".svg"]
