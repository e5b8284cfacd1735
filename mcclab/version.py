"""The installed mcclab's version, for ``mcclab --version``."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def version() -> str:
    """The version in the package metadata, else the checkout's pyproject.toml.

    The metadata is what pip installed; a checkout run without installing (e.g.
    ``PYTHONPATH=. python -m mcclab``) has none, so pyproject.toml says it then.
    """
    try:
        return dist_version("mcclab")
    except PackageNotFoundError:
        pass
    try:
        return str(tomllib.loads(_PYPROJECT.read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
