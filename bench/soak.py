"""Soak: one long run, with every long-lived process's memory and descriptors sampled.

    python bench/soak.py [--experiment ormcc-fig4-n24] [--profile paper] [--every 10]

Starts `mcclab run` (by default ORMCC's Fig. 4 star at n = 24, the paper profile:
1000 s, 73 agents, 24 TCP flows) and, every ``--every`` seconds while it runs, reads
from /proc, for the runner and for every process the lab recorded (routers, link
emulators, exporter, Prometheus, fork server, agents, iperf3): resident memory
(VmRSS, and its anonymous part) and open descriptors; and the bytes the run's
Prometheus database takes on disk (``--storage.tsdb.path``: ``mcclab.monitoring.storage``).
Processes are grouped by kind (the first word of what the lab recorded, or the
agent's role).

Growth is judged after the warm-up, while the flows run: for each kind, the median
of the last five samples against the median of the first five after ``--settle``
seconds of flows. The run passes when no kind's RSS or descriptors grow by more than
10 % (descriptors: and by more than two; a Prometheus's descriptors into its own
database are its on-disk blocks and are reported with the database's size, not
judged), and when no sample was lost: in ``tables/metrics.csv.gz``, every target
answered every scrape between its first and its last answer (``lost_samples``).

The run's Prometheus cuts its head into on-disk blocks every
``mcclab.monitoring.prometheus.RUN_BLOCK``. To compare that with Prometheus's default
(2-h blocks: the head keeps every sample of the run) in the same run, a **shadow**
Prometheus (``--shadow``, on by default) starts as soon as the run's Prometheus is
up: the same binary and scrape configuration (the run's ``prometheus.yml``),
Prometheus's default storage flags, its own TSDB in a temporary directory beside
the run's TSDB root (the same file system), listening on another loopback port, in its own
process group (and told to die with the soak). It is
sampled like the others, as kind ``prometheus-shadow``, reported beside the run's
and not judged; it is stopped by its pid and its directory removed at the end. If it
cannot start, the soak goes on without it. It doubles the scrapes the agents answer.
The scrapes made and failed during the flows are counted for both (from the ``up``
series): losses both share come from outside Prometheus's storage.

Writes ``soak.csv`` (every sample) and ``soak.json`` (the verdict) into the run
folder, and prints a table, with each kind's largest RSS once the flows had stopped
(the export of the series and the teardown). The TSDB's size is reported, not
judged: it holds the run's samples. Needs root. Takes the run's length plus about
2 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import ctypes
import gzip
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from mcclab.monitoring import prometheus as prom
from mcclab.monitoring import storage
from mcclab.state import STATE_ROOT, proc_stat_fields, same_process

REPO = Path(__file__).resolve().parent.parent
LIMIT = 0.10
SHADOW = "prometheus-shadow"


def kind_of(what: str) -> str:
    """A process's kind from the lab's description of it."""
    words = what.split()
    if words[:1] == ["flow"] and len(words) >= 3:
        return f"{words[2]}"  # sender, receiver, client, server, sink, source
    if words[:1] == ["monitoring"] and len(words) >= 2:
        return words[1]
    if words[:1] == ["shell"]:
        return "shell"
    return words[0] if words else "?"


def sample_process(pid: int, database: Path | None = None
                   ) -> tuple[int, int, int, int] | None:
    """(RSS in kB, open descriptors, anonymous RSS in kB, descriptors into ``database``)
    of a process, or None once it is gone. RSS less the anonymous part is mapped files
    and shared memory (for Prometheus: its TSDB files mapped from tmpfs). The last
    count is the files a Prometheus holds open in its own database (two per on-disk
    block): they follow the data it holds, as the database's size does."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    in_db = 0
    if database is not None:
        prefix = f"{database}/"
        for fd in fds:
            with contextlib.suppress(OSError):
                in_db += os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix)
    fields = {line.split(":")[0]: line.split()[1] for line in status.splitlines()
              if line.startswith(("VmRSS:", "RssAnon:"))}
    return int(fields.get("VmRSS", 0)), len(fds), int(fields.get("RssAnon", 0)), in_db


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a stopped flow lingers as a zombie until it is reaped)."""
    return same_process(proc_stat_fields(pid), None)


def tree_size(path: Path) -> int:
    """Bytes allocated under ``path`` (on tmpfs: the memory its files take)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def prometheus_config(pid: int) -> Path | None:
    """The --config.file of a Prometheus process."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for arg in argv:
        if arg.startswith(b"--config.file="):
            return Path(arg.split(b"=", 1)[1].decode())
    return None


def _die_with_parent() -> None:
    """In the child: SIGTERM when the soak dies, so a killed soak leaves no shadow."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Shadow:
    """A second Prometheus with Prometheus's default blocks, on the run's scrape config."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.dir: Path | None = None
        self.url = ""
        self.error = ""

    def start(self, config: Path) -> None:
        """Start it on a copy of ``config``; on any failure note why and carry on."""
        try:
            beside = storage.tsdb_root().parent  # outside the root, which runs sweep
            self.dir = Path(tempfile.mkdtemp(prefix="mcclab-soak-shadow-", dir=beside))
            copy = self.dir / "prometheus.yml"
            shutil.copyfile(config, copy)
            listen = f"127.0.0.1:{prom.free_port('127.0.0.1', 0)}"
            self.url = f"http://{listen}"
            log = (self.dir / "prometheus.log").open("w")
            self.proc = subprocess.Popen(
                prom.argv(copy, self.dir / "data", listen, block=None),
                stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent)
            log.close()
        except OSError as exc:
            self.error = f"shadow Prometheus not started: {exc}"
            self.stop()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def scrapes(self, start: float, end: float) -> tuple[int, int] | None:
        """(scrapes made, scrapes failed) over [start, end] (Unix seconds), from its
        ``up`` series; None if it cannot say."""
        if not self.alive() or end <= start:
            return None
        window = f"{max(1, int(end - start))}s"
        try:
            made, good = (prom.api(self.url, "/api/v1/query",
                                   {"query": f"sum({fn}(up[{window}]))",
                                    "time": f"{end:.3f}"})["result"]
                          for fn in ("count_over_time", "sum_over_time"))
            made_n, good_n = (int(float(r[0]["value"][1])) if r else 0 for r in (made, good))
        except (OSError, ValueError, KeyError, IndexError, RuntimeError):
            return None
        return made_n, made_n - good_n

    def stop(self) -> None:
        """End it by its pid (its own process group) and remove its directory."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc is not None and self.proc.returncode not in (0, -signal.SIGTERM, None) \
                and not self.error:
            self.error = f"shadow Prometheus exited with {self.proc.returncode}"
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def tsdb_path(pid: int) -> Path | None:
    """The --storage.tsdb.path of a Prometheus process."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for arg in argv:
        if arg.startswith(b"--storage.tsdb.path="):
            return Path(arg.split(b"=", 1)[1].decode())
    return None


def growth(rows: list[dict], settle: float, end: float, window: int = 5
           ) -> dict[str, dict[str, float]]:
    """Per kind, over the flows' time after ``settle`` up to ``end``: RSS and descriptors.

    Growth is a trend, not a peak: the median of the last ``window`` samples against
    the median of the first ``window`` after ``settle`` (a descriptor count of 4 that
    reads 11 while a scrape's sockets are open is not a leak). The largest sample is
    reported beside it. Descriptors into a Prometheus's own database (``db_fds``) are
    counted apart, as ``db_fds_start``/``db_fds_end``, and left out of ``fds_*``: they
    are the database's on-disk blocks, reported with its size and not judged.
    """
    by_time: dict[float, dict[str, list[int]]] = defaultdict(
        lambda: defaultdict(lambda: [0, 0, 0]))
    for row in rows:
        totals = by_time[row["t"]][row["kind"]]
        db = int(row.get("db_fds") or 0)
        totals[0] += row["rss_kb"]
        totals[1] += row["fds"] - db
        totals[2] += db
    times = sorted(t for t in by_time if settle <= t <= end)
    out: dict[str, dict[str, float]] = {}
    kinds = {kind for t in times for kind in by_time[t]}
    for kind in sorted(kinds):
        seen = [by_time[t][kind] for t in times if kind in by_time[t]]
        if len(seen) < 2 * window:
            continue
        first, last = seen[:window], seen[-window:]
        rss0, rss1 = (statistics.median(v[0] for v in part) for part in (first, last))
        fd0, fd1 = (statistics.median(v[1] for v in part) for part in (first, last))
        db0, db1 = (statistics.median(v[2] for v in part) for part in (first, last))
        out[kind] = {"rss_kb_start": rss0, "rss_kb_end": rss1,
                     "rss_kb_max": max(v[0] for v in seen),
                     "rss_growth": rss1 / rss0 - 1 if rss0 else 0.0,
                     "fds_start": fd0, "fds_end": fd1, "fds_max": max(v[1] for v in seen),
                     "fds_growth": fd1 / fd0 - 1 if fd0 else 0.0,
                     "db_fds_start": db0, "db_fds_end": db1}
    return out


def _db_fds(kind: dict[str, float]) -> str:
    """'start -> end' descriptors into the database, or '' for a process without one."""
    if not (kind["db_fds_start"] or kind["db_fds_end"]):
        return ""
    return f"{kind['db_fds_start']:.0f}->{kind['db_fds_end']:.0f}"


def fd_growth(kind: dict[str, float]) -> float:
    """Descriptor growth that counts: over 10 % and by more than two descriptors.

    A kind with four descriptors reads five while a scrape's socket is open; one
    descriptor is 25 % of four, and no leak.
    """
    return kind["fds_growth"] if kind["fds_end"] - kind["fds_start"] > 2 else 0.0


def after_flows(rows: list[dict], end: float) -> dict[str, float]:
    """Per kind, the largest RSS (kB) once the flows had stopped: the export and teardown."""
    peak: dict[str, float] = defaultdict(float)
    totals: dict[tuple[float, str], int] = defaultdict(int)
    for row in rows:
        if row["t"] > end:
            totals[(row["t"], row["kind"])] += row["rss_kb"]
    for (_t, kind), rss in totals.items():
        peak[kind] = max(peak[kind], rss)
    return dict(peak)


def lost_samples(metrics_csv: Path, interval: float = 1.0) -> dict[str, int]:
    """What the run's metrics table lost, from its ``up`` rows (one per scrape and target).

    A target's sample is lost when, between its first and its last answered scrape, a
    scrape failed (``up`` 0) or a scrape round has no row for it (a gap of more than
    1.5 intervals). Failed scrapes before a target first answered are its start-up
    (an agent's endpoint opens after its process starts), counted apart. A series
    that pauses while its target answers every scrape was not in the answers (an
    exporter series of a kernel multicast route while the kernel had no such route)
    and lost nothing; such pauses are counted apart (``series_pauses``).
    """
    ups: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    stamps: dict[str, list[float]] = defaultdict(list)
    with gzip.open(metrics_csv, "rt") as handle:
        reader = csv.DictReader(handle)
        keys = [k for k in (reader.fieldnames or []) if k not in ("time", "value")]
        for row in reader:
            when = float(row["time"])
            if row["metric"] == "up":
                ups[row["instance"]].append((when, row["value"] == "1"))
            else:
                stamps["|".join(row[k] for k in keys)].append(when)
    out = {"targets": len(ups), "scrapes": 0, "failed_before_first_answer": 0, "lost": 0,
           "series_pauses": 0}
    for rows in ups.values():
        rows.sort()
        answered = [when for when, ok in rows if ok]
        out["scrapes"] += len(rows)
        if not answered:
            out["failed_before_first_answer"] += len(rows)
            continue
        first, last = answered[0], answered[-1]
        out["failed_before_first_answer"] += sum(1 for when, ok in rows
                                                 if not ok and when < first)
        out["lost"] += sum(1 for when, ok in rows if not ok and first < when < last)
        inside = [when for when, _ok in rows if first <= when <= last]
        out["lost"] += sum(round((b - a) / interval) - 1
                           for a, b in zip(inside, inside[1:], strict=False)
                           if b - a > 1.5 * interval)
    for values in stamps.values():
        values.sort()
        out["series_pauses"] += sum(1 for a, b in zip(values, values[1:], strict=False)
                                    if b - a > 1.5 * interval)
    return out


def up_counts(metrics_csv: Path, start: float, end: float) -> tuple[int, int]:
    """(scrapes made, scrapes failed) over [start, end], from the ``up`` rows of the
    run's metrics table (one row per scrape and target)."""
    made = failed = 0
    with gzip.open(metrics_csv, "rt") as handle:
        for row in csv.DictReader(handle):
            if row["metric"] == "up" and start <= float(row["time"]) <= end:
                made += 1
                failed += row["value"] != "1"
    return made, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="ormcc-fig4-n24")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--set", action="append", default=[], dest="settings")
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=120.0,
                        help="seconds of flows before growth is measured")
    parser.add_argument("--shadow", action=argparse.BooleanOptionalAction, default=True,
                        help="run a second Prometheus with the default 2-h blocks beside "
                             "the run's, for comparison")
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/soak.py needs root (it builds a lab)", file=sys.stderr)
        return 2
    results = args.results or Path(tempfile.mkdtemp(prefix="mcclab-soak-"))
    argv = [sys.executable, "-m", "mcclab", "run", args.experiment, "--profile", args.profile,
            "--results", str(results), "--wait", "1800"]
    for item in args.settings:
        argv += ["--set", item]
    print("soak:", " ".join(argv[1:]), flush=True)
    runner = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    shadow = Shadow()
    window = [0.0, 0.0]  # the flows' first and last second, Unix time
    try:
        rows, tsdb_rows, t_last_flows, run_dir = _watch(runner, results, args, shadow, window)
        shadow_scrapes = shadow.scrapes(*window)
    finally:
        shadow.stop()
    if shadow.error:
        print(shadow.error, file=sys.stderr)
    if run_dir is None:
        print("the run left no folder", file=sys.stderr)
        return 1
    return _report(run_dir, rows, tsdb_rows, t_last_flows, args, shadow.error,
                   (window[0], window[1], shadow_scrapes))


def _watch(runner: subprocess.Popen, results: Path, args: argparse.Namespace, shadow: Shadow,
           window: list[float]
           ) -> tuple[list[dict], dict[str, list[tuple[float, int]]], float, Path | None]:
    """Sample until the runner exits: rows, TSDB sizes per Prometheus kind, the last
    second of flows and the run's folder; ``window`` gets the flows' first and last
    sampled second (Unix time)."""
    rows: list[dict] = []
    tsdb_rows: dict[str, list[tuple[float, int]]] = defaultdict(list)
    t_flows = None
    t_last_flows = 0.0
    run_dir = None
    state_dir = None
    while runner.poll() is None:
        time.sleep(args.every if t_flows is not None else 1.0)
        if run_dir is None:
            found = [p.parent for p in results.glob("*/*/run.json")]
            if found:
                run_dir = found[0]
                state_dir = STATE_ROOT / f"{run_dir.parent.name}-{run_dir.name}"
        if state_dir is None:
            continue
        try:
            state = json.loads((state_dir / "state.json").read_text())
        except (OSError, ValueError):
            continue
        procs = [(p["pid"], kind_of(p["what"])) for p in state.get("processes", [])]
        if args.shadow and shadow.proc is None and not shadow.error:
            config = next((prometheus_config(pid) for pid, kind in procs
                           if kind == "prometheus"), None)
            if config is not None:
                shadow.start(config)
                print(f"  shadow Prometheus (2-h blocks): "
                      f"{shadow.error or f'pid {shadow.proc.pid}'}", flush=True)
        if t_flows is None:
            if not any(p["what"].startswith("flow") for p in state.get("processes", [])):
                continue
            t_flows = time.monotonic()
            window[0] = time.time()
        t = round(time.monotonic() - t_flows, 1)
        if any(p["what"].startswith("flow") and running(p["pid"])
               for p in state.get("processes", [])):
            t_last_flows = t
            window[1] = time.time()
        if shadow.alive():
            procs.append((shadow.proc.pid, SHADOW))
        for pid, kind in [(runner.pid, "runner"), *procs]:
            path = tsdb_path(pid) if kind in ("prometheus", SHADOW) else None
            got = sample_process(pid, path)
            if got is not None:
                rows.append({"t": t, "pid": pid, "kind": kind, "rss_kb": got[0],
                             "fds": got[1], "anon_kb": got[2], "db_fds": got[3]})
            if path is not None:
                tsdb_rows[kind].append((t, tree_size(path)))
        if rows and int(t) % 60 < args.every:
            now = [r for r in rows if r["t"] == t and r["kind"] != SHADOW]
            sizes = "  ".join(f"{kind} TSDB {v[-1][1] / 2**20:6.1f} MiB"
                              for kind, v in sorted(tsdb_rows.items()) if v)
            print(f"  t={t:6.0f} s  processes {len(now):4d}  "
                  f"RSS {sum(r['rss_kb'] for r in now) / 1024:7.1f} MiB  {sizes}", flush=True)
    return rows, tsdb_rows, t_last_flows, run_dir


def _report(run_dir: Path, rows: list[dict], tsdb_rows: dict[str, list[tuple[float, int]]],
            t_last_flows: float, args: argparse.Namespace, shadow_error: str,
            scrapes: tuple[float, float, tuple[int, int] | None]) -> int:
    """Write soak.csv and soak.json, print the table; 0 when the run passes."""
    status = json.loads((run_dir / "run.json").read_text()).get("status")
    with (run_dir / "soak.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["t", "pid", "kind", "rss_kb", "fds", "anon_kb",
                                         "db_fds"])
        writer.writeheader()
        writer.writerows(rows)
    grown = growth(rows, args.settle, t_last_flows)
    export_peak = after_flows(rows, t_last_flows)
    metrics = run_dir / "tables" / "metrics.csv.gz"
    samples = lost_samples(metrics) if metrics.exists() else None
    # Scrapes made and failed during the flows, by the run's Prometheus and the shadow:
    # where both lose the same, the cause is outside Prometheus's storage.
    start, end, shadow_scrapes = scrapes
    run_scrapes = up_counts(metrics, start, end) if metrics.exists() else None
    # The shadow is a comparison, not part of the product: it is not judged.
    worst = max((max(v["rss_growth"], fd_growth(v)) for kind, v in grown.items()
                 if kind != SHADOW), default=0.0)
    tsdb = {kind: {"at_settle": next((b for t, b in v if t >= args.settle), None),
                   "end": next((b for t, b in reversed(v) if t <= t_last_flows), None),
                   "max": max((b for _t, b in v), default=None)}
            for kind, v in tsdb_rows.items()}
    anon = {kind: {"at_settle": _median_at(rows, kind, "anon_kb", args.settle),
                   "end": _median_at(rows, kind, "anon_kb", t_last_flows, before=True)}
            for kind in ("prometheus", SHADOW)}
    verdict = {"run": str(run_dir), "status": status, "kinds": grown, "tsdb_bytes": tsdb,
               "prometheus_anon_kb": anon, "block": prom.RUN_BLOCK, "shadow_error": shadow_error,
               "flows_seconds": t_last_flows, "rss_kb_after_flows": export_peak,
               "samples": samples, "worst_growth": worst,
               "scrapes_during_flows": {"prometheus": run_scrapes, SHADOW: shadow_scrapes},
               "pass": (status == "complete" and worst <= LIMIT and samples is not None
                        and samples["lost"] == 0 and samples["targets"] > 0)}
    (run_dir / "soak.json").write_text(json.dumps(verdict, indent=1))
    print(f"\nrun {run_dir}: {status}")
    print(f"from {args.settle:.0f} s to {t_last_flows:.0f} s of flows (medians of 5 samples):")
    print(f"{'kind':<18} {'RSS MiB':>9} {'end':>9} {'max':>9} {'growth':>7} {'fds':>6} "
          f"{'end':>6} {'max':>6} {'growth':>7} {'after flows MiB':>16} {'db fds':>7}")
    for kind, v in sorted(grown.items()):
        late = export_peak.get(kind)
        print(f"{kind:<18} {v['rss_kb_start'] / 1024:9.1f} {v['rss_kb_end'] / 1024:9.1f} "
              f"{v['rss_kb_max'] / 1024:9.1f} {v['rss_growth']:7.1%} {v['fds_start']:6.0f} "
              f"{v['fds_end']:6.0f} {v['fds_max']:6.0f} {v['fds_growth']:7.1%} "
              f"{late / 1024 if late else 0:16.1f} {_db_fds(v):>7}")
    blocks = {"prometheus": f"{prom.RUN_BLOCK} blocks, the run's", SHADOW: "2h blocks, not judged"}
    for kind, v in sorted(tsdb.items()):
        a = anon[kind]
        print(f"{kind} ({blocks[kind]}): TSDB {(v['at_settle'] or 0) / 2**20:.1f} MiB at "
              f"{args.settle:.0f} s, {(v['end'] or 0) / 2**20:.1f} MiB at the end of flows, "
              f"{(v['max'] or 0) / 2**20:.1f} MiB max; anonymous RSS "
              f"{(a['at_settle'] or 0) / 1024:.1f} -> {(a['end'] or 0) / 1024:.1f} MiB")
    if shadow_error:
        print(shadow_error)
    if samples is None:
        print("samples: no tables/metrics.csv.gz to check")
    else:
        print(f"samples: {samples['targets']} targets, {samples['scrapes']} scrapes, "
              f"{samples['lost']} lost between a target's first and last answer, "
              f"{samples['failed_before_first_answer']} failed before it first answered; "
              f"{samples['series_pauses']} pauses of a series in its target's answers")
    for kind, got in (("prometheus", run_scrapes), (SHADOW, shadow_scrapes)):
        if got is not None:
            print(f"  {kind}: {got[0]} scrapes made during the flows, {got[1]} failed")
    print(f"verdict: {'pass' if verdict['pass'] else 'FAIL'} (worst growth {worst:.1%}, "
          f"limit {LIMIT:.0%}; {SHADOW} not judged)")
    return 0 if verdict["pass"] else 1


def _median_at(rows: list[dict], kind: str, key: str, t: float, before: bool = False,
               window: int = 5) -> float | None:
    """The median of ``key`` over the ``window`` samples of ``kind`` from ``t`` on (or
    up to ``t`` with ``before``)."""
    seen = sorted((r["t"], r[key]) for r in rows if r["kind"] == kind
                  and (r["t"] <= t if before else r["t"] >= t))
    part = seen[-window:] if before else seen[:window]
    return statistics.median(v for _t, v in part) if part else None


if __name__ == "__main__":
    sys.exit(main())
