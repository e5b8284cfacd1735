"""The report opens in a real browser (headless Debian Chromium) without console errors.

Chromium's ``--enable-logging=stderr`` writes every console message (log,
warning, error, uncaught exception) as a line containing ``CONSOLE``, at INFO
level whatever the message's own level. The report has no scripts at all, so
*any* console line is a problem (a parse error, a blocked resource, a CSP
violation); the test demands none. A control page with a deliberate
``console.error`` and an uncaught exception proves that the detector sees them,
so a silent log cannot pass for a clean page.

Needs no root and no network; skipped with a reason when Chromium is missing.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from synthetic_runs import demo_run

from mcclab.analysis.report import build_report

CHROMIUM = Path("/usr/bin/chromium")
CONSOLE = re.compile(r":CONSOLE[:(]")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium is not installed (apt-get install chromium)")


def open_page(page: Path, tmp_path: Path) -> tuple[Path, list[str], subprocess.CompletedProcess]:
    """Render a page headless; return the screenshot, the console lines and the process."""
    shot = tmp_path / f"{page.stem}.png"
    profile = tmp_path / f"profile-{page.stem}"
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
        f"--screenshot={shot}", "--window-size=1280,2000", page.resolve().as_uri(),
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    console = [line for line in proc.stderr.splitlines() if CONSOLE.search(line)]
    return shot, console, proc


def test_detector_sees_console_errors(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><p>x</p><script>"
                    "console.error('deliberate'); notAFunction();</script></body></html>")
    _, console, proc = open_page(page, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any("deliberate" in line for line in console), proc.stderr[-2000:]
    assert any("notAFunction" in line for line in console), proc.stderr[-2000:]


def test_report_renders_cleanly(tmp_path):
    # An interrupted run: the page then also carries the status banner.
    folder = demo_run(tmp_path / "results" / "webrc-fig9" / "run1", status="interrupted",
                      elapsed_s=80)
    page = build_report(folder)
    shot, console, proc = open_page(page, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console == [], "console messages:\n" + "\n".join(console)
    assert shot.exists() and shot.stat().st_size > 50_000, "screenshot missing or tiny"
    assert_not_blank(shot)


def assert_not_blank(png: Path) -> None:
    """The screenshot shows a page: many colours and a fair share of non-white pixels."""
    import matplotlib.image

    pixels = matplotlib.image.imread(png)[:, :, :3]
    assert pixels.shape[:2] == (2000, 1280)
    flat = (pixels * 255).round().astype("uint8").reshape(-1, 3)
    colours = {tuple(p) for p in flat[::7]}
    assert len(colours) > 200, f"only {len(colours)} colours: a blank or broken page?"
    inked = (flat.astype(int).sum(axis=1) < 600).mean()  # clearly darker than white
    assert inked > 0.02, f"only {inked:.1%} of the page is drawn on"
