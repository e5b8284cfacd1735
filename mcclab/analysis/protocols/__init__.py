"""Protocol analysis plugins, one module per name prefix (see mcclab.analysis.plugins)."""
