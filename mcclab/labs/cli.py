"""``mcclab lab ...``: the lab catalogue's commands (printing only; the work is in actions)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from mcclab.model.loader import SpecError
from mcclab.refuse import alert, refuse

lab_app = typer.Typer(
    help="Classroom labs: list, start, check, reset, handouts (docs/teaching.md).",
    no_args_is_help=True,
)
console = Console(soft_wrap=True)  # paths and tshark lines are not broken
err = Console(stderr=True, soft_wrap=True)
RESULTS_HELP = "results folder; the lab's work folder is RESULTS/labs/NN-slug"
STATUS_STYLE = {
    "pass": "green",
    "fail": "red",
    "error": "red",
    "pending": "yellow",
    "unchecked": "dim",
}


def _find(ref: str):  # noqa: ANN202
    """A lab by number or slug, or exit 2 with why not."""
    from mcclab.labs.catalogue import find

    try:
        return find(ref)
    except SpecError as exc:
        refuse(err, "invalid lab", exc, code=2)


@lab_app.command("list")
def lab_list(as_json: bool = typer.Option(False, "--json", help="machine-readable")) -> None:
    """The catalogue: number, title, level and expected time of every lab."""
    from mcclab.labs.catalogue import discover

    try:
        labs = discover()
    except SpecError as exc:
        refuse(err, "invalid lab", exc, code=2)
    rows = [
        {
            "id": lab.spec.id,
            "slug": lab.spec.slug,
            "title": lab.spec.title,
            "level": lab.spec.level,
            "minutes": lab.spec.minutes,
        }
        for lab in labs
    ]
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table("#", "lab", "level", "time", title="mcclab labs")
    for row in rows:
        table.add_row(
            f"{row['id']:02d}",
            f"{row['title']} ({row['slug']})",
            row["level"],
            f"{row['minutes']} min",
        )
    console.print(table)


@lab_app.command("start")
def lab_start(
    lab: str = typer.Argument(..., help="lab number or slug"),
    results: Path = typer.Option(Path("results"), help=RESULTS_HELP),
    timeout: float = typer.Option(90.0, help="seconds to wait for routing readiness"),
    wait: float = typer.Option(0.0, help="seconds to wait for another lab (queued in order)"),
) -> None:
    """Bring the lab's network up in the background, create answers.yaml, print step 1."""
    from mcclab.labs import actions
    from mcclab.labs.handout import render_lab
    from mcclab.labs.live import StartError

    entry = _find(lab)
    console.print(alert(f"Lab {entry.spec.id}: {entry.spec.title}",
                        f"({entry.spec.level}, about {entry.spec.minutes} min)", sep=" ",
                        style="bold"), highlight=False)
    try:
        started = actions.start(entry, results, timeout, wait)
    except StartError as exc:
        refuse(err, exc, code=1)
    if started.live is not None:
        word = "already up" if started.already else "up"
        console.print(
            f"[green]network {word}[/green]: lab {started.live.lab_id} "
            f"({entry.topology.name}); enter a node with 'mcclab shell NODE'; "
            f"stop it with 'mcclab lab reset {entry.spec.id}'",
            highlight=False,
        )
    html = render_lab(entry, entry.work_dir(results))
    console.print(f"answers: {started.answers}\nhandout: {html}", highlight=False, markup=False)
    step = actions.first_step((entry.dir / "handout.md").read_text())
    if step:
        console.print("\n[bold]Step 1[/bold]", highlight=False)
        console.print(step, highlight=False, markup=False)


@lab_app.command("check")
def lab_check(
    lab: str = typer.Argument(..., help="lab number or slug"),
    as_json: bool = typer.Option(False, "--json", help="the stable format for autograders"),
    answers: Path | None = typer.Option(
        None, help="answers file (default: the work folder's answers.yaml)"
    ),
    results: Path = typer.Option(Path("results"), help=RESULTS_HELP),
) -> None:
    """One line per question: pass, fail, pending (why it cannot be checked yet), error."""
    from mcclab.labs.actions import grade
    from mcclab.labs.grade import as_json as to_json

    entry = _find(lab)
    try:
        results_ = grade(entry, results, answers)
    except SpecError as exc:
        refuse(err, "invalid answers or checks", exc, code=2)
    doc = to_json(entry.spec, results_)
    if as_json:
        print(json.dumps(doc, indent=1))
        return
    for r in results_:
        style = STATUS_STYLE.get(r.status, "")
        detail = f"  {r.id}  {r.text}" + (f"\n{'':11} {r.message}" if r.message else "")
        console.print(alert(f"{r.status:>9}", detail, sep="", style=style), highlight=False)
    console.print(f"{doc['passed']} of {doc['total']} checked questions pass")


@lab_app.command("reset")
def lab_reset(
    lab: str = typer.Argument(..., help="lab number or slug"),
    all_: bool = typer.Option(False, "--all", help="remove answers.yaml too"),
    results: Path = typer.Option(Path("results"), help=RESULTS_HELP),
) -> None:
    """Stop this lab's network (only this lab's) and clear its work folder but the answers."""
    from mcclab.labs.actions import reset

    entry = _find(lab)
    done = reset(entry, results, everything=all_)
    console.print(
        f"stopped lab {done['stopped']}" if done["stopped"] else "network was not up",
        highlight=False,
    )
    if done["removed"]:
        console.print(
            f"removed from {entry.work_dir(results)}: {', '.join(done['removed'])}",
            highlight=False, markup=False,
        )


@lab_app.command("handout")
def lab_handout(
    lab: str = typer.Argument(..., help="lab number or slug"),
    out: Path | None = typer.Option(
        None, "-o", "--out", help="HTML file (default: the work folder's handout.html)"
    ),
    results: Path = typer.Option(Path("results"), help=RESULTS_HELP),
    open_: bool = typer.Option(False, "--open", help="open it in a browser"),
) -> None:
    """Render the handout to one HTML page with the topology drawn."""
    from mcclab.labs.handout import render_lab

    entry = _find(lab)
    path = render_lab(entry, entry.work_dir(results), out)
    console.print(f"handout: {path}", highlight=False, markup=False)
    if open_:
        import webbrowser

        webbrowser.open(path.resolve().as_uri())


@lab_app.command("run")
def lab_run(
    ctx: typer.Context,
    lab: str = typer.Argument(..., help="lab number or slug"),
    experiment: str = typer.Argument(..., help="one of the lab's experiments"),
    profile: str = typer.Option("quick", help="quick or paper"),
    set_: list[str] = typer.Option([], "--set", help="override a key, e.g. duration=20s"),
    results: Path = typer.Option(Path("results"), help=RESULTS_HELP),
    wait: float = typer.Option(0.0, help="seconds to wait for another lab (queued in order)"),
) -> None:
    """Run one of the lab's experiments into its work folder.

    The lab's live network, if up, is stopped first: a run needs the machine's lab lock.
    """
    from mcclab.labs.live import stop
    from mcclab.labs.model import experiment_key, experiment_path

    entry = _find(lab)
    keys = {experiment_key(e): e for e in entry.spec.experiments}
    name = keys.get(experiment_key(experiment))
    if name is None:
        err.print(
            f"lab {entry.spec.id} has no experiment {experiment!r}; its experiments: "
            f"{', '.join(keys) or 'none'}",
            highlight=False, markup=False,
        )
        raise typer.Exit(2)
    work = entry.work_dir(results)
    stopped = stop(work)
    if stopped:
        console.print(
            f"stopped the lab's live network ({stopped}) to run the experiment", highlight=False
        )
    # The app's own `mcclab run`, found through the command tree rather than imported:
    # mcclab.cli registers these commands, so importing it here would make a cycle.
    root = ctx.find_root()
    lookup = getattr(root.command, "get_command", None)  # a group of commands (the app)
    run = lookup(root, "run") if lookup is not None else None
    if run is None:
        raise RuntimeError("'mcclab lab run' needs the mcclab app's 'run' command")
    # Every parameter of `mcclab run` is passed: its defaults are Typer's option markers.
    ctx.invoke(run.callback, experiment=str(experiment_path(name, entry.dir, entry.repo)),
               profile=profile, set_=set_, results=work / "runs", wait=wait, fork=True)


# ---- commands on the lab that is up: shell, exec, capture, link ----

TOPOLOGY_HELP = "the lab's topology file (default: the one the running lab recorded)"


def _current(topology: Path | None):  # noqa: ANN202
    """The live lab and its topology, or exit 1 saying none is up."""
    from mcclab.labs.live import NoLiveLab, current

    try:
        return current(topology)
    except NoLiveLab as exc:
        refuse(err, exc, code=1)
    except SpecError as exc:
        refuse(err, "invalid topology", exc, code=2)


def _node(topo, node: str) -> str:  # noqa: ANN001
    """``node`` if the topology has it as a host or router, else exit 2."""
    if node not in topo.nodes or topo.kind_of(node) == "lan":
        names = ", ".join(n for n in topo.nodes if topo.kind_of(n) != "lan")
        err.print(f"{topo.name} has no node {node!r}; nodes: {names}", highlight=False,
                  markup=False)
        raise typer.Exit(2)
    return node


def node_argv(state, topo, node: str, argv: list[str]) -> list[str]:  # noqa: ANN001
    """``argv`` run inside ``node``; a bare ``vtysh`` is pointed at the router's own pimd."""
    from mcclab.labs.checks import LiveLab
    from mcclab.net.node_config import netns_name

    if argv and argv[0] == "vtysh" and topo.kind_of(node) == "router":
        live = LiveLab(state.lab_id, topo.routing.backend, state.path)
        rest = argv[1:]
        # The router's own sockets (every daemon it runs: zebra's 'show ip route' and
        # pimd's 'show ip mroute' both work), then the student's -c commands (several
        # -c in a row configure: -c 'configure terminal' -c '...').
        argv = [*live.vtysh_argv(node, "")[:3], *rest]
    return ["ip", "netns", "exec", netns_name(node), *argv]


def node_env() -> dict[str, str]:
    """The environment of a command in a node: mcclab's Python first on PATH, so
    ``python -m mcclab.probes.mcast`` works in a node as on the handouts."""
    import os
    import sys

    bindir = os.path.dirname(sys.executable)
    return {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def shell(
    node: str = typer.Argument(..., help="a host or router of the running lab"),
    topology: Path | None = typer.Option(None, help=TOPOLOGY_HELP),
) -> None:
    """Open a shell inside a node of the running lab (exit it to come back)."""
    import os

    state, topo = _current(topology)
    _node(topo, node)
    env = {**node_env(), "PS1": f"[{node}] \\w# ", "MCCLAB_NODE": node}
    argv = node_argv(state, topo, node, ["bash", "--norc", "-i"])
    console.print(
        f"shell in {node} (lab {state.lab_id}); 'exit' to leave; FRR's view: "
        "vtysh -c 'show ip mroute' via 'mcclab exec NODE -- vtysh -c ...'",
        highlight=False,
    )
    os.execvpe(argv[0], argv, env)


def exec_(
    node: str = typer.Argument(..., help="a host or router of the running lab"),
    command: list[str] = typer.Argument(..., help="the command, after --"),
    topology: Path | None = typer.Option(None, help=TOPOLOGY_HELP),
) -> None:
    """Run a command inside a node: mcclab exec r1 -- ip route.

    On a router, 'vtysh -c CMD' talks to that router's own FRR.
    """
    import subprocess

    state, topo = _current(topology)
    _node(topo, node)
    if command[:1] == ["--"]:  # click keeps the separator when interspersed args are off
        command = command[1:]
    rc = subprocess.run(
        node_argv(state, topo, node, command), env=node_env(), check=False
    ).returncode
    raise typer.Exit(rc)


def capture(
    target: str = typer.Argument(..., help="a link (r1-r2) or a node (r2) of the running lab"),
    filter_: str = typer.Option(
        "routing",
        "--filter",
        help="igmp, pim, routing (both), multicast, udp, tcp, all, or a BPF expression",
    ),
    seconds: float = typer.Option(0.0, help="stop after this long (0: at Ctrl-C)"),
    out: Path | None = typer.Option(
        None,
        "-o",
        "--out",
        help="the pcap (default: "
        "results/captures/TARGET-TIME.pcap, or the lab's work "
        "folder's captures/ when a lab was started)",
    ),
    topology: Path | None = typer.Option(None, help=TOPOLOGY_HELP),
    results: Path = typer.Option(Path("results"), help=RESULTS_HELP),
) -> None:
    """Capture packets on a link or a node into a pcap, then print tshark's decoded summary."""
    import threading
    import time as time_

    from mcclab.capture import Capture, CaptureError, bpf, parse_target, tshark_summary
    from mcclab.labs.live import capture_dir
    from mcclab.model.addressing import plan_addresses

    state, topo = _current(topology)
    try:
        where = parse_target(topo, plan_addresses(topo), target)
    except CaptureError as exc:
        refuse(err, exc, code=2)
    path = out or _fresh(capture_dir(state, results) / f"{where.label}-{time_.strftime('%H%M%S')}")
    cap = Capture(where, bpf(filter_, topo.addressing.control), path)
    try:
        cap.start()
    except CaptureError as exc:
        refuse(err, exc, code=1)
    iface = where.iface or "all interfaces"
    console.print(
        f"capturing {filter_} on {where.node} ({iface}) into {path}; "
        + (f"{seconds:g} s" if seconds else "Ctrl-C to stop"),
        highlight=False, markup=False,
    )
    try:
        threading.Event().wait(seconds or None)
    except KeyboardInterrupt:
        pass
    finally:
        cap.stop()
    print(tshark_summary(path), flush=True)
    console.print(f"pcap: {path}", highlight=False, markup=False)


def _fresh(stem: Path) -> Path:
    """``stem.pcap``, or ``stem-2.pcap`` ... when taken (two captures in one second)."""
    path, n = stem.with_suffix(".pcap"), 1
    while path.exists():
        n += 1
        path = stem.with_name(f"{stem.name}-{n}.pcap")
    return path


def link(
    node1: str = typer.Argument(..., help="one end of the link"),
    node2: str = typer.Argument(..., help="the other end"),
    state_: str = typer.Argument(..., metavar="down|up", help="take the link down or up"),
    topology: Path | None = typer.Option(None, help=TOPOLOGY_HELP),
) -> None:
    """Take a link of the running lab down or up (routes and PIM follow).

    Unicast routes move to the shortest path left; PIM follows them through its RPF check.
    """
    from mcclab.execute import CommandError, Runner
    from mcclab.labs.linkstate import link_cmds, read_down, write_down
    from mcclab.model.addressing import plan_addresses

    if state_ not in ("down", "up"):
        err.print(f"say 'down' or 'up', not {state_!r}", highlight=False, markup=False)
        raise typer.Exit(2)
    state, topo = _current(topology)
    try:
        cmds, down = link_cmds(
            topo, plan_addresses(topo), node1, node2, state_ == "up", read_down(state.path)
        )
        Runner(transcript=state.path / "commands.log").run_all(cmds)
    except ValueError as exc:
        refuse(err, exc, code=2)
    except CommandError as exc:
        refuse(err, exc, code=1)
    write_down(state.path, down)
    console.print(
        f"link {node1}-{node2} {state_}; links down now: {', '.join(sorted(down)) or 'none'}",
        highlight=False, markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add the lab commands to the main ``mcclab`` app."""
    app.add_typer(lab_app, name="lab")
    app.command("shell")(shell)
    app.command("exec", context_settings={"allow_interspersed_args": False})(exec_)
    app.command("capture")(capture)
    app.command("link")(link)
