"""Analysis plugins: what a protocol's analysis module imports to register measures and figures.

The registry itself is :mod:`mcclab.model.plugins`, beside the spec's models,
because loading a spec checks the plugins it names and the experiment package
must not import the analysis. This module is the analysis-side name of the same
registry (the same objects, not copies), so a protocol's
``agents/<prefix>/analysis.py`` writes::

    from mcclab.analysis.plugins import figure, measure

    @measure("webrc.artt", unit="s")
    def artt(run: Run, flow: str, node: str | None = None) -> float: ...
"""

from __future__ import annotations

from mcclab.model.plugins import (
    AGENTS_PACKAGE,
    FIGURES,
    MEASURES,
    PROTOCOLS_PACKAGE,
    SWEEP_FIGURES,
    UNITS,
    Plugin,
    PluginError,
    Unit,
    figure,
    get_figure,
    get_measure,
    get_sweep_figure,
    known,
    measure,
    show,
    sweep_figure,
)

__all__ = ["AGENTS_PACKAGE", "FIGURES", "MEASURES", "PROTOCOLS_PACKAGE", "SWEEP_FIGURES",
           "UNITS", "Plugin", "PluginError", "Unit", "figure", "get_figure", "get_measure",
           "get_sweep_figure", "known", "measure", "show", "sweep_figure"]
