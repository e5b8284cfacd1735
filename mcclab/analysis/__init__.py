"""The analysis side: from one run's results folder to metrics, summary, figures and report.

The analysis reads only the results folder (``docs/results.md`` has the
contract, :mod:`mcclab.resultsdir` its names and columns), so a run can be
re-analysed anywhere, later, by a newer version.

* :mod:`.results` reads a folder; :mod:`.metrics` holds the shared metrics;
* :mod:`.summary` judges the spec's reference quantities (``summary.json``);
* :mod:`.figures` draws the figures; :mod:`.report` writes a run's ``report.html``;
* :mod:`.sweep` reads a sweep folder, :mod:`.trials` averages a sweep over seeds,
  :mod:`.sweep_report` writes the sweep's files and page;
* :mod:`.page` holds what both pages share (style, escaping, badges, figures);
* :mod:`.compare` puts several runs side by side.

The command-line entry points are :func:`.rebuild.report_command` (a run's or a
sweep's report) and :func:`.compare.compare_command`.
"""
