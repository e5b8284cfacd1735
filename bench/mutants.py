"""Mutation check: apply single-line edits to a protocol core one at a time, run its
behaviour tests, count the mutants they kill, and restore the file byte for byte.

    make mutants                            # every protocol (bench/mutants.py)
    python bench/mutants.py --protocol webrc

Each protocol lists its mutants and behaviour tests in ``agents/<protocol>/mutants.py``.

A mutant is *killed* when the tests fail with it. The mutants are applied to a copy
of the checkout (its tracked files with their uncommitted edits) in a temporary
folder, never to the checkout itself: a lab or test started meanwhile from the
checkout must not run a mutated core. Each file of the copy is saved before its first
edit and written back after every mutant; the script checks the restored bytes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: import the repository's packages
    sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Mutant:
    """Replace the single occurrence of ``old`` in ``file`` by ``new``."""

    protocol: str
    file: str
    old: str
    new: str
    what: str


def load(root: Path = ROOT) -> tuple[dict[str, list[str]], list[Mutant]]:
    """Each protocol's behaviour tests and mutants, from ``agents/<protocol>/mutants.py``.

    Protocols are found as the registry finds them (a package under ``agents/``); one
    without a ``mutants`` module has no mutants. Keyed by package name.
    """
    from agents.runtime.registry import protocol_packages

    tests: dict[str, list[str]] = {}
    mutants: list[Mutant] = []
    for package in protocol_packages():
        name = package.split(".")[-1]
        if not (root / "agents" / name / "mutants.py").is_file():
            continue
        module = importlib.import_module(f"{package}.mutants")
        tests[name] = list(module.TESTS)
        mutants += [Mutant(name, f"agents/{name}/{file}", old, new, what)
                    for file, old, new, what in module.MUTANTS]
    return tests, mutants


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


def check(mutants: list[Mutant], tests: dict[str, list[str]], tree: Path
          ) -> list[tuple[Mutant, bool]]:
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
                killed = not run_tests(tests[m.protocol], tree)
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
    tests, every = load()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", choices=sorted(tests))
    args = ap.parse_args()
    mutants = [m for m in every if args.protocol in (None, m.protocol)]
    with tempfile.TemporaryDirectory(prefix="mcclab-mutants-") as tmp:
        tree = copy_tree(Path(tmp))
        for protocol in sorted({m.protocol for m in mutants}):
            if not run_tests(tests[protocol], tree):
                raise SystemExit(f"{protocol}: the behaviour tests fail without any mutant")
        results = check(mutants, tests, tree)
    print("\n| protocol | mutants | killed | survivors |\n| --- | --- | --- | --- |")
    for protocol in sorted({m.protocol for m, _ in results}):
        mine = [(m, k) for m, k in results if m.protocol == protocol]
        survivors = "; ".join(m.what for m, k in mine if not k) or "none"
        print(f"| {protocol} | {len(mine)} | {sum(k for _, k in mine)} | {survivors} |")


if __name__ == "__main__":
    main()
