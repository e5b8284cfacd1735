"""How long agents take to start: a fresh interpreter each, or forked from the fork server.

    python bench/agent_start.py [--counts 8 24 48] [--protocol ormcc]

For each count N and each way of starting (``exec``: ``nsenter ... python -m
agents.run``, what ``mcclab run --no-fork`` does; ``fork``: :mod:`mcclab.forkserver`,
the default), the benchmark makes N network namespaces (loopback and a dummy
interface, nothing else: no traffic leaves them), starts one receiver agent in
each, all at once as the runner does at a run's start, and polls each agent's output for its
``ready`` line (metrics served, groups joined). It prints, per row: how long
the starting loop took, the median and the last agent's time from the loop's
start to ``ready``, and the CPU time each agent had used by then
(``/proc/PID/stat``). Needs root. Takes about 30 s on two cores (8, 24, 48).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcclab.forkserver import ForkServer, preload, start_tool
from mcclab.state import LabState, TrackedProcess, kill_groups, proc_stat_fields

PREFIX = "mcl-agentbench"
ADDRESS = "10.99.0.2"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def make_nodes(count: int) -> list[str]:
    """``count`` namespaces, each with loopback and a veth pair (``ab0`` at ADDRESS) up."""
    names: list[str] = []
    try:
        for i in range(count):
            names.append(f"{PREFIX}{i}")
            subprocess.run(["ip", "netns", "add", names[-1]], check=True)
            # Both ends stay in the namespace (kernels without the dummy driver have veth).
            for line in (["link", "set", "lo", "up"],
                         ["link", "add", "ab0", "type", "veth", "peer", "name", "ab1"],
                         ["addr", "add", f"{ADDRESS}/24", "dev", "ab0"],
                         ["link", "set", "ab1", "up"], ["link", "set", "ab0", "up"]):
                subprocess.run(["ip", "-n", names[-1], *line], check=True)
    except BaseException:
        remove_nodes(names)
        raise
    return names


def remove_nodes(names: list[str]) -> None:
    """Delete the namespaces (their dummy interfaces go with them)."""
    for name in names:
        subprocess.run(["ip", "netns", "del", name], check=False)


def session_file(folder: Path, protocol: str, count: int) -> Path:
    """One session with a receiver per namespace (each at the same address, in its own)."""
    from agents.runtime.registry import get

    spec = get(protocol)
    channels = spec.channels(spec.params.model_validate(spec.example_params)) \
        if spec.channels else 1
    session = {
        "protocol": protocol, "flow": "bench", "session_id": 1, "source": "10.99.0.1",
        "ssm": False, "ttl": 1,
        "channels": [{"group": f"239.99.0.{c + 1}", "port": 5500} for c in range(channels)],
        "params": spec.example_params,
        "nodes": {"src": {"address": "10.99.0.1"},
                  **{f"r{i}": {"address": ADDRESS, "params": {}} for i in range(count)}},
    }
    if spec.feedback:
        session["feedback_port"] = 5601
    path = folder / "session.json"
    path.write_text(json.dumps(session))
    return path


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far."""
    fields = proc_stat_fields(pid)
    if fields is None:
        raise RuntimeError(f"pid {pid} exited before it was measured")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def trial(method: str, nodes: list[str], protocol: str, folder: Path) -> dict[str, float]:
    """Start one receiver per node by ``method``; times to ready and CPU per agent."""
    state = LabState(lab_id="agentbench")
    state.save = lambda: None  # type: ignore[method-assign]  # not a lab: nothing to clean
    session = session_file(folder, protocol, len(nodes))
    server = None
    if method == "fork":
        server = ForkServer.start(state, preload(["agents.run"]), folder / "server.log")
    procs: list[TrackedProcess] = []
    outs: list[Path] = []
    t0 = time.monotonic()
    try:
        for i, node in enumerate(nodes):
            argv = [sys.executable, "-m", "agents.run", "receiver", "--session", str(session),
                    "--node", f"r{i}", "--log", str(folder / f"r{i}.jsonl"),
                    "--metrics", f"{ADDRESS}:9100"]
            out = folder / f"{method}-r{i}.out"
            procs.append(start_tool(state, server, argv, node, out, f"r{i}"))
            outs.append(out)
        looped = time.monotonic() - t0
        ready: dict[int, float] = {}
        cpu: dict[int, float] = {}
        deadline = t0 + 120
        while len(ready) < len(nodes) and time.monotonic() < deadline:
            for i, out in enumerate(outs):
                if i not in ready and out.exists() and "ready" in out.read_text():
                    ready[i] = time.monotonic() - t0
                    cpu[i] = cpu_seconds(procs[i].pid)
            time.sleep(0.01)
        if len(ready) < len(nodes):
            raise RuntimeError(f"{method}: {len(nodes) - len(ready)} agents not ready in 120 s")
        return {"loop_s": looped, "median_s": statistics.median(ready.values()),
                "last_s": max(ready.values()), "cpu_s": statistics.mean(cpu.values())}
    finally:
        kill_groups(procs)
        if server is not None:
            server.close()


def main() -> int:
    """Run the trials and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[8, 24, 48])
    parser.add_argument("--protocol", default="ormcc")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("agent_start: needs root (network namespaces)", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} CPUs, {args.protocol} receivers, one per namespace\n")
    print("| agents | started by | starting loop | median to ready | last ready | "
          "CPU per agent |")
    print("| --- | --- | --- | --- | --- | --- |")
    for count in args.counts:
        nodes = make_nodes(count)
        try:
            for method in ("exec", "fork"):
                with tempfile.TemporaryDirectory() as tmp:
                    r = trial(method, nodes, args.protocol, Path(tmp))
                print(f"| {count} | {method} | {r['loop_s']:.2f} s | {r['median_s']:.2f} s | "
                      f"{r['last_s']:.2f} s | {r['cpu_s'] * 1000:.0f} ms |", flush=True)
        finally:
            remove_nodes(nodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
