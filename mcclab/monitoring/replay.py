"""Replay a finished run's series: ``tables/metrics.csv.gz`` into a fresh Prometheus.

    python -m mcclab.monitoring.replay results/default/<run-id> [--port 9090]

The CSV is turned into OpenMetrics, ``promtool tsdb create-blocks-from
openmetrics`` writes TSDB blocks from it, and a Prometheus on 127.0.0.1 serves
them until Ctrl-C. With Grafana on the machine, the run's dashboards then show
the run as they did live (the printed link has its time range and run).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcclab.monitoring import export, grafana
from mcclab.monitoring import prometheus as prom

PROMTOOL = "/usr/bin/promtool"
# Backfilled samples are old; a long retention keeps Prometheus from deleting them.
REPLAY_RETENTION = "100y"


def backfill(csv_path: Path, data_dir: Path, promtool: str = PROMTOOL) -> tuple[float, float]:
    """Write TSDB blocks for every sample in ``csv_path``; returns the (first, last) time."""
    rows = export.read_csv(csv_path)
    if not rows:
        raise ValueError(f"{csv_path} holds no samples")
    data_dir.mkdir(parents=True, exist_ok=True)
    om = data_dir.parent / f"{data_dir.name}.om"
    om.write_text(export.to_openmetrics(rows))
    out = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om),
                          str(data_dir)], capture_output=True, text=True, check=False)
    om.unlink()
    if out.returncode != 0:
        raise RuntimeError(f"promtool failed: {(out.stdout + out.stderr).strip()[-800:]}")
    times = [float(r["time"]) for r in rows]
    return min(times), max(times)


def serve_argv(data_dir: Path, config: Path, listen: str) -> list[str]:
    """A Prometheus serving backfilled blocks (scrapes nothing)."""
    return prom.argv(config, data_dir, listen, retention=REPLAY_RETENTION)


def main(args: list[str] | None = None) -> int:
    """Backfill and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m mcclab.monitoring.replay")
    parser.add_argument("run", type=Path, help="a run's results folder")
    parser.add_argument("--port", type=int, default=prom.DEFAULT_PORT)
    opts = parser.parse_args(args)
    csv_path = export.metrics_path(opts.run)
    run_id = opts.run.resolve().name
    with tempfile.TemporaryDirectory(prefix="mcclab-replay-") as tmp:
        data = Path(tmp) / "data"
        first, last = backfill(csv_path, data)
        config = Path(tmp) / "prometheus.yml"
        config.write_text(json.dumps({"global": {"scrape_interval": prom.SCRAPE_INTERVAL}}))
        listen = f"127.0.0.1:{prom.free_port('127.0.0.1', opts.port)}"
        proc = subprocess.Popen(serve_argv(data, config, listen))
        url = f"http://{listen}"
        deadline = time.monotonic() + 30
        while not prom.ready(url) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        base = grafana.grafana_base()
        print(f"replaying {run_id}: Prometheus {url}")
        if base:
            print("dashboards (point the mcclab datasource at this port if it is not 9090): "
                  + grafana.dashboard_url(base, run_id, first, last, refresh=None))
        else:
            print(grafana.prometheus_url(url, run_id, first, last))
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            while proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        proc.terminate()
        proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
