"""Figures and the HTML report: outputs exist, the page is self-contained, states the status."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from synthetic_runs import demo_run, rows, write_run

from mcclab.analysis.page import inline_svg
from mcclab.analysis.rebuild import report_command
from mcclab.analysis.report import build_report


@pytest.fixture(scope="module")
def complete(tmp_path_factory) -> Path:
    folder = demo_run(tmp_path_factory.mktemp("results") / "webrc-fig9" / "run1")
    build_report(folder)
    return folder


def test_outputs(complete):
    assert (complete / "report.html").stat().st_size > 10_000
    assert json.loads((complete / "summary.json").read_text())["run_id"] == "run1"
    for name in ("throughput", "references", "links"):
        for suffix in ("png", "svg"):
            path = complete / "figures" / f"{name}.{suffix}"
            assert path.stat().st_size > 5_000, path
    assert (complete / "figures" / "throughput.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_content(complete):
    page = (complete / "report.html").read_text()
    assert "<h1>webrc-fig9</h1>" in page
    assert "One WEBRC session and one TCP session share" in page
    assert "WEBRC (SIGCOMM 2002), Fig. 9" in page
    assert "quick: durations divided by 2.5" in page     # the profile's scaling rule
    assert "6.1.0-synthetic" in page and "backends.routing" in page  # environment
    assert "role='alert'" not in page                     # complete: no banner
    # the table: one row per reference, with tolerance, verdict and explanation
    for text in ("WEBRC throughput", "±10 %", "[40 %, 60 %]", "Jain&#39;s index",
                 "v-fail", "outside [0&nbsp;%, 0.5&nbsp;%]"):
        assert text in page, text
    assert page.count("<span class='verdict v-pass'>pass</span>") == 5
    assert page.count("<svg") == 3


def test_report_is_self_contained(complete):
    page = (complete / "report.html").read_text()
    assert "<script" not in page
    assert "<link" not in page and "@import" not in page
    assert not re.search(r"\bsrc\s*=", page)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", page)
    for target in re.findall(r"href\s*=\s*['\"]([^'\"]*)['\"]", page):
        assert target.startswith("#") or target.startswith("figures/"), target


def test_inline_svg_scales_down_only(complete):
    svg = inline_svg(complete / "figures" / "throughput.svg")
    assert svg.startswith("<svg") and "<?xml" not in svg
    assert re.match(r'<svg[^>]*style="max-width: [0-9.]+pt"', svg)
    assert 'viewBox="' in svg.split(">", 1)[0]


HOSTILE = "<script>alert('x')</script>"


def test_hostile_names_are_escaped_in_the_report(tmp_path):
    # The page is a template with autoescape: a flow name, a label, a description
    # or an error that holds markup shows as text and never runs.
    flow = f"w{HOSTILE}"
    folder = write_run(
        tmp_path / "e" / "run", rows(flow, "multicast", "r1", 1e6, range(1, 61)),
        references=[{"kind": "throughput", "label": "<img src=x onerror=alert(1)>",
                     "flow": flow, "paper": "1Mbit", "tolerance": "10%",
                     "source": "Fig. <b>9</b>"}],
        spec={"description": f"A run by {HOSTILE} & co.", "reference": "<i>paper</i>"},
        status="failed", error=f"lab {HOSTILE} failed", elapsed_s=40)
    page = build_report(folder).read_text()
    shown = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    assert "<script" not in page and "<img" not in page and "<i>" not in page
    assert f"<p>A run by {shown} &amp; co.</p>" in page                 # description
    assert f"<td>w{shown}</td><td>multicast</td>" in page                # flow name
    assert "<td>&lt;img src=x onerror=alert(1)&gt;<div class='why'>" in page  # label
    assert "throughput · Fig. &lt;b&gt;9&lt;/b&gt;</div>" in page         # source
    assert f"<span class='detail'>Error: lab {shown} failed</span>" in page   # banner
    assert "<strong>Paper:</strong> &lt;i&gt;paper&lt;/i&gt;</p>" in page


def test_interrupted_banner(tmp_path):
    folder = demo_run(tmp_path / "webrc-fig9" / "run2", status="interrupted", elapsed_s=71.4)
    page = build_report(folder).read_text()
    assert "<div class='banner interrupted' role='alert'>This run was interrupted." in page
    assert "It ran 71.4 s of the planned 120 s" in page and "window 30–71 s" in page
    assert "interrupted by Ctrl-C" in page
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["window"] == [30.0, 71.0]


def test_failed_run_with_nothing_but_run_json(tmp_path):
    folder = tmp_path / "e" / "r"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({
        "experiment": "e", "run_id": "r", "status": "failed", "duration_s": 60,
        "warmup_s": 5, "elapsed_s": 1.5, "error": "FRR <did not> converge"}))
    page = build_report(folder).read_text()
    assert "banner failed" in page and "nothing was measured" in page
    assert "FRR &lt;did not&gt; converge" in page  # escaped
    assert "tables/per_second.csv is missing" in page
    assert "No per-second measurements" in page
    assert (folder / "figures" / "throughput.svg").exists()
    assert not (folder / "figures" / "links.svg").exists()


def test_no_links_table_no_links_figure(tmp_path):
    folder = write_run(tmp_path / "e" / "r", rows("m", "multicast", "r1", 5e5, range(1, 61)),
                       references=[{"kind": "throughput", "label": "m", "flow": "m",
                                    "paper": "500kbit", "tolerance": "5%"}])
    page = build_report(folder).read_text()
    assert not (folder / "figures" / "links.png").exists()
    assert page.count("<svg") == 2
    assert "500 kbit/s" in page


def test_many_receivers(tmp_path):
    # 20 receivers: the figure leaves out the legend rather than drown the lines in it.
    data = [r for i in range(20) for r in rows("m", "multicast", f"h{i}", 1e5 * (i + 1),
                                                range(1, 31))]
    folder = write_run(tmp_path / "e" / "r", data, warmup_s=5, duration_s=30)
    build_report(folder)
    assert "h19" not in (folder / "figures" / "throughput.svg").read_text()


def test_report_command(tmp_path, complete, capsys):
    report_command([complete])
    out = capsys.readouterr().out
    assert "complete" in out and "5 pass, 1 fail, 0 n/a" in out and "report.html" in out
    with pytest.raises(typer.Exit) as info:
        report_command([tmp_path / "missing", complete])
    assert info.value.exit_code == 2
    captured = capsys.readouterr()
    assert "no run.json" in captured.err and "report.html" in captured.out


def test_run_left_running(tmp_path):
    # The runner writes status "running" first; it stays if the runner died.
    folder = demo_run(tmp_path / "webrc-fig9" / "run3", status="running", elapsed_s=50)
    page = build_report(folder).read_text()
    assert "<div class='banner running' role='alert'>This run has not finished" in page
    assert json.loads((folder / "summary.json").read_text())["window"] == [30.0, 50.0]


def test_link_directions_are_not_mixed():
    import pandas as pd

    from mcclab.analysis.figures import link_directions

    data = []
    for t in range(0, 11):
        for src, dst, rate in (("a", "b", 1_000_000), ("b", "a", 40_000), ("b", "c", 0)):
            data.append({"t": t, "link": "0" if "c" not in (src, dst) else "1", "src": src,
                         "dst": dst, "bytes_out": rate * t // 8})
    busy = link_directions(pd.DataFrame(data))
    assert [label for label, _ in busy] == ["a→b"]  # the ACK path is under 5 %
    rows = busy[0][1]
    assert (rows["bytes_out"].diff().dropna() == 125_000).all()
    assert [label for label, _ in link_directions(pd.DataFrame(data), share=0.01)] \
        == ["a→b", "b→a"]


def test_a_marginal_verdict_is_labelled(tmp_path):
    # m runs at 500 kbit/s: 490 +- 2 % puts it 0.2 kbit/s outside the band's edge (a
    # fail, margin -0.02), 400 +- 30 % well inside (margin 0.17).
    folder = write_run(tmp_path / "e" / "r", rows("m", "multicast", "r1", 5e5, range(1, 61)),
                       references=[{"kind": "throughput", "label": "near", "flow": "m",
                                    "paper": "490kbit", "tolerance": "2%"},
                                   {"kind": "throughput", "label": "far", "flow": "m",
                                    "paper": "400kbit", "tolerance": "30%"}])
    page = build_report(folder).read_text()
    near, far = (page.split(f"<tr><td>{label}<")[1].split("</tr>")[0] for label in ("near", "far"))
    assert "class='marginal'>marginal</span>" in near
    assert "marginal" not in far
    assert "(1 marginal: within 10 % of the band's edge)" in page
