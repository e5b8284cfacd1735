"""Mutation check: apply single-line edits to a protocol core one at a time, run its
behaviour tests, count the mutants they kill, and restore the file byte for byte.

    python bench/mutants.py                 # every protocol
    python bench/mutants.py --protocol webrc

A mutant is *killed* when the tests fail with it. The mutants are applied to a copy
of the checkout (its tracked files with their uncommitted edits) in a temporary
folder, never to the checkout itself: a lab or test started meanwhile from the
checkout must not run a mutated core. Each file of the copy is saved before its first
edit and written back after every mutant; the script checks the restored bytes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    """Replace the single occurrence of ``old`` in ``file`` by ``new``."""

    protocol: str
    file: str
    old: str
    new: str
    what: str


TESTS = {
    "webrc": ["tests/unit/test_behaviour_webrc.py"],
    "stair": ["tests/unit/test_behaviour_stair.py"],
    "ormcc": ["tests/unit/test_behaviour_ormcc.py", "tests/unit/test_ormcc_arrival.py"],
    "tfmcc": ["tests/unit/test_behaviour_tfmcc.py", "tests/unit/test_tfmcc_core.py"],
    "pgmcc": ["tests/unit/test_behaviour_pgmcc.py", "tests/unit/test_pgmcc_core.py"],
}

W, S, OS, OR = ("agents/webrc/receiver.py", "agents/stair/receiver.py",
                "agents/ormcc/sender.py", "agents/ormcc/receiver.py")
TS, TR, TE = ("agents/tfmcc/sender.py", "agents/tfmcc/receiver.py",
              "agents/tfmcc/estimators.py")
PS, PR, PE, PP = ("agents/pgmcc/sender.py", "agents/pgmcc/receiver.py",
                  "agents/pgmcc/estimators.py", "agents/pgmcc/params.py")
MUTANTS = [
    Mutant("webrc", W, "near = [s for s in self.event_starts if abs(at - s) < reach]",
           "near = [s for s in self.event_starts if abs(at - s) > reach]", "flip comparison"),
    Mutant("webrc", W, "reach = artt + step  #", "reach = artt  #", "drop the spacing term"),
    Mutant("webrc", W, "at = before + k * step", "at = now", "time at detection"),
    Mutant("webrc", W, "        self.event_starts.append(at)\n", "",
           "remove the event-start update"),
    Mutant("webrc", W, "                self.last_at[cn] = now\n", "",
           "remove the last-arrival update"),
    Mutant("webrc", W, "step = (now - before) / (count + 1)", "step = (now - before) / count",
           "interpolation off by one"),
    Mutant("webrc", W, "self.loss_event_end = max(self.loss_event_end, at + artt)",
           "self.loss_event_end = max(self.loss_event_end, now + artt)",
           "loss event blocks joins from detection"),
    Mutant("stair", S, "        if self.period_loss or now - self.last_md < self.p.md_holdoff:",
           "        if now - self.last_md < self.p.md_holdoff:", "drop the per-period rule"),
    Mutant("stair", S, "        self.period_loss = True\n        self.last_md = now",
           "        self.last_md = now", "remove the period-loss update"),
    Mutant("stair", S, "        if sl != self.stairs[0]:\n            return actions\n"
           "        self.period_loss = False\n",
           "        if sl != self.stairs[0]:\n            return actions\n",
           "never reopen a decrease period"),
    Mutant("stair", S, "if ext.kind == SL and sl in self.cycles:",
           "if ext.kind == SL and sl == self.stairs[0]:", "only the first layer recycles"),
    Mutant("stair", S, "if self.full[sl] and not self.lossy[sl] and",
           "if self.full[sl] and", "increase after a lossy period"),
    Mutant("stair", S, "        self.full[sl] = True\n", "", "remove the whole-period update"),
    Mutant("stair", S, "            self.lossy[sl] = True\n", "            pass\n",
           "losses never mark a period"),
    Mutant("ormcc", OS, "rtt = max(arrival - ci.echo_ns / 1e9, self.params.min_rtt)",
           "rtt = max(now - ci.echo_ns / 1e9, self.params.min_rtt)", "RTT at handling time"),
    Mutant("ormcc", OS, "self._set_rate(now, min(self.rate, self.params.beta * trac))",
           "self._set_rate(now, min(self.rate, 0.9 * trac))", "decrease factor 0.9"),
    Mutant("ormcc", OS, "self._set_rate(now, min(self.rate, self.params.beta * trac))",
           "self._set_rate(now, min(self.rate, 0.5 * trac))", "decrease factor 0.5"),
    Mutant("ormcc", OS, "self.rate + self.size * 8 / self.rtt_cr)",
           "self.rate + 2 * self.size * 8 / self.rtt_cr)", "double the increase"),
    Mutant("ormcc", OS, "if self.last_cut is not None and now - self.last_cut < self.rtt_cr:",
           "if self.last_cut is not None and now - self.last_cut > self.rtt_cr:",
           "flip the once-per-RTT cut"),
    Mutant("ormcc", OS, "        self.rtt_cr = (1 - a) * self.rtt_cr + a * sample\n", "",
           "remove the RTT update"),
    Mutant("ormcc", OS, "elif self.mu.mean is not None and ci.trac < self.mu.mean - self.mu.dev:",
           "elif self.mu.mean is not None and ci.trac > self.mu.mean - self.mu.dev:",
           "flip the CR switch test"),
    Mutant("ormcc", OR, "return self.avg.mean < cr.mu_cr - cr.sigma_cr",
           "return self.avg.mean < cr.mu_cr + cr.sigma_cr", "receiver: suppress less"),
    Mutant("ormcc", OR, "if not cr.valid or cr.cr == self.rid:", "if True:",
           "receiver: no suppression"),
    Mutant("tfmcc", TE, "4 * rtt * 3 * math.sqrt(3 * p / 8)", "rtt * 3 * math.sqrt(3 * p / 8)",
           "t_RTO = R in the equation"),
    Mutant("tfmcc", TE, "sent <= self.event_time + rtt:", "sent <= self.event_time:",
           "every loss is a loss event"),
    Mutant("tfmcc", TE, "WEIGHTS = (1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2)",
           "WEIGHTS = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)", "flat interval weights"),
    Mutant("tfmcc", TE, "mean = max(i_tot0 / w_tot0, i_tot1 / w_tot1)",
           "mean = i_tot1 / w_tot1", "ignore the open interval"),
    Mutant("tfmcc", TS, "if self.clr is None or r.rate < self.clr_rate:",
           "if self.clr is None or r.rate > self.clr_rate:", "flip the CLR switch test"),
    Mutant("tfmcc", TS, "step = dt * self.size * 8 / (self.rmax * self.rmax)",
           "step = 2 * dt * self.size * 8 / (self.rmax * self.rmax)", "double the increase limit"),
    Mutant("tfmcc", TS, "self.target = 2 * reported", "self.target = 4 * reported",
           "slow start to four times the receive rate"),
    Mutant("tfmcc", TS, "        if silent >= drop_after:", "        if False:",
           "never drop a silent CLR"),
    Mutant("tfmcc", TR, "return not own < (1 - self.p.suppress_margin) * bound", "return False",
           "receiver: no suppression"),
    Mutant("tfmcc", TR, "self.rtt = q * sample + (1 - q) * self.rtt", "self.rtt = sample",
           "receiver: RTT without smoothing"),
    Mutant("pgmcc", PE, "return m_acker < c * m_candidate", "return m_acker > c * m_candidate",
           "flip the acker switch test"),
    Mutant("pgmcc", PE, "return m_acker < c * m_candidate", "return m_acker < m_candidate",
           "no switching bias (C = 1)"),
    Mutant("pgmcc", PE, "return rtt * math.sqrt(p) * (1", "return math.sqrt(p) * (1",
           "RTT left out of the throughput estimate"),
    Mutant("pgmcc", PE, "self.p *= 1.0 - self.gain", "self.p *= 1.0 - 2 * self.gain",
           "receptions weigh twice in the loss EWMA"),
    Mutant("pgmcc", PP, "default=500 / 65536", "default=5000 / 65536", "EWMA gain ten times"),
    Mutant("pgmcc", PS, "                and last_lost >= self.cut_floor):", "                ):",
           "cut again for packets sent before the last cut"),
    Mutant("pgmcc", PS, "if (last_lost is not None and self.recover_until is None\n"
           "                and last_lost >= self.cut_floor):", "if last_lost is not None:",
           "no once-per-RTT guard"),
    Mutant("pgmcc", PS, "self.window = max(self.window / 2, 1.0)",
           "self.window = max(self.window, 1.0)", "never halve the window"),
    Mutant("pgmcc", PS, "elif bin(bitmap & ((1 << k) - 1)).count(\"1\") >= self.p.dupthresh:",
           "elif True:", "a hole is a loss at once (no dupthresh)"),
    Mutant("pgmcc", PS, "        if self.window < self.p.ssthresh:", "        if False:",
           "no slow start"),
    Mutant("pgmcc", PS, "self.window = min(self.window + n / self.window, self.p.max_window)",
           "self.window = min(self.window + 2 * n / self.window, self.p.max_window)",
           "double the linear increase"),
    Mutant("pgmcc", PS, "self.tokens += acked + lost + unreported",
           "self.tokens += acked + unreported", "lost packets keep their tokens"),
    Mutant("pgmcc", PS, "if self.acker is not None and self.retry >= self.p.acker_timeouts:",
           "if self.acker is not None and self.retry > 100:", "never drop a silent acker"),
    Mutant("pgmcc", PS, "rtt = max(arrival - r.echo_ns / 1e9 - r.delay_us / 1e6",
           "rtt = max(arrival - r.echo_ns / 1e9", "ignore the receiver's hold time"),
    Mutant("pgmcc", PR, "and ext.acker == self.rid", "and ext.acker != self.rid",
           "receiver: ACK when not the acker"),
    Mutant("pgmcc", PR, "                    self.loss.lost()\n", "                    pass\n",
           "receiver: losses left out of the EWMA"),
    Mutant("pgmcc", PR, "for seq in lost[:self.p.max_naks_per_gap]:", "for seq in lost[:1]:",
           "receiver: one NAK per gap"),
]


def copy_tree(dest: Path) -> Path:
    """The checkout's files (tracked, edited, and new unignored ones) copied into ``dest``."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def run_tests(tests: list[str], tree: Path) -> bool:
    """True when the tests pass, importing the packages from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           *tests], cwd=tree, env=env, capture_output=True, text=True,
                          check=False)
    return proc.returncode == 0


def check(mutants: list[Mutant], tree: Path) -> list[tuple[Mutant, bool]]:
    """Apply each mutant alone in ``tree``, run its protocol's tests; (mutant, killed)."""
    saved = {m.file: (tree / m.file).read_bytes() for m in mutants}
    results = []
    try:
        for m in mutants:
            path = tree / m.file
            text = saved[m.file].decode()
            if text.count(m.old) != 1:
                raise SystemExit(f"{m.file}: {m.what}: the edit does not match exactly once")
            path.write_text(text.replace(m.old, m.new))
            try:
                killed = not run_tests(TESTS[m.protocol], tree)
            finally:
                path.write_bytes(saved[m.file])
            results.append((m, killed))
            print(f"{m.protocol:6} {'killed' if killed else 'SURVIVED':8} {m.what}", flush=True)
    finally:
        for file, data in saved.items():
            (tree / file).write_bytes(data)
            assert (tree / file).read_bytes() == data, file
    return results


def main() -> None:
    """Run the mutants of one protocol or all, print a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", choices=sorted(TESTS))
    args = ap.parse_args()
    mutants = [m for m in MUTANTS if args.protocol in (None, m.protocol)]
    with tempfile.TemporaryDirectory(prefix="mcclab-mutants-") as tmp:
        tree = copy_tree(Path(tmp))
        for protocol in sorted({m.protocol for m in mutants}):
            if not run_tests(TESTS[protocol], tree):
                raise SystemExit(f"{protocol}: the behaviour tests fail without any mutant")
        results = check(mutants, tree)
    print("\n| protocol | mutants | killed | survivors |\n| --- | --- | --- | --- |")
    for protocol in sorted({m.protocol for m, _ in results}):
        mine = [(m, k) for m, k in results if m.protocol == protocol]
        survivors = "; ".join(m.what for m, k in mine if not k) or "none"
        print(f"| {protocol} | {len(mine)} | {sum(k for _, k in mine)} | {survivors} |")


if __name__ == "__main__":
    main()
