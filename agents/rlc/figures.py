"""RLC figures in the paper's style: Fig. 7 (subscription level over time) and Fig. 5
(aggregate throughput of the RLC and TCP groups)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from agents.rlc.measures import (  # noqa: E402
    clock_offset,
    level_trace,
    sync_stats,
    trace_end,
)
from mcclab.analysis.figures import rate_scale, save  # noqa: E402
from mcclab.analysis.results import Run  # noqa: E402


def fig7_sync(run: Run, flow: str = "rlc", nodes: tuple[str, ...] = ("n5", "n6", "n7")
              ) -> dict[str, float]:
    """Convergence and synchrony of the receivers behind the first bottleneck (agent clock),
    plus ``converge_s``: seconds from the last of them starting to convergence."""
    traces = {n: level_trace(run, flow, n) for n in nodes}
    ends = [trace_end(run, flow, n) for n in nodes]
    end = min(ends) if ends and not any(math.isnan(e) for e in ends) else math.nan
    stats = sync_stats(traces, end) if not math.isnan(end) else {}
    if stats:
        stats["converge_s"] = stats["converged_at"] - stats["last_start"]
    return stats


def fig7_figure(run: Run, folder: Path, flow: str = "rlc",
                labels: dict[str, str] | None = None) -> list[Path]:
    """Rate pertinent to the subscription level of every receiver over time (Fig. 7 left)."""
    labels = labels or {"n8": "r0 (0.5 Mbit/s)", "n9": "r1 (128 kbit/s)", "n5": "r2",
                        "n6": "r3", "n7": "r4"}
    offset = clock_offset(run, flow)
    params = _params(run, flow)
    base = params["packet_size"] * 8 / params["tau0"]
    steps = {}
    for node, label in labels.items():
        trace = level_trace(run, flow, node)
        if not trace:
            continue
        end = trace_end(run, flow, node)
        xs, ys = [], []
        for k, (t, level) in enumerate(trace):
            nxt = trace[k + 1][0] if k + 1 < len(trace) else end
            xs += [t - offset, nxt - offset]
            ys += [base * 2 ** level] * 2
        steps[label] = (xs, ys)
    top = max((max(ys) for _, ys in steps.values()), default=base)
    scale, unit = rate_scale(top)
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, (xs, ys) in steps.items():
        ax.plot(xs, [y / scale for y in ys], label=label, linewidth=1.2)
    ax.set_yscale("log", base=2)
    levels = range(0, max(1, round(math.log2(top / base))) + 1)
    ax.set_yticks([base * 2 ** i / scale for i in levels],
                  [f"{base * 2 ** i / scale:.3g}" for i in levels])
    ax.minorticks_off()
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"subscribed rate B_i ({unit}, payload)")
    ax.set_title("RLC Fig. 7 (left): receivers joining at different times")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, alpha=0.3)
    return save(fig, folder, "rlc-fig7")


def _params(run: Run, flow: str) -> dict[str, float]:
    """packet_size (bytes) and tau0 (s) of an RLC flow, from the spec (paper defaults)."""
    from agents.rlc import RlcParams

    for f in run.spec.flows:
        if f.name == flow:
            p = RlcParams.model_validate((getattr(f, "model_extra", None) or {}).get("params")
                                         or {})
            return {"packet_size": p.packet_size, "tau0": p.tau0}
    return {"packet_size": 256, "tau0": 0.125}


def fig5_figure(run: Run, folder: Path, groups: dict[str, list[str]], name: str = "rlc-fig5",
                title: str = "RLC Fig. 5") -> list[Path]:
    """Aggregate throughput per group of flows over time (e.g. RLC vs TCP)."""
    table = run.per_second
    fig, ax = plt.subplots(figsize=(7, 3.6))
    series = {g: table[table["flow"].isin(flows)].groupby("t")["throughput_bps"].sum()
              for g, flows in groups.items()}
    top = max((s.max() for s in series.values() if len(s)), default=1.0)
    scale, unit = rate_scale(top)
    for g, s in series.items():
        ax.plot(s.index, s.values / scale, label=g)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"aggregate throughput ({unit})")
    ax.set_title(title)
    ax.legend()
    ax.grid(True, alpha=0.3)
    return save(fig, folder, name)


def fig3_figure(points: list[tuple[float, float, object]], folder: Path, title: str,
                name: str = "rlc-fig3", packet_size: int = 256, tau0: float = 0.125,
                P: int = 1, W: int = 8) -> list[Path]:  # noqa: N803
    """Throughput (KB/s) vs burst loss rate, one marker per label, with Eq. 2 for c' = 1, 2."""
    import numpy as np

    from agents.rlc.model import eq2_throughput

    pts = [(p, t, lab) for p, t, lab in points if p and p > 0 and not math.isnan(p)]
    fig, ax = plt.subplots(figsize=(5.5, 4))
    lo = min((p for p, _, _ in pts), default=1e-4) / 3
    hi = max((p for p, _, _ in pts), default=1e-1) * 3
    ps = np.logspace(math.log10(lo), math.log10(hi), 100)
    for c, style in ((1.0, "-"), (2.0, "--")):
        ax.plot(ps, [eq2_throughput(p, packet_size, tau0, P, W, c) / 1e3 for p in ps],
                "k" + style, label=f"Eq. 2, c' = {c:g}")
    labels = list(dict.fromkeys(lab for *_, lab in pts))
    for lab, marker in zip(labels, "os^vDx*+<>", strict=False):
        ax.plot([p for p, _, m in pts if m == lab], [t / 1e3 for _, t, m in pts if m == lab],
                marker, linestyle="none", label=str(lab), alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("burst loss rate")
    ax.set_ylabel("throughput (KB/s)")
    ax.set_title(f"RLC Fig. 3: {title}", fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return save(fig, folder, name)
