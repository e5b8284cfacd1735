"""CI's skip rule (tests/conftest.py): under CI=true a skipped root test fails the run.

The decision is a pure function, checked case by case; the hooks are then run for
real on a small suite in a pytester sandbox holding a copy of tests/conftest.py.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


def load_conftest():
    """tests/conftest.py as a module of its own (it is not importable by name)."""
    spec = importlib.util.spec_from_file_location("mcclab_tests_conftest", CONFTEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


conf = load_conftest()


def test_gate_reason_names_what_is_missing():
    assert conf.gate_reason(0, True, True) is None
    assert "root" in conf.gate_reason(1000, True, True)
    assert "CONFIG_IP_MROUTE" in conf.gate_reason(0, False, True)
    assert "mininet" in conf.gate_reason(0, True, False)


@pytest.mark.parametrize(("value", "ci"), [("true", True), ("TRUE", True), (" true\n", True),
                                           ("false", False), ("1", False), ("", False)])
def test_in_ci_reads_the_ci_variable(value, ci):
    assert conf.in_ci({"CI": value}) is ci
    assert conf.in_ci({}) is False


def test_ci_skip_failure_only_for_a_skipped_root_test_under_ci():
    ci = {"CI": "true"}
    msg = conf.ci_skip_failure(ci, is_root=True, skipped=True, xfail=False, reason="no NFQUEUE")
    assert msg == conf.CI_SKIP_PREFIX + "no NFQUEUE"
    assert conf.ci_skip_failure(ci, True, True, False, "").endswith("no reason given")
    assert conf.ci_skip_failure({}, True, True, False, "x") is None  # not CI
    assert conf.ci_skip_failure({"CI": "false"}, True, True, False, "x") is None
    assert conf.ci_skip_failure(ci, False, True, False, "x") is None  # not a root test
    assert conf.ci_skip_failure(ci, True, False, False, "x") is None  # not skipped
    assert conf.ci_skip_failure(ci, True, True, True, "x") is None  # an xfail


SUITE = '''
import pytest

@pytest.mark.root
def test_root_skips_at_run_time():
    pytest.skip("the kernel has no NFQUEUE target")

@pytest.mark.root
@pytest.mark.skip(reason="marked skip")
def test_root_marked_skip():
    pass

@pytest.mark.root
def test_root_passes():
    pass

@pytest.mark.root
@pytest.mark.xfail(reason="known", strict=True)
def test_root_xfails():
    assert False

def test_plain_skip():
    pytest.skip("no chromium")
'''


@pytest.fixture
def sandbox(pytester):
    """A pytester dir with the real conftest, the root marker and SUITE."""
    pytester.makeini("[pytest]\nmarkers =\n    root: needs root\n")
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def gate_says(pytester, reason: str | None, leftover: str | None = None) -> None:
    """Make the sandbox's collection gate answer ``reason``, and its check for a crashed
    lab's leftovers ``leftover``, whatever this machine has."""
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + f"\n\ndef gate_reason(*args):\n"
                                                f"    return {reason!r}\n"
                                                f"\n\ndef crash_leftovers():\n"
                                                f"    return {leftover!r}\n")


def test_under_ci_root_skips_fail_with_their_reason(sandbox, monkeypatch):
    gate_says(sandbox, None)
    monkeypatch.setenv("CI", "true")
    result = sandbox.runpytest("-rA")
    # a skip in the test body fails it; one at setup (marker, gate) is an error
    result.assert_outcomes(failed=1, errors=1, passed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(
        ["FAILED*test_root_skips_at_run_time*may not skip*the kernel has no NFQUEUE target*"])
    result.stdout.fnmatch_lines(["ERROR*test_root_marked_skip*may not skip*marked skip*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_outside_ci_skips_stay_skips(sandbox, monkeypatch):
    gate_says(sandbox, None)
    monkeypatch.delenv("CI", raising=False)
    sandbox.runpytest().assert_outcomes(passed=1, skipped=3, xfailed=1)


def test_under_ci_the_collection_gate_fails_every_root_test(sandbox, monkeypatch):
    gate_says(sandbox, "needs root to create network namespaces")
    monkeypatch.setenv("CI", "true")
    result = sandbox.runpytest("-rA")
    # the gate's skip comes at setup, before any xfail or body runs: an error each
    result.assert_outcomes(errors=4, skipped=1)
    result.stdout.fnmatch_lines(["*test_root_passes*may not skip*needs root to create network*"])
    monkeypatch.delenv("CI")
    sandbox.runpytest().assert_outcomes(skipped=5)


LEFTOVER = ("a crashed mcclab lab was not cleaned up (7 namespaces, 0 interfaces): "
            "run 'mcclab clean'")


@pytest.mark.parametrize("ci", [True, False])
def test_a_crashed_labs_leftovers_stop_the_session_before_any_test(sandbox, monkeypatch, ci):
    # CI once ran 69 lab tests into the same refusal, one after another, over 28 min
    gate_says(sandbox, None, LEFTOVER)
    if ci:
        monkeypatch.setenv("CI", "true")
    else:
        monkeypatch.delenv("CI", raising=False)
    result = sandbox.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["*no lab test can run: a crashed mcclab lab was not cleaned up"
                                 "*mcclab clean*no test ran*"])
    result.assert_outcomes()


def test_leftovers_do_not_stop_a_session_without_lab_tests(sandbox):
    gate_says(sandbox, None, LEFTOVER)
    sandbox.runpytest("-m", "not root").assert_outcomes(passed=0, skipped=1, deselected=4)


def test_leftovers_are_not_checked_where_lab_tests_cannot_run(sandbox, monkeypatch):
    gate_says(sandbox, "needs root to create network namespaces", LEFTOVER)
    monkeypatch.delenv("CI", raising=False)
    sandbox.runpytest().assert_outcomes(skipped=5)


def test_crash_leftovers_names_only_a_crashed_labs_leftovers(monkeypatch):
    import mcclab.lab
    import mcclab.state

    found = {"netns": ["mcl-r0", "mcl-h1"], "interfaces": []}
    monkeypatch.setattr(mcclab.state, "leftovers", lambda: found)
    monkeypatch.setattr(mcclab.lab, "live_labs", lambda: [])
    assert conf.crash_leftovers() == ("a crashed mcclab lab was not cleaned up "
                                      "(2 namespaces, 0 interfaces): run 'mcclab clean'")
    # another engineer's lab in use: lab tests queue for it, no reason to stop
    monkeypatch.setattr(mcclab.lab, "live_labs", lambda: ["a lab in use"])
    assert conf.crash_leftovers() is None
    monkeypatch.setattr(mcclab.lab, "live_labs", lambda: [])
    found["netns"] = []
    assert conf.crash_leftovers() is None


def test_sigterm_names_the_hung_test_fails_it_and_stops(pytester):
    # what the watchdog (timeout around `make test` in .ci/run) relies on
    pytester.makeconftest(CONFTEST.read_text())
    started = pytester.path / "started"
    pytester.makepyfile(test_hang=f'''
import time
from pathlib import Path

def test_hangs():
    Path({str(started)!r}).touch()
    time.sleep(120)

def test_never_reached():
    pass
''')
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA"],
                            cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.communicate(timeout=10)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "=== SIGTERM (watchdog?) while running: test_hang.py::test_hangs" in err
    assert f'File "{pytester.path / "test_hang.py"}", line 6 in test_hangs' in err  # the sleep
    assert "FAILED test_hang.py::test_hangs" in out
    assert "test_never_reached" not in out
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out


CHILD_SIGINT = """
import subprocess
import sys

def test_child_sees_the_default_action():
    probe = "import signal; print(signal.getsignal(signal.SIGINT))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "default_int_handler" in out.stdout, out.stdout
"""


def test_commands_started_by_tests_take_ctrl_c_when_pytest_started_with_it_ignored(pytester):
    # `make test &` in a script: the shell ignores SIGINT for it, and a child inherits that
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_child=CHILD_SIGINT)
    ignored = ("import signal, sys, pytest; signal.signal(signal.SIGINT, signal.SIG_IGN); "
               "sys.exit(pytest.main(['-p', 'no:cacheprovider', '-q']))")
    proc = subprocess.run([sys.executable, "-c", ignored], cwd=pytester.path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_lock_wait_allowance_is_zero_under_ci_and_configurable_elsewhere():
    assert conf.lock_wait_allowance({"CI": "true", conf.LOCK_WAIT_ENV: "900"}) == 0.0
    assert conf.lock_wait_allowance({}) == conf.DEFAULT_LOCK_WAIT
    assert conf.lock_wait_allowance({conf.LOCK_WAIT_ENV: "5"}) == 5.0
    assert conf.lock_wait_allowance({conf.LOCK_WAIT_ENV: "0"}) == 0.0


SLOW = """
import time
import pytest

pytestmark = pytest.mark.timeout(1)

@pytest.mark.root
def test_root_needs_two_seconds():
    time.sleep(2)

def test_plain_needs_two_seconds():
    time.sleep(2)
"""


def test_root_timeouts_grow_by_the_allowance_outside_ci_only(pytester, monkeypatch):
    pytester.makeini("[pytest]\nmarkers =\n    root: needs root\n")
    pytester.makeconftest(CONFTEST.read_text() + "\n\ndef gate_reason(*args):\n    return None\n")
    pytester.makepyfile(test_slow=SLOW)
    monkeypatch.setenv(conf.LOCK_WAIT_ENV, "5")
    monkeypatch.delenv("CI", raising=False)
    # the root test gets 1 + 5 s; the plain one keeps its 1 s
    pytester.runpytest_subprocess().assert_outcomes(passed=1, failed=1)
    monkeypatch.setenv("CI", "true")
    pytester.runpytest_subprocess().assert_outcomes(failed=2)
