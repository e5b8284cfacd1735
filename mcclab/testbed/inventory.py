"""Which machine plays which topology node: inventories read into one strict model.

Three sources are read:

* a plain **Ansible inventory** (INI or YAML): hosts named after the
  topology's nodes, or carrying a ``mcclab_node`` host variable;
* a **CloudLab manifest RSpec** (what the portal shows once an experiment is
  up): each ``<node client_id=...>`` with its ``<login hostname port username>``
  and ``<host ipv4>``;
* an **Emulab node list**: lines ``vname pnode.domain``.

Every problem (an unknown variable, a host that is no node, a node without a
host, two nodes on one machine) is collected and raised together as an
:class:`InventoryError` naming the file, before anything is started.
"""

from __future__ import annotations

import ipaddress
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcclab.model.topology import Topology

Format = Literal["ansible-ini", "ansible-yaml", "cloudlab", "emulab"]
HostKeyPolicy = Literal["yes", "no", "accept-new"]

# Host variables an Ansible inventory may give a node's host.
HOST_VARS = frozenset({"ansible_host", "ansible_user", "ansible_port",
                       "ansible_ssh_private_key_file", "mcclab_node", "mcclab_control"})
# Variables that hold for the whole inventory (the SSH client's settings).
GLOBAL_VARS = frozenset({"mcclab_ssh_command", "mcclab_strict_host_key_checking",
                         "mcclab_known_hosts"})
# Ansible's own connection settings: accepted, so an inventory written for the
# playbook reads unchanged, and not used by the SSH backend.
IGNORED_VARS = frozenset({"ansible_python_interpreter", "ansible_connection", "ansible_become",
                          "ansible_become_method", "ansible_become_user"})


class InventoryError(ValueError):
    """An inventory that cannot drive the topology; the message names the file and nodes."""

    def __init__(self, path: Path | str, problems: list[str]):
        self.path, self.problems = str(path), problems
        super().__init__("\n".join(f"{path}: {p}" for p in problems))


class Host(BaseModel):
    """One machine the SSH backend logs in to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str = Field(min_length=1)  # what ssh connects to: a name or an address
    user: str | None = None
    port: int = Field(default=22, ge=1, le=65535)
    identity_file: str | None = None
    # The address the controller reaches the host's own services at (metrics),
    # when it differs from ``address``.
    control: str | None = None

    def target(self) -> str:
        """``user@address`` or ``address``, as ssh takes it."""
        return f"{self.user}@{self.address}" if self.user else self.address


class Inventory(BaseModel):
    """Every layer-3 node of a topology mapped to its host, and the SSH client's settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    format: Format
    hosts: dict[str, Host]
    # The client command, before its options: ``ip netns exec CTL ssh`` reaches
    # stand-in hosts from inside a control namespace.
    ssh_command: tuple[str, ...] = ("ssh",)
    strict_host_key_checking: HostKeyPolicy = "accept-new"
    known_hosts: str | None = None
    # Names the file listed that are no node (an Emulab delay node, say).
    ignored: tuple[str, ...] = ()


def nodes_needing_hosts(topo: Topology) -> list[str]:
    """The nodes that run on a machine of their own: hosts and routers (LANs are the testbed's)."""
    return [n for n in topo.nodes if topo.kind_of(n) != "lan"]


def detect_format(path: Path, text: str) -> Format:
    """The inventory's format from its name and first words."""
    suffix = path.suffix.lower()
    stripped = text.lstrip()
    if suffix in (".xml", ".rspec") or stripped.startswith("<"):
        return "cloudlab"
    if suffix in (".yaml", ".yml"):
        return "ansible-yaml"
    lines = [ln.split() for ln in text.splitlines()
             if ln.strip() and not ln.lstrip().startswith(("#", ";"))]
    if lines and all(len(words) == 2 and "=" not in "".join(words)
                     and not words[0].startswith("[") for words in lines):
        return "emulab"
    return "ansible-ini"


# --- Ansible ---------------------------------------------------------------------------


def _ini_groups(text: str) -> tuple[dict[str, dict[str, dict[str, str]]],
                                                 dict[str, dict[str, str]],
                                                 dict[str, list[str]], list[str]]:
    """An INI inventory's groups: hosts with their inline vars, group vars, children."""
    hosts: dict[str, dict[str, dict[str, str]]] = {"ungrouped": {}}
    group_vars: dict[str, dict[str, str]] = {}
    children: dict[str, list[str]] = {}
    problems: list[str] = []
    section, kind = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                problems.append(f"line {number}: unterminated section {line!r}")
                continue
            name = line[1:-1].strip()
            section, _, kind = name.partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children"):
                problems.append(f"line {number}: unknown section kind {kind!r}")
            continue
        if kind == "vars":
            key, eq, value = line.partition("=")
            if not eq:
                problems.append(f"line {number}: expected KEY=VALUE in [{section}:vars]")
                continue
            group_vars.setdefault(section, {})[key.strip()] = _unquote(value.strip())
        elif kind == "children":
            children.setdefault(section, []).append(line.split()[0])
        else:
            try:
                words = shlex.split(line, comments=True)
            except ValueError as exc:
                problems.append(f"line {number}: {exc}")
                continue
            host_vars = {}
            for word in words[1:]:
                key, eq, value = word.partition("=")
                if not eq:
                    problems.append(f"line {number}: {word!r} is not KEY=VALUE")
                    continue
                host_vars[key] = value
            hosts.setdefault(section, {})[words[0]] = host_vars
    return hosts, group_vars, children, problems


def _unquote(value: str) -> str:
    """An INI value without its surrounding quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _yaml_groups(data: Any) -> tuple[dict[str, dict[str, dict[str, str]]],
                                     dict[str, dict[str, str]], dict[str, list[str]],
                                     list[str]]:
    """A YAML inventory's groups, in the same shape as :func:`_ini_groups` gives."""
    hosts: dict[str, dict[str, dict[str, str]]] = {}
    group_vars: dict[str, dict[str, str]] = {}
    children: dict[str, list[str]] = {}
    problems: list[str] = []
    if not isinstance(data, Mapping):
        return hosts, group_vars, children, ["the top level must be a mapping of groups"]

    def walk(name: str, body: Any) -> None:
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            problems.append(f"group {name!r} must be a mapping")
            return
        for key in body:
            if key not in ("hosts", "vars", "children"):
                problems.append(f"group {name!r}: unknown key {key!r}")
        members = body.get("hosts") or {}
        if not isinstance(members, Mapping):
            problems.append(f"group {name!r}: hosts must be a mapping")
            members = {}
        hosts[name] = {str(h): {str(k): str(v) for k, v in (hv or {}).items()}
                       for h, hv in members.items()}
        group_vars[name] = {str(k): str(v) for k, v in (body.get("vars") or {}).items()}
        kids = body.get("children") or {}
        if not isinstance(kids, Mapping):
            problems.append(f"group {name!r}: children must be a mapping")
            return
        children[name] = [str(k) for k in kids]
        for kid, kid_body in kids.items():
            walk(str(kid), kid_body)

    for name, body in data.items():
        walk(str(name), body)
    return hosts, group_vars, children, problems


def _ancestry(children: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Each group's ancestors, nearest first (``all`` is everybody's last)."""
    parents: dict[str, list[str]] = {}
    for parent, kids in children.items():
        for kid in kids:
            parents.setdefault(kid, []).append(parent)
    out: dict[str, list[str]] = {}
    for group in set(parents) | set(children):
        seen: list[str] = []
        queue = list(parents.get(group, []))
        while queue:
            g = queue.pop(0)
            if g not in seen:
                seen.append(g)
                queue += parents.get(g, [])
        out[group] = seen
    return out


def _flatten(hosts: Mapping[str, Mapping[str, Mapping[str, str]]],
             group_vars: Mapping[str, Mapping[str, str]],
             children: Mapping[str, list[str]]) -> dict[str, dict[str, str]]:
    """Each inventory host's variables: ``all``'s, then its groups' (outermost first),
    then its own."""
    ancestors = _ancestry(children)
    merged: dict[str, dict[str, str]] = {}
    for group, members in hosts.items():
        chain = [g for g in reversed(ancestors.get(group, [])) if g != "all"]
        for name, own in members.items():
            out = merged.setdefault(name, dict(group_vars.get("all", {})))
            for g in [*chain, group]:
                out.update(group_vars.get(g, {}))
            out.update(own)
    return merged


def _from_ansible(path: Path, text: str, fmt: Format, topo: Topology | None) -> Inventory:
    """An Ansible inventory (INI or YAML) as an Inventory."""
    if fmt == "ansible-yaml":
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InventoryError(path, [f"not YAML: {exc}"]) from exc
        hosts, group_vars, children, problems = _yaml_groups(data)
    else:
        hosts, group_vars, children, problems = _ini_groups(text)
    settings = dict(group_vars.get("all", {}))
    for group, variables in group_vars.items():
        for key in variables:
            if key in GLOBAL_VARS and group != "all":
                problems.append(f"{key} belongs in the vars of group 'all', not {group!r}")
            elif key not in HOST_VARS | GLOBAL_VARS | IGNORED_VARS:
                problems.append(f"group {group!r}: unknown variable {key!r}")
    machines: dict[str, Host] = {}
    for name, variables in _flatten(hosts, group_vars, children).items():
        unknown = [k for k in variables if k not in HOST_VARS | GLOBAL_VARS | IGNORED_VARS]
        problems += [f"host {name!r}: unknown variable {k!r}" for k in unknown]
        node = variables.get("mcclab_node", name)
        if node in machines:
            problems.append(f"node {node!r} is given twice (host {name!r})")
            continue
        try:
            machines[node] = Host(address=variables.get("ansible_host", name),
                                  user=variables.get("ansible_user"),
                                  port=int(variables.get("ansible_port", 22)),
                                  identity_file=variables.get("ansible_ssh_private_key_file"),
                                  control=variables.get("mcclab_control"))
        except (ValueError, ValidationError) as exc:
            problems.append(f"host {name!r}: {_first_error(exc)}")
    ssh_command = tuple(shlex.split(settings.get("mcclab_ssh_command", "ssh")))
    policy = settings.get("mcclab_strict_host_key_checking", "accept-new")
    if policy not in ("yes", "no", "accept-new"):
        problems.append(f"mcclab_strict_host_key_checking: {policy!r} is not yes, no or "
                        "accept-new")
        policy = "accept-new"
    return _finish(path, fmt, topo, machines, problems, strict_unknown=True,
                   ssh_command=ssh_command or ("ssh",), strict_host_key_checking=policy,
                   known_hosts=settings.get("mcclab_known_hosts"))


def _first_error(exc: Exception) -> str:
    """A one-line reason from a pydantic or conversion error."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
    return str(exc)


# --- CloudLab and Emulab ---------------------------------------------------------------


def _local(tag: str) -> str:
    """An element's name without its XML namespace."""
    return tag.rsplit("}", 1)[-1]


def _from_manifest(path: Path, text: str, topo: Topology | None, user: str | None
                   ) -> Inventory:
    """A CloudLab (GENI) manifest RSpec as an Inventory: logins by ``client_id``."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InventoryError(path, [f"not XML: {exc}"]) from exc
    if _local(root.tag) != "rspec" or root.get("type", "manifest") != "manifest":
        raise InventoryError(path, ["not a manifest RSpec (<rspec type=\"manifest\">)"])
    problems: list[str] = []
    machines: dict[str, Host] = {}
    for node in root:
        if _local(node.tag) != "node":
            continue
        name = node.get("client_id", "")
        logins = [e for e in node.iter() if _local(e.tag) == "login"]
        host_el = next((e for e in node if _local(e.tag) == "host"), None)
        if user is not None:
            logins = [e for e in logins if e.get("username") == user]
        if not logins:
            problems.append(f"node {name!r}: no <login>"
                            + (f" for user {user!r}" if user else ""))
            continue
        login = logins[0]
        try:
            machines[name] = Host(address=login.get("hostname", ""),
                                  user=login.get("username"),
                                  port=int(login.get("port", "22")),
                                  control=host_el.get("ipv4") if host_el is not None else None)
        except (ValueError, ValidationError) as exc:
            problems.append(f"node {name!r}: {_first_error(exc)}")
    return _finish(path, "cloudlab", topo, machines, problems, strict_unknown=False)


def _from_emulab(path: Path, text: str, topo: Topology | None, user: str | None,
                 port: int) -> Inventory:
    """An Emulab node list (``vname pnode.domain`` per line) as an Inventory."""
    problems: list[str] = []
    machines: dict[str, Host] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) != 2:
            problems.append(f"line {number}: expected 'vname pnode.domain', got {line.strip()!r}")
            continue
        if words[0] in machines:
            problems.append(f"line {number}: node {words[0]!r} is given twice")
            continue
        machines[words[0]] = Host(address=words[1], user=user, port=port)
    return _finish(path, "emulab", topo, machines, problems, strict_unknown=False)


# --- common ----------------------------------------------------------------------------


def _finish(path: Path, fmt: Format, topo: Topology | None, machines: dict[str, Host],
            problems: list[str], strict_unknown: bool, **settings: Any) -> Inventory:
    """Check the mapping against the topology and build the Inventory, or raise (without
    a topology, every machine the file lists is a node)."""
    needed = nodes_needing_hosts(topo) if topo is not None else list(machines)
    extra = sorted(set(machines) - set(needed))
    if strict_unknown and topo is not None:
        problems += [f"host {name!r} is no host or router of topology {topo.name!r}"
                     for name in extra]
    if topo is not None:
        missing = [n for n in needed if n not in machines]
        problems += [f"node {n!r} of topology {topo.name!r} has no host" for n in missing]
    seen: dict[tuple[str, int], str] = {}
    for node in needed:
        host = machines.get(node)
        if host is None:
            continue
        key = (host.address, host.port)
        if key in seen:
            problems.append(f"nodes {seen[key]!r} and {node!r} are both on "
                            f"{host.address}:{host.port} (one machine per node)")
        seen[key] = node
        if host.control is not None:
            try:
                ipaddress.ip_address(host.control)
            except ValueError:
                problems.append(f"node {node!r}: control address {host.control!r} is no "
                                "IP address")
    if problems:
        raise InventoryError(path, problems)
    return Inventory(source=str(path), format=fmt,
                     hosts={n: machines[n] for n in needed},
                     ignored=tuple(extra), **settings)


def load_inventory(path: Path, topo: Topology | None, fmt: Format | None = None,
                   user: str | None = None, port: int = 22) -> Inventory:
    """Read ``path`` and map every host and router of ``topo`` to a machine (with no
    ``topo``, take every machine the file lists, each as the node it names).

    ``fmt`` overrides the format read from the file; ``user`` chooses the login
    of a manifest (several users can log in to a CloudLab node) and is the login
    of an Emulab list, whose ``port`` it also takes. Raises InventoryError.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise InventoryError(path, [f"cannot read: {exc.strerror}"]) from exc
    fmt = fmt or detect_format(path, text)
    if fmt == "cloudlab":
        return _from_manifest(path, text, topo, user)
    if fmt == "emulab":
        return _from_emulab(path, text, topo, user, port)
    return _from_ansible(path, text, fmt, topo)


def ansible_ini(hosts: Mapping[str, Host], settings: Mapping[str, str] | None = None,
                groups: Iterable[tuple[str, list[str]]] = ()) -> str:
    """An Ansible INI inventory of ``hosts`` (node -> host), the form the loader reads:
    the ``mcclab_*`` settings under ``[all:vars]`` and one optional group per pair."""
    lines = []
    grouped = {n for _, members in groups for n in members}

    def host_line(node: str) -> str:
        host = hosts[node]
        words = [node, f"ansible_host={host.address}", f"ansible_port={host.port}"]
        if host.user:
            words.append(f"ansible_user={host.user}")
        if host.identity_file:
            words.append(f"ansible_ssh_private_key_file={host.identity_file}")
        if host.control:
            words.append(f"mcclab_control={host.control}")
        return " ".join(words)

    lines += [host_line(n) for n in hosts if n not in grouped]
    for group, members in groups:
        lines += ["", f"[{group}]", *[host_line(n) for n in members]]
    if settings:
        lines += ["", "[all:vars]", *[f"{k}={v}" for k, v in settings.items()]]
    return "\n".join(lines) + "\n"


__all__ = ["Host", "Inventory", "InventoryError", "ansible_ini", "detect_format",
           "load_inventory", "nodes_needing_hosts"]
