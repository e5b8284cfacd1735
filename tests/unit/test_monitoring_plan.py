"""The monitoring processes as data: the files each writes, its command line, where it answers."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from mcclab.commands import Cmd
from mcclab.monitoring import plan, storage
from mcclab.monitoring import prometheus as prom
from mcclab.monitoring.exporter import ExporterConfig, IperfSource

WORK = Path("/run/mcclab/default-r1/monitoring")
LOGS = Path("/run/mcclab/default-r1/logs")
TARGETS = [
    prom.Target("172.30.0.1:9463", {"run": "r1", "component": "exporter", "node": "root"}),
    prom.Target("172.30.0.5:9464", {"run": "r1", "component": "agent", "node": "d1"}),
]


def _flag(argv: tuple[str, ...], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    return value


def test_the_exporter_reads_the_files_it_is_planned_with():
    topology = {"name": "dumbbell", "nodes": [{"name": "r1", "kind": "router"}]}
    iperf = [IperfSource("tcp", "d2", "tcp", "/x/tcp-server-d2.txt")]
    p = plan.exporter_plan(WORK, LOGS, WORK.parent, topology, "userspace", ["r1"], iperf,
                           "172.30.0.1", 9463, "/opt/mcclab/venv/bin/python")
    config_file = WORK / "exporter.json"
    assert p.cmd == Cmd(("/opt/mcclab/venv/bin/python", "-m", "mcclab.monitoring.exporter",
                         "--config", str(config_file)))
    assert p.what == "monitoring exporter" and p.log == LOGS / "monitoring-exporter.log"
    assert p.url == "http://172.30.0.1:9463/metrics"
    assert set(p.files) == {config_file, WORK / "topology.yaml"}
    config = ExporterConfig.from_json(p.files[config_file])
    assert config == ExporterConfig(listen="172.30.0.1", port=9463, lab_dir=str(WORK.parent),
                                    topology=str(WORK / "topology.yaml"),
                                    link_backend="userspace", routers=["r1"], iperf=iperf)
    assert yaml.safe_load(p.files[WORK / "topology.yaml"]) == topology
    assert p.keep == {"exporter": config_file}


def test_the_run_s_prometheus_keeps_its_database_on_disk_not_in_run():
    tsdb = storage.tsdb_path(storage.DEFAULT_ROOT, "default-r1")
    p = plan.prometheus_plan(WORK, LOGS, tsdb, "127.0.0.1:9090")
    argv = p.cmd.argv
    assert argv[0] == prom.PROMETHEUS_BIN and p.cmd.netns is None
    assert _flag(argv, "storage.tsdb.path") == "/var/lib/mcclab/labs/default-r1/prometheus"
    assert not Path(_flag(argv, "storage.tsdb.path")).is_relative_to("/run")
    assert _flag(argv, "config.file") == str(WORK / "prometheus.yml")
    assert _flag(argv, "web.listen-address") == "127.0.0.1:9090"
    assert _flag(argv, "storage.tsdb.min-block-duration") == prom.RUN_BLOCK
    assert p.url == "http://127.0.0.1:9090" and p.what == "monitoring prometheus"
    assert p.log == LOGS / "monitoring-prometheus.log"
    assert plan.prometheus_plan(WORK, LOGS, tsdb, "127.0.0.1:1",
                                binary="/b/prometheus").cmd.argv[0] == "/b/prometheus"


def test_the_run_s_prometheus_starts_with_no_target_and_reads_them_from_one_file():
    p = plan.prometheus_plan(WORK, LOGS, Path("/d"), "127.0.0.1:9090")
    config = yaml.safe_load(p.files[WORK / "prometheus.yml"])
    (job,) = config["scrape_configs"]
    # file_sd on the one file, so the targets can follow once the launch plan is known
    assert "static_configs" not in job
    assert job["file_sd_configs"] == [{"files": [str(WORK / "targets.json")],
                                       "refresh_interval": "5s"}]
    assert config == prom.scrape_config(targets_glob=str(WORK / "targets.json"))
    assert json.loads(p.files[WORK / "targets.json"]) == []
    # The results keep both, under these names (logs/monitoring/prometheus.yml, targets.json).
    assert p.keep == {"prometheus": WORK / "prometheus.yml", "targets": WORK / "targets.json"}
    later = plan.run_targets(WORK, TARGETS)
    assert later.path == WORK / "targets.json"
    assert [g["targets"] for g in json.loads(later.text)] == [["172.30.0.1:9463"],
                                                               ["172.30.0.5:9464"]]
    assert json.loads(later.text) == prom.targets_document(TARGETS)


def test_with_the_machine_s_service_the_run_only_drops_one_target_file():
    service = prom.Service("http://127.0.0.1:9090", Path("/var/lib/mcclab/prometheus/targets"))
    drop = plan.service_plan(service, "default-r1", TARGETS)
    assert drop.url == service.url
    assert drop.targets == plan.TargetsFile(
        Path("/var/lib/mcclab/prometheus/targets/default-r1.json"), drop.targets.text)
    assert json.loads(drop.targets.text) == prom.targets_document(TARGETS)
