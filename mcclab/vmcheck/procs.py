"""Run a host command in its own process group, its output to a log and a live status line."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO


def priority_prefix(nice: int = 0, idle: bool = False) -> list[str]:
    """Commands that start the rest of an argv at a lower CPU priority (inherited by children).

    ``idle``: SCHED_IDLE (``chrt --idle 0``), CPU time only when nothing else on
    the host wants it, for sharing the host with latency-sensitive work such as
    another lab's userspace link emulator. ``nice``: a niceness (0 = normal).
    """
    if not 0 <= nice <= 19:
        raise ValueError(f"nice must be 0..19, not {nice}")
    argv = ["chrt", "--idle", "0"] if idle else []
    return argv + (["nice", "-n", str(nice)] if nice else [])


class CommandFailed(RuntimeError):
    """A step's command exited non-zero or timed out."""


def run_logged(argv: list[str], log: Path, timeout: float,
               status: Callable[[str], None] | None = None,
               stdin: IO[bytes] | int | None = subprocess.DEVNULL,
               stdout_to: IO[bytes] | None = None,
               env: dict[str, str] | None = None,
               on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
               cwd: Path | None = None,
               ) -> tuple[int, str]:
    """Run ``argv`` (own session), append its output to ``log``, return (status, output).

    ``stdout_to`` takes stdout instead of the log (for tar streams); stderr
    always goes to the log. Each logged line starts with the seconds since the
    command started (per-task timings of a playbook run); the returned output
    is unchanged. On timeout or Ctrl-C the process group gets SIGINT, then
    SIGKILL; a timeout returns status 124, an interrupt re-raises.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    chunks: list[str] = []
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdin=stdin,
                                stdout=stdout_to if stdout_to is not None else subprocess.PIPE,
                                stderr=subprocess.STDOUT if stdout_to is None else subprocess.PIPE,
                                env=env, cwd=cwd, start_new_session=True)
        if on_start is not None:
            on_start(proc)
        stream = proc.stdout if stdout_to is None else proc.stderr
        assert stream is not None

        def pump() -> None:
            for raw in iter(stream.readline, b""):
                line = raw.decode(errors="replace")
                chunks.append(line)
                out.write(f"[{time.monotonic() - started:7.1f} s] {line}")
                out.flush()
                if status and line.strip():
                    status(line.strip())

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            reader.join(5)
            out.write(f"\n[timed out after {timeout:.0f} s]\n")
            return 124, "".join(chunks)
        except BaseException:
            stop_group(proc)
            raise
        reader.join(10)
    return proc.returncode, "".join(chunks)


def stop_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGINT the process group (lets a lab tear down), SIGKILL it after ``grace`` s."""
    for sig, wait in ((signal.SIGINT, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        if proc.poll() is not None:
            return
