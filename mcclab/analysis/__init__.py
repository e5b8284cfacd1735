"""The analysis side: from one run's results folder to metrics, summary, figures and report.

The analysis reads only the results folder (``docs/results.md`` has the
contract), so a run can be re-analysed anywhere, later, by a newer version.

* :mod:`.results` reads a folder; :mod:`.metrics` holds the shared metrics;
* :mod:`.summary` judges the spec's reference quantities (``summary.json``);
* :mod:`.figures` and :mod:`.report` draw the figures and write ``report.html``;
* :mod:`.compare` puts several runs side by side.

The command-line entry points are :func:`.report.report_command` and
:func:`.compare.compare_command`.
"""
