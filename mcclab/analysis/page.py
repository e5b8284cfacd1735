"""What every report page shares: the style sheet, escaping, badges and embedded figures.

A run's report (:mod:`.report`) and a sweep's (:mod:`.sweep_report`) are
self-contained pages in the same style; both build their HTML from these
pieces, so the two cannot drift apart.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #222; margin: 0; background: #fafafa; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid #e5e5e5; padding-bottom: 4px; }
.sub { color: #666; margin: 0 0 12px; }
.banner { padding: 12px 16px; border-radius: 6px; margin: 16px 0; font-weight: 600; }
.banner.interrupted, .banner.running, .banner.killed { background: #fff4e5;
                                       border: 1px solid #f0a040; color: #8a4b00; }
.banner.failed, .banner.overloaded { background: #fdecea; border: 1px solid #e57373;
                                     color: #a31515; }
.banner .detail { font-weight: 400; display: block; margin-top: 4px; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; font-size: 14px; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #f5f5f5; font-weight: 600; }
th.num { text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.verdict { display: inline-block; padding: 1px 10px; border-radius: 10px; font-weight: 600;
           font-size: 13px; }
.v-pass { background: #e6f4ea; color: #1e6b34; }
.v-fail { background: #fdecea; color: #a31515; }
.v-na { background: #eee; color: #555; }
.marginal { display: inline-block; margin-left: 4px; padding: 0 6px; border-radius: 8px;
            font-size: 12px; background: #fff4e5; color: #8a4b00; }
.status-complete { color: #1e6b34; } .status-interrupted { color: #8a4b00; }
.status-failed { color: #a31515; }
.status-running, .status-killed { color: #8a4b00; }
.why { color: #555; font-size: 13px; }
.counts { margin: 4px 0 8px; color: #444; }
figure { margin: 16px 0; }
figure svg { display: block; width: 100%; height: auto; }
figcaption { color: #666; font-size: 13px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 8px 0; }
dt { color: #666; } dd { margin: 0; font-family: ui-monospace, "DejaVu Sans Mono", monospace;
     font-size: 13px; overflow-wrap: anywhere; }
ul.notes { color: #8a4b00; }
"""


def esc(text: object) -> str:
    """HTML-escape any value, quotes included."""
    return html.escape(str(text), quote=True)


def inline_svg(path: Path) -> str:
    """An SVG file's ``<svg>`` element for embedding: natural size, shrunk to fit the page."""
    text = path.read_text()
    text = text[text.index("<svg"):]  # drop the XML declaration and DOCTYPE
    # Fixed width/height would overflow a narrow window; the viewBox keeps the
    # aspect ratio, and max-width keeps small figures (and their fonts) at
    # their natural size instead of blowing them up.
    return re.sub(r'<svg([^>]*?) width="([^"]*)" height="[^"]*"',
                  r'<svg\1 style="max-width: \2"', text, count=1)


def verdict_badge(verdict: str) -> str:
    """A coloured verdict badge."""
    css = {"pass": "v-pass", "fail": "v-fail", "error": "v-fail"}.get(verdict, "v-na")
    return f"<span class='verdict {css}'>{esc(verdict)}</span>"


def definitions(pairs: list[tuple[str, str]]) -> str:
    """Key/value pairs as a definition list."""
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"


def figures_html(paths: list[Path], extra: dict[str, str] | None = None,
                 base: str = "figures") -> str:
    """The SVG figures, embedded, with captions and links to the PNGs.

    ``extra`` holds plugin figures' captions by file stem; ``base`` is the
    figures' folder relative to the page.
    """
    captions = {
        "throughput": "Throughput of each flow at each receiver (shaded: warm-up, "
                      "not measured).",
        "references": "Paper (grey) versus measured (coloured by verdict); the yellow band "
                      "is the accepted range.",
        "links": "Per link direction: sending rate, queue length and drops per second "
                 "(the busiest directions; idle ones and ACK paths are left out).",
    }
    captions.update(extra or {})
    out = []
    for path in paths:
        if path.suffix != ".svg":
            continue
        png = (f" <a href='{esc(base)}/{esc(path.stem)}.png'>PNG</a>"
               if path.with_suffix(".png").is_file() else "")
        out.append(f"<figure>{inline_svg(path)}<figcaption>{esc(captions.get(path.stem, ''))}"
                   f"{png}</figcaption></figure>")
    return "".join(out)
