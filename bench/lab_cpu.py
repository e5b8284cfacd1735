"""CPU by component of a lab run, sampled from /proc (pidstat-style), for ``mcclab run``.

Usage::

    python bench/lab_cpu.py --out cpu.csv [--interval 1] [--seconds 600]

Every ``interval`` seconds it reads ``/proc/<pid>/stat`` of every process, charges
the utime + stime it used since the previous sample to a component (by command
line: linkemu, iperf3, agents, FRR, Prometheus, the exporter, the runner, the fork
server, other) and appends one row per component to ``--out``
(``t,component,cpu_s,procs``). It stops after ``--seconds`` or on SIGTERM/SIGINT,
then prints the totals per component. Processes that start and end between two
samples are missed: a lower bound for very short-lived helpers.

It only reads /proc; it starts nothing and may run beside any lab.
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# (component, test on the command line), first match wins.
RULES: tuple[tuple[str, str], ...] = (
    ("linkemu", "mcclab-linkemu"),
    ("iperf3", "iperf3"),
    ("agents", "agents.run"),
    ("agent-host", "agents.host"),
    ("fork-server", "mcclab.forkserver"),
    ("exporter", "mcclab.monitoring.exporter"),
    ("prometheus", "prometheus"),
    ("grafana", "grafana"),
    ("frr", "/frr/"),
    ("frr", "zebra"),
    ("frr", "pimd"),
    ("frr", "ospfd"),
    ("frr", "mgmtd"),
    ("frr", "staticd"),
    ("frr", "watchfrr"),
    ("runner", "mcclab run"),
    ("runner", "bin/mcclab"),
    ("udp-onoff", "mcclab.traffic"),
    ("sampler", "lab_cpu.py"),
)


def component(cmdline: str, comm: str) -> str:
    """The component a process belongs to, from its command line (or its name)."""
    text = cmdline or comm
    for name, needle in RULES:
        if needle in text:
            return name
    if comm.startswith(("kworker", "ksoftirq", "rcu_", "migration")):
        return "kernel-threads"
    return "other"


def sample(born: dict[int, tuple[str, float, str]] | None = None
           ) -> dict[int, tuple[str, int]]:
    """pid -> (component, utime + stime in ticks) of every process now; ``born`` gets
    (component, start time in seconds since boot, command line) of each pid not in it."""
    out: dict[int, tuple[str, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        # fields[11], [12]: utime, stime (stat fields 14 and 15).
        comp = component(cmdline, comm)
        out[pid] = (comp, int(fields[11]) + int(fields[12]))
        if born is not None and pid not in born:
            born[pid] = (comp, int(fields[19]) / TICK, cmdline.strip())
    return out


def main(argv: list[str] | None = None) -> int:
    """Sample until told to stop; write the rows and print the totals."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--births", type=Path, help="also write pid,component,start_s,cmdline "
                    "of every process seen (start_s: seconds since boot)")
    args = ap.parse_args(argv)
    stop = False

    def handler(_s: int, _f: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    totals: dict[str, float] = defaultdict(float)
    start = time.monotonic()
    born: dict[int, tuple[str, float, str]] = {}
    prev = sample(born)
    with args.out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["t", "component", "cpu_s", "procs"])
        while not stop and time.monotonic() - start < args.seconds:
            time.sleep(args.interval)
            now = sample(born)
            t = round(time.monotonic() - start, 2)
            used: dict[str, float] = defaultdict(float)
            procs: dict[str, int] = defaultdict(int)
            for pid, (comp, ticks) in now.items():
                before = prev.get(pid)
                # A new pid counts from 0: its whole CPU fell in this interval.
                used[comp] += (ticks - (before[1] if before else 0)) / TICK
                procs[comp] += 1
            for comp in sorted(used):
                writer.writerow([t, comp, round(used[comp], 3), procs[comp]])
                totals[comp] += used[comp]
            fh.flush()
            prev = now
    if args.births:
        with args.births.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["pid", "component", "start_s", "cmdline"])
            for pid, (comp, t0, cmdline) in sorted(born.items(), key=lambda kv: kv[1][1]):
                writer.writerow([pid, comp, t0, cmdline])
    wall = time.monotonic() - start
    print(f"{wall:.0f} s sampled; CPU seconds by component (share of 1 core):")
    for comp, cpu in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {comp:15s} {cpu:9.1f} s  {cpu / wall:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
