"""Live monitoring of a run: Prometheus scraping the agents and the router and link exporter.

The runner starts monitoring in steps that overlap the lab's bring-up
(``session.MonitoringStart``) and calls ``Monitoring.stop`` before teardown.
The modules, from data to processes:

* ``metric_names``: the metric names and labels, the contract with the dashboards;
* ``targets``: the run's scrape targets and exporter sources, from its launch plan;
* ``prometheus``: Prometheus's scrape configuration, command line and HTTP API;
* ``plan``: the files and command lines of the exporter and the run's Prometheus, as data;
* ``storage``: where the run's Prometheus keeps its database (on disk, per lab);
* ``lifecycle``: writing a plan's files, starting its process, waiting until it answers;
* ``session``: one run's monitoring from start to stop (``MonitoringStart``, ``Monitoring``);
* ``export``: the series copied into the results folder (``tables/metrics.csv.gz``);
* ``replay``: a finished run's series served again by a fresh Prometheus;
* ``exporter``, ``netns``: the router and link exporter process;
* ``grafana``, ``promql``: dashboard links and the PromQL reader the dashboard checks use.

This package imports none of them, so ``python -m mcclab.monitoring.exporter``
(and ``replay``) start without the module already loaded.
"""
