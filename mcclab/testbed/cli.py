"""``mcclab testbed check``: an inventory against an experiment, and the hosts behind it.

Read-only: it maps the experiment's nodes to the inventory's hosts (refusing
what does not map), logs in to every host over SSH, checks that each carries
its planned addresses on the planned interfaces, and measures its clock
offsets. Nothing on the hosts is changed.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

testbed_app = typer.Typer(help="Allocated hosts: check an inventory against an experiment "
                          "(docs/testbeds.md).", no_args_is_help=True)
console = Console()
err = Console(stderr=True, soft_wrap=True)


@testbed_app.command("check")
def check(
    experiment: str = typer.Argument(..., help="experiment name (experiments/NAME.yaml) or file"),
    inventory: Path = typer.Option(..., "--inventory", "-i",
                                   help="Ansible inventory (INI or YAML), CloudLab manifest "
                                   "RSpec or Emulab node list"),
    profile: str = typer.Option("quick", help="quick or paper"),
    user: str | None = typer.Option(None, help="login of a manifest or node list"),
    port: int = typer.Option(22, help="SSH port of a node list's hosts"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
) -> None:
    """Check that the inventory's hosts can run EXPERIMENT: mapping, logins, addresses, clocks.

    Exits 2 when the inventory does not map the topology, 1 when a host cannot be
    reached or does not carry its addresses.
    """
    from mcclab.experiment.loader import resolve
    from mcclab.model.addressing import plan_addresses
    from mcclab.model.loader import SpecError
    from mcclab.testbed.clocks import measure
    from mcclab.testbed.hosts import interface_problems, parse_addresses
    from mcclab.testbed.inventory import InventoryError, load_inventory
    from mcclab.testbed.ssh import Ssh, SshError

    try:
        topo = resolve(experiment, profile).topology
        inv = load_inventory(inventory, topo, user=user, port=port)
    except (SpecError, InventoryError) as exc:
        err.print(f"[red]refused[/red]\n{exc}", highlight=False)
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
    bad = any(row["problems"] for row in rows.values())
    if as_json:
        console.print_json(json.dumps({"inventory": str(inventory), "format": inv.format,
                                       "ignored": list(inv.ignored), "hosts": rows,
                                       "ok": not bad}))
    else:
        table = Table("node", "host", "clock offset", "±", "problems")
        for node, row in rows.items():
            clock = row.get("clock")
            table.add_row(node, f"{row['host']}:{row['port']}",
                          f"{clock['realtime_offset_s'] * 1e3:+.2f} ms" if clock else "-",
                          f"{clock['uncertainty_s'] * 1e3:.2f} ms" if clock else "-",
                          "; ".join(row["problems"]) or "ok")
        console.print(table)
    if bad:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``mcclab testbed ...`` to the main command line."""
    app.add_typer(testbed_app, name="testbed")
