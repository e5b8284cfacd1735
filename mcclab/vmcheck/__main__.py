"""`python -m mcclab.vmcheck` (what `make vm-check` runs)."""

from __future__ import annotations

from pathlib import Path

import typer

from mcclab.vmcheck.run import Options, run

app = typer.Typer(add_completion=False)


@app.command()
def main(
    cache: Path = typer.Option(Path("/var/cache/mcclab-vm"), help="image cache (not the repo)"),
    out: Path = typer.Option(None, help="results folder (default results/vm-check-<time>)"),
    rebuild: bool = typer.Option(False, help="rebuild the image even if it is cached"),
    cpus: int = typer.Option(2, help="guest CPUs"),
    memory: int = typer.Option(4096, help="guest memory, MiB"),
    nice: int = typer.Option(0, help="niceness (0-19) of QEMU and the image build"),
    idle: bool = typer.Option(False, help="run QEMU and the image build under SCHED_IDLE "
                              "(chrt --idle 0): on a host shared with latency-sensitive "
                              "labs; timings then depend on the others' load"),
    boot_timeout: float = typer.Option(600.0, help="seconds to wait for ssh after starting QEMU"),
    host_fidelity: bool = typer.Option(True, help="measure the userspace backend on the host"),
    optional_packages: bool = typer.Option(False, help="let the playbook install its optional "
                                           "packages (Chromium) too"),
    full_fidelity: bool = typer.Option(False, help="full-length fidelity measurements "
                                       "(default: bench_links --quick)"),
) -> None:
    """Build/boot a Debian 12 VM, provision it, run the kernel-backend checks inside."""
    raise typer.Exit(run(Options(cache=cache, out=out, rebuild=rebuild, cpus=cpus,
                                 memory_mb=memory, nice=nice, idle=idle, boot_timeout=boot_timeout,
                                 host_fidelity=host_fidelity, fidelity_quick=not full_fidelity,
                                 optional_packages=optional_packages)))


app()
