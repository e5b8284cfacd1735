"""What the CPU benchmarks that compare processes with hosts share (bench/agents.py,
bench/onoff.py): their command line and their root check."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def parse_bench_args(doc: str, counts: Sequence[int], argv: list[str] | None = None,
                     extra: Callable[[argparse.ArgumentParser], None] = lambda parser: None
                     ) -> argparse.Namespace:
    """Parse a benchmark's options: ``--counts`` (default ``counts``), ``--window``, the
    benchmark's own (added by ``extra``), then ``--keep``. The help's description is
    the first paragraph of ``doc`` (the script's docstring)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=list(counts))
    parser.add_argument("--window", type=float, default=10.0, help="measured seconds per row")
    extra(parser)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the logs in this folder (default: a temporary one)")
    return parser.parse_args(argv)


def require_root(name: str, why: str) -> bool:
    """True when running as root; otherwise say on stderr that ``name`` needs it and
    ``why`` (the caller then exits with status 2)."""
    if os.geteuid() == 0:
        return True
    print(f"{name} needs root ({why})", file=sys.stderr)
    return False
