"""Every lab's handout renders in a real browser (headless Debian Chromium).

For each lab under labs/ the handout page is built as a student gets it
(``mcclab lab handout N``), opened in headless Chromium, and a screenshot is
kept in ``$TEST_REPORT_DIR/handouts/`` (default /tmp/mcclab-test-report), one
per lab, for a human to look at. The page must carry the topology drawing, the
lab's title and every question, no instructor text, and Chromium must log no
console message (the page has no scripts, so any console line is a problem).

Needs no root and no network; Chromium and Graphviz are installed by the playbook.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from mcclab.labs.catalogue import discover

CHROMIUM = Path("/usr/bin/chromium")
CONSOLE = re.compile(r":CONSOLE[:(]")
SHOTS = Path(os.environ.get("TEST_REPORT_DIR", "/tmp/mcclab-test-report")) / "handouts"
LABS = discover()


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack("!II", data[16:24])


def screenshot(page: Path, shot: Path, profile: Path) -> subprocess.CompletedProcess:
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        f"--screenshot={shot}",
        "--window-size=1100,2400",
        page.resolve().as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_there_are_six_labs():
    assert len(LABS) >= 6, [lab.name for lab in LABS]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("lab", LABS, ids=[lab.name for lab in LABS])
def test_handout_renders_in_chromium(lab, tmp_path):
    from typer.testing import CliRunner

    from mcclab.cli import app

    page = tmp_path / f"{lab.name}.html"
    result = CliRunner().invoke(app, ["lab", "handout", str(lab.spec.id), "-o", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "<svg" in html, "the topology is not drawn"
    for q in lab.spec.questions:
        assert q.id in html
    solutions = lab.dir / "instructor" / "solutions.md"
    assert solutions.is_file(), f"{lab.name} has no instructor/solutions.md"
    # No line of the instructor's notes (long enough to be distinctive) reaches the page.
    secret = [
        line.strip()
        for line in solutions.read_text().splitlines()
        if len(line.strip()) > 40 and not line.lstrip().startswith(("#", "|", "-", "`"))
    ]
    leaked = [line for line in secret if line in html]
    assert not leaked, leaked[:2]
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{lab.name}.png"
    shot.unlink(missing_ok=True)
    proc = screenshot(page, shot, tmp_path / "profile")
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if CONSOLE.search(line)]
    assert not console, console
    width, height = png_size(shot)
    assert (width, height) == (1100, 2400)
    assert shot.stat().st_size > 20_000, "the screenshot looks blank"
