"""Pure parts of the router and link exporter: /proc parsers, nft counters, iperf3 reports."""

from __future__ import annotations

import json

from mcclab.links.counters import LinkCounters
from mcclab.model.loader import load_topology
from mcclab.monitoring import metric_names as mn
from mcclab.monitoring.exporter import (
    ExporterConfig,
    IperfSource,
    LabCollector,
    nft_counter_name,
    nft_script,
    parse_iperf,
    parse_mroutes,
    parse_nft_counters,
    parse_sink_stats,
    parse_vifs,
    registry_for,
)

VIF = """Interface      BytesIn  PktsIn  BytesOut PktsOut Flags Local    Remote
 0 pimreg            0       0         0       0 00004 00000000 00000000
 1 rl-eth0         500       5      1000      10 00008 00000002 00000000
"""
# 239.10.1.1 from 10.0.1.10 as a little-endian machine prints them.
MFC = """Group    Origin   Iif     Pkts    Bytes    Wrong Oifs
01010AEF 0A01000A 2         42    42000        1  1:1
01010AEF 00000000 -1         0        0        0
"""
IPERF = """-----------------------------------------------------------
Server listening on 5202 (test #1)
-----------------------------------------------------------
Accepted connection from 10.0.3.10, port 40000
[  5] local 10.0.4.10 port 5202 connected to 10.0.3.10 port 40002
[ ID] Interval           Transfer     Bitrate
[  5]   0.00-1.00   sec   250 KBytes  2000 Kbits/sec
[  5]   1.00-2.00   sec   256 KBytes  2100 Kbits/sec
"""
SUMMARY = """- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate
[  5]   0.00-2.00   sec   506 KBytes  2050 Kbits/sec                  receiver
"""


def test_parse_vifs():
    vifs = parse_vifs(VIF)
    assert [(v.index, v.iface, v.pkts_in, v.pkts_out) for v in vifs] == [
        (0, "pimreg", 0, 0), (1, "rl-eth0", 5, 10)]


def test_parse_mroutes_decodes_addresses_and_star():
    import sys

    routes = parse_mroutes(MFC)
    if sys.byteorder == "little":
        assert (routes[0].group, routes[0].source) == ("239.10.1.1", "10.0.1.10")
        assert routes[1].source == "*"
    assert (routes[0].iif, routes[0].pkts, routes[0].wrong) == (2, 42, 1)
    assert routes[1].iif == -1


def test_nft_script_counts_igmp_and_pim_both_ways_on_every_interface():
    script = nft_script(["rl-eth0", "rl-eth1"])
    assert script.startswith("add table ip mclmon\ndelete table ip mclmon\n")
    for iface in ("rl-eth0", "rl-eth1"):
        for proto in ("igmp", "pim"):
            assert f'iifname "{iface}" ip protocol {proto} counter name ' \
                   f'"{nft_counter_name(proto, "in", iface)}"' in script
            assert f'oifname "{iface}" ip protocol {proto}' in script
    assert nft_counter_name("pim", "out", "rl-eth0") == "pim_out_rl_eth0"


def test_parse_nft_counters():
    out = json.dumps({"nftables": [{"metainfo": {}}, {"counter": {
        "family": "ip", "name": "igmp_in_x", "table": "mclmon", "packets": 7, "bytes": 224}}]})
    assert parse_nft_counters(out) == {"igmp_in_x": 7}


def test_parse_iperf_last_interval_and_total():
    rate, total = parse_iperf(IPERF)
    assert rate == 2100e3
    assert total == (2000e3 + 2100e3) / 8
    rate, total2 = parse_iperf(IPERF + SUMMARY)
    assert rate == 0.0 and total2 == total  # the summary is not counted twice
    assert parse_iperf("") == (None, 0.0)


def test_parse_sink_stats_takes_the_last_whole_record():
    lines = [json.dumps({"event": "stats", "t": t, "total_rx_bytes": b, "total_rx_packets": 1,
                         "total_lost": 0, "throughput_bps": r})
             for t, b, r in ((1.0, 0, 0.0), (2.0, 25000, 200e3))]
    text = "\n".join(lines) + '\n{"event": "stats", "t": 3.0, "total_rx'  # cut mid-write
    assert parse_sink_stats(text) == (200e3, 25000.0)
    assert parse_sink_stats("") == (None, 0.0)


def test_collector_reads_a_udp_sink_like_an_iperf3_server(tmp_path):
    log = tmp_path / "sink.jsonl"
    log.write_text(json.dumps({"event": "stats", "t": 5.0, "total_rx_bytes": 75000,
                               "total_rx_packets": 75, "total_lost": 2,
                               "throughput_bps": 199e3}) + "\n")
    config = ExporterConfig("127.0.0.1", 1, str(tmp_path), "", "kernel", [],
                            [IperfSource("udp-r1-h1-1", "h1", "udp", str(log), "stats")])
    collector = LabCollector(config, load_topology("topologies/dumbbell.yaml"))
    collector.links.counters = lambda: []
    reg = registry_for(collector)
    labels = {"node": "h1", "flow": "udp-r1-h1-1", "protocol": "udp"}
    assert reg.get_sample_value("mcc_iperf_throughput_bps", labels) == 199e3
    assert reg.get_sample_value("mcc_iperf_bytes_received_total", labels) == 75000


def test_config_round_trip():
    c = ExporterConfig("172.30.0.1", 9463, "/run/mcclab/x", "/t.yaml", "userspace", ["rl"],
                       [IperfSource("tcp", "d2", "tcp", "/l.txt"),
                        IperfSource("o", "d2", "udp", "/o.jsonl", "stats")])
    assert ExporterConfig.from_json(c.to_json()) == c


def _collector(tmp_path, counters):
    topo = load_topology("topologies/dumbbell.yaml")
    log = tmp_path / "tcp.txt"
    log.write_text(IPERF)
    config = ExporterConfig("127.0.0.1", 1, str(tmp_path), "", "kernel", [],
                            [IperfSource("tcp", "d2", "tcp", str(log))])
    collector = LabCollector(config, topo)
    collector.links.counters = lambda: counters
    return collector


def test_collector_exports_link_counters_with_common_labels(tmp_path):
    c = LinkCounters(link=0, src="rl", dst="rr", backend="kernel", node="rl", iface="rl-eth0",
                     hook="egress", time=1.0, pkts_in=12, bytes_in=None, pkts_sent=10,
                     bytes_sent=15000, drops_queue=1, drops_loss=1, qlen_pkts=3,
                     qlen_bytes=4500, in_flight=4)
    reg = registry_for(_collector(tmp_path, [c]))
    labels = {"node": "rl", "flow": mn.NO_FLOW, "protocol": mn.NO_FLOW, "link": "0",
              "src": "rl", "dst": "rr"}
    assert reg.get_sample_value("mcc_link_bytes_total", labels) == 15000
    assert reg.get_sample_value("mcc_link_drops_total", {**labels, "cause": "queue"}) == 1
    assert reg.get_sample_value("mcc_link_queue_packets", labels) == 3
    assert reg.get_sample_value("mcc_link_capacity_bps", labels) == 3.2e6
    assert reg.get_sample_value("mcc_link_queue_limit_packets", labels) == 40
    tcp = {"node": "d2", "flow": "tcp", "protocol": "tcp"}
    assert reg.get_sample_value("mcc_iperf_throughput_bps", tcp) == 2100e3


def test_collector_counts_a_failing_source_instead_of_failing(tmp_path):
    collector = _collector(tmp_path, [])

    def broken():
        raise OSError("stats file gone")

    collector.links.counters = broken
    reg = registry_for(collector)
    base = {"node": mn.ROOT_NODE, "flow": mn.NO_FLOW, "protocol": mn.NO_FLOW}
    assert reg.get_sample_value("mcc_exporter_errors_total", {**base, "source": "links"}) == 1


def test_a_scrape_during_a_slow_read_gets_the_last_read_instead_of_a_second_read(tmp_path):
    import threading

    c = LinkCounters(link=0, src="rl", dst="rr", backend="kernel", node="rl", iface="rl-eth0",
                     hook="egress", time=1.0, pkts_in=12, bytes_in=None, pkts_sent=10,
                     bytes_sent=15000, drops_queue=1, drops_loss=1, qlen_pkts=3,
                     qlen_bytes=4500, in_flight=4)
    collector = _collector(tmp_path, [c])
    first = {f.name: f for f in collector.collect()}  # a complete read, remembered
    entered, release = threading.Event(), threading.Event()
    reads = []

    def slow():
        reads.append(1)
        entered.set()
        release.wait(5)
        return [c]

    collector.links.counters = slow
    slow_scrape = threading.Thread(target=lambda: list(collector.collect()))
    slow_scrape.start()
    assert entered.wait(5)
    during = {f.name: f for f in collector.collect()}  # a second scrape meanwhile
    release.set()
    slow_scrape.join(5)
    assert reads == [1]  # the second scrape did not read again
    assert during.keys() == first.keys()
    assert during["mcc_link_bytes"].samples == first["mcc_link_bytes"].samples
    list(collector.collect())
    assert reads == [1, 1]  # once the read is over, the next scrape reads afresh


def test_a_source_tally_follows_a_growing_log_as_a_whole_parse_would(tmp_path):
    # Each scrape reads only what a server or sink appended since the last one, and
    # still answers what parsing the whole log would.
    from mcclab.monitoring.exporter import SourceTally

    log = tmp_path / "iperf.txt"
    tally = SourceTally(IperfSource("f", "d1", "tcp", str(log)))
    assert tally.update() == (None, 0.0)  # the server has not started
    text = IPERF + SUMMARY
    for cut in range(0, len(text) + 1, 11):
        log.write_text(text[:cut])
        assert tally.update() == parse_iperf(text[:text.rfind("\n", 0, cut) + 1])
    sink = tmp_path / "sink.jsonl"
    stats = SourceTally(IperfSource("u", "d2", "udp", str(sink), format="stats"))
    records = [json.dumps({"event": "stats", "t": t, "total_rx_bytes": b,
                           "throughput_bps": r}) for t, b, r in ((1.0, 0, 0.0), (2.0, 25000, 2e5))]
    sink.write_text(records[0] + "\n" + records[1][:20])
    assert stats.update() == (0.0, 0.0)
    sink.write_text(records[0] + "\n" + records[1] + "\n")
    assert stats.update() == (2e5, 25000.0)
