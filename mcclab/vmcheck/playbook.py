"""What the playbook will install, read from the playbook itself (roles, defaults, tasks).

The image build installs the same Debian packages natively in the chroot, so the
playbook's first run inside the emulated VM finds them present instead of
unpacking and byte-compiling them at a tenth of the host's speed. Reading the
lists from ``ansible/`` (never a hand-kept copy) keeps the two from drifting: a
change to a role's package list changes the image digest and rebuilds the image.

Only the subset of Ansible needed for the project's own roles is understood:
variables from ``group_vars/all.yml`` and each role's ``defaults/main.yml``
(plus extra vars), and ``name:`` values that are a list or ``{{ a + b }}``.
Task files a role imports statically (``import_tasks``) are read as part of it.
Tasks with a ``when:`` (decided at run time, e.g. Grafana's repository) and
dynamically included task files are left to the playbook. Anything else is an
error, so a new construct is noticed rather than silently ignored.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

APT_MODULES = ("ansible.builtin.apt", "apt")
DEBCONF_MODULES = ("ansible.builtin.debconf", "debconf")
COMMAND_MODULES = ("ansible.builtin.command", "command")
IMPORT_MODULES = ("ansible.builtin.import_tasks", "import_tasks")
_VAR = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_SUM = re.compile(r"^\{\{\s*([A-Za-z_]\w*(?:\s*\+\s*[A-Za-z_]\w*)*)\s*\}\}$")


class PlaybookError(ValueError):
    """The playbook uses a construct this reader does not understand."""


@dataclass(frozen=True)
class Provisioning:
    """The Debian packages and debconf answers of the playbook's unconditional tasks."""

    packages: tuple[str, ...]
    debconf: tuple[str, ...]  # debconf-set-selections lines
    pip_extras: str
    # The python role's venv: its path and the command that creates it (the task
    # with ``creates: <venv>/bin/python``), if the playbook has one.
    venv: str = ""
    venv_command: tuple[str, ...] = ()


def roles(ansible: Path, playbook: str = "site.yml") -> list[str]:
    """The roles of the playbook's plays, in order."""
    out: list[str] = []
    for play in yaml.safe_load((ansible / playbook).read_text()) or []:
        for role in play.get("roles", []):
            out.append(role["role"] if isinstance(role, dict) else str(role))
    return out


def variables(ansible: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """group_vars/all.yml, then every role's defaults, then extra vars (highest)."""
    out: dict[str, Any] = {}
    group = ansible / "group_vars" / "all.yml"
    if group.exists():
        out.update(yaml.safe_load(group.read_text()) or {})
    for role in roles(ansible):
        defaults = ansible / "roles" / role / "defaults" / "main.yml"
        if defaults.exists():
            for key, value in (yaml.safe_load(defaults.read_text()) or {}).items():
                out.setdefault(key, value)  # group_vars outrank role defaults
    out.update(extra or {})
    return out


def evaluate(value: Any, names: dict[str, Any]) -> list[str]:
    """A task's ``name:`` as a list of strings (a list, a plain name or ``{{ a + b }}``)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    text = str(value).strip()
    if "{{" not in text:
        return [text]
    m = _SUM.match(text)
    if not m:
        raise PlaybookError(f"cannot evaluate {text!r} (only '{{{{ a + b }}}}' sums of lists)")
    out: list[str] = []
    for name in (n.strip() for n in m.group(1).split("+")):
        if name not in names:
            raise PlaybookError(f"undefined variable {name!r} in {text!r}")
        part = names[name]
        if not isinstance(part, list):
            raise PlaybookError(f"{name!r} is not a list in {text!r}")
        out += [str(p) for p in part]
    return out


def substitute(text: str, names: dict[str, Any], depth: int = 5) -> str:
    """``text`` with its ``{{ name }}`` references to string variables filled in (nested too).

    Anything else between braces (filters, expressions) is a PlaybookError.
    """
    for _ in range(depth):
        if "{{" not in text:
            return text

        def value(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in names or not isinstance(names[name], str):
                raise PlaybookError(f"cannot substitute {m.group(0)!r} (not a string variable)")
            return names[name]
        new = _VAR.sub(value, text)
        if new == text:
            break
        text = new
    if "{{" in text:
        raise PlaybookError(f"cannot evaluate {text!r} (only plain '{{{{ name }}}}' references)")
    return text


def _venv_task(tasks: list[dict[str, Any]], names: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(venv path, argv) of an unconditional command task that creates ``<venv>/bin/python``."""
    for task in tasks:
        args = _module(task, COMMAND_MODULES)
        if args is None or "when" in task or not isinstance(args, dict):
            continue
        creates = str(args.get("creates", ""))
        if not creates.endswith("/bin/python") or "cmd" not in args:
            continue
        venv = substitute(creates, names).removesuffix("/bin/python")
        return venv, tuple(shlex.split(substitute(str(args["cmd"]), names)))
    return "", ()


def role_tasks(tasks_dir: Path, name: str = "main.yml") -> list[dict[str, Any]]:
    """A role's tasks in order, with each unconditional ``import_tasks`` file in place."""
    out: list[dict[str, Any]] = []
    for task in yaml.safe_load((tasks_dir / name).read_text()) or []:
        imported = _module(task, IMPORT_MODULES)
        if imported is None or "when" in task:
            out.append(task)
            continue
        target = imported if isinstance(imported, str) else imported.get("file", "")
        if not target or "{{" in str(target):
            raise PlaybookError(f"import_tasks {target!r} in {tasks_dir / name}: "
                                "only a plain file name")
        out += role_tasks(tasks_dir, str(target))
    return out


def _module(task: dict[str, Any], modules: tuple[str, ...]) -> dict[str, Any] | None:
    """The task's arguments if it calls one of ``modules``."""
    for mod in modules:
        if mod in task:
            return task[mod] or {}
    return None


def provisioning(ansible: Path, extra: dict[str, Any] | None = None) -> Provisioning:
    """Packages (in task order, deduplicated) and debconf answers of unconditional tasks."""
    names = variables(ansible, extra)
    packages: list[str] = []
    debconf: list[str] = []
    venv, venv_command = "", ()
    for role in roles(ansible):
        tasks_dir = ansible / "roles" / role / "tasks"
        if not (tasks_dir / "main.yml").exists():
            continue
        tasks = role_tasks(tasks_dir)
        if not venv:
            venv, venv_command = _venv_task(tasks, names)
        for task in tasks:
            if "when" in task:
                continue
            if (args := _module(task, APT_MODULES)) is not None and "name" in args:
                if args.get("state", "present") != "present":
                    raise PlaybookError(f"apt task {task.get('name')!r}: only state=present")
                packages += [p for p in evaluate(args["name"], names) if p not in packages]
            elif (args := _module(task, DEBCONF_MODULES)) is not None:
                value = args["value"]
                if isinstance(value, bool):
                    value = str(value).lower()
                debconf.append(f"{args['name']} {args['question']} {args['vtype']} {value}")
    return Provisioning(tuple(packages), tuple(debconf), str(names.get("mcclab_pip_extras", "")),
                        venv, venv_command)
