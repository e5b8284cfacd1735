"""Each host's clocks against the controller's, measured over SSH and kept in the run.

One-way delays and multicast round trips computed from two hosts' logs are only
as good as the agreement of their clocks. Before a run the controller opens one
SSH session per host running a tiny reader, and asks it ``SAMPLES`` times for
its ``CLOCK_REALTIME``, ``CLOCK_MONOTONIC`` and ``CLOCK_BOOTTIME``, noting its
own clocks just before
the question (``t0``) and just after the answer (``t1``). The host read its
clocks somewhere inside that round trip, so for the sample with the smallest
round trip

    offset = remote - (t0 + t1) / 2,  uncertainty = (t1 - t0) / 2

bounds the true offset (Cristian's method). A positive offset means the host's
clock is ahead of the controller's. The offsets go into ``clocks.json`` in the
run's folder (:func:`write_clocks`), with every translation the run made with
them (``mcclab.testbed.timebase``), so each translated time carries the
uncertainty of the offset it was moved by.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from mcclab.jsonfile import write_json_atomic
from mcclab.testbed.ssh import Ssh, SshError

CLOCKS_JSON = "clocks.json"
SAMPLES = 9
# On the host: answer each line read with CLOCK_REALTIME, CLOCK_MONOTONIC and
# CLOCK_BOOTTIME (the clock of /proc/uptime, which armed starts note; it runs ahead of
# CLOCK_MONOTONIC by the time the host was suspended, so it gets its own offset).
_READER = ("import sys, time\n"
           "for _ in sys.stdin:\n"
           "    print(repr(time.clock_gettime(time.CLOCK_REALTIME)),"
           " repr(time.clock_gettime(time.CLOCK_MONOTONIC)),"
           " repr(time.clock_gettime(time.CLOCK_BOOTTIME)), flush=True)\n")


@dataclass(frozen=True)
class Sample:
    """One question: the controller's clocks before and after, the host's answer."""

    local_real_before: float
    local_mono_before: float
    local_real_after: float
    local_mono_after: float
    remote_real: float
    remote_mono: float
    local_boot_before: float | None = None
    local_boot_after: float | None = None
    remote_boot: float | None = None

    @property
    def rtt(self) -> float:
        """The round trip, on the controller's monotonic clock."""
        return self.local_mono_after - self.local_mono_before


@dataclass(frozen=True)
class ClockOffset:
    """How far a host's clocks are ahead of the controller's (seconds)."""

    node: str
    host: str
    realtime_offset_s: float
    monotonic_offset_s: float
    uncertainty_s: float
    rtt_s: float
    samples: int
    # None in a clocks.json written before boot-clock offsets were measured.
    boottime_offset_s: float | None = None


def offset_from(node: str, host: str, samples: Sequence[Sample]) -> ClockOffset:
    """The offsets from the sample with the smallest round trip (ValueError if none)."""
    if not samples:
        raise ValueError(f"{node}: no clock samples")
    best = min(samples, key=lambda s: s.rtt)
    return ClockOffset(
        node=node, host=host,
        realtime_offset_s=best.remote_real - (best.local_real_before
                                              + best.local_real_after) / 2,
        monotonic_offset_s=best.remote_mono - (best.local_mono_before
                                               + best.local_mono_after) / 2,
        uncertainty_s=best.rtt / 2, rtt_s=best.rtt, samples=len(samples),
        boottime_offset_s=(None if None in (best.remote_boot, best.local_boot_before,
                                            best.local_boot_after)
                           else best.remote_boot - (best.local_boot_before
                                                    + best.local_boot_after) / 2))


def _clocks() -> tuple[float, float, float]:
    """The controller's CLOCK_REALTIME, CLOCK_MONOTONIC and CLOCK_BOOTTIME."""
    return (time.clock_gettime(time.CLOCK_REALTIME), time.clock_gettime(time.CLOCK_MONOTONIC),
            time.clock_gettime(time.CLOCK_BOOTTIME))


def sample_over(ask: Callable[[], str], count: int) -> list[Sample]:
    """``count`` samples from ``ask``, which returns the host's ``REAL MONO BOOT`` line."""
    out = []
    for _ in range(count):
        real0, mono0, boot0 = _clocks()
        words = ask().split()
        real1, mono1, boot1 = _clocks()
        if len(words) != 3:
            raise SshError(f"unexpected clock answer {' '.join(words)!r}")
        try:
            real, mono, boot = (float(w) for w in words)
        except ValueError:
            raise SshError(f"unexpected clock answer {' '.join(words)!r}") from None
        out.append(Sample(real0, mono0, real1, mono1, real, mono, boot0, boot1, boot))
    return out


def measure(ssh: Ssh, node: str, count: int = SAMPLES, python: str = "python3",
            timeout: float = 30.0) -> ClockOffset:
    """Measure ``node``'s host's clock offsets over one SSH session."""
    proc = subprocess.Popen(ssh.argv(node, [python, "-u", "-c", _READER]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    deadline = time.monotonic() + timeout

    def ask() -> str:
        if time.monotonic() > deadline:
            raise SshError(f"{node}: clock samples took longer than {timeout:g} s")
        proc.stdin.write("\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise SshError(f"{node}: the clock reader ended: {proc.stderr.read()[-300:]}")
        return line

    try:
        ask()  # the first answer pays for the interpreter's start and the session's
        samples = sample_over(ask, count)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return offset_from(node, ssh.host(node).target(), samples)


def measure_all(ssh: Ssh, count: int = SAMPLES) -> dict[str, ClockOffset]:
    """Every host's offsets, node by node (one at a time, so they do not disturb each
    other's round trips)."""
    return {node: measure(ssh, node, count) for node in ssh.inventory.hosts}


def write_clocks(run_dir: Path, offsets: dict[str, ClockOffset],
                 translations: Sequence[Mapping[str, object]] = ()) -> Path:
    """``clocks.json`` in the run's folder: the controller's view of every host's clocks,
    and the times the run moved between a host's clock and the controller's with them
    (``translations``, see :class:`mcclab.testbed.timebase.Translation`)."""
    path = run_dir / CLOCKS_JSON
    write_json_atomic(path, {
        "method": "smallest of several SSH round trips; offset = remote - midpoint, "
                  "uncertainty = half the round trip",
        "reference": "controller",
        "hosts": {node: asdict(off) for node, off in offsets.items()},
        "translations": [dict(t) for t in translations],
    })
    return path


def read_clocks(run_dir: Path) -> dict[str, ClockOffset]:
    """The offsets a run recorded ({} when it has no ``clocks.json``)."""
    try:
        data = json.loads((run_dir / CLOCKS_JSON).read_text())
    except FileNotFoundError:
        return {}
    return {node: ClockOffset(**row) for node, row in data["hosts"].items()}
