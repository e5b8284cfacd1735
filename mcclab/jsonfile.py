"""Writing a JSON record so that a reader never sees half of it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any, *, newline: bool = False) -> None:
    """Write ``data`` to ``path`` as indented JSON, replacing the file whole.

    The text goes to a temporary name private to this process in the same folder,
    then is renamed over ``path``: readers (``mcclab clean``, a sweep's other
    runner, the live report) see the old record or the new, never a mix, and two
    writers racing on one record do not share a temporary file. Values JSON does
    not know (paths, datetimes) are written as their ``str``.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + ("\n" if newline else ""))
    tmp.replace(path)
