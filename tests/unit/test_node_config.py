"""The command lines that configure nodes, asserted as data (no root needed)."""

from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import resolve_topology
from mcclab.net import node_config


def topo(version=3):
    return resolve_topology({"name": "c", "generate": {"kind": "chain", "routers": 2,
                                                        "hosts_per_router": 1},
                             "routing": {"igmp": {"version": version}}})


def lines(cmds):
    return [str(c) for c in cmds]


def settings(cmds, ns):
    """The sysctls set in namespace ``ns``, in order, from its one ``sysctl`` line."""
    found = [c.argv[3:] for c in cmds if c.argv[:3] == ("sysctl", "-q", "-w") and c.netns == ns]
    assert len(found) == 1, f"{ns}: {len(found)} sysctl processes, not one"
    return dict(word.split("=", 1) for word in found[0])


def test_router_forwards_and_host_does_not():
    t = topo()
    plan = plan_addresses(t)
    router = settings(node_config.node_cmds(t, plan, "r1"), "mcl-r1")
    host = settings(node_config.node_cmds(t, plan, "h1n1"), "mcl-h1n1")
    assert router["net.ipv4.ip_forward"] == "1"
    assert host["net.ipv4.ip_forward"] == "0"


def test_rp_filter_off_and_igmp_version_forced_on_every_interface():
    t = topo(version=2)
    plan = plan_addresses(t)
    out = settings(node_config.node_cmds(t, plan, "r1"), "mcl-r1")
    for iface in plan.interfaces["r1"]:
        assert out[f"net.ipv4.conf.{iface.name}.rp_filter"] == "0"
        assert out[f"net.ipv4.conf.{iface.name}.force_igmp_version"] == "2"
    assert out["net.ipv4.igmp_max_memberships"] == "1024"
    # the interfaces' rp_filter after all's, as the one-process-each order had it
    keys = list(out)
    assert keys.index("net.ipv4.conf.all.rp_filter") < keys.index(
        f"net.ipv4.conf.{plan.interfaces['r1'][0].name}.rp_filter")


def test_offloads_off_before_addressing():
    t = topo()
    plan = plan_addresses(t)
    out = lines(node_config.node_cmds(t, plan, "h1n1"))
    eth = plan.interfaces["h1n1"][0].name
    off = out.index(f"[mcl-h1n1] ethtool -K {eth} rx off tx off sg off tso off gso off gro off")
    assert off < out.index(f"[mcl-h1n1] ip addr add {plan.interfaces['h1n1'][0].address} dev {eth}")


def test_hosts_send_multicast_on_the_experiment_interface():
    t = topo()
    plan = plan_addresses(t)
    out = lines(node_config.node_cmds(t, plan, "src"))
    assert "[mcl-src] ip route replace 224.0.0.0/4 dev src-eth0" in out
    assert not any("224.0.0.0/4" in line for line in lines(node_config.node_cmds(t, plan, "r1")))


def test_control_ports_are_isolated_and_get_no_default_route():
    t = topo()
    plan = plan_addresses(t)
    out = lines(node_config.control_node_cmds("r1", plan))
    assert "bridge link set dev mclc-r1 isolated on" in out
    assert f"[mcl-r1] ip addr add {plan.control['r1']} dev ctl0" in out
    assert not any("default" in line for line in out)


def test_hosts_repeat_state_change_reports_quickly():
    t = topo()
    plan = plan_addresses(t)
    eth = plan.interfaces["h1n1"][0].name
    out = settings(node_config.node_cmds(t, plan, "h1n1"), "mcl-h1n1")
    key = f"net.ipv4.conf.{eth}.igmpv3_unsolicited_report_interval"
    assert out[key] == "100"
    assert not any("unsolicited" in line for line in lines(node_config.node_cmds(t, plan, "r1")))


def test_root_bridges_facing_the_lab_filter_reverse_paths_strictly():
    t = topo()
    out = lines(node_config.control_root_cmds(plan_addresses(t)))
    assert "sysctl -q -w net.ipv4.conf.mclctl.rp_filter=1" in out
    assert out.index("sysctl -q -w net.ipv4.conf.mclctl.rp_filter=1") < out.index(
        "ip link set mclctl up")
    assert "sysctl -q -w net.ipv4.conf.mclb-lan1.rp_filter=1" in lines(
        node_config.lan_bridge_cmds("lan1"))


def test_static_routes_go_to_one_ip_batch_per_node():
    t = topo()
    plan = plan_addresses(t)
    routes = plan.routes_of("h1n1")
    assert len(routes) >= 2  # a chain: more than one subnet beyond the access link
    out = [c for c in node_config.node_cmds(t, plan, "h1n1") if c.input is not None]
    assert len(out) == 1
    (batch,) = out
    assert batch.argv == ("ip", "-batch", "-") and batch.netns == "mcl-h1n1" and batch.check
    assert batch.input.splitlines() == [f"route replace {r.dest} via {r.gateway} dev {r.dev}"
                                        for r in routes]
    assert not any(c.argv[:3] == ("ip", "route", "replace") and "via" in c.argv
                   for c in node_config.node_cmds(t, plan, "h1n1"))
    assert node_config.route_cmds([]) == []


def test_a_batch_command_reads_its_input_and_shows_it_in_the_transcript(tmp_path):
    from mcclab.commands import Cmd
    from mcclab.execute import Runner

    runner = Runner(transcript=tmp_path / "t.log")
    assert runner.run(Cmd(("cat",), input="a\nb\n")) == "a\nb\n"
    assert (tmp_path / "t.log").read_text() == "0\tcat < [a; b]\n"
