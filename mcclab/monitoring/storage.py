"""Where a run's own Prometheus keeps its database (TSDB): on disk, one folder per lab.

The database goes to ``/var/lib/mcclab/labs/<lab-id>/prometheus`` (the root
can be moved with ``MCCLAB_TSDB_ROOT``), not to the lab's directory under
``/run``: ``/run`` is tmpfs on most machines, so every byte there is RAM, and
it is small (10-20 % of the memory on a laptop or a VM). Nor does it go to
the results folder: the results keep the series as ``tables/metrics.csv.gz``,
which replays into a fresh Prometheus, and the results folder can sit on a
shared or network file system, where Prometheus's storage is not supported.

The lab's folder is recorded in the lab state (``LabState.add_dir``) before it
is made, so ``mcclab clean`` removes it after a crash like the rest of the lab.
A folder whose lab has no record any more (the machine rebooted after a crash,
taking ``/run/mcclab`` with it) is swept when the next run prepares its own.

:func:`check_root` runs before any monitoring process starts: a root that is
missing, not a directory, not writable or nearly full is reported in one
sentence that names the path, the cause and the setting to change.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from mcclab.state import LabState

ROOT_ENV = "MCCLAB_TSDB_ROOT"
DEFAULT_ROOT = Path("/var/lib/mcclab/labs")
TSDB_NAME = "prometheus"
# A run's database stays small (21 MiB after the 1000-s soak with 2-min blocks), but
# each block write preallocates one chunk segment (prometheus.RUN_CHUNK_SEGMENT, 64 MiB)
# next to the write-ahead log's 128-MiB segments: below this much free space a run
# could fill the disk in the middle of its flows.
MIN_FREE_BYTES = 256 * 1024 * 1024


class StorageError(RuntimeError):
    """The TSDB root cannot hold a run's database; the message says why and what to set."""


def tsdb_root(environ: Mapping[str, str] | None = None) -> Path:
    """The folder that holds every lab's database folder: ``MCCLAB_TSDB_ROOT`` or the default."""
    env = os.environ if environ is None else environ
    value = env.get(ROOT_ENV, "").strip()
    return Path(value) if value else DEFAULT_ROOT


def lab_dir(root: Path, lab_id: str) -> Path:
    """The folder of one lab under the root (recorded in its state, removed with it)."""
    if not lab_id or "/" in lab_id or lab_id in (".", ".."):
        raise ValueError(f"not a lab id: {lab_id!r}")
    return root / lab_id


def tsdb_path(root: Path, lab_id: str) -> Path:
    """The ``--storage.tsdb.path`` of one lab's Prometheus."""
    return lab_dir(root, lab_id) / TSDB_NAME


def _hint(root: Path, default: Path) -> str:
    return (f"set {ROOT_ENV} to a writable folder on a local disk" if root == default
            else f"{ROOT_ENV}={root} is set; point it at a writable folder on a local disk")


def check_root(root: Path, default: Path = DEFAULT_ROOT,
               min_free: int = MIN_FREE_BYTES) -> None:
    """Make sure ``root`` can take a database, or raise :class:`StorageError`.

    The default root is created with its parents (a fresh machine has no
    ``/var/lib/mcclab``); a root chosen with ``MCCLAB_TSDB_ROOT`` must exist, as a
    missing one is more likely a typo or an unmounted disk than a folder to make.
    Writability is tried with a real file, which also catches a read-only mount.
    """
    what = f"Prometheus's data folder {root}"
    if root.exists() and not root.is_dir():
        raise StorageError(f"{what} is not a directory; {_hint(root, default)}")
    if not root.exists():
        if root != default:
            raise StorageError(f"{what} does not exist; {_hint(root, default)}")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"{what} cannot be created ({exc.strerror or exc}); "
                               f"{_hint(root, default)}") from exc
    try:
        fd, probe = tempfile.mkstemp(prefix=".mcclab-probe-", dir=root)
    except OSError as exc:
        raise StorageError(f"{what} is not writable ({exc.strerror or exc}); "
                           f"{_hint(root, default)}") from exc
    os.close(fd)
    os.unlink(probe)
    free = shutil.disk_usage(root).free
    if free < min_free:
        raise StorageError(f"{what} has {free / 2**20:.0f} MiB free, less than the "
                           f"{min_free / 2**20:.0f} MiB a run's database may need; "
                           f"{_hint(root, default)}")


def sweep(root: Path, live_labs: Iterable[str]) -> list[Path]:
    """Remove the folders of labs that have no record any more; returns what was removed.

    A lab records its folder before making it, so a folder present now whose lab
    is not in ``live_labs`` (every lab recorded under /run/mcclab, dead owners
    included: ``mcclab clean`` removes those) belongs to no lab.
    """
    keep = set(live_labs)
    removed = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.is_dir() and not path.is_symlink() and path.name not in keep:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def prepare(state: LabState, root: Path, live_labs: Iterable[str],
            default: Path = DEFAULT_ROOT, min_free: int = MIN_FREE_BYTES) -> Path:
    """Check the root, sweep orphans, record the lab's folder, make it; returns the TSDB path.

    Raises :class:`StorageError` (nothing recorded, nothing made) when the root is unusable.
    """
    check_root(root, default, min_free)
    sweep(root, {*live_labs, state.lab_id})
    folder = lab_dir(root, state.lab_id)
    state.add_dir(folder)  # recorded first: a kill from here on leaves it to `mcclab clean`
    path = folder / TSDB_NAME
    path.mkdir(parents=True, exist_ok=True)
    return path


def disk_usage(path: Path) -> int:
    """Bytes ``path`` takes on disk (allocated blocks, as ``du`` counts them); 0 if absent."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in (*files, "."):
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def release(state: LabState | None, tsdb: Path) -> None:
    """Remove a lab's database folder and drop it from the lab's record."""
    folder = tsdb.parent
    shutil.rmtree(folder, ignore_errors=True)
    if state is not None and str(folder) in state.dirs and not folder.exists():
        state.dirs.remove(str(folder))
        with contextlib.suppress(OSError):
            state.save()
