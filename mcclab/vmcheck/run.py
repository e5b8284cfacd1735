"""The VM check from end to end, cleaning up after itself on success, failure or Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from mcclab.refuse import alert
from mcclab.vmcheck import compare, guest, image, playbook, wheels
from mcclab.vmcheck import recipe as rc
from mcclab.vmcheck.procs import CommandFailed, priority_prefix, run_logged, stop_group
from mcclab.vmcheck.qemu import Qemu, VmSpec, free_port, kill_group, overlay_argv, stale_qemu
from mcclab.vmcheck.ssh import Keys, SshTimeout, ssh_argv, wait_for_ssh

REPO = Path(__file__).resolve().parents[2]
LINKEMU = REPO / "linkemu" / "mcclab-linkemu"
console = Console()
HOST_TOOLS = ("qemu-system-x86_64", "qemu-img", "debootstrap", "sfdisk", "mkfs.ext4", "chroot",
              "unshare", "ssh", "ssh-keygen", "git", "tar", "nice", "chrt")


@dataclass
class Options:
    """Settings of one check."""

    cache: Path = Path("/var/cache/mcclab-vm")
    out: Path | None = None
    rebuild: bool = False
    cpus: int = 2
    memory_mb: int = 4096
    # CPU priority of QEMU and of the image and wheelhouse builds (normal by
    # default; idle = SCHED_IDLE for a host shared with latency-sensitive labs).
    nice: int = 0
    idle: bool = False
    boot_timeout: float = 600.0
    host_fidelity: bool = True
    fidelity_quick: bool = True
    lock_timeout: float = 1800.0
    optional_packages: bool = False


@dataclass
class Step:
    """A step's outcome, for the summary."""

    name: str
    seconds: float = 0.0
    ok: bool | None = None
    note: str = ""
    task: int | None = None  # its line in the live progress display


@dataclass
class Check:
    """State of one check run."""

    opts: Options
    out: Path
    steps: list[Step] = field(default_factory=list)
    vm: Qemu | None = None
    host_proc: subprocess.Popen[bytes] | None = None
    host_thread: threading.Thread | None = None
    run_dir: Path | None = None
    port: int = 0
    keys: Keys | None = None
    progress: Progress | None = None
    wheels_in_image: bool = False

    # ------------------------------------------------------------ helpers

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[Step]:
        """Time a step, show it live, record it; an exception marks it failed."""
        st = Step(name)
        self.steps.append(st)
        assert self.progress is not None
        task = self.progress.add_task(name, total=None)
        st.task = task
        start = time.monotonic()
        if not console.is_terminal:
            # Rich draws its live display only on a terminal: in a log or CI, a line per
            # step is the progress (the check runs 20-35 min).
            console.print(f"... {name}", highlight=False)
        try:
            yield st
            if st.ok is None:
                st.ok = True
        except BaseException as exc:
            st.ok = False
            st.note = st.note or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            raise
        finally:
            st.seconds = time.monotonic() - start
            done = (f"{'[green]✓' if st.ok else '[red]✗'}[/] {name} ({st.seconds:.0f} s)"
                    + (f" — {st.note}" if st.note else ""))
            self.progress.update(task, description=done, total=1, completed=1)
            if not console.is_terminal:
                console.print(done, highlight=False)

    def status(self, name: str, step: Step | None = None) -> Callable[[str], None]:
        """A callback showing a command's latest output line on its step's line."""
        assert self.progress is not None
        task = (step or self.steps[-1]).task
        assert task is not None

        def show(line: str) -> None:
            self.progress.update(task, description=f"{name}: [dim]{line[:90]}[/dim]")
        return show

    def log(self, name: str) -> Path:
        """The log file of a step."""
        return self.out / "logs" / f"{name}.log"

    def host(self, argv: list[str], log: str, timeout: float, what: str,
             heavy: bool = False, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> str:
        """Run a host command; raise CommandFailed (with the log's path) if it fails.

        ``heavy`` (CPU-bound build work) runs at the check's QEMU priority.
        """
        if heavy:
            argv = priority_prefix(self.opts.nice, self.opts.idle) + argv
        rc_, output = run_logged(argv, self.log(log), timeout, self.status(what), env=env,
                                 cwd=cwd)
        if rc_ != 0:
            raise CommandFailed(f"{what}: exit status {rc_} (log: {self.log(log)})")
        return output

    def ssh(self, command: str, log: str, timeout: float, what: str,
            check: bool = True) -> tuple[int, str]:
        """Run a shell command in the guest as vagrant; output to the step's log."""
        assert self.keys is not None
        rc_, output = run_logged(ssh_argv(self.keys, self.port, command), self.log(log),
                                 timeout, self.status(what))
        if check and rc_ != 0:
            raise CommandFailed(f"{what}: exit status {rc_} (log: {self.log(log)})")
        return rc_, output

    def job(self, command: str, name: str, log: str, timeout: float, what: str,
            poll_every: float = 10.0, unreachable_limit: float = 600.0) -> tuple[int, str]:
        """Run a long guest command detached (guest.Job) and poll it; (status, output).

        Each poll is a short ssh call; its new log bytes go to the step's log with
        the host's elapsed seconds. A poll that fails (guest too busy, ssh lost) is
        retried; after ``unreachable_limit`` s without an answer, or if QEMU died,
        the step fails. On timeout the job's process group is ended: status 124.
        """
        assert self.keys is not None and self.vm is not None
        job = guest.Job(name)
        path = self.log(log)
        rc_, out = run_logged(ssh_argv(self.keys, self.port, job.start(command)), path, 120,
                              self.status(what))
        if rc_ != 0:
            raise CommandFailed(f"{what}: could not start it in the guest, exit {rc_}: "
                                f"{out.strip()[-200:]} (log: {path})")
        show = self.status(what)
        chunks: list[bytes] = []
        offset, partial = 0, b""
        started = last_answer = time.monotonic()
        with path.open("a") as f:
            f.write(f"$ (detached in the guest as {job.folder}) {command}\n")
            while True:
                time.sleep(poll_every)
                now = time.monotonic()
                if not self.vm.running():
                    raise CommandFailed(f"{what}: the VM stopped.\n{self.vm.exit_message()}")
                try:
                    # sshd in a guest saturated by a lab's start-up took over 10 s to
                    # send its banner: allow a minute to connect.
                    res = subprocess.run(ssh_argv(self.keys, self.port, job.poll(offset),
                                                  connect_timeout=60),
                                         stdin=subprocess.DEVNULL, capture_output=True,
                                         timeout=180)
                except subprocess.TimeoutExpired:
                    res = None
                polled = None
                if res is not None and res.returncode == 0:
                    with contextlib.suppress(ValueError):
                        polled = guest.parse_poll(res.stdout)
                if polled is None:
                    why = "no answer in 180 s" if res is None else \
                        f"ssh exit {res.returncode}: {res.stderr.decode(errors='replace').strip()}"
                    if res is not None and res.returncode == 0:
                        why = f"unexpected answer {res.stdout[:80]!r}"
                    f.write(f"[{now - started:7.1f} s] (poll failed: {why})\n")
                    f.flush()
                    if now - last_answer > unreachable_limit:
                        raise CommandFailed(f"{what}: the guest did not answer for "
                                            f"{unreachable_limit:.0f} s (log: {path})")
                    continue
                last_answer = now
                status, new = polled
                offset += len(new)
                chunks.append(new)
                lines = (partial + new).split(b"\n")
                partial = lines.pop()
                for raw in lines:
                    line = raw.decode(errors="replace")
                    f.write(f"[{now - started:7.1f} s] {line}\n")
                    if line.strip():
                        show(line.strip())
                f.flush()
                if status is not None:
                    if partial:
                        f.write(f"[{now - started:7.1f} s] {partial.decode(errors='replace')}\n")
                    f.write(f"[exit status {status}]\n")
                    return status, b"".join(chunks).decode(errors="replace")
                if now - started > timeout:
                    f.write(f"\n[timed out after {timeout:.0f} s: ending the job]\n")
                    with contextlib.suppress(subprocess.SubprocessError, OSError):
                        subprocess.run(ssh_argv(self.keys, self.port, job.stop()),
                                       stdin=subprocess.DEVNULL, capture_output=True,
                                       timeout=120)
                    return 124, b"".join(chunks).decode(errors="replace")

    # ------------------------------------------------------------ VM lifecycle

    def boot(self, disk: Path, folder: Path, kernel: tuple[Path, Path] | None = None) -> None:
        """Start QEMU on ``disk`` and wait for ssh."""
        assert self.keys is not None
        self.port = free_port()
        spec = VmSpec(disk=disk, ssh_port=self.port, console_log=folder / "console.log",
                      pidfile=folder / "qemu.pid", cpus=self.opts.cpus,
                      memory_mb=self.opts.memory_mb, nice=self.opts.nice,
                      idle=self.opts.idle)
        if kernel is not None:
            spec.kernel, spec.initrd = kernel
            spec.append = f"root=LABEL={rc.ROOT_LABEL} rw {rc.KERNEL_CMDLINE}"
        self.vm = Qemu(spec).start()
        took = wait_for_ssh(self.keys, self.port, self.opts.boot_timeout, self.vm.running,
                            self.vm.exit_message)
        self.steps[-1].note = f"ssh after {took:.0f} s, port 127.0.0.1:{self.port}"

    def power_off(self) -> None:
        """Ask the guest to power off, wait, then end QEMU's process group whatever happened."""
        if self.vm is None:
            return
        vm, self.vm = self.vm, None
        try:
            if vm.running() and self.keys is not None:
                with contextlib.suppress(subprocess.SubprocessError, OSError):
                    subprocess.run(ssh_argv(self.keys, self.port, "sudo systemctl poweroff"),
                                   stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
                vm.wait_exit(90)
        finally:
            vm.kill()

    # ------------------------------------------------------------ image

    def playbook_extra_vars(self) -> dict[str, object]:
        """The extra vars the playbook runs with (also used to read its package lists)."""
        return guest.extra_vars(self.opts.optional_packages)

    def wheelhouse(self) -> Path:
        """The cached wheelhouse for the checkout's pyproject.toml, built natively if missing."""
        cache = self.opts.cache
        with self.step("wheelhouse (pip wheel on the host)") as st:
            if why := wheels.host_matches_guest():
                raise CommandFailed(why)
            prov = playbook.provisioning(REPO / "ansible", self.playbook_extra_vars())
            reqs = wheels.requirements((REPO / "pyproject.toml").read_text(), prov.pip_extras)
            house = cache / ("wheels-" + wheels.digest(reqs, wheels.GUEST_PYTHON,
                                                       wheels.GUEST_MACHINE))
            if house.is_dir() and wheels.wheel_files(house) and not self.opts.rebuild:
                st.note = f"{house.name} (cached)"
                return house
            tmp = cache / "wheels-build"
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                self.host(wheels.pip_wheel_argv(sys.executable, reqs, tmp), "wheelhouse", 1800,
                          "pip wheel", heavy=True)
                shutil.rmtree(house, ignore_errors=True)
                tmp.rename(house)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            for old in cache.glob("wheels-*"):
                if old != house:
                    shutil.rmtree(old, ignore_errors=True)
            st.note = f"{house.name}, {len(wheels.wheel_files(house))} wheels"
            return house

    def image(self, house: Path) -> Path:
        """The cached base image for this host's recipe, built if missing.

        The image holds the wheelhouse ``house`` and the playbook's venv with the
        project's dependencies installed from it (natively, in the chroot).
        """
        assert self.keys is not None
        cache = self.opts.cache
        with self.step("keys and recipe") as st:
            made = self.keys.ensure()
            prov = playbook.provisioning(REPO / "ansible", self.playbook_extra_vars())
            venv_reqs = wheels.runtime_requirements((REPO / "pyproject.toml").read_text(),
                                                    prov.pip_extras)
            recipe = image.host_recipe(self.keys, prov=prov, wheelhouse=wheels.GUEST_WHEELHOUSE,
                                       venv_reqs=venv_reqs,
                                       wheels=[w.name for w in wheels.wheel_files(house)])
            self.wheels_in_image = bool(recipe.venv_install)
            base = cache / f"base-{recipe.digest()}.qcow2"
            st.note = (f"{base.name}, mirror {recipe.mirror}, {len(prov.packages)} playbook "
                       "packages" + (f", venv {prov.venv} with {len(venv_reqs)} requirements"
                                     if recipe.venv_install else "")
                       + (", new keys" if made else ""))
        if base.exists() and not self.opts.rebuild:
            self.steps[-1].note += " (cached)"
            return base
        build = cache / "build"
        try:
            with self.step("debootstrap Debian 12, the playbook's packages in the chroot"):
                build.mkdir(parents=True, exist_ok=True)
                image.build_rootfs(recipe, build / "rootfs",
                                   lambda argv: self.host(argv, "build", 3600, "debootstrap",
                                                          heavy=True,
                                                          env=image.build_env(os.environ)),
                                   wheelhouse=house if recipe.venv_install else None)
                if left := image.leftover_mounts(build):
                    raise CommandFailed(f"mounts left under {build}: {left}")
            with self.step("disk image (ext4 by mkfs -d, qcow2)"):
                image.make_disk(build / "rootfs", build / "disk.raw", build / "base.qcow2",
                                lambda argv: self.host(argv, "build", 1800, "disk",
                                                       heavy=True))
                kernel = image.kernel_files(build / "rootfs")
                kernel = (self._copy(kernel[0], build), self._copy(kernel[1], build))
                shutil.rmtree(build / "rootfs")
            with self.step("first boot (direct kernel), grub-install"):
                self.boot(build / "base.qcow2", build, kernel)
                for cmd in image.grub_commands():
                    self.ssh(cmd, "build", 600, "grub")
            with self.step("power off, publish the image"):
                self.power_off()
                for old in cache.glob("base-*.qcow2"):
                    old.unlink()
                (build / "base.qcow2").rename(base)
        finally:
            self.power_off()
            shutil.rmtree(build, ignore_errors=True)
        return base

    def _host_started(self, proc: subprocess.Popen[bytes]) -> None:
        """Remember the host measurement's process, to stop it on interrupt."""
        self.host_proc = proc

    def start_host_fidelity(self, fidelity_args: list[str]) -> None:
        """Measure the host side in the background while the VM is provisioned and checked.

        It overlaps with the VM's minutes (and with waiting for the host's lab lock,
        which other labs may hold); QEMU runs at nice 10 so it disturbs the host
        measurement little.
        """
        def body() -> None:
            with contextlib.suppress(BaseException), \
                    self.step("host: same fidelity settings, userspace backend") as st:
                self.host_fidelity(fidelity_args, st)
        self.host_thread = threading.Thread(target=body, daemon=True)
        self.host_thread.start()

    def join_host_fidelity(self, timeout: float | None = None) -> None:
        """Wait for the background host measurement."""
        if self.host_thread is not None:
            self.host_thread.join(timeout)

    def stop_host_fidelity(self) -> None:
        """Interrupt the host measurement (SIGINT lets its lab come down), then wait."""
        if self.host_thread is not None and self.host_thread.is_alive() and self.host_proc:
            stop_group(self.host_proc, grace=60.0)
        self.join_host_fidelity(90)

    @staticmethod
    def _copy(src: Path, folder: Path) -> Path:
        """Copy a kernel file out of the rootfs (which is removed)."""
        dest = folder / src.name
        shutil.copy2(src, dest)
        return dest

    # ------------------------------------------------------------ inside the VM

    def _tar_into_guest(self, tar_argv: list[str], unpack: str, timeout: float, what: str,
                        names: bytes | None = None, cwd: Path | None = None) -> None:
        """Stream a tar (fed ``names`` on stdin when given) over ssh into ``unpack``."""
        assert self.keys is not None
        tar = subprocess.Popen(tar_argv, cwd=cwd, start_new_session=True,
                               stdin=subprocess.PIPE if names is not None else None,
                               stdout=subprocess.PIPE)
        if names is not None:
            assert tar.stdin is not None
            tar.stdin.write(names)
            tar.stdin.close()
        try:
            rc_, _ = run_logged(ssh_argv(self.keys, self.port, unpack),
                                self.log("provision"), timeout, stdin=tar.stdout)
        finally:
            tar.wait(60)
        if rc_ != 0 or tar.returncode != 0:
            raise CommandFailed(f"copying {what} failed (log: {self.log('provision')})")

    def copy_checkout(self) -> None:
        """Tracked files of the checkout (with uncommitted edits) into /vagrant."""
        files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                               check=True).stdout.split(b"\0")
        present = b"\0".join(f for f in files if f and (REPO / f.decode()).exists())
        self._tar_into_guest(["tar", "-c", "--null", "-T", "-"], guest.unpack_checkout(), 600,
                             "the checkout", names=present, cwd=REPO)

    def copy_wheelhouse(self, house: Path) -> None:
        """The wheelhouse into the guest folder its pip.conf names."""
        self._tar_into_guest(["tar", "-c", "-C", str(house), "."], guest.unpack_wheelhouse(),
                             900, "the wheelhouse")

    def provision(self, house: Path) -> None:
        """ansible-core from Debian, then the playbook twice; the second must change nothing."""
        with self.step("copy the checkout to /vagrant") as st:
            self.copy_checkout()
            st.note = "git ls-files, tar over ssh"
        if not self.wheels_in_image:
            with self.step("copy the wheelhouse") as st:
                self.copy_wheelhouse(house)
                st.note = f"{len(wheels.wheel_files(house))} wheels to {wheels.GUEST_WHEELHOUSE}"
        with self.step("install ansible-core (apt)"):
            self.ssh(guest.install_ansible(), "provision", 1800, "apt")
        for n in (1, 2):
            with self.step(f"playbook, run {n}") as st:
                _, out = self.job(guest.playbook(self.opts.optional_packages),
                                  f"playbook-{n}", f"playbook-{n}", 3600, "ansible")
                recap = guest.parse_recap(out)
                if recap is None:
                    raise CommandFailed(f"no PLAY RECAP (log: {self.log(f'playbook-{n}')})")
                st.note = (f"ok={recap.ok} changed={recap.changed} failed={recap.failed} "
                           f"unreachable={recap.unreachable}")
                if not recap.success:
                    raise CommandFailed(f"playbook failed: {st.note}")
                if n == 2 and recap.changed:
                    st.note += "; changed: " + ", ".join(guest.changed_tasks(out))
                    raise CommandFailed(f"second playbook run not idempotent: {st.note}")

    def inner_checks(self, fidelity_args: list[str]) -> bool:
        """Every check runs even if an earlier one failed; True if all passed."""
        ok = True
        for i, chk in enumerate(guest.checks(fidelity_args), 1):
            with self.step(chk.name) as st:
                rc_, out = self.job(chk.command(), chk.job, f"check-{i}", chk.timeout,
                                    chk.name)
                st.ok = rc_ == 0
                tail = [ln for ln in out.splitlines() if ln.strip()][-1:] or [""]
                st.note = f"exit {rc_}: {tail[0][:100]}" if rc_ else tail[0][:100]
                ok &= st.ok
        return ok

    def fetch_results(self) -> None:
        """Copy the guest's results/ into out/guest/."""
        assert self.keys is not None
        dest = self.out / "guest"
        dest.mkdir(parents=True, exist_ok=True)
        tar = subprocess.Popen(["tar", "-x", "-C", str(dest)], stdin=subprocess.PIPE,
                               start_new_session=True)
        try:
            rc_, _ = run_logged(ssh_argv(self.keys, self.port, guest.pack_results()),
                                self.log("results"), 600, stdout_to=tar.stdin)  # type: ignore[arg-type]
        finally:
            assert tar.stdin is not None
            tar.stdin.close()
            tar.wait(120)
        if rc_ != 0 or tar.returncode != 0:
            raise CommandFailed(f"copying results back failed (log: {self.log('results')})")

    # ------------------------------------------------------------ host side

    def host_fidelity(self, fidelity_args: list[str], step: Step) -> None:
        """The same fidelity settings on this host with the userspace backend."""
        argv = [sys.executable, str(REPO / "bench" / "bench_links.py"),
                "--design", "vm", "--backend", "userspace", "--out-dir", str(self.out),
                "--raw", str(self.out / "fidelity-userspace.json"),
                "--wait", str(self.opts.lock_timeout), *fidelity_args]
        env = os.environ | {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        rc_, _ = run_logged(argv, self.log("host-fidelity"), self.opts.lock_timeout + 1200,
                            self.status("host", step), env=env, on_start=self._host_started)
        # Misses are reported in the table; only a crash is a failure of this step.
        if not (self.out / "fidelity-userspace.json").exists():
            raise CommandFailed(f"host fidelity run failed, exit {rc_} "
                                f"(log: {self.log('host-fidelity')})")


def clean_stale(cache: Path) -> list[str]:
    """End QEMUs and remove run folders left by a check that was SIGKILLed."""
    done = []
    for folder in sorted(cache.glob("run-*")) + ([cache / "build"] if (cache / "build").exists()
                                                  else []):
        for disk in (folder / "overlay.qcow2", folder / "base.qcow2"):
            pid = stale_qemu(folder / "qemu.pid", disk)
            if pid is not None:
                kill_group(pid)
                done.append(f"ended QEMU {pid}")
        if image.leftover_mounts(folder):
            raise CommandFailed(f"{folder} has mounts under it; unmount them first")
        shutil.rmtree(folder, ignore_errors=True)
        done.append(f"removed {folder}")
    return done


def leftovers(cache: Path) -> list[str]:
    """What the check could have left behind: QEMUs, overlays, mounts, loop devices."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if argv[0].endswith(b"qemu-system-x86_64") and any(
                        str(cache).encode() in a for a in argv):
                    found.append(f"QEMU pid {proc.name}")
    found += [f"overlay {p}" for p in cache.glob("run-*/overlay.qcow2")]
    found += [f"mount {m}" for m in image.leftover_mounts(cache)]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        loops = subprocess.run(["losetup", "-n", "-O", "NAME,BACK-FILE"], capture_output=True,
                               text=True, timeout=10).stdout
        found += [f"loop {ln.split()[0]}" for ln in loops.splitlines() if str(cache) in ln]
    return found


def summary_table(steps: list[Step]) -> Table:
    """Steps with their durations and outcome."""
    t = Table("step", "time", "result", "note", title="VM check")
    for s in steps:
        verdict = {True: "[green]ok[/green]", False: "[red]FAILED[/red]",
                   None: "[yellow]not run[/yellow]"}[s.ok]
        t.add_row(s.name, f"{s.seconds / 60:.1f} min" if s.seconds >= 60 else f"{s.seconds:.0f} s",
                  verdict, s.note)
    return t


def _raise_interrupt(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP end the check like Ctrl-C (cleanup runs in finally blocks)."""
    raise KeyboardInterrupt(f"signal {signum}")


def run(opts: Options) -> int:
    """Run the whole check; the exit status is 0 only if every step and check passed."""
    if os.geteuid() != 0:
        console.print("[red]make vm-check must run as root[/red] (debootstrap, chroot)")
        return 2
    missing = [t for t in HOST_TOOLS if shutil.which(t) is None]
    if missing:
        console.print(f"[red]missing host tools:[/red] {', '.join(missing)} — apt-get install "
                      "qemu-system-x86 qemu-utils debootstrap fdisk openssh-client")
        return 2
    if opts.host_fidelity and not LINKEMU.exists():
        # Found out only when the host measurement starts (after the image build) otherwise.
        console.print(f"[red]{LINKEMU} is missing[/red] (the host-side measurement needs it): "
                      "run 'make -C linkemu' (make vm-check does), or pass --no-host-fidelity")
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = opts.out or REPO / "results" / f"vm-check-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    opts.cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    chk = Check(opts, out, keys=Keys(opts.cache / "keys"))
    fidelity_args = ["--quick"] if opts.fidelity_quick else []
    t0 = time.monotonic()
    load_before = os.getloadavg()
    inner_ok = False
    interrupted = False
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_interrupt)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=console, transient=False)
    chk.progress = progress
    try:
        with progress:
            for note in clean_stale(opts.cache):
                console.print(f"[yellow]stale state from an earlier check:[/yellow] {note}")
            house = chk.wheelhouse()
            base = chk.image(house)
            if opts.host_fidelity:
                chk.start_host_fidelity(fidelity_args)
            chk.run_dir = opts.cache / f"run-{os.getpid()}"
            chk.run_dir.mkdir()
            overlay = chk.run_dir / "overlay.qcow2"
            try:
                with chk.step("boot (QEMU TCG, overlay on the cached image)"):
                    subprocess.run(overlay_argv(base, overlay), check=True)
                    chk.boot(overlay, chk.run_dir)
                chk.provision(house)
                inner_ok = chk.inner_checks(fidelity_args)
                with chk.step("bring results back"):
                    chk.fetch_results()
            finally:
                with chk.step("power off, kill QEMU, remove the overlay"):
                    chk.power_off()
                    shutil.rmtree(chk.run_dir, ignore_errors=True)
            chk.join_host_fidelity()
    except KeyboardInterrupt:
        interrupted = True
        console.print("[red]interrupted[/red]: cleaning up")
    except (CommandFailed, SshTimeout, subprocess.SubprocessError, OSError) as exc:
        console.print(alert("VM check failed:", exc, sep=" "))
    finally:
        # Nothing may survive the check, whatever happened above.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        chk.stop_host_fidelity()
        chk.power_off()
        if chk.run_dir is not None:
            shutil.rmtree(chk.run_dir, ignore_errors=True)
        shutil.rmtree(opts.cache / "build", ignore_errors=True)
        shutil.rmtree(opts.cache / "wheels-build", ignore_errors=True)
        left = leftovers(opts.cache)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    minutes = (time.monotonic() - t0) / 60
    console.print(summary_table(chk.steps))
    kernel = compare.load(out / "guest" / "results" / "vm-check" / "fidelity-kernel.json")
    userspace = compare.load(out / "fidelity-userspace.json")
    table = compare.markdown(compare.comparison(kernel, userspace)) if kernel or userspace else ""
    if table:
        console.print("\nLink fidelity, same settings: kernel backend in the VM vs userspace "
                      "backend on this host\n")
        console.print(table, markup=False, highlight=False)
    steps_ok = all(s.ok for s in chk.steps)
    ok = steps_ok and inner_ok and not left and not interrupted
    write_summary(out, chk.steps, table, minutes, load_before, left, kernel, userspace, ok)
    if left:
        console.print(f"[red]left behind:[/red] {', '.join(left)}")
    else:
        console.print("nothing left behind (no QEMU, overlay, mount or loop device)")
    console.print(f"{'[green]VM check passed' if ok else '[red]VM check FAILED'}[/] in "
                  f"{minutes:.1f} min; results and logs: {out}")
    return 0 if ok else (130 if interrupted else 1)


def write_summary(out: Path, steps: list[Step], table: str, minutes: float,
                  load_before: tuple[float, float, float], left: list[str],
                  kernel: dict | None, userspace: dict | None, ok: bool) -> None:
    """summary.md and summary.json in the output folder."""
    load_after = os.getloadavg()
    lines = [f"# VM check {'passed' if ok else 'FAILED'}", "",
             f"{time.strftime('%Y-%m-%d %H:%M')} UTC, {minutes:.1f} min; host load average "
             f"{load_before[0]:.2f} before, {load_after[0]:.2f}/{load_after[1]:.2f}/"
             f"{load_after[2]:.2f} (1/5/15 min) after.", "",
             "| step | seconds | result | note |", "|---|---|---|---|"]
    for s in steps:
        lines.append(f"| {s.name} | {s.seconds:.0f} | "
                     f"{ {True: 'ok', False: 'FAILED', None: 'not run'}[s.ok]} | {s.note} |")
    lines += ["", "## Link fidelity: kernel backend (VM) vs userspace backend (host)", "",
              table or "(no fidelity results)", "",
              "Left behind: " + (", ".join(left) if left else "nothing")]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps({
        "ok": ok, "minutes": minutes, "load_before": load_before, "load_after": load_after,
        "steps": [s.__dict__ for s in steps], "left_behind": left,
        "kernel_misses": compare.misses(kernel), "userspace_misses": compare.misses(userspace),
    }, indent=1))
