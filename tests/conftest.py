"""Shared pytest fixtures, the root / kernel-feature gate for network tests, and CI's rules.

Under ``CI=true`` (the CI machine has every feature the lab tests need) a skipped
``root`` test fails the run, with its skip reason: a lab test that silently did
not run is not a pass. A SIGTERM (the watchdog ``timeout`` around ``make test``
in .ci/run) stops the session after naming the test that was running and
printing every thread's stack, so a wedged lab says where it wedged. A crashed
lab's leftovers, which would refuse every lab test, stop the session before any
test runs.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CI_SKIP_PREFIX = "CI=true: a root test may not skip (the CI machine has every feature): "
LOCK_WAIT_ENV = "MCCLAB_TEST_LOCK_WAIT"
DEFAULT_LOCK_WAIT = 1800.0

pytest_plugins = ["pytester"]  # tests/unit/test_conftest_ci.py runs these hooks in a sandbox


def gate_reason(euid: int, has_mroute: bool, has_mnexec: bool) -> str | None:
    """Why network tests cannot run on this machine, or None when they can."""
    if euid != 0:
        return "needs root to create network namespaces"
    if not has_mroute:
        return "kernel has no IPv4 multicast routing (CONFIG_IP_MROUTE)"
    if not has_mnexec:
        return "mininet is not installed (run 'make setup')"
    return None


def in_ci(env: Mapping[str, str]) -> bool:
    """True when the environment says this is the CI run (``CI=true``, any case)."""
    return env.get("CI", "").strip().lower() == "true"


def ci_skip_failure(env: Mapping[str, str], is_root: bool, skipped: bool, xfail: bool,
                    reason: str) -> str | None:
    """The failure message that replaces a skip, or None when the skip may stand.

    Only a ``root`` test's skip fails, only under ``CI=true``, and an expected
    failure (xfail, reported as a skip) is left alone.
    """
    if not (skipped and is_root and not xfail and in_ci(env)):
        return None
    return CI_SKIP_PREFIX + (reason or "no reason given")


def crash_leftovers() -> str | None:
    """Why no lab can start now: a crashed lab's namespaces or interfaces, or None.

    A lab in use (its owner runs) is not a reason: lab tests queue for the lock.
    """
    from mcclab.lab import leftover_problem, live_labs
    from mcclab.state import leftovers

    live = live_labs()
    return None if live else leftover_problem(leftovers(), live)


def lock_wait_allowance(env: Mapping[str, str]) -> float:
    """Seconds added to every ``root`` test's timeout for queueing behind other labs.

    A lab test's timeout bounds its own work (about 3x its measured time). On a
    shared machine it may first queue for the machine-wide lab lock while another
    engineer's lab runs: ``$MCCLAB_TEST_LOCK_WAIT`` seconds (default 1800) are
    allowed for that. Under CI=true the machine runs one lab at a time, so none.
    """
    if in_ci(env):
        return 0.0
    return float(env.get(LOCK_WAIT_ENV, DEFAULT_LOCK_WAIT))


def _skip_reason(longrepr: object) -> str:
    """The reason text of a skip report (pytest keeps (path, line, 'Skipped: why'))."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def pytest_collection_modifyitems(config, items):  # noqa: ANN001
    """Skip network tests, saying why, where they cannot run (not root, no netns, no mnexec).

    Outside CI, also extend each network test's timeout by the lab-lock allowance.
    """
    allowance = lock_wait_allowance(os.environ)
    for item in items:
        marker = item.get_closest_marker("timeout")
        if allowance and "root" in item.keywords and marker is not None and marker.args:
            # prepended: the closest marker is the one pytest-timeout reads
            item.add_marker(pytest.mark.timeout(float(marker.args[0]) + allowance),
                            append=False)
    reason = gate_reason(os.geteuid(), Path("/proc/net/ip_mr_vif").exists(),
                         shutil.which("mnexec") is not None)
    if reason is None:
        return
    for item in items:
        if "root" in item.keywords:
            # under CI=true pytest_runtest_makereport turns this skip into a failure
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_collection_finish(session):  # noqa: ANN001
    """Stop before any test when a crashed lab's leftovers would refuse every lab test.

    Each would be refused in turn, and one that queues for the lab waits out its
    timeout first: one message now says more. Only where lab tests run (selected,
    and not skipped by the gate).
    """
    labs = [i for i in session.items if "root" in i.keywords
            and not any(m.name == "skip" for m in i.iter_markers())]
    if not labs:
        return
    leftover = crash_leftovers()
    if leftover is not None:
        pytest.exit(f"no lab test can run: {leftover} (left before this session started; "
                    "no test ran)", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # noqa: ANN001
    """Under CI=true, report a skipped ``root`` test (gate, marker or pytest.skip) as failed."""
    outcome = yield
    report = outcome.get_result()
    message = ci_skip_failure(os.environ, "root" in item.keywords, report.skipped,
                              hasattr(report, "wasxfail"), _skip_reason(report.longrepr))
    if message is not None:
        report.outcome = "failed"
        report.longrepr = message


_running: list[pytest.Item] = []  # the test in progress, for the SIGTERM report
_config: list[pytest.Config] = []  # this session's config (its capture manager)


def _on_sigterm(signum: int, frame: object) -> None:  # noqa: ARG001
    """Name the running test and dump every thread's stack, then fail it and stop.

    The test fails (the JUnit XML records it with its time) and the session stops
    after its teardown, so labs come down; between tests the session just exits.
    Either way pytest's exit code is not 0.
    """
    # once: make passes its SIGTERM on to pytest as well, and the teardown must not be
    # interrupted by the second copy (the watchdog's SIGKILL bounds a wedged teardown)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    item = _running[-1] if _running else None
    where = item.nodeid if item is not None else "none (between tests)"
    capman = _config[0].pluginmanager.getplugin("capturemanager") if _config else None
    with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
        sys.stderr.write(f"\n=== SIGTERM (watchdog?) while running: {where}\n")
        sys.stderr.flush()
        faulthandler.dump_traceback(all_threads=True)
    if item is None:
        pytest.exit(f"SIGTERM while running {where}", returncode=pytest.ExitCode.INTERRUPTED)
    item.session.shouldstop = f"SIGTERM while running {where}"
    pytest.fail(f"SIGTERM (watchdog?) while this test ran: {where}")


def pytest_configure(config):  # noqa: ANN001
    """Install the SIGTERM report (once: pytester's in-process runs keep the outer one),
    and let Ctrl-C through to the commands the tests start.

    A shell without job control starts a background command (``make test &`` in a
    script) with SIGINT ignored, and every child inherits that: the lab tests' Ctrl-C
    to a receiver (tests/integration/test_labs_routing.py) then does nothing. With
    Python's own handler here, the children start with the default action instead.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        _config.append(config)
        signal.signal(signal.SIGTERM, _on_sigterm)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ANN001, ARG001
    """Remember which test runs, for the SIGTERM report."""
    _running.append(item)
    try:
        yield
    finally:
        _running.pop()


@pytest.fixture(scope="session")
def kernel_features():
    """Probe the kernel once per session."""
    from mcclab.features import probe

    return probe()


@pytest.fixture
def topologies() -> Path:
    """The repository's topology folder."""
    return REPO / "topologies"
