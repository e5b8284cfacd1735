"""RLC Table 1 and Fig. 3: run N = 2, 4, 8, ... sessions per queue discipline, then tabulate.

A stop-gap until the shared sweep runner and flow replication land on main: this
expands the specs' ``count`` / ``{i}`` flow templates itself, writes one
expanded spec per (discipline, N) under ``results/rlc-table1/specs/`` and runs
each with ``mcclab run --wait``; ``report`` tabulates every run beside the
paper's Table 1 and draws Fig. 3 (throughput versus burst loss rate with
Eq. 2's band for c' in [1, 2]).

    python -m bench.rlc_table1 run --n 2 4 8 --discipline red droptail --profile quick
    python -m bench.rlc_table1 report results/rlc-table1/runs.json
    python -m bench.rlc_table1 spec rlc-fig5 --tset 'tcp{i}.mss=1024B' --suffix mss1024
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from agents.rlc.measures import instances, table1_row
from mcclab.analysis.results import load_run
from mcclab.experiment.loader import REPO

OUT = REPO / "results" / "rlc-table1"
CAPACITY = 1.5e6
# Table 1 of the paper: N -> value, per discipline and index.
PAPER: dict[str, dict[str, dict[int, float]]] = {
    "red": {
        "fairness": {2: 0.998, 4: 0.978, 8: 0.992, 16: 0.993, 32: 0.994},
        "router_loss": {2: 0.0054, 4: 0.0125, 8: 0.0250, 16: 0.0354, 32: 0.0737},
        "perceived_loss": {2: 0.0030, 4: 0.0070, 8: 0.0143, 16: 0.0231, 32: 0.0495},
        "burst_loss": {2: 0.000077, 4: 0.000510, 8: 0.001752, 16: 0.007092, 32: 0.021459},
        "exploitation": {2: 0.563, 4: 0.624, 8: 0.696, 16: 0.776, 32: 0.907},
    },
    "droptail": {
        "fairness": {2: 0.986, 4: 0.779, 8: 0.876, 16: 0.897, 32: 0.978},
        "router_loss": {2: 0.0034, 4: 0.0180, 8: 0.0283, 16: 0.0486, 32: 0.0825},
        "perceived_loss": {2: 0.0029, 4: 0.0117, 8: 0.0135, 16: 0.0267, 32: 0.0504},
        "burst_loss": {2: 0.000150, 4: 0.001458, 8: 0.001894, 16: 0.005198, 32: 0.018356},
        "exploitation": {2: 0.579, 4: 0.773, 8: 0.766, 16: 0.857, 32: 0.942},
    },
}
INDEXES = ["fairness", "router_loss", "perceived_loss", "burst_loss", "exploitation"]


def _subst(value: Any, i: int) -> Any:
    """``{i}`` replaced by ``i`` in every string of a flow template."""
    if isinstance(value, str):
        return value.replace("{i}", str(i))
    if isinstance(value, list):
        return [_subst(v, i) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, i) for k, v in value.items()}
    return value


def expand(spec: dict[str, Any], n: int | None = None,
           template_sets: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The spec with every flow template (``count``) replicated.

    With ``n``, the templates share ``n`` flows evenly (and the spec's name gets
    ``-n<N>``); otherwise each keeps its own count. ``template_sets`` maps a
    template's name (e.g. ``tcp{i}``) to keys to set on it before replication.
    """
    out = copy.deepcopy(spec)
    templates = [f for f in out["flows"] if "count" in f]
    per = n // len(templates) if templates and n is not None else None
    if per is not None and per * len(templates) != n:
        raise ValueError(f"N={n} does not split evenly over {len(templates)} templates")
    flows = []
    for f in out["flows"]:
        f = {**f, **(template_sets or {}).get(f["name"], {})}
        if "count" not in f:
            flows.append(f)
            continue
        body = {k: v for k, v in f.items() if k != "count"}
        flows += [_subst(body, i) for i in range(1, (per or f["count"]) + 1)]
    out["flows"] = flows
    if n is not None:
        out["name"] = f"{spec['name']}-n{n}"
    return out


def run_spec(spec: dict[str, Any], profile: str, sets: list[str]) -> Path | None:
    """Write an expanded spec and run it; the run folder, or None if none was made."""
    specs = OUT / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    path = specs / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    argv = [sys.executable, "-m", "mcclab", "run", str(path), "--profile", profile,
            "--wait", "7200"]
    for s in sets:
        argv += ["--set", s]
    base = REPO / "results" / spec["name"]
    before = set(base.glob("*"))
    proc = subprocess.run(argv, check=False)
    new = sorted(set(base.glob("*")) - before)
    if proc.returncode != 0:
        print(f"run of {spec['name']} failed (exit {proc.returncode})", file=sys.stderr)
    return new[-1] if new else None


def run_one(discipline: str, n: int, profile: str, sets: list[str]) -> Path | None:
    """Expand and run one (discipline, N) of Table 1."""
    spec = yaml.safe_load((REPO / "experiments" / f"rlc-table1-{discipline}.yaml").read_text())
    return run_spec(expand(spec, n), profile, sets)


def cmd_spec(args: argparse.Namespace) -> None:
    """Expand any spec's templates (with template sets and a name suffix) and run it."""
    spec = yaml.safe_load((REPO / "experiments" / f"{args.spec}.yaml").read_text())
    tsets: dict[str, dict[str, Any]] = {}
    for item in args.tset or []:
        key, value = item.split("=", 1)
        name, field = key.rsplit(".", 1)
        tsets.setdefault(name, {})[field] = yaml.safe_load(value)
    out = expand(spec, None, tsets)
    if args.suffix:
        out["name"] = f"{out['name']}-{args.suffix}"
    folder = run_spec(out, args.profile, args.set or [])
    print(folder)


def cmd_run(args: argparse.Namespace) -> None:
    """Run every (discipline, N) in turn; record the folders in runs.json."""
    OUT.mkdir(parents=True, exist_ok=True)
    index = OUT / "runs.json"
    runs = json.loads(index.read_text()) if index.exists() else []
    for discipline in args.discipline:
        for n in args.n:
            folder = run_one(discipline, n, args.profile, args.set or [])
            if folder is not None:
                runs.append({"discipline": discipline, "n": n, "profile": args.profile,
                             "run": str(folder)})
                index.write_text(json.dumps(runs, indent=1))


def measure(entry: dict[str, Any]) -> dict[str, Any]:
    """Table 1's indexes and Fig. 3's points of one recorded run."""
    run = load_run(entry["run"])
    row = table1_row(run, CAPACITY)
    points = [{"flow": i.flow, "throughput_Bps": i.throughput_bps / 8, "burst_loss": i.burst_loss}
              for i in instances(run)]
    return {**entry, **row, "status": run.info.status, "points": points}


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.4f}" if abs(x) >= 0.001 or x == 0 else f"{x:.6f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    """Table 1 as markdown: measured beside the paper, per discipline and N."""
    lines = []
    for discipline in ("red", "droptail"):
        mine = sorted((r for r in rows if r["discipline"] == discipline), key=lambda r: r["n"])
        if not mine:
            continue
        ns = [r["n"] for r in mine]
        lines.append(f"\n**{'RED' if discipline == 'red' else 'tail-drop'}** "
                     f"({mine[0]['profile']} profile)\n")
        lines.append("| index | " + " | ".join(f"N={n} paper | N={n} lab" for n in ns) + " |")
        lines.append("| --- |" + " --- |" * (2 * len(ns)))
        for idx in INDEXES:
            cells = []
            for r in mine:
                cells += [_fmt(PAPER[discipline][idx].get(r["n"], math.nan)), _fmt(r[idx])]
            lines.append(f"| {idx.replace('_', ' ')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def fig3(rows: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Fig. 3 per discipline: every instance of every N, with Eq. 2's band."""
    from agents.rlc.figures import fig3_figure

    paths = []
    for discipline in ("red", "droptail"):
        pts = [(p["burst_loss"], p["throughput_Bps"], f"N = {r['n']}") for r in
               sorted(rows, key=lambda r: r["n"]) if r["discipline"] == discipline
               for p in r["points"]]
        if pts:
            paths += fig3_figure(pts, folder, "RED" if discipline == "red" else "tail-drop",
                                 name=f"rlc-fig3-{discipline}")
    return paths


def cmd_report(args: argparse.Namespace) -> None:
    """Measure every recorded run; write table1.md, table1.json and the Fig. 3 figures."""
    entries = json.loads(Path(args.runs).read_text())
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for e in entries:  # the last run of each (discipline, N) wins
        latest[(e["discipline"], e["n"])] = e
    rows = [measure(e) for e in latest.values()]
    folder = Path(args.runs).parent
    (folder / "table1.json").write_text(json.dumps(rows, indent=1, default=float))
    text = markdown(rows)
    (folder / "table1.md").write_text(text)
    print(text)
    for p in fig3(rows, folder / "figures"):
        print(p)


def cmd_fig5(args: argparse.Namespace) -> None:
    """Aggregate RLC and TCP throughput over the window, and the Fig. 5 figure, per run."""
    from agents.rlc.figures import fig5_figure
    from mcclab.analysis.metrics import throughput

    for folder in args.runs:
        run = load_run(folder)
        flows = sorted(run.per_second["flow"].unique())
        groups = {"RLC (8 instances)": [f for f in flows if not f.startswith("tcp")],
                  "TCP Reno (8 connections)": [f for f in flows if f.startswith("tcp")]}
        agg = {g: sum(throughput(run.per_second, f, run.window) for f in fs)
               for g, fs in groups.items()}
        print(json.dumps({"run": str(folder), "window": run.window,
                          **{g: round(v) for g, v in agg.items()},
                          "rlc_over_tcp": agg["RLC (8 instances)"]
                          / agg["TCP Reno (8 connections)"]}))
        for path in fig5_figure(run, run.path / "figures", groups, name="rlc-fig5",
                                title=f"RLC Fig. 5: {run.info.experiment}"):
            print(path)


def cmd_fig7(args: argparse.Namespace) -> None:
    """Convergence and synchrony of r2-r4, and the Fig. 7 figure."""
    from agents.rlc.figures import fig7_figure, fig7_sync

    run = load_run(args.run)
    print(json.dumps(fig7_sync(run)))
    for path in fig7_figure(run, run.path / "figures"):
        print(path)


def main() -> None:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--n", type=int, nargs="+", default=[2, 4, 8])
    r.add_argument("--discipline", nargs="+", default=["red", "droptail"],
                   choices=["red", "droptail"])
    r.add_argument("--profile", default="quick", choices=["quick", "paper"])
    r.add_argument("--set", action="append")
    r.set_defaults(fn=cmd_run)
    sp = sub.add_parser("spec", help="expand and run any spec with flow templates")
    sp.add_argument("spec")
    sp.add_argument("--tset", action="append", help="TEMPLATE.key=value, e.g. tcp{i}.mss=1024B")
    sp.add_argument("--suffix", default="")
    sp.add_argument("--profile", default="quick", choices=["quick", "paper"])
    sp.add_argument("--set", action="append")
    sp.set_defaults(fn=cmd_spec)
    f5 = sub.add_parser("fig5", help="Fig. 5 numbers and figure of rlc-fig5 runs")
    f5.add_argument("runs", nargs="+")
    f5.set_defaults(fn=cmd_fig5)
    f7 = sub.add_parser("fig7", help="Fig. 7 synchrony numbers and figure of an rlc-fig7 run")
    f7.add_argument("run")
    f7.set_defaults(fn=cmd_fig7)
    rep = sub.add_parser("report")
    rep.add_argument("runs", nargs="?", default=str(OUT / "runs.json"))
    rep.set_defaults(fn=cmd_report)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
