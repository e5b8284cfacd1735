"""``mcclab testbed provision``: the project's playbook, run over SSH on an inventory's hosts.

The hosts of a testbed run need what the playbook gives a laptop (FRR, pimd,
smcroute, iperf3, the venv with mcclab). This module turns the testbed
inventory (``mcclab.testbed.inventory``) into an Ansible inventory with the
same logins and host-key policy the SSH backend uses (``mcclab.testbed.ssh``),
and runs ``ansible/site.yml`` against it, the playbook ``.ci/run``, the
Makefile and the Vagrant VM run locally.

Commands as data, as in ``mcclab.routing.common``: :func:`plan_provision` is
pure and returns a :class:`ProvisionPlan` (the files to write and the one
command to run); :func:`run_plan` writes the files, runs the command, streams
its output line by line and reads the result (each host's ``PLAY RECAP`` line
and the first failure Ansible printed for it) into a :class:`ProvisionResult`.
"""

from __future__ import annotations

import getpass
import re
import shlex
import subprocess
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from mcclab.commands import Cmd
from mcclab.execute import full_argv
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.ssh import CONNECT_TIMEOUT

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = "ansible/site.yml"
ANSIBLE_CONFIG = "ansible/ansible.cfg"
# The interpreter the project's own inventory pins (ansible/inventory.ini): Debian's.
PYTHON = "/usr/bin/python3"
INVENTORY_FILE = "inventory.yml"
SSH_WRAPPER_FILE = "ssh"
# Ansible's master connections, private to one provisioning run and closed after it.
CONTROL_DIR = "cp"

_RECAP = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:\w+=\d+\s*)+)$")
_FATAL = re.compile(r"^fatal: \[(?P<host>[^\]]+)\]: (?P<kind>FAILED|UNREACHABLE)! =>"
                    r"\s*(?P<rest>.*)$")
_TASK = re.compile(r"^TASK \[(?P<task>.*)\] \**$")
_CHANGED = re.compile(r"^changed: \[(?P<host>[^\]]+)\]")


class ProvisionError(RuntimeError):
    """The playbook failed on a host, or did not run; the message is one line."""


@dataclass(frozen=True)
class ProvisionPlan:
    """What provisioning writes (``files``: name in the work folder -> text, mode) and
    the command it runs; ``targets`` maps each Ansible host (a node) to its login, and
    ``ssh_command`` is the client that closes Ansible's master connections after."""

    files: dict[str, tuple[str, int]]
    command: Cmd
    targets: dict[str, str]
    ssh_command: tuple[str, ...] = ("ssh",)


@dataclass
class ProvisionResult:
    """What Ansible reported: per host, its recap counts, the tasks it changed (or would
    change, in check mode) and its first failure."""

    returncode: int
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


def login(host: Host, local_user: str) -> str:
    """The account ssh logs in as on ``host`` (the local user's name when none is given)."""
    return host.user or local_user


def target(host: Host, local_user: str) -> str:
    """``user@address:port``, how messages name a host."""
    return f"{login(host, local_user)}@{host.address}:{host.port}"


def ssh_common_args(inventory: Inventory) -> str:
    """The ssh options Ansible adds to each connection: the SSH backend's policy
    (no prompts, the inventory's host-key checking and known-hosts file)."""
    words = ["-o", "BatchMode=yes",
             "-o", f"StrictHostKeyChecking={inventory.strict_host_key_checking}",
             "-o", f"ConnectTimeout={CONNECT_TIMEOUT}"]
    if inventory.known_hosts:
        words += ["-o", f"UserKnownHostsFile={inventory.known_hosts}"]
    return shlex.join(words)


def ssh_wrapper(ssh_command: Sequence[str]) -> str | None:
    """A POSIX sh script running ``ssh_command`` with the arguments it is given, for an
    inventory whose client is more than one word (Ansible's ``ansible_ssh_executable``
    is one program); None for a plain ``ssh``."""
    if list(ssh_command) == ["ssh"]:
        return None
    return f'#!/bin/sh\nexec {shlex.join(ssh_command)} "$@"\n'


def ansible_inventory(inventory: Inventory, local_user: str,
                      ssh_executable: str | None = None,
                      control_path_dir: str | None = None) -> str:
    """The Ansible (YAML) inventory of ``inventory``'s hosts, one Ansible host per node.

    Each host keeps its login (address, port, user, key); a host whose login is not
    root gets ``ansible_become`` (the playbook must run as root). ``ssh_executable``
    is the wrapper of a multi-word client command; files then go through the same
    client (``piped``: Ansible's sftp and scp would bypass it). ``control_path_dir``
    keeps Ansible's master connections apart from any other run's.
    """
    common: dict[str, object] = {"ansible_python_interpreter": PYTHON,
                                 "ansible_ssh_common_args": ssh_common_args(inventory)}
    if control_path_dir is not None:
        common["ansible_control_path_dir"] = control_path_dir
    if ssh_executable is not None:
        common["ansible_ssh_executable"] = ssh_executable
        common["ansible_ssh_transfer_method"] = "piped"
    hosts: dict[str, dict[str, object]] = {}
    for node, host in inventory.hosts.items():
        entry: dict[str, object] = {"ansible_host": host.address, "ansible_port": host.port}
        if host.user:
            entry["ansible_user"] = host.user
        if host.identity_file:
            entry["ansible_ssh_private_key_file"] = host.identity_file
        if login(host, local_user) != "root":
            entry["ansible_become"] = True
        hosts[node] = entry
    header = (f"# Written by mcclab testbed provision from {inventory.source}: one host per "
              "node.\n")
    return header + yaml.safe_dump({"all": {"vars": common, "hosts": hosts}},
                                   sort_keys=False, default_flow_style=False, width=4096)


def playbook_command(inventory_file: Path, repo: Path = REPO, check: bool = False,
                     tags: Iterable[str] = (), hosts_repo: str | None = None,
                     extra: Sequence[str] = ()) -> Cmd:
    """``ansible-playbook`` on the project's playbook with ``inventory_file``, configured
    by the project's ``ansible.cfg`` as ``.ci/run`` and the Vagrantfile configure it.

    ``check`` is Ansible's check mode (reports what would change, changes nothing);
    ``tags`` limits the run to tagged tasks; ``hosts_repo`` is the checkout's path on
    the hosts (the playbook's ``mcclab_repo``, by default this checkout's path).
    """
    argv = ["env", f"ANSIBLE_CONFIG={repo / ANSIBLE_CONFIG}", "ANSIBLE_NOCOLOR=1",
            "PYTHONUNBUFFERED=1", "ansible-playbook", "-i", str(inventory_file),
            str(repo / PLAYBOOK)]
    if check:
        argv.append("--check")
    tag_list = [t for t in tags if t]
    if tag_list:
        argv += ["--tags", ",".join(tag_list)]
    if hosts_repo is not None:
        argv += ["-e", f"mcclab_repo={hosts_repo}"]
    argv += list(extra)
    return Cmd(tuple(argv))


def plan_provision(inventory: Inventory, folder: Path, repo: Path = REPO, check: bool = False,
                   tags: Iterable[str] = (), hosts_repo: str | None = None,
                   local_user: str | None = None) -> ProvisionPlan:
    """Everything provisioning ``inventory``'s hosts writes into ``folder`` and runs."""
    user = local_user or getpass.getuser()
    wrapper = ssh_wrapper(inventory.ssh_command)
    files: dict[str, tuple[str, int]] = {}
    executable = None
    if wrapper is not None:
        files[SSH_WRAPPER_FILE] = (wrapper, 0o700)
        executable = str(folder / SSH_WRAPPER_FILE)
    files[INVENTORY_FILE] = (ansible_inventory(inventory, user, executable,
                                               str(folder / CONTROL_DIR)), 0o600)
    command = playbook_command(folder / INVENTORY_FILE, repo, check, tags, hosts_repo)
    return ProvisionPlan(files, command,
                         {node: target(host, user) for node, host in inventory.hosts.items()},
                         tuple(inventory.ssh_command))


def close_commands(ssh_command: Sequence[str], sockets: Iterable[Path]) -> list[Cmd]:
    """Commands ending the master connections behind ``sockets`` (Ansible keeps them
    open for a minute after its last task otherwise)."""
    return [Cmd((*ssh_command, "-o", f"ControlPath={sock}", "-O", "exit", "mcclab-provision"),
                check=False) for sock in sorted(sockets)]


# --- reading Ansible's output ----------------------------------------------------------


def _one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _failure_message(rest: str, block: list[str]) -> str:
    """The reason of one ``fatal:`` report: its ``msg`` (or stderr), from the JSON on its
    line or the YAML block under it (``callback_result_format = yaml``)."""
    data: object = None
    text = rest.strip() or textwrap.dedent("\n".join(block))
    try:
        data = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        data = None
    if isinstance(data, Mapping):
        for key in ("msg", "stderr", "reason"):
            if data.get(key):
                return _one_line(str(data[key]))
    return _one_line(text or "no reason given")


def read_output(lines: Sequence[str]) -> tuple[dict[str, dict[str, int]],
                                                dict[str, list[str]], dict[str, str]]:
    """From ansible-playbook's output: each host's recap counts, the tasks reported
    ``changed`` for it (in order) and its first failure's reason."""
    recap: dict[str, dict[str, int]] = {}
    changed: dict[str, list[str]] = {}
    failures: dict[str, str] = {}
    task = ""
    in_recap = False
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        i += 1
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            m = _RECAP.match(line.strip())
            if m:
                recap[m["host"]] = {k: int(v) for k, v in
                                    (w.split("=") for w in m["counts"].split())}
            continue
        if m := _TASK.match(line):
            task = m["task"]
        elif m := _CHANGED.match(line):
            changed.setdefault(m["host"], []).append(task)
        elif m := _FATAL.match(line):
            block = []
            while i < len(lines) and lines[i].startswith((" ", "\t")):
                block.append(lines[i].rstrip("\n"))
                i += 1
            failures.setdefault(m["host"], f"{m['kind'].lower()}: "
                                f"{_failure_message(m['rest'], block)}")
    return recap, changed, failures


def summary_error(result: ProvisionResult, targets: Mapping[str, str]) -> str | None:
    """The one-line error of a failed run, naming the (first) failed host; None when
    every host went through."""
    bad = [h for h, c in result.recap.items() if c.get("failed") or c.get("unreachable")]
    bad += [h for h in result.failures if h not in bad]
    if not bad and result.returncode == 0:
        return None
    if not bad and result.returncode == 127:
        return "ansible-playbook is not installed here (make setup installs it)"
    if not bad:
        return f"ansible-playbook failed (exit {result.returncode}) before naming a host"
    host = bad[0]
    where = f"{host} ({targets[host]})" if host in targets else host
    reason = result.failures.get(host, "failed (see the output above)")
    more = f" (also: {', '.join(bad[1:])})" if len(bad) > 1 else ""
    return f"provisioning failed on {where}: {reason}{more}"


# --- running ---------------------------------------------------------------------------


def stream(command: Cmd, echo: Callable[[str], None], timeout: float | None = None
           ) -> tuple[int, list[str]]:
    """Run ``command`` here, handing each line of its output (stdout and stderr) to
    ``echo`` as it comes; its exit status and every line."""
    lines: list[str] = []
    proc = subprocess.Popen(full_argv(command), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            echo(line.rstrip("\n"))
        rc = proc.wait(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return rc, lines


def write_files(plan: ProvisionPlan, folder: Path) -> None:
    """Write the plan's files into ``folder`` with their modes (the inventory names key
    files, so it is private)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CONTROL_DIR).mkdir(mode=0o700, exist_ok=True)
    for name, (text, mode) in plan.files.items():
        path = folder / name
        path.write_text(text)
        path.chmod(mode)


def run_plan(plan: ProvisionPlan, folder: Path, echo: Callable[[str], None] = print,
             run: Callable[[Cmd, Callable[[str], None]], tuple[int, list[str]]] = stream
             ) -> ProvisionResult:
    """Write the plan's files, run its command (through ``run``), and read the result;
    raise ProvisionError with a one-line message naming the host when a host failed."""
    write_files(plan, folder)
    try:
        rc, lines = run(plan.command, echo)
    except FileNotFoundError as exc:
        raise ProvisionError(f"cannot run {plan.command.argv[0]}: {exc.strerror} "
                             "(install ansible-core: make setup)") from None
    finally:
        control = folder / CONTROL_DIR
        for close in close_commands(plan.ssh_command, control.glob("*")
                                    if control.is_dir() else []):
            run(close, lambda line: None)
    recap, changed, failures = read_output(lines)
    result = ProvisionResult(rc, recap, changed, failures)
    error = summary_error(result, plan.targets)
    if error is not None:
        raise ProvisionError(error)
    return result


__all__ = ["ProvisionError", "ProvisionPlan", "ProvisionResult", "ansible_inventory",
           "close_commands",
           "plan_provision", "playbook_command", "read_output", "run_plan", "ssh_wrapper",
           "stream", "summary_error"]
