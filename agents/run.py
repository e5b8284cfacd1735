"""Launch one agent inside a lab node (a network namespace).

    python -m agents.run sender|receiver --session FILE.json --node NAME --log FILE \\
        --metrics ADDR:PORT [--duration S]

Runs until ``--duration`` seconds have passed or SIGTERM/SIGINT, then writes a
last stats record, leaves every group and flushes the log. Prints one JSON line
``{"event": "ready", ...}`` on stdout once ``/metrics`` is up and the session has
started. Exit status: 0 on a clean stop, 2 for a bad command line or session,
1 for a failure while running.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from agents.runtime.agent import Agent
from agents.runtime.eventlog import EventLog
from agents.runtime.loop import EventLoop
from agents.runtime.metrics import AgentMetrics, parse_endpoint, serve
from agents.runtime.session import Session
from agents.runtime.transport import UdpTransport


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agents.run",
                                     description="Run one protocol agent.")
    parser.add_argument("role", choices=("sender", "receiver"))
    parser.add_argument("--session", required=True, type=Path, help="session description (JSON)")
    parser.add_argument("--node", required=True, help="this node's name (metrics label)")
    parser.add_argument("--log", required=True, type=Path, help="event log (JSON lines, appended)")
    parser.add_argument("--metrics", default=None,
                        help="ADDR:PORT on the control net (default: the session's node entry)")
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds to run (default: until SIGTERM/SIGINT)")
    return parser.parse_args(argv)


def load_session(path: Path) -> Session:
    return Session.model_validate_json(path.read_text())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        session = load_session(args.session)
        node = session.node(args.node)
        endpoint = args.metrics or node.metrics
        if endpoint is None:
            raise ValueError(f"no --metrics and no nodes.{args.node}.metrics in the session")
        addr, port = parse_endpoint(endpoint)
        if args.duration is not None and args.duration <= 0:
            raise ValueError("--duration must be positive")
        spec = session.spec
        params = session.params_for(args.node)
    except (OSError, ValueError, ValidationError) as exc:
        print(f"agents.run: {exc}", file=sys.stderr)
        return 2
    factory = spec.sender if args.role == "sender" else spec.receiver
    core = factory(params, session)

    metrics = AgentMetrics(args.node, session.flow, spec.name, args.role)
    loop = EventLoop()
    args.log.parent.mkdir(parents=True, exist_ok=True)
    log = EventLog(args.log.open("a", buffering=1 << 16), args.node, args.role)
    server = None
    agent = Agent(core, args.role, session, args.node, loop, log, metrics)
    address = None if node.address is None else str(node.address)
    transport = UdpTransport(loop, session, address, agent.deliver, agent.deliver_feedback,
                             listen_feedback=args.role == "sender"
                             and session.feedback_port is not None)
    agent.transport = transport
    try:
        server = serve(metrics, addr, port)
        loop.stop_on_signals(signal.SIGTERM, signal.SIGINT)
        if args.role == "sender":
            transport.open()
        agent.start()
        print(json.dumps({"event": "ready", "node": args.node, "role": args.role,
                          "metrics": f"{addr}:{port}", "t": loop.now()}), flush=True)
        until = None if args.duration is None else loop.now() + args.duration
        loop.run(until)
    except OSError as exc:  # address not on this node, join refused, port taken ...
        log.write(loop.now(), "error", what="run", error=repr(exc))
        print(f"agents.run: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        log.write(loop.now(), "error", what="run", error=repr(exc))
        raise
    finally:
        agent.stop()
        transport.close()
        log.close()
        if server is not None:
            server.shutdown()
            server.server_close()
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
