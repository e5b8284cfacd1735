"""An experiment through the SSH backend on stand-in hosts: ``mcclab run EXP --inventory``.

    python bench/standin_run.py [EXP] [--profile quick] [--set k=v ...]

Builds shaped stand-in hosts for the experiment's topology
(``tests/integration/standins.py``: a namespace and an sshd per node, the links
emulated by the lab's userspace emulator as a testbed's delay nodes would),
then runs ``mcclab run EXP --inventory <their inventory>`` into ``results/``,
so ``mcclab compare`` can put the run beside lab runs of the same experiment.
Needs root; holds the machine-wide lab lock while the stand-ins exist.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

from standins import stand_ins  # noqa: E402

from mcclab.experiment.loader import resolve  # noqa: E402


def main() -> int:
    """Run the experiment on stand-ins; the exit status of ``mcclab run``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", nargs="?", default="default")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    args = parser.parse_args()
    res = resolve(args.experiment, args.profile, args.sets)
    with tempfile.TemporaryDirectory(prefix="mcs-run-") as folder, \
            stand_ins(res.topology, "bench", Path(folder) / "standins", shape=True,
                      seed=res.experiment.seed, proxy=True) as si:
        command = [sys.executable, "-m", "mcclab", "run", args.experiment, "--profile",
                   args.profile, "--inventory", str(si.inventory)]
        for item in args.sets:
            command += ["--set", item]
        return subprocess.run(command, cwd=REPO, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
