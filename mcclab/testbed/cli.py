"""``mcclab testbed check`` and ``provision``: an inventory against an experiment, the hosts
behind it, and provisioning them with the project's playbook (``mcclab.testbed.provision``).

``check`` is read-only: it maps the experiment's nodes to the inventory's hosts (refusing
what does not map), lists what of the experiment a run on hosts cannot do yet
(``mcclab.testbed.support``), logs in to every host over SSH, checks that each
carries its planned addresses on the planned interfaces, and measures its clock
offsets. Nothing on the hosts is changed.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from mcclab.refuse import alert, refuse

if TYPE_CHECKING:  # the module loads the spec models: only when a command runs
    from mcclab.testbed.support import Unsupported

testbed_app = typer.Typer(help="Allocated hosts: check an inventory against an experiment, "
                          "provision its hosts (docs/testbeds.md).", no_args_is_help=True)
console = Console()
err = Console(stderr=True, soft_wrap=True)


@testbed_app.command("check")
def check(
    experiment: str = typer.Argument(..., help="experiment name (experiments/NAME.yaml) or file"),
    inventory: Path = typer.Option(..., "--inventory", "-i",
                                   help="Ansible inventory (INI or YAML), CloudLab manifest "
                                   "RSpec or Emulab node list"),
    profile: str = typer.Option("quick", help="quick or paper"),
    set_: list[str] = typer.Option([], "--set", help="override a key, as for 'mcclab run'"),
    user: str | None = typer.Option(None, help="login of a manifest or node list"),
    port: int = typer.Option(22, help="SSH port of a node list's hosts"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Check that the inventory's hosts can run EXPERIMENT: mapping, what the experiment
    asks that hosts cannot do yet, logins, addresses, clocks.

    Exits 2 when the inventory does not map the topology, 1 when the experiment asks
    for something a run on hosts refuses, or a host cannot be reached or does not
    carry its addresses.
    """
    from mcclab.experiment.loader import resolve
    from mcclab.model.addressing import plan_addresses
    from mcclab.model.loader import SpecError
    from mcclab.testbed.clocks import measure
    from mcclab.testbed.hosts import interface_problems, parse_addresses
    from mcclab.testbed.inventory import InventoryError, load_inventory
    from mcclab.testbed.ssh import Ssh, SshError
    from mcclab.testbed.support import unsupported

    try:
        resolved = resolve(experiment, profile, set_)
    except SpecError as exc:
        refuse(err, "refused", exc, code=2)
    topo = resolved.topology
    refusals = unsupported(resolved.experiment, topo)
    try:
        inv = load_inventory(inventory, topo, user=user, port=port)
    except InventoryError as exc:
        err.print(alert("refused", exc), highlight=False)
        _print_unsupported(refusals)
        raise typer.Exit(2) from None
    plan = plan_addresses(topo)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="mcs-", dir="/tmp") as sockets:
        ssh = Ssh(inv, Path(sockets))
        try:
            for node, host in inv.hosts.items():
                row: dict = {"host": host.target(), "port": host.port, "problems": []}
                try:
                    found = parse_addresses(ssh.run(node, ["ip", "-j", "-4", "addr", "show"]))
                    row["problems"] = interface_problems(plan, node, found)
                    row["clock"] = asdict(measure(ssh, node))
                except (SshError, ValueError) as exc:
                    row["problems"].append(str(exc).splitlines()[0])
                rows[node] = row
        finally:
            ssh.close()
    bad = bool(refusals) or any(row["problems"] for row in rows.values())
    if as_json:
        console.print_json(json.dumps({"inventory": str(inventory), "format": inv.format,
                                       "ignored": list(inv.ignored),
                                       "unsupported": [u.record() for u in refusals],
                                       "hosts": rows, "ok": not bad}))
    else:
        table = Table("node", "host", "clock offset", "±", "problems")
        for node, row in rows.items():
            clock = row.get("clock")
            table.add_row(node, f"{row['host']}:{row['port']}",
                          f"{clock['realtime_offset_s'] * 1e3:+.2f} ms" if clock else "-",
                          f"{clock['uncertainty_s'] * 1e3:.2f} ms" if clock else "-",
                          "; ".join(row["problems"]) or "ok")
        console.print(table)
        _print_unsupported(refusals)
    if bad:
        raise typer.Exit(1)


def _print_unsupported(refusals: list[Unsupported]) -> None:
    """What ``mcclab run --inventory`` would refuse, one line each, on stderr."""
    for problem in refusals:
        err.print(alert("refused on hosts:", problem.message(), sep=" "), highlight=False)


@testbed_app.command("provision")
def provision(
    experiment: str | None = typer.Argument(
        None, help="experiment whose nodes to provision (default: every host of the file)"),
    inventory: Path = typer.Option(..., "--inventory", "-i",
                                   help="Ansible inventory (INI or YAML), CloudLab manifest "
                                   "RSpec or Emulab node list"),
    check: bool = typer.Option(False, "--check",
                               help="Ansible's check mode: report what would change, change "
                               "nothing"),
    profile: str = typer.Option("quick", help="quick or paper"),
    user: str | None = typer.Option(None, help="login of a manifest or node list"),
    port: int = typer.Option(22, help="SSH port of a node list's hosts"),
    tags: str = typer.Option("", help="only the playbook's tasks with these tags "
                             "(comma-separated)"),
    repo: str | None = typer.Option(None, help="the mcclab checkout's path on the hosts "
                                    "(default: this checkout's path)"),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="print the Ansible inventory and the command only"),
) -> None:
    """Provision the inventory's hosts with the project's playbook (ansible/site.yml) over SSH.

    The hosts get the logins, keys, ports and host-key policy of the inventory.
    Ansible's output streams as it runs; a failure ends with one line naming the
    host. Exits 2 when the inventory is refused, 1 when a host fails.
    """
    import shlex

    from mcclab.experiment.loader import resolve
    from mcclab.model.loader import SpecError
    from mcclab.testbed.inventory import InventoryError, load_inventory
    from mcclab.testbed.provision import INVENTORY_FILE, ProvisionError, plan_provision, run_plan

    try:
        topo = resolve(experiment, profile).topology if experiment else None
        inv = load_inventory(inventory, topo, user=user, port=port)
    except (SpecError, InventoryError) as exc:
        refuse(err, "refused", exc, code=2)
    with tempfile.TemporaryDirectory(prefix="mcclab-provision-") as work:
        plan = plan_provision(inv, Path(work), check=check, tags=tags.split(","),
                              hosts_repo=repo)
        if dry_run:
            console.print(plan.files[INVENTORY_FILE][0], highlight=False, markup=False,
                          soft_wrap=True, end="")
            console.print(shlex.join(plan.command.argv), highlight=False, markup=False,
                          soft_wrap=True)
            return
        mode = " (check mode: nothing is changed)" if check else ""
        hosts = f"{len(inv.hosts)} host" + ("s" if len(inv.hosts) != 1 else "")
        console.print(f"provisioning {hosts}{mode}: "
                      + ", ".join(f"{n} ({t})" for n, t in plan.targets.items()),
                      highlight=False, markup=False, soft_wrap=True)
        try:
            result = run_plan(plan, Path(work),
                              lambda line: console.print(line, highlight=False, markup=False,
                                                         soft_wrap=True))
        except ProvisionError as exc:
            refuse(err, "error:", exc, code=1, sep=" ")
    verb = "would change" if check else "changed"
    for node, counts in result.recap.items():
        console.print(f"{node}: ok, {verb} {counts.get('changed', 0)} tasks",
                      highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add ``mcclab testbed ...`` to the main command line."""
    app.add_typer(testbed_app, name="testbed")
