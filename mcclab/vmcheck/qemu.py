"""QEMU as data (argv builders) and as a process (own process group, ended by its id).

The VM's only network is QEMU's user-mode stack: the guest's packets become the
host's own sockets, and the one way in is ssh forwarded on 127.0.0.1. No tap,
no bridge, no host-side address range.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from mcclab.vmcheck.procs import priority_prefix

QEMU = "qemu-system-x86_64"
CPU = "max,avx=off,avx2=off,fma=off,f16c=off"  # see qemu_argv
LOOPBACK = "127.0.0.1"


@dataclass
class VmSpec:
    """How to start one VM."""

    disk: Path
    ssh_port: int
    console_log: Path
    pidfile: Path
    cpus: int = 2
    memory_mb: int = 4096
    nice: int = 0
    idle: bool = False  # SCHED_IDLE (see procs.priority_prefix)
    # Direct kernel boot (first boot of a fresh image, before grub is installed).
    kernel: Path | None = None
    initrd: Path | None = None
    append: str = ""
    name: str = "mcclab-vmcheck"
    extra: list[str] = field(default_factory=list)


def qemu_argv(vm: VmSpec) -> list[str]:
    """The full command line, with ``chrt``/``nice`` in front if asked for.

    TCG (software emulation): /dev/kvm on this host cannot run a stock guest
    kernel. The CPU is ``max`` without the AVX family, because Debian 12's QEMU 7.2
    emulates AVX2 wrongly: numpy 2.4's sorts went wrong under ``-cpu max`` (191 of
    640 in user-mode qemu-x86_64; 0 with this CPU), which crashed the guest's
    analysis in pandas' sort_values. Dropping AVX2 alone is no cure: AVX, FMA and
    F16C then promise instructions that code uses, and apt's http method died of
    SIGILL (docs/vm-check.md). ``cache=unsafe``: the overlay is thrown away
    after the check, and guest fsyncs are then free.
    """
    argv = priority_prefix(vm.nice, vm.idle) + [
        QEMU, "-name", vm.name,
        "-machine", "pc", "-accel", "tcg,thread=multi", "-cpu", CPU,
        "-smp", str(vm.cpus), "-m", str(vm.memory_mb),
        "-drive", f"file={vm.disk},if=virtio,format=qcow2,cache=unsafe,discard=unmap",
        "-netdev", f"user,id=net0,hostfwd=tcp:{LOOPBACK}:{vm.ssh_port}-:22",
        "-device", "virtio-net-pci,netdev=net0",
        "-display", "none", "-monitor", "none", "-vga", "none",
        "-serial", f"file:{vm.console_log}",
        "-pidfile", str(vm.pidfile),
        "-no-reboot",
    ]
    if vm.kernel is not None:
        argv += ["-kernel", str(vm.kernel)]
        if vm.initrd is not None:
            argv += ["-initrd", str(vm.initrd)]
        argv += ["-append", vm.append]
    return argv + vm.extra


def overlay_argv(base: Path, overlay: Path) -> list[str]:
    """qemu-img command creating a copy-on-write overlay of ``base``."""
    return ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(base),
            str(overlay)]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (QEMU binds it a moment later)."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 25) -> str:
    """The last lines of a file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no console output)"


class Qemu:
    """A running VM: QEMU in its own session, so its pid is its process group id."""

    def __init__(self, spec: VmSpec) -> None:
        self.spec = spec
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Qemu:
        """Start QEMU; its stdout/stderr go next to the console log."""
        log = self.spec.console_log.with_suffix(".qemu.log")
        with log.open("ab") as out:
            self.proc = subprocess.Popen(qemu_argv(self.spec), stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        """QEMU's pid (= its process group id)."""
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        """True while QEMU has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def exit_message(self) -> str:
        """Why QEMU is gone, with the end of its own log and of the console."""
        rc = self.proc.returncode if self.proc else None
        qlog = tail(self.spec.console_log.with_suffix(".qemu.log"), 10)
        return (f"QEMU exited (status {rc}).\nQEMU said:\n{qlog}\n"
                f"guest console ({self.spec.console_log}):\n{tail(self.spec.console_log)}")

    def wait_exit(self, timeout: float) -> bool:
        """Wait for QEMU to exit by itself (guest poweroff); True if it did."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self, grace: float = 5.0) -> None:
        """End QEMU's process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
        if self.proc is None:
            return
        kill_group(self.proc.pid, grace, self.proc)
        self.spec.pidfile.unlink(missing_ok=True)


def kill_group(pgid: int, grace: float = 5.0, proc: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group ``pgid``, SIGKILL it if it outlives ``grace``, reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        if proc is None and not _alive(pgid):
            break
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stale_qemu(pidfile: Path, disk: Path) -> int | None:
    """The pid in ``pidfile`` if it is still a QEMU running ``disk`` (left by a killed check)."""
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    if not cmdline or not cmdline[0].endswith(QEMU.encode()):
        return None
    return pid if any(str(disk).encode() in arg for arg in cmdline) else None
