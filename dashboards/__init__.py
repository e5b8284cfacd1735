"""mcclab's Grafana dashboards as code (grafana-foundation-sdk).

``python -m dashboards`` (``make dashboards``) writes ``dashboards/json/*.json``,
which Grafana provisions; ``python -m dashboards --check`` fails when the
committed JSON differs from what the code builds. Metric names come from the
contract in ``mcclab.monitoring.metric_names``; see docs/monitoring.md.
"""
