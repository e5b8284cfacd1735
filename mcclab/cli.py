"""The `mcclab` command line (Typer + Rich)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from mcclab.audit import register as register_audit_commands
from mcclab.labs.cli import register as register_lab_commands
from mcclab.model.loader import SpecError, load_topology
from mcclab.refuse import alert, refuse
from mcclab.testbed.cli import register as register_testbed_commands

if TYPE_CHECKING:  # imported where used: the CLI starts without the sweep module
    from mcclab.experiment.sweep import PlannedPoint

app = typer.Typer(help="Multicast congestion-control lab.", no_args_is_help=True)
topo_app = typer.Typer(help="Inspect and validate topology files.", no_args_is_help=True)
app.add_typer(topo_app, name="topo")
export_app = typer.Typer(help="Export an experiment to a testbed: Emulab NS file, CloudLab "
                         "profile (docs/testbeds.md).", no_args_is_help=True)
app.add_typer(export_app, name="export")
experiment_app = typer.Typer(help="Experiment specs: their JSON Schema.", no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")
console = Console()
err = Console(stderr=True, soft_wrap=True)  # never break a file:field message


def _print_version(value: bool) -> None:
    """``--version``: print the installed version and stop before any command runs."""
    if value:
        from mcclab.version import version

        console.print(f"mcclab {version()}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print mcclab's version and exit"),
) -> None:
    """Multicast congestion-control lab."""


def _load(path: Path):  # noqa: ANN202
    """Load a topology or exit with the validation messages."""
    try:
        return load_topology(path)
    except SpecError as exc:
        refuse(err, "invalid topology", exc, code=2)


@topo_app.command("validate")
def topo_validate(
    files: list[Path] = typer.Argument(..., help="topology files (YAML) to validate"),
) -> None:
    """Validate topology files; exit 2 if any is invalid."""
    bad = 0
    for path in files:
        try:
            topo = load_topology(path)
            console.print(alert("ok", f"{path}: {len(topo.nodes)} nodes, {len(topo.links)} links",
                                sep=" ", style="green"))
        except SpecError as exc:
            bad += 1
            err.print(str(exc), highlight=False, markup=False)
    if bad:
        raise typer.Exit(2)


@topo_app.command("show")
def topo_show(
    file: Path = typer.Argument(..., help="topology file (YAML, e.g. topologies/dumbbell.yaml)"),
    dot: bool = typer.Option(False, help="print a Graphviz graph"),
) -> None:
    """Summarise a topology: nodes, links with per-direction parameters, addresses."""
    from mcclab.model.addressing import plan_addresses
    from mcclab.topo_view import dot_graph, link_rows

    topo = _load(file)
    if dot:
        console.print(dot_graph(topo), highlight=False, markup=False)
        return
    plan = plan_addresses(topo)
    console.print(alert(topo.name, f"{topo.reference}\n{topo.description}".rstrip(), sep=" ",
                        style="bold"))
    nodes = Table("node", "kind", "addresses", "control", title="Nodes")
    for name, node in topo.nodes.items():
        addrs = ", ".join(str(i.address) for i in plan.interfaces.get(name, []))
        nodes.add_row(name, node.kind, addrs, str(plan.control.get(name, "")))
    console.print(nodes)
    links = Table("#", "link", "direction", "rate", "delay", "loss", "queue", title="Links")
    for row in link_rows(topo):
        links.add_row(*row)
    console.print(links)
    r = topo.routing
    console.print(f"routing: {r.backend}, RP {topo.rp}, SSM {r.ssm_range}, IGMPv{r.igmp.version}; "
                  f"link backend: {topo.link_backend}")


@topo_app.command("schema")
def topo_schema(
    write: Path | None = typer.Option(None, help="write the schema to this file"),
    check: Path | None = typer.Option(None, help="fail if this file differs from the models"),
) -> None:
    """Print, write or check the JSON Schema of topology files (generated from the models)."""
    from mcclab.model.schema import topology_schema

    _schema_command(topology_schema(), write, check)


@experiment_app.command("schema")
def experiment_schema(
    write: Path | None = typer.Option(None, help="write the schema to this file"),
    check: Path | None = typer.Option(None, help="fail if this file differs from the models"),
) -> None:
    """Print, write or check the JSON Schema of experiment files (generated from the models).

    It describes a spec as written: templated flows (count, {i}) and units as text.
    """
    from mcclab.experiment.schema import experiment_schema as generate

    _schema_command(generate(), write, check)


def _schema_command(schema: dict, write: Path | None, check: Path | None) -> None:
    """Write, check against a file, or print a generated schema (sorted, stable JSON)."""
    text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    if write is not None:
        write.parent.mkdir(parents=True, exist_ok=True)
        write.write_text(text)
    elif check is not None:
        if not check.is_file() or check.read_text() != text:
            err.print(f"{check} is out of date: run 'make schema'")
            raise typer.Exit(1)
    else:
        console.print(text, highlight=False, markup=False, end="")


_START_HELP = ("boot command of every node, run as SCRIPT KIND NODE EXPERIMENT PROFILE; a "
               "placeholder mcclab does not ship (docs/testbeds.md); --no-start leaves it out")


def _export(write) -> None:  # noqa: ANN001
    """Run an export writer; a refusal or a bad option exits 2 with nothing written."""
    try:
        paths = write()
    except SpecError as exc:
        refuse(err, "not exported", exc, code=2)
    except ValueError as exc:
        refuse(err, "not exported", exc, code=2, sep=": ")
    for path in paths if isinstance(paths, list) else [paths]:
        console.print(f"wrote {path}", highlight=False, markup=False)


@export_app.command("emulab")
def export_emulab(
    experiment: str = typer.Argument(..., help="experiment name (experiments/NAME.yaml) or file"),
    profile: str = typer.Option("paper", help="quick or paper"),
    out: Path | None = typer.Option(None, help="the NS file (default: EXPERIMENT.ns)"),
    os_image: str = typer.Option("UBUNTU22-64-STD", "--os", help="Emulab OS image of every node"),
    start: str = typer.Option("/usr/local/bin/mcclab-node-start", help=_START_HELP),
    no_start: bool = typer.Option(False, "--no-start", help="no start commands"),
) -> None:
    """Write an Emulab NS file of the experiment's resolved topology."""
    from mcclab.export.files import check_option, write_emulab

    def write() -> Path:
        script = None if no_start else check_option(start, "--start", path=True)
        return write_emulab(experiment, profile, out, check_option(os_image, "--os"), script)

    _export(write)


@export_app.command("cloudlab")
def export_cloudlab(
    experiment: str = typer.Argument(..., help="experiment name (experiments/NAME.yaml) or file"),
    profile: str = typer.Option("paper", help="quick or paper"),
    out: Path | None = typer.Option(None, help="folder for profile.py and request.xml "
                                    "(default: EXPERIMENT-cloudlab)"),
    image: str = typer.Option("urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD",
                              help="disk image URN of every node"),
    node_type: str = typer.Option("rawpc", help="rawpc (bare metal) or xenvm"),
    start: str = typer.Option("/usr/local/bin/mcclab-node-start", help=_START_HELP),
    no_start: bool = typer.Option(False, "--no-start", help="no start commands"),
) -> None:
    """Write a CloudLab geni-lib profile and its request RSpec for the experiment."""
    from mcclab.export.cloudlab import NODE_TYPES
    from mcclab.export.files import check_option, write_cloudlab

    def write() -> list[Path]:
        if node_type not in NODE_TYPES:
            raise ValueError(f"--node-type {node_type!r}: use one of {', '.join(NODE_TYPES)}")
        script = None if no_start else check_option(start, "--start", path=True)
        return write_cloudlab(experiment, profile, out, check_option(image, "--image"),
                              node_type, script)

    _export(write)


@app.command()
def features() -> None:
    """Probe the kernel's network features (needs root)."""
    from mcclab.features import probe

    found = probe()
    table = Table("feature", "present")
    for key, value in found.as_dict().items():
        table.add_row(key, "[green]yes[/green]" if value else "[red]no[/red]")
    console.print(table)
    console.print(f"link backend 'auto' resolves to: [bold]{found.link_backend()}[/bold]")


def _progress_bar() -> Progress:
    """A Rich progress bar for slow steps."""
    return Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err, transient=False)


class _StepProgress:
    """A progress callback that gives each named step its own bar."""

    def __init__(self, bar: Progress):
        self.bar = bar
        self.tasks: dict[str, int] = {}

    def __call__(self, step: str, done: int, total: int) -> None:
        if step not in self.tasks:
            self.tasks[step] = self.bar.add_task(step, total=total)
        self.bar.update(self.tasks[step], completed=done, total=total)


@app.command()
def up(
    file: Path = typer.Argument(..., help="topology file (YAML, e.g. topologies/dumbbell.yaml)"),
    cli: bool = typer.Option(False, "--cli", help="open Mininet's CLI once the lab is ready"),
    hold: bool = typer.Option(True, help="keep the lab up until Ctrl-C (--no-hold: tear down)"),
    timeout: float = typer.Option(60.0, help="seconds to wait for routing readiness"),
    wait: float = typer.Option(0.0, help="seconds to wait for another lab (queued in order)"),
) -> None:
    """Bring a topology up with real multicast routers and report readiness."""
    topo = _load(file)
    with _sigterm_interrupts():
        lab = _bring_up(topo, timeout, wait)
        try:
            from mcclab.labs.live import record_topology

            record_topology(lab.run_dir, topo)  # for mcclab shell/exec/capture/link
            # Ctrl-C or SIGTERM is how a held lab normally ends, whenever it comes.
            with contextlib.suppress(KeyboardInterrupt):
                assert lab.routers is not None
                console.print(f"[green]ready[/green] lab {lab.state.lab_id}: "
                              f"{len(topo.nodes)} nodes, routing {topo.routing.backend} "
                              f"({lab.routers.ready_summary()}), link backend "
                              f"{lab.link_backend}; state in {lab.run_dir}")
                console.print("enter a node with: ip netns exec mcl-<node> bash",
                              highlight=False)
                sys.stdout.flush()
                if cli:
                    from mininet.cli import CLI

                    CLI(lab.mininet)
                elif hold:
                    console.print("lab is up; press Ctrl-C to tear it down")
                    threading.Event().wait()
        finally:
            lab.down()
            console.print("lab torn down")


@contextlib.contextmanager
def _sigterm_interrupts():  # noqa: ANN202
    """Treat SIGTERM like Ctrl-C from the very start, so teardown always runs."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _bring_up(topo, timeout: float, wait: float):  # noqa: ANN001, ANN202
    """Bring a lab up with progress bars; exit 1 with the reasons if preflight refuses."""
    from mcclab.lab import Lab, LabOptions, PreflightError

    with _progress_bar() as bar:
        lab = Lab(topo, LabOptions(readiness_timeout=timeout, progress=_StepProgress(bar),
                                   lock_timeout=wait))
        try:
            lab.up()
        except PreflightError as exc:
            refuse(err, exc, code=1)
    return lab


_PROFILE_HELP = ("quick or paper; default: quick where the spec defines it (as 'make "
                 "experiment'), else paper (the spec as written)")


def _mark_killed(results: Path) -> None:
    """Mark runs whose runner died without a word (SIGKILL) as killed, one line each."""
    from mcclab.experiment.record import mark_killed_runs

    for folder in mark_killed_runs(results.resolve()):
        err.print(f"marked killed (its runner is gone): {folder}", highlight=False, markup=False)


@app.command()
def run(
    experiment: str = typer.Argument(..., help="experiment name (experiments/NAME.yaml) or file"),
    profile: str | None = typer.Option(None, help=_PROFILE_HELP),
    set_: list[str] = typer.Option([], "--set", help="override a key, e.g. duration=20s"),
    results: Path = typer.Option(Path("results"), help="where run folders go"),
    wait: float = typer.Option(0.0, help="seconds to wait for another lab (queued in order)"),
    fork: bool = typer.Option(True, help="start agents by forking one preloaded interpreter "
                              "(--no-fork: exec a fresh interpreter for each agent)"),
    inventory: Path | None = typer.Option(None, help="run on allocated hosts over SSH: an "
                                          "Ansible inventory, CloudLab manifest or Emulab node "
                                          "list (docs/testbeds.md)"),
    user: str | None = typer.Option(None, help="with --inventory: the login of a manifest or "
                                    "node list"),
) -> None:
    """Run an experiment and write results/<experiment>/<run-id>/ with data, figures, report.

    Without --profile the quick profile runs where the spec has one, as with 'make
    experiment'; '--profile paper' runs the paper's length ('mcclab list' shows both).
    """
    from mcclab.analysis.report import build_report
    from mcclab.analysis.stalls import warning_in
    from mcclab.catalog import default_profile
    from mcclab.experiment.loader import resolve
    from mcclab.experiment.runner import RunOptions, execute
    from mcclab.lab import PreflightError
    from mcclab.model.units import show_duration

    _mark_killed(results)
    try:
        profile = profile or default_profile(experiment)
        resolved = resolve(experiment, profile, set_)
    except SpecError as exc:
        refuse(err, "invalid experiment", exc, code=2)
    exp = resolved.experiment
    hosts = _testbed_labs(inventory, resolved, user) if inventory else None
    console.print(alert(exp.name, f"({profile} profile, {show_duration(exp.duration)}): "
                        f"{exp.description}", sep=" ", style="bold"), highlight=False)
    with _progress_bar() as bar:
        progress = _StepProgress(bar)

        def live(now: float, duration: float, rates: dict[str, float]) -> None:
            text = "  ".join(f"{flow} {rate / 1e6:.2f}M" for flow, rate in sorted(rates.items()))
            if "running" in progress.tasks:
                bar.update(progress.tasks["running"], description=f"running {text}"[:60])

        def announce(text: str) -> None:
            # Never folded: the link must survive a narrow or non-terminal output
            # (e.g. `vagrant ssh -c`, 80 columns) to be opened as printed.
            console.print(text, soft_wrap=True)

        try:
            options = RunOptions(results=results.resolve(), progress=progress, live=live,
                                 announce=announce, lock_timeout=wait, fork=fork,
                                 analyse=build_report)
            if hosts is not None:
                # On allocated hosts: every process is exec'd over SSH (no fork server).
                options.lab, options.started, options.fork = hosts, hosts.started, False
            run_dir = execute(resolved, options)
        except PreflightError as exc:
            # Refused before anything was created: no results folder was left.
            refuse(err, exc, "no run was started", code=1)
    record = json.loads((run_dir / "run.json").read_text())
    colour = {"complete": "green", "interrupted": "yellow"}.get(record["status"], "red")
    where = f" (in {record['interrupted_phase']})" if record.get("interrupted_phase") else ""
    console.print(alert(record["status"], f"{where}: {run_dir}", sep="", style=colour))
    report = run_dir / "report.html"
    if report.exists():
        console.print(f"report: {report}", markup=False)
    else:
        console.print(f"no report yet: build it with 'mcclab report {run_dir}'", markup=False)
    overloaded = warning_in(run_dir / "summary.json")
    if overloaded:
        err.print(alert("warning:", overloaded, sep=" "), highlight=False)
    if record["status"] != "complete":
        raise typer.Exit(1)


def _testbed_labs(inventory: Path, resolved, user: str | None):  # noqa: ANN001, ANN202
    """The lab factory of a run on the inventory's hosts; exits 2, before any host is
    contacted, if the inventory does not map or the experiment asks for what a run on
    hosts cannot do (mcclab.testbed.support)."""
    from mcclab.testbed.inventory import InventoryError, load_inventory
    from mcclab.testbed.lab import TestbedLabs
    from mcclab.testbed.support import unsupported

    refusals = unsupported(resolved.experiment, resolved.topology)
    try:
        labs = TestbedLabs(load_inventory(inventory, resolved.topology, user=user))
    except InventoryError as exc:
        err.print(alert("invalid inventory", exc), highlight=False)
        labs = None
    for problem in refusals:
        err.print(alert("refused on hosts:", problem.message(), sep=" "), highlight=False)
    if labs is None or refusals:
        err.print("no run was started", highlight=False)
        raise typer.Exit(2)
    return labs


@app.command("list")
def list_experiments(
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    experiments: Path | None = typer.Option(None, help="folder of specs (default: the "
                                            "repository's experiments/)"),
) -> None:
    """List the experiments: paper, figure, and run length in the quick and paper profiles.

    Each spec is resolved as 'mcclab run' would; exit 2 if any is invalid (the others
    are still listed).
    """
    from mcclab.catalog import catalogue
    from mcclab.model.units import show_duration

    if experiments is not None and not experiments.is_dir():
        refuse(err, "no such folder", experiments, code=2, sep=" ")
    entries, errors = catalogue(experiments) if experiments else catalogue()
    for exc in errors:
        err.print(alert("invalid experiment", exc), highlight=False)
    if as_json:
        print(json.dumps([e.as_dict() for e in entries], indent=2))
    else:
        table = Table("experiment", "paper", "figure", "quick run", "paper run",
                      title=f"{len(entries)} experiments (mcclab run NAME --profile quick|paper)")
        for e in entries:
            shown = [show_duration(d) if d is not None else "-"
                     for d in (e.durations_s["quick"], e.durations_s["paper"])]
            # Text: a reference is free text, and "[...]" in it is not Rich markup
            table.add_row(e.name, Text(e.paper), Text(e.figure or "-"), *shown)
        console.print(table)
    if errors:
        raise typer.Exit(2)


@app.command()
def sweep(
    experiment: str | None = typer.Argument(
        None, help="experiment name (experiments/NAME.yaml) or file; not with --resume"),
    sweep_name: str | None = typer.Option(None, "--sweep",
                                          help="the sweep: a key of the spec's sweeps"),
    profile: str | None = typer.Option(None, help=_PROFILE_HELP),
    set_: list[str] = typer.Option([], "--set", help="override a key for every run"),
    results: Path | None = typer.Option(
        None, help="where run and sweep folders go [default: results]; not with --resume"),
    wait: float = typer.Option(0.0, help="seconds each run waits for another lab to finish"),
    limit: int | None = typer.Option(None, min=1, help="run at most this many points now; "
                                     "the sweep is then partial, and --resume goes on"),
    resume: Path | None = typer.Option(None, help="go on with this sweep folder "
                                       "(results/EXP/sweep-ID): run each point without a "
                                       "complete run, under the spec, profile and --set it "
                                       "started with"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the points, which are "
                                 "complete, and the time estimate; run nothing"),
) -> None:
    """Run every point of a sweep as an ordinary run; write results/<exp>/sweep-<id>/."""
    from mcclab.analysis.report import build_report
    from mcclab.analysis.sweep_report import build_sweep_report
    from mcclab.catalog import default_profile
    from mcclab.experiment.runner import RunOptions
    from mcclab.experiment.sweep import (
        SweepOptions,
        preview,
        preview_resume,
        resume_sweep,
        run_sweep,
        running_elsewhere,
    )

    if resume is not None:
        given = (experiment, sweep_name, profile, results)
        if any(v is not None for v in given) or set_:
            err.print("[red]--resume takes the experiment, sweep, profile, --set and results "
                      "folder from the sweep folder[/red]: give none of them with it",
                      highlight=False)
            raise typer.Exit(2)
        resume = resume.resolve()
        # The runs go next to the sweep folder: results/<exp>/sweep-<id>.
        results = resume.parent.parent
    else:
        if experiment is None or sweep_name is None:
            err.print("[red]give an experiment and --sweep[/red], or --resume with a sweep "
                      "folder", highlight=False)
            raise typer.Exit(2)
        results = results if results is not None else Path("results")
        try:
            profile = profile or default_profile(experiment)
        except SpecError as exc:
            refuse(err, "invalid sweep", exc, code=2)
    if dry_run:
        with _sweep_refusals():
            if resume is not None:
                planned = preview_resume(resume)
            else:
                assert experiment is not None and sweep_name is not None and profile is not None
                planned = preview(experiment, sweep_name, profile, set_)
        header, now = _sweep_plan(planned, limit)
        console.print(header, highlight=False)
        for p in planned:
            what = "complete" if p.complete else f"~{p.estimate_s / 60:.1f} min" + (
                "" if p in now else " (beyond --limit)")
            console.print(f"  run {p.k} of {p.n}: {_point_text(p.point)}  {what}",
                          highlight=False, markup=False)
        if resume is not None and running_elsewhere(resume):
            console.print("another process is running this sweep now: its current point "
                          "is not complete yet", highlight=False)
        return
    left: dict[int, float] = {}  # run k -> seconds left from its start, this sitting
    _mark_killed(results)
    with _progress_bar() as bar:
        steps = _StepProgress(bar)
        overall = bar.add_task("sweep", total=None)

        def on_plan(planned: list[PlannedPoint]) -> None:
            header, now = _sweep_plan(planned, limit)
            bar.console.print(header, highlight=False)
            left.update({p.k: sum(q.estimate_s for q in now if q.k >= p.k) for p in now})

        def on_point(k: int, n: int, point: dict) -> None:
            bar.update(overall, completed=k - 1, total=n, description=f"run {k} of {n}")
            eta = f" (about {left[k] / 60:.0f} min left)" if k in left else ""
            bar.console.print(alert(f"run {k} of {n}", f"{_point_text(point)}{eta}", sep=": ",
                                    style="bold"), highlight=False)

        options = SweepOptions(
            run=RunOptions(results=results.resolve(), progress=steps,
                           announce=bar.console.print, lock_timeout=wait,
                           analyse=build_report),
            progress=on_point, sets=set_, report=build_sweep_report, limit=limit,
            planned=on_plan)
        with _sweep_refusals():
            if resume is not None:
                folder = resume_sweep(resume, options)
            else:
                assert experiment is not None and sweep_name is not None and profile is not None
                folder = run_sweep(experiment, sweep_name, profile, options)
        record = json.loads((folder / "sweep.json").read_text())
        bar.update(overall, completed=len(record["runs"]))
    statuses = [r["status"] for r in record["runs"]]
    colour = {"complete": "green", "partial": "green", "interrupted": "yellow"}.get(
        record["status"], "red")
    # soft_wrap: a path broken over two lines cannot be pasted back
    console.print(alert(f"sweep {record['status']}", f"{len(statuses)} of {record['planned']} "
                        f"runs ({statuses.count('complete')} complete): {folder}", sep=": ",
                        style=colour), soft_wrap=True)
    _print_trials(folder)
    if (folder / "report.html").exists():
        console.print(f"report: {folder / 'report.html'}", markup=False)
    if record["status"] != "complete" or any(s != "complete" for s in statuses):
        console.print(f"go on with: mcclab sweep --resume {folder}", highlight=False,
                      markup=False, soft_wrap=True)
    if record["status"] not in ("complete", "partial") or any(s != "complete" for s in statuses):
        raise typer.Exit(1)


@contextlib.contextmanager
def _sweep_refusals() -> Iterator[None]:
    """Exit 2, saying why, when a sweep's spec is invalid or its folder cannot resume."""
    from mcclab.experiment.sweep import ResumeError

    try:
        yield
    except SpecError as exc:
        refuse(err, "invalid sweep", exc, code=2)
    except ResumeError as exc:
        refuse(err, "cannot resume", exc, code=2, sep=": ")


def _point_text(point: dict) -> str:
    """A sweep point as the CLI shows it: ``key=value, ...``."""
    return ", ".join(f"{key}={value}" for key, value in point.items())


def _sweep_plan(planned: list[PlannedPoint], limit: int | None
                ) -> tuple[str, list[PlannedPoint]]:
    """The line a sweep prints before its first run (points, complete, to run now and
    the estimate) and the points of ``planned`` it runs now."""
    todo = [p for p in planned if not p.complete]
    now = todo[:limit] if limit is not None else todo
    header = (f"{len(planned)} points, {len(planned) - len(todo)} complete; {len(now)} to run "
              f"now, about {sum(p.estimate_s for p in now) / 60:.0f} min"
              + (f" ({len(todo) - len(now)} left for a resume)" if len(now) < len(todo)
                 else ""))
    return header, now


def _print_trials(folder: Path) -> None:
    """The mean over the seeds of each quantity, when the sweep was one of trials."""
    from mcclab.analysis.summary import format_value
    from mcclab.analysis.trials import STAT_COLUMNS, read_trials

    table = read_trials(folder)
    if table is None:
        return
    groups = [c for c in table.columns if c not in STAT_COLUMNS]
    out = Table(*groups, "quantity", "runs", "mean", "sd", "paper", "verdict",
                title="Over the trials (the criterion applied to the mean)")
    for row in table.to_dict("records"):
        show = [format_value(row["kind"], row[c], row["unit"]) for c in ("mean", "sd", "paper")]
        out.add_row(*(str(row[g]) for g in groups), row["label"], str(row["runs"]), *show,
                    row["verdict"])
    console.print(out)


@app.command("report")
def report(
    runs: list[Path] = typer.Argument(..., help="run or sweep folders (results/EXP/ID)"),
    as_json: bool = typer.Option(False, "--json", help="print each report's path and summary "
                                 "(a run's summary.json, a sweep's sweep.json) as JSON"),
) -> None:
    """Rebuild summary, figures and report.html of run (or sweep) folders from their data."""
    if not as_json:
        from mcclab.analysis.rebuild import report_command

        report_command(runs)
        return
    from mcclab.analysis.results import RunError
    from mcclab.jsonout import emit, report_record

    records, bad = [], 0
    for folder in runs:
        try:
            records.append(report_record(folder))
        except (RunError, SpecError) as exc:
            bad += 1
            err.print(alert("cannot analyse", f"{folder}\n{exc}", sep=" "), highlight=False)
    emit(records)
    if bad:
        raise typer.Exit(2)


@app.command("compare")
def compare(
    runs: list[Path] = typer.Argument(..., help="run folders (results/EXP/ID) to compare"),
    as_json: bool = typer.Option(False, "--json", help="print the runs, each quantity's paper "
                                 "value and each run's measured value and verdict as JSON"),
) -> None:
    """Show runs side by side (a table of reference quantities and an overlay figure)."""
    if not as_json:
        from mcclab.analysis.compare import compare_command

        compare_command(runs)
        return
    from mcclab.analysis.results import RunError
    from mcclab.jsonout import compare_record, emit

    try:
        record = compare_record(runs)
    except (RunError, SpecError) as exc:
        refuse(err, "cannot analyse", exc, code=2)
    emit(record)


@app.command("index")
def index(
    results: Path = typer.Option(Path("results"), help="the results folder to read"),
    profile: str = typer.Option(None, help="only runs of this profile (quick or paper); "
                                "default: the newest of each profile"),
) -> None:
    """Write RESULTS/index.html: every paper result of the newest runs, one table per paper.

    Reads only result folders (no lab), so it can be rebuilt at any time.
    """
    from mcclab.analysis.index import build_index

    if not results.is_dir():
        refuse(err, "no results folder", results, code=2, sep=" ")
    console.print(f"index: {build_index(results, profile)}", markup=False)


@app.command("reproduce")
def reproduce(
    profile: str | None = typer.Option(None, help="quick (the default) or paper (the paper "
                                       "profile runs the paper's number of trials where it "
                                       "averaged several)"),
    experiment: list[str] = typer.Option(
        [], "--experiment", "-e", help="only these experiments (repeatable); "
        "default: every experiment that reproduces a paper result"),
    results: Path = typer.Option(Path("results"), help="where run folders go"),
    wait: float = typer.Option(0.0, help="seconds each run waits for another lab"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and its estimate"),
    resume: Path | None = typer.Option(None, help="go on with a reproduction that stopped "
                                       "(results/reproduce/ID): its complete steps are kept, "
                                       "its trials sweeps resumed, the rest run again"),
) -> None:
    """Run every paper experiment one after the other, then write RESULTS/index.html."""
    import os
    import time

    from mcclab.analysis.index import build_index
    from mcclab.reproduce import (
        completed,
        execute,
        new_record_dir,
        plan,
        resume_plan,
        write_index,
    )

    earlier = None
    try:
        if resume is not None:
            if profile is not None or experiment:
                err.print("[red]--resume takes the profile and experiments from the "
                          "record[/red]: give neither with it", highlight=False)
                raise typer.Exit(2)
            try:
                profile, results, steps, earlier = resume_plan(resume.resolve(), wait=wait)
            except ValueError as exc:
                refuse(err, "cannot resume", exc, code=2, sep=": ")
        else:
            profile = profile or "quick"
            steps = plan(profile, experiment or None, results.resolve(), wait=wait)
    except SpecError as exc:
        refuse(err, "invalid experiment", exc, code=2)
    done = completed(earlier)
    todo = [s for k, s in enumerate(steps) if k not in done]
    estimate = sum(s.estimate_s for s in todo)
    console.print(f"{len(steps)} experiments, {sum(s.runs for s in steps)} runs, "
                  f"about {estimate / 60:.0f} min ({profile} profile)"
                  + (f"; {len(done)} complete before, {len(todo)} to go"
                     if earlier is not None else ""))
    if dry_run:
        for k, s in enumerate(steps):
            what = "complete before" if k in done else \
                f"~{s.estimate_s / 60:5.1f} min" + (" (resumes its sweep)" if s.resumes else "")
            console.print(f"  {s.experiment:28} {s.kind:6} {s.runs:3} run(s) {what}",
                          highlight=False)
        return
    if os.geteuid() != 0:
        err.print("[red]mcclab reproduce needs root[/red] (it builds network namespaces)")
        raise typer.Exit(2)
    record = resume.resolve() if resume is not None else new_record_dir(results)
    names = [s.experiment for s in steps]

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    started = time.monotonic()
    with _progress_bar() as bar:
        overall = bar.add_task("reproduce", total=estimate)
        progress = [0.0]

        def on_step(k: int, step, outcome) -> None:  # noqa: ANN001
            if outcome is None:
                bar.update(overall, description=f"{k}/{len(steps)} {step.experiment}"[:40])
                return
            progress[0] += step.estimate_s
            bar.update(overall, completed=progress[0])
            colour = "green" if outcome.status == "complete" else "red"
            loaded = ""
            if outcome.overloaded:
                loaded = ", [red]overloaded[/red]" if step.runs == 1 else \
                    f", [red]{outcome.overloaded} of {step.runs} runs overloaded[/red]"
            bar.console.print(f"[{colour}]{outcome.status}[/{colour}] {step.experiment} "
                              f"({outcome.elapsed_s / 60:.1f} min){loaded}", highlight=False)

        try:
            outcomes = execute(steps, results.resolve(), record, on_step, profile=profile,
                               earlier=earlier)
        except KeyboardInterrupt:
            err.print(alert("interrupted", f"record: {record}; go on with: mcclab reproduce "
                            f"--resume {record}", sep="; ", style="yellow"),
                      highlight=False, soft_wrap=True)
            _, why = write_index(results, profile, names, build_index)
            if why:
                err.print(alert("warning:", why, sep=" "), highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None
    page, why = write_index(results, profile, names, build_index)
    failed = [o.experiment for o in outcomes if o.status != "complete"]
    console.print(f"{len(outcomes) - len(failed)} of {len(outcomes)} experiments complete in "
                  f"{(time.monotonic() - started) / 60:.1f} min; record: {record}", markup=False)
    if failed:
        err.print(alert("not complete:", ", ".join(failed), sep=" "))
    loaded = [o.experiment for o in outcomes if o.overloaded]
    if loaded:
        err.print(alert("overloaded", f"(their agents stalled, so their values may describe "
                        f"this machine rather than the protocol): {', '.join(loaded)}",
                        sep=" ", style="yellow"), highlight=False, soft_wrap=True)
    if page is None:
        err.print(alert("error:", why, sep=" "), highlight=False, soft_wrap=True)
    else:
        console.print(f"index: {page}", markup=False)
    if failed or page is None:
        raise typer.Exit(1)


@app.command()
def check(
    file: Path = typer.Argument(..., help="topology file (YAML, e.g. topologies/dumbbell.yaml)"),
    sender: str = typer.Option("", help="sending host (default: 'src', else the first host)"),
    timeout: float = typer.Option(60.0, help="seconds to wait for routing readiness"),
    wait: float = typer.Option(0.0, help="seconds to wait for another lab (queued in order)"),
    as_json: bool = typer.Option(False, "--json", help="print the verdicts as JSON (progress "
                                 "and notes go to stderr)"),
) -> None:
    """Bring a lab up and show that multicast reaches exactly the hosts that joined.

    Every other host joins an ASM group and, through IGMPv3, an SSM group;
    the rest stay out. The table shows each host's join latency and the
    packets its interface carried in a 2 s window (counted by nftables).
    """
    from mcclab.jsonout import check_record, emit, reach_rows
    from mcclab.probes.reach import ASM_GROUP, SSM_GROUP, Flow, reach

    topo = _load(file)
    hosts = topo.names("host")
    source = sender or ("src" if "src" in hosts else hosts[0])
    others = [h for h in hosts if h != source]
    joiners = {h: [Flow(ASM_GROUP, ssm=False), Flow(SSM_GROUP, ssm=True)]
               for h in others[::2]}
    notes = err if as_json else console  # stdout holds the JSON alone
    with _sigterm_interrupts():
        lab = _bring_up(topo, timeout, wait)
        try:
            assert lab.routers is not None
            notes.print(f"ready: routing {topo.routing.backend} "
                        f"({lab.routers.ready_summary()}), link backend {lab.link_backend}")
            report = reach(lab, source, joiners, join_timeout=40.0)
        finally:
            lab.down()
    backend = topo.routing.backend
    rows = reach_rows(report, others, joiners, [ASM_GROUP, SSM_GROUP], SSM_GROUP, backend)
    if as_json:
        emit(check_record(str(file), source, backend, report, rows))
    else:
        table = Table("host", "group", "joined", "join latency", "packets in window", "verdict",
                      title=f"multicast from {source} at {report.rate_pps:g} pkt/s per group")
        for row in rows:
            latency = row["join_latency_s"]
            table.add_row(row["host"], row["group"] + (" (SSM)" if row["ssm"] else " (ASM)"),
                          "yes" if row["joined"] else "no",
                          f"{latency * 1e3:.1f} ms" if latency is not None else "-",
                          str(row["packets"]),
                          "[green]ok[/green]" if row["ok"] else "[red]WRONG[/red]")
        console.print(table)
    if backend == "smcroute":
        notes.print("smcroute routes statically and never prunes: hosts that did not join "
                    "still see the traffic on their links.")
    if not all(row["ok"] for row in rows):
        raise typer.Exit(1)


@app.command()
def clean(
    all_labs: bool = typer.Option(False, "--all", help="also remove labs in use (their owner "
                                  "is stopped); asks first unless --yes"),
    yes: bool = typer.Option(False, "--yes", help="do not ask before --all removes labs in use"),
    results: Path = typer.Option(Path("results"), help="results folder whose runs that still "
                                 "say running, with their runner gone, are marked killed"),
    lab: str | None = typer.Option(None, "--lab", help="only this lab, by its id (a run's "
                                   "lab is '<experiment>-<run-id>'); other labs and strays "
                                   "are left alone"),
) -> None:
    """Remove what crashed labs left (namespaces, interfaces, processes, cgroups, directories).

    A lab whose owner still runs is in use and is left alone unless --all is given. Runs
    whose runner was killed outright are marked killed in their run.json. --lab limits
    all of this to one lab, so a script cleans up only what it started.
    """
    from mcclab.lab import holders, live_labs
    from mcclab.state import clean as clean_labs
    from mcclab.state import still_present

    if all_labs and not yes:
        live = [s for s in live_labs() if lab is None or s.lab_id == lab]
        if not sys.stdin.isatty():
            err.print("'mcclab clean --all' also removes labs in use"
                      + (f" ({holders(live)})" if live else "")
                      + ": there is no terminal to confirm on, so nothing was removed; "
                      "add --yes to go ahead", highlight=False)
            raise typer.Exit(2)
        what = f"labs in use too: {holders(live)}" if live else "labs in use too (none now)"
        typer.confirm(f"Remove lab {lab}, even in use?" if lab else
                      f"Remove every mcclab lab, {what}?", abort=True)
    plan = clean_labs(everything=all_labs, only=lab)
    if lab is not None and not plan.remove and not plan.keep:
        console.print(f"no lab {lab} is recorded on this machine", highlight=False)
    _mark_killed(results)
    for state in plan.remove:
        how = "in use, stopped" if state.lab_id in plan.stopped else "dead"
        console.print(f"removed lab {state.lab_id} (owner pid {state.owner_pid}, {how})",
                      highlight=False)
    for state in plan.keep:
        console.print(f"left lab {state.lab_id} alone: its owner pid {state.owner_pid} is "
                      "alive ('mcclab clean --all' removes it)", highlight=False)
    console.print(f"removed {len(plan.remove)} lab(s), swept {len(plan.stray_netns)} stray "
                  f"namespace(s), {len(plan.stray_ifaces)} stray interface(s) and "
                  f"{len(plan.stray_cgroups)} stray cgroup(s)")
    rest = still_present(plan, only=lab)
    if any(rest.values()):
        err.print(f"[red]still present:[/red] {rest}")
        raise typer.Exit(1)


register_lab_commands(app)  # mcclab lab ..., shell, exec, capture, link (mcclab/labs/cli.py)
register_audit_commands(app)  # mcclab audit bands (mcclab/audit.py)
register_testbed_commands(app)  # mcclab testbed check (mcclab/testbed/cli.py)


def main() -> None:
    """Entry point for `python -m mcclab`."""
    app()


if __name__ == "__main__":  # `python -m mcclab.cli` behaves like `python -m mcclab`
    main()
