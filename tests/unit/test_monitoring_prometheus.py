"""Prometheus configuration and targets as data, the export of a run's series, the links."""

from __future__ import annotations

import gzip
import json
import socket
from pathlib import Path

import yaml

from mcclab.experiment.launch import plan_launches
from mcclab.experiment.loader import resolve
from mcclab.model.addressing import plan_addresses
from mcclab.monitoring import export, grafana
from mcclab.monitoring import metric_names as mn
from mcclab.monitoring import prometheus as prom
from mcclab.monitoring.session import Monitoring
from mcclab.monitoring.targets import flow_protocols, iperf_sources, targets_for

REPO = Path(__file__).resolve().parents[2]


def _default_run():
    res = resolve("default")
    plan = plan_addresses(res.topology)
    return res, plan, plan_launches(res.experiment, plan, Path("/tmp/run"), python="py")


def test_targets_name_every_agent_endpoint_and_the_exporter_with_all_labels():
    res, plan, lp = _default_run()
    protocols = flow_protocols(res.experiment)
    assert protocols == {"webrc": "webrc", "tcp": "tcp"}
    gw = f"{plan.control_gateway.ip}:9463"
    targets = targets_for("r1", "default", lp, protocols, gw)
    assert targets[0].address == gw and targets[0].labels["component"] == "exporter"
    agents = {(t.labels["role"], t.labels["node"]): t for t in targets[1:]}
    assert set(agents) == {("sender", "s1"), ("receiver", "d1")}
    for t in targets:
        assert set(mn.COMMON_LABELS) <= set(t.labels)
        assert t.labels["run"] == "r1" and t.labels["experiment"] == "default"
    d1 = agents[("receiver", "d1")]
    assert d1.address == f"{plan.control['d1'].ip}:9464"
    assert d1.labels["flow"] == "webrc" and d1.labels["protocol"] == "webrc"
    doc = prom.targets_document(targets)
    assert doc[2] == {"targets": [d1.address], "labels": dict(sorted(d1.labels.items()))}


def test_iperf_servers_are_exporter_sources():
    res, _, lp = _default_run()
    (src,) = iperf_sources(lp, flow_protocols(res.experiment))
    assert (src.flow, src.node, src.protocol) == ("tcp", "d2", "tcp")
    assert src.log.endswith("tcp-server-d2.txt")


def test_scrape_config_static_for_a_run():
    target = prom.Target("172.30.0.2:9464", {"run": "r", "node": "d1"})
    (job,) = prom.scrape_config(targets=[target])["scrape_configs"]
    assert job["static_configs"] == prom.targets_document([target])
    assert "file_sd_configs" not in job


def test_scrape_config_one_second_file_sd_and_labels_filled():
    cfg = prom.scrape_config("/x/*/targets.json")
    assert cfg["global"]["scrape_interval"] == "1s"
    (job,) = cfg["scrape_configs"]
    assert job["job_name"] == mn.JOB and job["honor_labels"] is True
    assert job["file_sd_configs"] == [{"files": ["/x/*/targets.json"], "refresh_interval": "5s"}]
    filled = {r["target_label"]: r["replacement"] for r in job["metric_relabel_configs"]}
    assert filled == {"node": "root", "flow": "none", "protocol": "none"}


def test_prometheus_argv_listens_on_loopback_with_retention(tmp_path):
    argv = prom.argv(tmp_path / "p.yml", tmp_path / "data", "127.0.0.1:9090")
    assert argv[0] == "/usr/bin/prometheus"
    assert "--web.listen-address=127.0.0.1:9090" in argv
    assert any(a.startswith("--storage.tsdb.retention.time=") for a in argv)


def _seconds(duration: str) -> float:
    """A Prometheus duration with one unit (``2m``, ``1h``) in seconds."""
    return float(duration[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[duration[-1]]


def test_prometheus_argv_cuts_short_head_blocks(tmp_path):
    # The head keeps every sample until it spans 1.5 blocks: a per-run Prometheus gets
    # short blocks, so its memory is bounded over any run length.
    argv = prom.argv(tmp_path / "p.yml", tmp_path / "data", "127.0.0.1:9090")
    blocks = [a.split("=", 1)[1] for a in argv
              if a.startswith("--storage.tsdb.min-block-duration=")]
    assert blocks == [prom.RUN_BLOCK]
    # Far below Prometheus's 2 h, yet long enough for a chunk's 120 samples at the
    # scrape interval (a shorter block cuts every chunk short).
    assert 120 * _seconds(prom.SCRAPE_INTERVAL) <= _seconds(prom.RUN_BLOCK) <= 600
    # The largest block stays Prometheus's default, so blocks keep merging.
    assert not any(a.startswith("--storage.tsdb.max-block-duration") for a in argv)
    # A compaction preallocates a chunk segment (512 MiB by default) for a moment.
    (segment,) = [a.split("=", 1)[1] for a in argv
                  if a.startswith("--storage.tsdb.max-block-chunk-segment-size=")]
    assert segment == prom.RUN_CHUNK_SEGMENT and int(segment.removesuffix("MB")) < 512
    default = prom.argv(tmp_path / "p.yml", tmp_path / "data", "127.0.0.1:9090", block=None)
    assert not any("block" in a for a in default)


def test_free_port_avoids_a_taken_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        assert prom.free_port("127.0.0.1", taken) != taken


def test_service_is_used_only_when_provisioned_and_ready(tmp_path):
    assert prom.find_service(tmp_path / "absent.json") is None
    marker = tmp_path / "prometheus.json"
    marker.write_text(json.dumps({"url": "http://127.0.0.1:9", "targets_dir": "/t"}))
    assert prom.find_service(marker, timeout=0.2) is None  # nothing answers on port 9


def _fetcher(result: list[dict], calls: list[str]):
    """A stand-in for Prometheus: one metric's series per call, every call recorded."""
    def fetch(name: str) -> list[dict]:
        calls.append(name)
        return [s for s in result if s["metric"]["__name__"] == name]
    return fetch


def _write(result: list[dict], path: Path, calls: list[str] | None = None) -> int:
    calls = [] if calls is None else calls
    label_sets = [dict(s["metric"]) for s in result]
    return export.write_series_csv(label_sets, _fetcher(result, calls), path)


def test_export_round_trip_and_openmetrics(tmp_path):
    result = [
        {"metric": {"__name__": "up", "run": "r", "node": "d1"}, "values": [[100.5, "1"]]},
        {"metric": {"__name__": "mcc_link_bytes_total", "run": "r", "link": "0"},
         "values": [[100.0, "10"], [101.0, "20"]]},
    ]
    path = tmp_path / export.METRICS_CSV
    calls: list[str] = []
    assert _write(result, path, calls) == 3
    assert calls == ["mcc_link_bytes_total", "up"]  # one request a metric, in order
    assert path.read_bytes()[:2] == b"\x1f\x8b"  # gzip
    header = gzip.decompress(path.read_bytes()).decode().splitlines()[0]
    assert header == "time,metric,link,node,run,value"
    back = export.read_csv(path)
    assert back[0] == {"time": "100.000", "metric": "mcc_link_bytes_total", "link": "0",
                       "run": "r", "value": "10"}
    text = export.to_openmetrics(back)
    assert text.splitlines() == [
        'mcc_link_bytes_total{link="0",run="r"} 10.0 100.000',
        'mcc_link_bytes_total{link="0",run="r"} 20.0 101.000',
        'up{node="d1",run="r"} 1.0 100.500',
        "# EOF"]


def test_export_orders_rows_by_metric_labels_and_time(tmp_path):
    # Series arrive in any order, with different label keys, and samples out of order:
    # the table is sorted by metric, then by every label's value ("" where absent),
    # then by time, whatever order Prometheus answers in.
    result = [
        {"metric": {"__name__": "b", "run": "r", "node": "h2"}, "values": [[3.0, "7"]]},
        {"metric": {"__name__": "a", "run": "r", "link": "1"},
         "values": [[2.0, "2"], [1.0, "1"]]},
        {"metric": {"__name__": "b", "run": "r", "node": "h1", "flow": "f"},
         "values": [[1.0, "5"]]},
        {"metric": {"__name__": "a", "run": "r", "link": "0"}, "values": [[5.0, "9"]]},
    ]
    path = tmp_path / export.METRICS_CSV
    assert _write(result, path) == 5
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    assert lines == ["time,metric,flow,link,node,run,value",
                     "5.000,a,,0,,r,9",
                     "1.000,a,,1,,r,1",
                     "2.000,a,,1,,r,2",
                     "3.000,b,,,h2,r,7",
                     "1.000,b,f,,h1,r,5"]


def test_selector_narrowed_to_one_metric():
    assert prom.with_name('{run="x"}', "up") == '{__name__="up",run="x"}'
    assert prom.with_name("{}", "up") == '{__name__="up"}'


def test_dashboard_url_has_run_and_time_range():
    url = grafana.dashboard_url("http://127.0.0.1:3000", "20261121-1-ab", 1000.0, 1060.5)
    assert url.startswith("http://127.0.0.1:3000/d/mcclab-overview/")
    assert "var-run=20261121-1-ab" in url and "from=1000000" in url and "to=1061499" in url
    assert "refresh=5s" in url
    assert "to=now" in grafana.dashboard_url("http://g", "r", 1.0, None)


def test_prometheus_url_has_run_and_time_range():
    url = grafana.prometheus_url("http://127.0.0.1:9090", "r1", 0.0, 90.0)
    assert "r1" in url and "g0.range_input=90s" in url
    assert "g0.end_input=1970-01-01+00%3A01%3A30" in url


def test_grafana_marker(tmp_path):
    assert grafana.grafana_base(tmp_path / "none.json") is None
    (tmp_path / "g.json").write_text('{"url": "http://127.0.0.1:3000/"}')
    assert grafana.grafana_base(tmp_path / "g.json") == "http://127.0.0.1:3000"


def test_announcement_says_what_there_is():
    assert Monitoring().announcement.startswith("live monitoring unavailable")
    m = Monitoring(url="http://127.0.0.1:9090/graph?x", prometheus_url="http://127.0.0.1:9090")
    assert "no Grafana" in m.announcement
    m.grafana_base = "http://127.0.0.1:3000"
    assert m.announcement.startswith("live dashboards: ")


def test_stop_without_prometheus_never_raises(tmp_path):
    m = Monitoring(run="r", prometheus_url="http://127.0.0.1:9", url="http://127.0.0.1:9/graph",
                   started=0.0)
    m.stop(tmp_path)  # nothing answers: the failure is noted, not raised
    record = json.loads((tmp_path / "logs" / "monitoring.json").read_text())
    assert any("export" in n for n in record["notes"])


def test_the_vm_service_scrapes_exactly_like_a_per_run_prometheus():
    import jinja2

    role = REPO / "ansible" / "roles" / "grafana"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    text = env.from_string((role / "templates" / "prometheus.yml.j2").read_text()).render(
        ansible_managed="managed", **defaults)
    targets = prom.targets_glob(Path(defaults["mcclab_prometheus_targets_dir"]))
    assert yaml.safe_load(text) == prom.scrape_config(targets)


def test_target_files_one_per_lab_and_stale_ones_swept(tmp_path):
    assert prom.targets_glob(tmp_path) == f"{tmp_path}/*.json"
    live, dead = prom.targets_path(tmp_path, "lab-a"), prom.targets_path(tmp_path, "lab-b")
    live.write_text("[]")
    dead.write_text("[]")
    assert prom.sweep_targets(tmp_path, {"lab-a"}) == [dead]
    assert live.exists() and not dead.exists()


def test_metrics_of_older_runs_are_still_found_and_read(tmp_path):
    result = [{"metric": {"__name__": "up", "run": "r"}, "values": [[1.0, "1"]]}]
    assert export.metrics_path(tmp_path) == tmp_path / export.METRICS_CSV  # a new run's
    plain = tmp_path / export.LEGACY_METRICS_CSV  # written before 25 Nov 2026
    _write(result, plain)
    assert plain.read_text().startswith("time,metric,run,value")
    assert export.metrics_path(tmp_path) == plain
    assert export.read_csv(plain) == [{"time": "1.000", "metric": "up", "run": "r", "value": "1"}]
    _write(result, tmp_path / export.METRICS_CSV)
    assert export.metrics_path(tmp_path) == tmp_path / export.METRICS_CSV
