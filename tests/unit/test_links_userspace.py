"""The userspace backend's emulator configs, iptables rules, stats and death detection."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from mcclab.execute import Runner
from mcclab.links import LinkEmulationError, UserspaceEmulation, plan_directions, userspace
from mcclab.links.emulation import Emulator
from mcclab.links.plan import userspace_placement
from mcclab.model.addressing import plan_addresses
from mcclab.model.loader import resolve_topology
from mcclab.state import LabState, TrackedProcess, proc_start_time

RED = {"limit": "40pkt", "discipline": "red",
       "red": {"min_th": "5pkt", "max_th": "15pkt", "max_p": "10%"}}


def path_topo(middle="router", **link):
    """s - r - d, r a router (or, with ``middle``, a host), the r - d link given."""
    return resolve_topology({
        "name": "p", "nodes": {"s": {"kind": "host"}, "r": {"kind": middle},
                               "d": {"kind": "host"}},
        "links": [{"endpoints": ["s", "r"]}, {"endpoints": ["r", "d"], **link}]})


def placed(t):
    plan = plan_addresses(t)
    return [(d, userspace_placement(t, plan, d)) for d in plan_directions(t)]


def test_droptail_line_has_every_parameter_in_the_emulators_units():
    (d, _), _ = placed(path_topo(rate="3.2Mbit", delay="50ms", jitter="1ms", loss="1%",
                                 queue={"limit": "40pkt"}))
    assert userspace.queue_line(d) == (
        "queue=2 name=l1:r-d rate_bps=3200000 delay_us=50000 jitter_us=1000 loss=0.01 "
        "limit_pkts=40 disc=droptail protect_control=1 seed=1")


def test_red_line_uses_ns2_defaults_for_what_the_model_does_not_expose():
    (d, _), _ = placed(path_topo(rate="1Mbit", queue=RED))
    line = userspace.queue_line(d)
    assert ("limit_pkts=40 disc=red min_th=5 max_th=15 max_p=0.1 weight=0.002 gentle=1 "
            "wait=1 mean_pktsize=500") in line


def test_no_rate_means_rate_0_and_no_queue_and_ge_is_survival_based():
    ge = {"p": "1%", "r": "30%", "loss_bad": "80%", "loss_good": "0.1%"}
    (d, _), _ = placed(path_topo(delay="10ms", gilbert_elliott=ge))
    line = userspace.queue_line(d)
    assert "rate_bps=0 " in line and "limit_pkts" not in line
    assert "ge_p=0.01 ge_r=0.3 ge_h=0.2 ge_k=0.999" in line


def test_a_router_emulates_what_leaves_it_and_what_a_host_sends_it():
    t = path_topo(rate="10Mbit", delay="5ms")
    (fwd, w_fwd), (rev, w_rev) = placed(t)
    assert (w_fwd.node, w_fwd.hook, w_rev.node, w_rev.hook) == ("r", "egress", "r", "ingress")
    text = userspace.node_config("r", [(fwd, w_fwd), (rev, w_rev)])
    assert text.splitlines()[2].startswith("queue=2 name=l1:r-d ")
    assert str(userspace.rule_cmd(fwd, w_fwd)) == (
        f"[mcl-r] iptables -w -t mangle -A POSTROUTING -o {w_fwd.iface} "
        "-j NFQUEUE --queue-num 2")
    assert str(userspace.rule_cmd(rev, w_rev)) == (
        f"[mcl-r] iptables -w -t mangle -A PREROUTING -i {w_rev.iface} "
        "-j NFQUEUE --queue-num 3")
    # fail closed: never --queue-bypass
    assert "--queue-bypass" not in str(userspace.rule_cmd(rev, w_rev))


def test_between_hosts_each_direction_is_emulated_at_its_receivers_ingress():
    (fwd, w_fwd), (rev, w_rev) = placed(path_topo(middle="host", rate="10Mbit"))
    assert (w_fwd.node, w_fwd.hook, w_rev.node, w_rev.hook) == ("d", "ingress", "r", "ingress")
    assert str(userspace.rule_cmd(fwd, w_fwd)).startswith(
        f"[mcl-d] iptables -w -t mangle -A PREROUTING -i {w_fwd.iface} ")


def test_lan_egress_rule_uses_postrouting():
    t = resolve_topology({
        "name": "l", "nodes": {"r": {"kind": "router"}, "lan": {"kind": "lan"},
                               "h": {"kind": "host"}},
        "links": [{"endpoints": ["r", "lan"], "rate": "1Mbit"}, {"endpoints": ["lan", "h"]}]})
    (d, where), (back, back_where) = placed(t)
    assert str(userspace.rule_cmd(d, where)).startswith(
        f"[mcl-r] iptables -w -t mangle -A POSTROUTING -o {where.iface} ")
    assert back_where.node == "r" and back_where.hook == "ingress"


BINARY = userspace.linkemu_binary()


@pytest.mark.skipif(not BINARY.exists(), reason="linkemu not built (make -C linkemu)")
@pytest.mark.parametrize("link", [
    {"rate": "320kbit", "delay": "200ms", "loss": "5%", "queue": {"limit": "4pkt"}},
    {"rate": "50Mbit", "delay": "10ms", "jitter": "2ms", "queue": RED},
    {"delay": "1ms", "gilbert_elliott": {"p": "1%", "r": "30%"}},
    {"rate": "1Mbit", "queue": dict(RED, red=dict(RED["red"], gentle=False, weight=1.0,
                                                  max_p="100%"))},
])
def test_the_real_emulator_accepts_every_generated_config(tmp_path, link):
    t = path_topo(**link)
    conf = tmp_path / "d.conf"
    conf.write_text(userspace.node_config("d", placed(t)))
    out = subprocess.run(userspace.check_cmd(BINARY, conf).argv, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr


def test_stats_become_one_record_per_direction():
    pairs = placed(path_topo(rate="1Mbit"))
    data = {"time": 5.0, "pid": 1, "queues": {
        "2": {"name": "l1:r-d", "pkts_in": 100, "bytes_in": 150000, "pkts_out": 90,
              "bytes_out": 135000, "drops_queue": 6, "drops_loss": 1, "qlen_pkts": 2,
              "qlen_bytes": 3000, "red_avg": 0.0, "max_qlen": 40, "in_flight": 3,
              "kernel_queue_total": 3, "kernel_dropped": 0, "kernel_user_dropped": 2,
              "enobufs": 1, "nl_errors": 0}}}
    (rec,) = userspace.parse_stats(data, pairs)
    assert (rec.link, rec.src, rec.dst, rec.node, rec.hook) == (1, "r", "d", "r", "egress")
    assert (rec.pkts_in, rec.pkts_sent, rec.drops_queue, rec.drops_loss) == (100, 90, 6, 1)
    assert (rec.qlen_pkts, rec.max_qlen, rec.in_flight, rec.errors) == (2, 40, 3, 2)
    assert rec.pkts_in == rec.pkts_sent + rec.drops_queue + rec.drops_loss + rec.in_flight


def _fake_emulation(tmp_path: Path, proc: TrackedProcess) -> UserspaceEmulation:
    t = path_topo(middle="host", rate="1Mbit")
    emu = UserspaceEmulation(t, plan_addresses(t), LabState(lab_id="unit"), Runner(dry_run=True),
                             binary=BINARY)
    log = tmp_path / "linkemu-d.log"
    log.write_text("mcclab-linkemu: binding NFQUEUE 2: Operation not permitted\n")
    emu.emulators["d"] = Emulator("d", placed(t)[:1], tmp_path / "d.conf",
                                  tmp_path / "d.stats.json", log, "", proc)
    return emu


def test_check_names_the_node_whose_emulator_died_even_as_an_unreaped_zombie(tmp_path):
    child = subprocess.Popen(["sleep", "30"])
    proc = TrackedProcess(child.pid, proc_start_time(child.pid) or -1, "linkemu d")
    emu = _fake_emulation(tmp_path, proc)
    emu.check()  # running: fine
    child.send_signal(signal.SIGKILL)
    # Not reaped yet: /proc still lists it (state Z), and a zombie is not alive.
    for _ in range(200):
        if not proc.alive():
            break
        subprocess.run(["sleep", "0.01"])
    assert not proc.alive() and Path(f"/proc/{child.pid}").exists()
    with pytest.raises(LinkEmulationError) as exc:
        emu.check()
    text = str(exc.value)
    assert "link emulator of node d" in text and "r->d" in text and "fail closed" in text
    assert "Operation not permitted" in text  # the log tail explains why
    child.wait()
    with pytest.raises(LinkEmulationError):
        emu.check()  # reaped: still dead


class FakeSpawn:
    """Stands in for mcclab.processes.spawn: records who would be started, starts `sleep`."""

    def __init__(self):
        self.started: list[str] = []
        self.argvs: dict[str, tuple[str, ...]] = {}
        self.children: list[subprocess.Popen] = []

    def __call__(self, state, command, log, what, runner=None):  # noqa: ANN001, ANN204
        self.started.append(what)
        self.argvs[what] = tuple(command.argv)
        child = subprocess.Popen(["sleep", "30"])
        self.children.append(child)
        return TrackedProcess(child.pid, proc_start_time(child.pid) or -1, what)


def test_apply_restarts_only_changed_emulators_and_keeps_unchanged_rules(tmp_path, monkeypatch):
    from mcclab.links import emulation

    fake = FakeSpawn()
    monkeypatch.setattr(emulation, "spawn", fake)
    monkeypatch.setattr(UserspaceEmulation, "_wait_ready", lambda self, emu: None)
    monkeypatch.setattr(emulation, "kill_group", lambda proc: None)
    # Between hosts, so that the two directions have an emulator each (d's and r's).
    t = path_topo(middle="host", rate="10Mbit", delay="5ms")
    state = LabState(lab_id="unit")
    monkeypatch.setattr(LabState, "path", property(lambda self: tmp_path))
    monkeypatch.setattr(LabState, "save", lambda self: None)
    runner = Runner(dry_run=True)
    emu = UserspaceEmulation(t, plan_addresses(t), state, runner, binary=BINARY)
    try:
        emu.start(lambda *a: None)
        assert sorted(fake.started) == ["linkemu d", "linkemu r"]
        rules = [str(c) for c in runner.history if "iptables" in c.argv]
        assert len(rules) == 2 and all(" -A PREROUTING " in r for r in rules)
        assert (tmp_path / "links" / "d.conf").read_text().count("queue=") == 1

        # Only r -> d changes (loss on the forward direction): d restarts, r does not,
        # and no rule is touched.
        runner.history.clear()
        emu.apply(path_topo(middle="host", rate="10Mbit", delay="5ms", forward={"loss": "1%"}))
        assert fake.started[2:] == ["linkemu d"]
        assert not any("iptables" in c.argv for c in runner.history)

        # The reverse direction stops being emulated: its rule goes, r's emulator ends,
        # d's (same forward parameters) keeps running.
        runner.history.clear()
        emu.apply(path_topo(middle="host",
                            forward={"rate": "10Mbit", "delay": "5ms", "loss": "1%"}))
        deleted = [str(c) for c in runner.history if "-D" in c.argv]
        assert len(deleted) == 1 and "[mcl-r]" in deleted[0] and "--queue-num 3" in deleted[0]
        assert set(emu.emulators) == {"d"} and fake.started[3:] == []
        with pytest.raises(LinkEmulationError, match="same nodes and links"):
            emu.apply(resolve_topology({"name": "other", "nodes": {"a": {"kind": "host"},
                                                                   "b": {"kind": "host"}},
                                        "links": [{"endpoints": ["a", "b"]}]}))
    finally:
        for child in fake.children:
            child.kill()
            child.wait()


def test_emulators_spin_only_where_every_link_is_slow():
    from mcclab.links.emulation import DEFAULT_SPIN_US, spin_for

    assert spin_for(placed(path_topo(rate="10Mbit", delay="5ms"))) == DEFAULT_SPIN_US == 100
    assert spin_for(placed(path_topo(rate="50Mbit", delay="5ms"))) == 0
    assert spin_for(placed(path_topo(delay="5ms"))) == 0  # no rate: packet rate unbounded
    argv = userspace.emulator_argv(BINARY, Path("c.conf"), Path("s.json"), 100)
    assert argv[-2:] == ["--spin-us", "100"]
    assert "--spin-us" not in userspace.emulator_argv(BINARY, Path("c"), Path("s"), 0)


def test_the_labs_spinning_emulators_share_one_spin_budget():
    """Each emulator's --spin-budget-ms is its share of the lab's: 21 routers of slow
    links (ORMCC's Table II tree) must not spin 21 times as long as one."""
    from mcclab.links.emulation import (
        EMULATOR_SPIN_BUDGET_MS,
        LAB_SPIN_BUDGET_MS,
        spin_budget_ms,
    )

    assert spin_budget_ms(1) == spin_budget_ms(2) == EMULATOR_SPIN_BUDGET_MS == 100
    assert spin_budget_ms(3) == LAB_SPIN_BUDGET_MS // 3 == 66
    assert spin_budget_ms(21) == 9
    assert spin_budget_ms(1000) == 1  # linkemu reads 0 as no bound at all
    assert 21 * spin_budget_ms(21) <= LAB_SPIN_BUDGET_MS
    argv = userspace.emulator_argv(BINARY, Path("c"), Path("s"), 100, 0, 9)
    assert argv[-4:] == ["--spin-us", "100", "--spin-budget-ms", "9"]
    assert "--spin-budget-ms" not in userspace.emulator_argv(BINARY, Path("c"), Path("s"), 0,
                                                             0, 9)


def test_a_lab_starts_its_emulators_with_their_share_of_the_spin_budget(tmp_path, monkeypatch):
    from mcclab.links import emulation

    fake = FakeSpawn()
    monkeypatch.setattr(emulation, "spawn", fake)
    monkeypatch.setattr(UserspaceEmulation, "_wait_ready", lambda self, emu: None)
    monkeypatch.setattr(emulation, "kill_group", lambda proc: None)
    monkeypatch.setattr(emulation, "LAB_SPIN_BUDGET_MS", 50)
    monkeypatch.delenv(emulation.SPIN_ENV, raising=False)
    t = path_topo(middle="host", rate="10Mbit", delay="5ms")  # two emulators, both slow
    state = LabState(lab_id="unit")
    monkeypatch.setattr(LabState, "path", property(lambda self: tmp_path))
    monkeypatch.setattr(LabState, "save", lambda self: None)
    emu = UserspaceEmulation(t, plan_addresses(t), state, Runner(dry_run=True), binary=BINARY)
    try:
        emu.start(lambda *a: None)
        for what in ("linkemu d", "linkemu r"):
            argv = list(fake.argvs[what])
            assert argv[argv.index("--spin-budget-ms") + 1] == "25", argv
    finally:
        for child in fake.children:
            child.kill()
            child.wait()


def test_emulator_argv_asks_for_realtime_only_when_given_a_priority():
    argv = userspace.emulator_argv(BINARY, Path("c.conf"), Path("s.json"), 0, 10)
    assert argv[-2:] == ["--rt-priority", "10"]
    assert "--rt-priority" not in userspace.emulator_argv(BINARY, Path("c"), Path("s"), 100)


def test_emulator_rejects_a_priority_outside_the_fifo_range(tmp_path):
    conf = tmp_path / "c.conf"
    conf.write_text("")
    for bad in ("100", "-1", "x"):
        out = subprocess.run([str(BINARY), "--config", str(conf), "--rt-priority", bad,
                              "--check"], capture_output=True, text=True)
        assert out.returncode == 2 and "--rt-priority" in out.stderr, (bad, out)


def test_a_runs_seed_reaches_every_emulator_config(tmp_path, monkeypatch):
    """The experiment's seed draws the links' random drops, so trials over seeds differ."""
    from types import SimpleNamespace

    from mcclab.experiment.loader import resolve
    from mcclab.experiment.runner import RunOptions, lab_options
    from mcclab.links.emulation import start_links

    res = resolve("webrc-fig4", "quick", ["seed=7"])
    options = lab_options(res.experiment, tmp_path / "run", RunOptions(results=tmp_path))
    assert options.link_seed == 7
    state = LabState(lab_id="unit")
    monkeypatch.setattr(type(state), "path", property(lambda self: tmp_path / "lab"))
    monkeypatch.setattr(UserspaceEmulation, "start", lambda self, progress: None)
    lab = SimpleNamespace(topo=res.topology, plan=plan_addresses(res.topology), state=state,
                          runner=Runner(dry_run=True), options=options, features=None,
                          link_backend="userspace")
    emulation = start_links(lab, lambda *step: None)
    configs = [emu.text for emu in emulation._layout(res.topology).values()]
    lines = [line for text in configs for line in text.splitlines() if line.startswith("queue=")]
    assert lines and all(line.endswith(" seed=7") for line in lines)
    # without a run (mcclab up, benches) the links keep the emulator's default seed
    default = UserspaceEmulation(res.topology, lab.plan, state, lab.runner)
    assert all(text.count("seed=1\n") == text.count("queue=")
               for text in (e.text for e in default._layout(res.topology).values()))
