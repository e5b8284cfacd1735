"""Links into Grafana (when the machine has it) or else into Prometheus's own graph page.

``ansible/roles/grafana`` writes ``/etc/mcclab/grafana.json`` with the URL it
serves on (``http://127.0.0.1:3000``: loopback only, forwarded to the host by
the Vagrantfile). Without that file this machine has no Grafana, and the link
printed for a run points at Prometheus instead.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

GRAFANA_MARKER = Path("/etc/mcclab/grafana.json")
OVERVIEW_UID = "mcclab-overview"
OVERVIEW_SLUG = "mcclab-experiment-overview"
DATASOURCE_UID = "mcclab-prometheus"


def grafana_base(marker: Path = GRAFANA_MARKER) -> str | None:
    """Grafana's base URL from the provisioning marker, or None without Grafana."""
    try:
        return json.loads(marker.read_text())["url"].rstrip("/")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def dashboard_url(base: str, run: str, start: float, end: float | None,
                  uid: str = OVERVIEW_UID, slug: str = OVERVIEW_SLUG,
                  refresh: str | None = "5s") -> str:
    """A dashboard at the run's time range (Unix seconds; end None = now) with its run chosen."""
    params = [("orgId", "1"), ("var-run", run), ("from", str(int(start * 1000))),
              ("to", "now" if end is None else str(int(end * 1000 + 999)))]
    if refresh:
        params.append(("refresh", refresh))
    return f"{base}/d/{uid}/{slug}?{urllib.parse.urlencode(params)}"


def prometheus_url(base: str, run: str, start: float, end: float) -> str:
    """Prometheus's graph page: the run's per-flow throughput over its time range (Unix s)."""
    expr = f'mcc_agent_throughput_bps{{run="{run}"}} or mcc_iperf_throughput_bps{{run="{run}"}}'
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(end))
    params = {"g0.expr": expr, "g0.tab": "0", "g0.range_input": f"{max(1, round(end - start))}s",
              "g0.end_input": stamp}
    return f"{base}/graph?{urllib.parse.urlencode(params)}"
