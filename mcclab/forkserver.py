"""Start the lab's Python tools inside nodes by forking one interpreter that imported them.

A fresh interpreter spends about 0.4-0.5 s of CPU importing pydantic, numpy and
the protocol modules before an agent sends its first packet. When dozens of
agents start together on two cores (49 in ``ormcc-fig4-n16``, 73 at n = 24),
the last of them began 18-27 s into the run, inside the measurement window. A
fork of a process that has already imported them costs a few milliseconds.

The server runs as ``python -m mcclab.forkserver MODULE...`` in its own
session, started by the runner. It imports the modules, prints one ``ready``
line, then reads one JSON request per line on stdin::

    {"module": "agents.run", "args": [...], "netns": "/run/netns/mcl-h1", "log": "..."}

For each it forks a child that makes itself a session (and process group)
leader, enters the node's network namespace, points stdin at /dev/null and
stdout and stderr at ``log``, takes the tool's command line as its process
title (what ``ps`` shows), and only then reports back; the child then runs
``MODULE.main(args)`` and exits with its return value. The server answers
``{"pid": N}`` (or ``{"error": ...}``) once the child is set up, so the
runner can end it by process group at once. The server reaps its children
(a zombie would look alive to the runner) and logs their exit statuses to
stderr. It exits when its stdin closes, i.e. when the runner ends or dies.

Only modules in :data:`FORKABLE` are run this way; each has ``main(argv) ->
int`` and is what ``python -m MODULE`` would run. The command line a launch
would have executed is unchanged in the launch plan.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from setproctitle import setproctitle

from agents.runtime.registry import protocol_packages
from mcclab.commands import Cmd
from mcclab.execute import Runner
from mcclab.net.setns import NETNS_DIR, enter_netns
from mcclab.processes import spawn
from mcclab.state import LabState, TrackedProcess, kill_group

# Module run by a launch -> what the server imports for it. Agents look their
# protocol up in the registry, which imports the protocol packages it discovers on first
# use; the server imports the same packages (found without importing them) once for all.
FORKABLE: dict[str, tuple[str, ...]] = {
    "agents.run": ("agents.run", *protocol_packages()),
    "agents.host": ("agents.host", *protocol_packages()),
    "mcclab.traffic.udp_onoff": ("mcclab.traffic.udp_onoff",),
    "mcclab.traffic.onoff_host": ("mcclab.traffic.onoff_host",),
}


def forkable(argv: Sequence[str], python: str = sys.executable
             ) -> tuple[str, list[str]] | None:
    """``(module, args)`` when ``argv`` is ``python -m MODULE ARGS`` for a forkable module."""
    if len(argv) >= 3 and argv[0] == python and argv[1] == "-m" and argv[2] in FORKABLE:
        return argv[2], list(argv[3:])
    return None


def preload(modules: Iterable[str]) -> list[str]:
    """Every module the server must import before forking tools of ``modules``."""
    out: list[str] = []
    for module in sorted(set(modules)):
        out += [m for m in FORKABLE[module] if m not in out]
    return out


# --- server side ----------------------------------------------------------------------------

def _reap(_signum: int, _frame: object) -> None:
    """Collect every exited child and log its status (runs as the SIGCHLD handler)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        # os.write, not print: the handler may interrupt a write to the same stream.
        code = os.waitstatus_to_exitcode(status)
        os.write(2, f"forkserver: pid {pid} exited {code}\n".encode())


def _child(request: dict[str, Any], ready_fd: int) -> NoReturn:
    """Set up the forked child, tell the server, run the tool; never returns."""
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if request.get("netns"):
            enter_netns(Path(request["netns"]))
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        module = importlib.import_module(request["module"])
        # What `ps` and `top` show: the command line the launch would have exec'd.
        setproctitle(shlex.join([sys.executable, "-m", request["module"], *request["args"]]))
    except BaseException as exc:  # noqa: BLE001 - reported to the server, which answers
        os.write(ready_fd, f"{type(exc).__name__}: {exc}".encode())
        os._exit(127)
    os.write(ready_fd, b"ok")
    os.close(ready_fd)
    try:
        code = module.main(list(request["args"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the child must end here, not in the server's loop
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # nothing left to report it to
            stream.flush()
    os._exit(code if isinstance(code, int) else 0)


def _fork(request: dict[str, Any]) -> dict[str, Any]:
    """Fork one tool; its pid once it is set up, or the reason it could not be."""
    if request.get("module") not in FORKABLE:
        return {"error": f"module {request.get('module')!r} is not forkable"}
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(request, write_fd)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 4096):
        chunks.append(chunk)
    os.close(read_fd)
    answer = b"".join(chunks).decode(errors="replace")
    return {"pid": pid} if answer == "ok" else {"error": answer or "child died while starting"}


def serve(modules: Sequence[str]) -> int:
    """The server's loop: import ``modules``, then fork one tool per request line."""
    for name in modules:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, _reap)
    print(json.dumps({"event": "ready", "pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        try:
            answer = _fork(json.loads(line))
        except (ValueError, OSError) as exc:
            answer = {"error": repr(exc)}
        print(json.dumps(answer), flush=True)
    return 0


# --- runner side ----------------------------------------------------------------------------

class ForkServer:
    """The runner's handle on a started server (:meth:`start`), which it owns."""

    def __init__(self, proc: subprocess.Popen[bytes], tracked: TrackedProcess, log: Path,
                 timeout: float):
        self.proc, self.tracked, self.log, self.timeout = proc, tracked, log, timeout

    @classmethod
    def start(cls, state: LabState, modules: Sequence[str], log: Path,
              timeout: float = 30.0) -> ForkServer:
        """Start a server that has imported ``modules``, recorded in the lab's state."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as err:
            proc = subprocess.Popen([sys.executable, "-m", "mcclab.forkserver", *modules],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                    start_new_session=True)
        server = cls(proc, state.add_process(proc.pid, "fork server"), log, timeout)
        try:
            server._answer("start")
        except RuntimeError:
            server.close()
            raise
        return server

    def _answer(self, what: str) -> dict[str, Any]:
        """The server's next line, parsed; raise with its log's tail if none comes in time."""
        assert self.proc.stdout is not None
        # poll, not select: select() refuses descriptors past 1023.
        poller = select.poll()
        poller.register(self.proc.stdout, select.POLLIN)
        ready = poller.poll(self.timeout * 1000)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            tail = self.log.read_text(errors="replace")[-800:] if self.log.exists() else ""
            raise RuntimeError(f"fork server gave no answer to {what} within "
                               f"{self.timeout:g} s (log {self.log}):\n{tail}")
        return json.loads(line)

    def spawn(self, state: LabState, module: str, args: Sequence[str], netns: Path | None,
              log: Path, what: str) -> TrackedProcess:
        """Fork ``module.main(args)`` inside ``netns``, output to ``log``; record and return it."""
        assert self.proc.stdin is not None
        log.parent.mkdir(parents=True, exist_ok=True)
        request = {"module": module, "args": list(args), "log": str(log),
                   "netns": None if netns is None else str(netns)}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        answer = self._answer(what)
        if "pid" not in answer:
            raise RuntimeError(f"fork server could not start {what}: {answer.get('error')}")
        return state.add_process(int(answer["pid"]), what)

    def close(self) -> None:
        """Let the server exit (its stdin closes); end its group if it does not."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=3.0)
        except subprocess.TimeoutExpired:
            kill_group(self.tracked)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_tool(state: LabState, server: ForkServer | None, argv: Sequence[str], netns: str,
               log: Path, what: str, runner: Runner | None = None) -> TrackedProcess:
    """Start ``argv`` in the namespace named ``netns``, output to ``log``; record it.

    ``server`` forks it when it is a forkable module in a namespace of this machine;
    otherwise (no server, another program such as iperf3, or a namespace ``runner``
    routes to another machine) it is executed as its own session, where ``runner``
    (the lab's) sends it.
    """
    here = runner is None or netns not in runner.remote
    target = forkable(argv) if server is not None and here else None
    if server is not None and target is not None:
        return server.spawn(state, *target, NETNS_DIR / netns, log, what)
    return spawn(state, Cmd(tuple(argv), netns), log, what, runner=runner)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
