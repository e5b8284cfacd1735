"""The agent command line: argument and session errors, lifecycle, SIGTERM, /metrics.

The lifecycle tests run a cbr sender in this namespace, sending with TTL 1 out of
the loopback interface only (IP_MULTICAST_IF 127.0.0.1); no receiver joins here,
so nothing is sent on a real interface.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from agents.run import main

REPO = Path(__file__).resolve().parents[2]
SESSION = {"protocol": "cbr", "flow": "cli", "session_id": 1, "source": "127.0.0.1", "ttl": 1,
           "channels": [{"group": "239.255.42.1", "port": 5999}],
           "params": {"rate": "80kbit", "packet_size": "100B"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def session_file(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(json.dumps(SESSION))
    return path


def run_main(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().err


def test_bad_session_and_arguments_exit_2(tmp_path, session_file, capsys):
    log = str(tmp_path / "log.jsonl")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**SESSION, "params": {"rate": 5}}))
    common = ["--node", "s", "--log", log]
    cases = [
        (["sender", "--session", str(bad), *common, "--metrics", "127.0.0.1:9"], "needs a unit"),
        (["sender", "--session", str(tmp_path / "missing.json"), *common,
          "--metrics", "127.0.0.1:9"], "No such file"),
        (["sender", "--session", str(session_file), *common], "no --metrics"),
        (["sender", "--session", str(session_file), *common, "--metrics", "0.0.0.0:9100"],
         "control-net"),
        (["sender", "--session", str(session_file), *common, "--metrics", "127.0.0.1:9",
          "--duration", "0"], "positive"),
    ]
    for argv, message in cases:
        code, err = run_main(capsys, *argv)
        assert code == 2, argv
        assert message in err
    assert not Path(log).exists()


def launch(session_file, log, port, *extra):
    argv = [sys.executable, "-m", "agents.run", "sender", "--session", str(session_file),
            "--node", "s", "--log", str(log), "--metrics", f"127.0.0.1:{port}", *extra]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def records(log):
    return [json.loads(line) for line in Path(log).read_text().splitlines()]


def test_runs_for_duration_serves_metrics_and_logs(tmp_path, session_file):
    log, port = tmp_path / "s.jsonl", free_port()
    proc = launch(session_file, log, port, "--duration", "1.6")
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["event"] == "ready" and ready["metrics"] == f"127.0.0.1:{port}"
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=3) as reply:
            text = reply.read().decode()
        assert 'mcc_agent_packets_sent_total{flow="cli",node="s",protocol="cbr",role="sender"}' \
            in text
        assert proc.wait(10) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    recs = records(log)
    assert [r["event"] for r in recs][:1] == ["start"]
    assert recs[-1]["event"] == "stop"
    assert recs[-1]["tx_packets"] == pytest.approx(1.6 * 100, abs=3)  # 100 packets/s
    assert sum(1 for r in recs if r["event"] == "stats") == 2


def test_sigterm_stops_cleanly(tmp_path, session_file):
    log, port = tmp_path / "s.jsonl", free_port()
    proc = launch(session_file, log, port)
    try:
        json.loads(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert records(log)[-1]["event"] == "stop"


def test_metrics_port_in_use_fails_with_status_1(tmp_path, session_file):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = launch(session_file, tmp_path / "s.jsonl", port, "--duration", "1")
        assert proc.wait(10) == 1
        assert "Address already in use" in proc.stderr.read()
    assert records(tmp_path / "s.jsonl")[-1]["event"] == "error"
