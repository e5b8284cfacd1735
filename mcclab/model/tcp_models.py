"""The TCP each paper competed with: one named model per paper, and Linux's default beside it.

The models live in ``experiments/tcp/models.yaml`` (one definition per paper,
each setting with the paper's words or the default it is inferred from; the
derivation is in ``docs/tcp-models.md``). An experiment names one with
``tcp: {model: NAME}``; :func:`host_sysctls` turns a model into the sender's
namespace settings and the launcher takes the congestion control and the
window ceiling from it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from mcclab.model.loader import SpecError
from mcclab.model.topology import StrictModel
from mcclab.model.units import Packets, format_packets, in_range

MODELS_FILE = Path(__file__).resolve().parents[2] / "experiments" / "tcp" / "models.yaml"
Window = Annotated[Packets, in_range(format_packets, 1, why="a window holds a packet")]
CongestionControl = Literal["reno", "cubic", "bbr"]
SETTINGS = ("cc", "max_window", "sack", "rack", "tlp", "frto")
# The sysctl behind each switch and the value that turns it off; "on" leaves the
# namespace's default, which a new namespace takes from the kernel, not from the host.
SWITCHES = {"sack": ("net.ipv4.tcp_sack", 0), "rack": ("net.ipv4.tcp_recovery", 0),
            "tlp": ("net.ipv4.tcp_early_retrans", 0), "frto": ("net.ipv4.tcp_frto", 0)}


class TcpModel(StrictModel):
    """One TCP as a paper ran it: congestion control, window ceiling, loss recovery."""

    paper: str = Field(description="the paper (and its part) whose TCP this is")
    testbed: str = Field(description="simulator or kernel, in the paper's words")
    verdict: bool = Field(description="true: a paper's model, whose runs give the verdict; "
                          "false: a second reading, never the verdict")
    cc: CongestionControl
    max_window: Window | None = Field(description="ceiling on the congestion window in "
                                      "segments (ns-2's window_); null: none")
    sack: bool = Field(description="selective acknowledgements (net.ipv4.tcp_sack)")
    rack: bool = Field(description="RACK loss detection (net.ipv4.tcp_recovery)")
    tlp: bool = Field(description="tail loss probes (net.ipv4.tcp_early_retrans)")
    frto: bool = Field(description="F-RTO spurious-timeout detection (net.ipv4.tcp_frto)")
    why: dict[Literal["cc", "max_window", "sack", "rack", "tlp", "frto"], str] = Field(
        description="per setting: 'quoted: ...' (the paper says so) or 'inferred: ...'")

    @model_validator(mode="after")
    def _every_setting_sourced(self) -> TcpModel:
        missing = [s for s in SETTINGS if s not in self.why]
        if missing:
            raise ValueError(f"why: no source for {', '.join(missing)}")
        if self.verdict:
            bad = [s for s, text in self.why.items()
                   if not text.startswith(("quoted:", "inferred:"))]
            if bad:
                raise ValueError(f"why.{bad[0]}: a paper's model says 'quoted:' or "
                                 "'inferred:' for every setting")
        return self


class TcpModels(StrictModel):
    """The file: every model by name, and which one is the Linux reading."""

    models: dict[Annotated[str, Field(pattern=r"^[a-z0-9-]+$")], TcpModel]
    linux_reading: str

    @model_validator(mode="after")
    def _reading_known(self) -> TcpModels:
        reading = self.models.get(self.linux_reading)
        if reading is None:
            raise ValueError(f"linux_reading: no model {self.linux_reading!r}")
        if reading.verdict:
            raise ValueError("linux_reading: the Linux reading is never a verdict")
        return self


def load_models(path: Path = MODELS_FILE) -> TcpModels:
    """Read and validate a models file; SpecError names the file and each bad field."""
    try:
        data = yaml.safe_load(path.read_text())
        return TcpModels.model_validate(data)
    except OSError as exc:
        raise SpecError(path, [("", f"cannot read: {exc.strerror}")]) from None
    except yaml.YAMLError as exc:
        raise SpecError(path, [("", f"not YAML: {exc}")]) from None
    except ValidationError as exc:
        raise SpecError(path, [(".".join(map(str, e["loc"])), e["msg"])
                               for e in exc.errors()]) from None


@cache
def models() -> TcpModels:
    """The repository's models (read once)."""
    return load_models()


def model(name: str) -> TcpModel:
    """One model by name; KeyError names the known ones."""
    known = models().models
    if name not in known:
        raise KeyError(f"no TCP model {name!r}; known: {', '.join(sorted(known))}")
    return known[name]


def host_sysctls(m: TcpModel) -> list[tuple[str, int]]:
    """The (key, value) sysctls a TCP sender's namespace needs for this model."""
    return [SWITCHES[s] for s in ("sack", "rack", "tlp", "frto") if not getattr(m, s)]


def reading_label(name: str | None) -> str:
    """How reports name a run's TCP: the paper's model (the verdict) or a second reading."""
    if name is None:
        return ""
    try:
        m = model(name)
    except (KeyError, SpecError):
        return f"TCP model {name} (unknown to this version)"
    cap = f"window ≤ {m.max_window} segments" if m.max_window else "no window ceiling"
    names = {"sack": "SACK", "rack": "RACK", "tlp": "TLP", "frto": "F-RTO"}
    recovery = ", ".join(f"{shown} {'on' if getattr(m, key) else 'off'}"
                         for key, shown in names.items())
    what = f"{m.cc}, {cap}, {recovery}"
    if m.verdict:
        return f"TCP model {name}: the paper's TCP ({what}); these are the verdicts"
    return (f"TCP model {name}: Linux's default TCP ({what}); a second reading, "
            "not the verdict")
