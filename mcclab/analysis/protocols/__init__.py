"""Analysis plugins for any protocol (``generic``); a protocol's own are in
``agents/<package>/analysis.py`` (see mcclab.analysis.plugins)."""
