"""Side by side: the kernel backend in the VM and the userspace backend on the host.

Both sides are raw JSON files of ``bench/bench_links.py --design vm`` (same
settings, same measurements). Each setting expands into one row per quantity,
with the target and, per side, the measured value and its verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

RTT_ABS_MS, RTT_REL = 0.5, 0.02  # as bench_links: median within max(0.5 ms, 2%)


@dataclass(frozen=True)
class Cell:
    """A measured value and its verdict (None: no target applies)."""

    text: str
    ok: bool | None


def setting_label(s: dict) -> str:
    """Short label of a setting dict."""
    red = " (not gentle)" if s["disc"] == "red" and not s.get("gentle", True) else ""
    return (f"{s['group']}: {s['rate'] / 1e6:g} Mbit/s, {s['delay'] * 1e3:g} ms, "
            f"{s['loss'] * 100:g}%, {s['limit']} pkt {s['disc']}{red}")


def quantities(result: dict) -> dict[str, tuple[str, Cell]]:
    """quantity -> (target text, measured cell) for one setting's result."""
    s, v = result["setting"], result["verdicts"]
    out: dict[str, tuple[str, Cell]] = {}
    want = result["rtt_expected"]
    tol = max(RTT_ABS_MS, RTT_REL * want)
    out["RTT median (ms)"] = (f"{want:.2f} ± {tol:.2f}",
                              Cell(f"{result['rtt']['median']:.2f}", v.get("rtt median")))
    out["RTT p99 - median (ms)"] = ("≤ 1", Cell(
        f"{result['rtt']['p99'] - result['rtt']['median']:.2f}", v.get("rtt p99-median ≤1ms")))
    out["UDP rate (Mbit/s)"] = (f"{s['rate'] / 1e6:g} ± 2%", Cell(
        f"{result['udp_bps'] / 1e6:.3f} ({(result['udp_bps'] / s['rate'] - 1) * 100:+.1f}%)",
        v.get("udp rate ±2%")))
    tcp_target = f"{s['rate'] / 1e6:g} ± 2%" if result["tcp_applicable"] else "(no target)"
    out["TCP rate (Mbit/s)"] = (tcp_target, Cell(f"{result['tcp_bps'] / 1e6:.3f}",
                                                 v.get("tcp rate ±2%")))
    if result.get("loss"):
        lo, hi = result["loss"]["ci"]
        out["loss (%)"] = (f"{s['loss'] * 100:g} in 99% CI", Cell(
            f"{result['loss']['rate'] * 100:.2f} [{lo * 100:.2f}, {hi * 100:.2f}]",
            v.get("loss in 99% CI")))
    if result.get("queue"):
        out["queue at drop-tail drops (pkt)"] = (f"{s['limit']} ± 1", Cell(
            f"{result['queue']['queue_at_drop']:g}", v.get("drop-tail onset ±1")))
    for p in result.get("red") or []:
        tol_red = max(1.0, 0.05 * p["curve_avg"])
        ok = abs(p["avg_queue_owd"] - p["curve_avg"]) <= tol_red
        out[f"RED avg queue at f={p['target']:g} (pkt)"] = (
            f"{p['curve_avg']:.1f} ± {tol_red:.1f}",
            Cell(f"{p['avg_queue_owd']:.1f} (f {p['drop_fraction'] * 100:.1f}%"
                 + (f"; Linux red's curve {p['curve_avg_linux']:.1f}"
                    if "curve_avg_linux" in p else "") + ")", ok))
    return out


def load(path: Path) -> dict | None:
    """A raw bench JSON, or None if the file is missing."""
    return json.loads(path.read_text()) if path.exists() else None


def comparison(kernel: dict | None, userspace: dict | None) -> list[list[str | Cell]]:
    """Rows: setting, quantity, target, kernel cell, userspace cell (settings in kernel order)."""
    sides = [kernel or {"results": []}, userspace or {"results": []}]
    by_label: dict[str, list[dict | None]] = {}
    for i, side in enumerate(sides):
        for r in side["results"]:
            by_label.setdefault(setting_label(r["setting"]), [None, None])[i] = r
    rows: list[list[str | Cell]] = []
    for label, pair in by_label.items():
        q = [quantities(r) if r else {} for r in pair]
        names = list(dict.fromkeys([*q[0], *q[1]]))
        for name in names:
            target = (q[0].get(name) or q[1].get(name))[0]  # type: ignore[index]
            cells = [q[i][name][1] if name in q[i] else Cell("-", None) for i in (0, 1)]
            rows.append([label, name, target, *cells])
    return rows


def mark(cell: Cell) -> str:
    """Cell text with its verdict."""
    return cell.text + ("" if cell.ok is None else (" ok" if cell.ok else " MISS"))


def markdown(rows: list[list[str | Cell]]) -> str:
    """The comparison as a Markdown table."""
    lines = ["| setting | quantity | target | kernel (VM) | userspace (host) |",
             "|---|---|---|---|---|"]
    last = None
    for label, name, target, k, u in rows:
        shown = label if label != last else ""
        last = label
        lines.append(f"| {shown} | {name} | {target} | {mark(k)} | {mark(u)} |")  # type: ignore[arg-type]
    return "\n".join(lines) + "\n"


def misses(side: dict | None) -> list[str]:
    """'setting: target' for every missed verdict of one side."""
    if not side:
        return []
    return [f"{setting_label(r['setting'])}: {k}" for r in side["results"]
            for k, ok in r["verdicts"].items() if ok is False]
