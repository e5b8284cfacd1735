"""The fork server starts tools inside a node's namespace, in their own groups, and reaps them."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from nspair import recorded_lab

from mcclab.forkserver import ForkServer, preload
from mcclab.net.node_config import netns_name
from mcclab.net.setns import NETNS_DIR
from mcclab.probes.reach import wait_for
from mcclab.state import LabState, kill_groups

# timeout: measured 1.2 s (2-core VM); 60 s is the floor for a lab test
pytestmark = [pytest.mark.root, pytest.mark.timeout(60)]

NODE = "fsrvtest"
PORT = 5960
PACKETS, SIZE = 100, 125  # 100 datagrams in 1 s at 100 kbit/s


def records(path: Path) -> list[dict]:
    """The JSON lines of a tool's log."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def lab() -> Iterator[LabState]:
    """A lab record (lab lock held) with one namespace, only loopback up; removed afterwards."""
    with recorded_lab("fsrvtest", (NODE,)) as state:
        subprocess.run(["ip", "-n", netns_name(NODE), "link", "set", "lo", "up"], check=True)
        yield state


def test_tools_run_in_the_node_and_are_reaped(lab: LabState, tmp_path: Path) -> None:
    # The lab's record, in /run/mcclab: `mcclab clean` sees the server and tools as a
    # live lab's, and after a crash it ends them.
    state = lab
    node = NETNS_DIR / netns_name(NODE)
    server = ForkServer.start(state, preload(["mcclab.traffic.udp_onoff"]),
                              tmp_path / "server.log")
    try:
        sink = server.spawn(state, "mcclab.traffic.udp_onoff",
                            ["recv", "--bind", "127.0.0.1", "--port", str(PORT),
                             "--log", str(tmp_path / "sink.jsonl")],
                            node, tmp_path / "sink.out", "sink")
        # The answer comes once the child leads its own group and is in the node.
        assert os.getpgid(sink.pid) == sink.pid
        assert os.stat(f"/proc/{sink.pid}/ns/net").st_ino == node.stat().st_ino
        assert os.stat(f"/proc/{sink.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
        wait_for(lambda: "ready" in (tmp_path / "sink.out").read_text(), 10, "the sink")
        # `ps` shows the tool's command line, not the server's.
        title = Path(f"/proc/{sink.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        assert "-m mcclab.traffic.udp_onoff recv --bind 127.0.0.1" in title
        assert "forkserver" not in title

        schedule = tmp_path / "schedule.json"
        schedule.write_text(json.dumps({"periods": [[0, 1]]}))
        source = server.spawn(state, "mcclab.traffic.udp_onoff",
                              ["send", "--dest", "127.0.0.1", "--port", str(PORT), "--rate",
                               str(PACKETS * SIZE * 8), "--size", str(SIZE), "--schedule",
                               str(schedule), "--log", str(tmp_path / "source.jsonl")],
                              node, tmp_path / "source.out", "source")
        # The source ends by itself after its schedule: reaped, it is no longer alive.
        wait_for(lambda: not source.alive(), 10, "the source to finish and be reaped")
        assert records(tmp_path / "source.jsonl")[-1]["sent"] == PACKETS

        kill_groups([sink], grace=3.0)
        assert not sink.alive()
        # Loopback in the node: every datagram arrived (the last record is written on SIGTERM).
        assert records(tmp_path / "sink.jsonl")[-1]["total_rx_packets"] == PACKETS

        # A namespace that does not exist is refused by name, and the server keeps serving.
        with pytest.raises(RuntimeError, match="nonexistent"):
            server.spawn(state, "mcclab.traffic.udp_onoff", ["recv"], NETNS_DIR / "nonexistent",
                         tmp_path / "bad.out", "bad")
        assert server.proc.poll() is None
    finally:
        # The server's exit does not end the tools (they lead their own sessions): end
        # them here, before the server's log is read below.
        kill_groups([p for p in state.processes if p is not server.tracked])
        server.close()
    assert server.proc.returncode == 0
    exits = (tmp_path / "server.log").read_text()
    assert f"pid {sink.pid} exited" in exits and f"pid {source.pid} exited 0" in exits
    assert [p.what for p in state.processes] == ["fork server", "sink", "source"]
