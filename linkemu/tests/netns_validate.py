#!/usr/bin/env python3
"""End-to-end validation of mcclab-linkemu in two network namespaces.

Needs root, iproute2, iptables (NFQUEUE target), ping and iperf3.  Creates
namespaces le-a and le-b joined by a veth (10.99.0.1 <-> 10.99.0.2), queues
le-a's egress to NFQUEUE 0, runs the emulator in le-a and measures delay,
rate, loss, multicast, fail-closed behaviour and packet-rate capacity.  All
traffic stays inside the two namespaces.  Everything it creates is removed
on exit.

usage: netns_validate.py [--bin PATH] [--out results.json] [--quick]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

A, B = "le-a", "le-b"
IP_A, IP_B = "10.99.0.1", "10.99.0.2"
DEV_A, DEV_B = "le-va", "le-vb"
# The rule under test (egress of le-a) and the alternative placement on the
# receiving side (ingress of le-b), which avoids the sender's TCP small
# queues / socket buffer accounting for packets held by the emulator.
RULE = ["-t", "mangle", "-A", "POSTROUTING", "-o", DEV_A, "-j", "NFQUEUE", "--queue-num", "0"]
RULE_INGRESS = ["-t", "mangle", "-A", "PREROUTING", "-i", DEV_B, "-j", "NFQUEUE", "--queue-num", "0"]

HERE = os.path.dirname(os.path.abspath(__file__))
results = {}
checks = []


def run(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


def nsx(ns, *cmd):
    return ["ip", "netns", "exec", ns, *cmd]


def check(name, ok, detail):
    checks.append((name, bool(ok), detail))
    print(f"  [{'ok' if ok else 'FAIL'}] {name}: {detail}", flush=True)


def setup():
    teardown()
    run(["ip", "netns", "add", A])
    run(["ip", "netns", "add", B])
    run(["ip", "link", "add", DEV_A, "netns", A, "type", "veth", "peer", "name", DEV_B, "netns", B])
    for ns, dev, ip in ((A, DEV_A, IP_A), (B, DEV_B, IP_B)):
        run(["ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev])
        run(["ip", "-n", ns, "link", "set", dev, "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        run(["ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", dev])
    rule(True)


def rule(on, ingress=False):
    spec = list(RULE_INGRESS if ingress else RULE)
    if not on:
        spec[2] = "-D"
    run(nsx(B if ingress else A, "iptables", *spec))


class Ingress:
    """Moves the queue from le-a egress to le-b ingress for a with-block."""

    def __enter__(self):
        rule(False)
        rule(True, ingress=True)

    def __exit__(self, *exc):
        rule(False, ingress=True)
        rule(True)


def teardown():
    for ns in (A, B):
        run(["ip", "netns", "del", ns], check=False)


class Emu:
    def __init__(self, binpath, conf, tmp, args=(), ns=A):
        self.conf = os.path.join(tmp, "emu.conf")
        self.stats = os.path.join(tmp, "emu-stats.json")
        with open(self.conf, "w") as f:
            f.write(conf + "\n")
        if os.path.exists(self.stats):
            os.unlink(self.stats)
        self.err = open(os.path.join(tmp, "emu.err"), "w")
        self.p = subprocess.Popen(nsx(ns, binpath, "--config", self.conf, "--stats", self.stats, *args),
                                  stderr=self.err)
        deadline = time.time() + 5
        while not os.path.exists(self.stats):
            if self.p.poll() is not None or time.time() > deadline:
                raise RuntimeError("emulator did not start")
            time.sleep(0.02)

    def read(self):
        with open(self.stats) as f:
            return json.load(f)

    def q(self, n=0):
        return self.read()["queues"][str(n)]

    def stop(self, sig=signal.SIGTERM):
        """Stops the emulator; returns (exit code, final stats of queue 0)."""
        self.p.send_signal(sig)
        rc = self.p.wait(timeout=5)
        self.err.close()
        self.final = self.read()
        return rc, self.final["queues"].get("0")

    def cpu_seconds(self):
        # The ip-netns-exec wrapper execs the emulator, so the pid is ours.
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ping(count, interval, size=56, timeout=1):
    r = run(nsx(A, "ping", "-n", "-c", str(count), "-i", str(interval), "-s", str(size),
                "-W", str(timeout), IP_B), check=False)
    return [float(l.split("time=")[1].split()[0]) for l in r.stdout.splitlines() if "time=" in l]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def rtt_summary(xs):
    return {"n": len(xs), "min": min(xs), "median": statistics.median(xs), "p99": pct(xs, 99),
            "max": max(xs)}


def iperf(args, seconds):
    srv = subprocess.Popen(nsx(B, "iperf3", "-s", "-1", "-J", "-B", IP_B), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        r = run(nsx(A, "iperf3", "-c", IP_B, "-t", str(seconds), "-J", "--get-server-output",
                    *args), check=False, timeout=seconds + 30)
    finally:
        try:
            srv.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    return json.loads(r.stdout)


def server_rate(j, skip=2):
    """Receiver-side payload rate over the steady middle of the test."""
    iv = j["server_output_json"]["intervals"][skip:-1]
    byts = sum(i["sum"]["bytes"] for i in iv)
    secs = sum(i["sum"]["seconds"] for i in iv)
    return byts * 8 / secs


def test_fail_closed_no_emulator():
    print("fail closed without emulator", flush=True)
    got = ping(3, 0.2)
    check("no emulator -> no traffic", len(got) == 0, f"{len(got)} of 3 pings answered")


def test_delay(binpath, tmp, quick):
    print("delay", flush=True)
    n = 300 if quick else 1000
    rule(False)
    base = rtt_summary(ping(n, 0.005))
    rule(True)
    results["rtt_no_emulator_ms"] = base
    emu = Emu(binpath, "queue=0 name=a-b", tmp)
    zero = rtt_summary(ping(n, 0.005))
    emu.stop()
    results["rtt_emulator_delay0_ms"] = zero
    check("emulator overhead (delay 0)", zero["median"] - base["median"] < 0.3,
          f"median {zero['median']:.3f} ms vs {base['median']:.3f} ms without emulator")
    for delay_ms, rate, size, spin in ((20, 0, 56, 0), (20, 0, 56, 100), (50, 0, 56, 0),
                                       (10, 1000000, 1000, 0)):
        emu = Emu(binpath, f"queue=0 delay_us={delay_ms * 1000} rate_bps={rate} name=a-b", tmp,
                  ("--spin-us", str(spin)))
        s = rtt_summary(ping(n if delay_ms < 50 else n // 2, 0.02, size))
        _, st = emu.stop()
        tx_ms = (size + 28) * 8 / rate * 1e3 if rate else 0
        want = delay_ms + tx_ms + base["median"]
        key = f"rtt_delay{delay_ms}ms_rate{rate}_size{size}_spin{spin}"
        results[key] = dict(s, expected_median=want, late_avg_us=st["late_avg_us"],
                            late_max_us=st["late_max_us"], late_p50_us=st["late_p50_us"],
                            late_p99_us=st["late_p99_us"], late_over_100us=st["late_over_100us"])
        check(f"RTT delay {delay_ms} ms rate {rate} spin {spin} us", abs(s["median"] - want) < 0.25,
              f"median {s['median']:.3f} p99 {s['p99']:.3f} expected {want:.3f} ms; verdict "
              f"lateness p50 {st['late_p50_us']} p99 {st['late_p99_us']} avg {st['late_avg_us']} "
              f"max {st['late_max_us']} us")

    emu = Emu(binpath, "queue=0 delay_us=30000 jitter_us=10000 name=a-b seed=3", tmp)
    # Sparse probes (100 ms apart) so the no-reorder clamp rarely engages.
    s = rtt_summary(ping(100 if quick else 200, 0.1))
    emu.stop()
    results["rtt_delay30ms_jitter10ms"] = s
    check("jitter spreads RTT within [20, 40] ms + base", 20 <= s["min"] and s["max"] <= 41.5 and
          s["max"] - s["min"] > 15, f"min {s['min']:.2f} median {s['median']:.2f} max {s['max']:.2f}")


def test_rate(binpath, tmp, quick):
    print("rate", flush=True)
    secs = 8 if quick else 15
    for rate in (1000000, 10000000):
        emu = Emu(binpath, f"queue=0 rate_bps={rate} limit_pkts=20 name=a-b", tmp)
        j = iperf(["-u", "-b", str(int(rate * 1.3)), "-l", "1400"], secs)
        _, st = emu.stop()
        ip_rate = server_rate(j) * 1428 / 1400  # UDP payload -> IP bytes
        err = ip_rate / rate - 1
        results[f"udp_rate_{rate}"] = {"measured_ip_bps": ip_rate, "error": err,
                                       "drops_queue": st["drops_queue"], "max_qlen": st["max_qlen"]}
        check(f"UDP rate {rate / 1e6:g} Mbit/s", abs(err) < 0.02,
              f"receiver IP-level {ip_rate / 1e6:.4f} Mbit/s, error {err * 100:+.2f}%, "
              f"queue drops {st['drops_queue']}, max_qlen {st['max_qlen']}")

        for where in ("ingress", "egress"):
            conf = f"queue=0 rate_bps={rate} delay_us=10000 limit_pkts=100 name=a-b"
            if where == "ingress":
                with Ingress():
                    emu = Emu(binpath, conf, tmp, ns=B)
                    j = iperf([], secs)
                    _, st = emu.stop()
            else:
                emu = Emu(binpath, conf, tmp)
                j = iperf([], secs)
                _, st = emu.stop()
            good = server_rate(j)
            mss = 1448
            ip_rate = good * (mss + 52) / mss  # 20 IP + 20 TCP + 12 timestamp option
            err = ip_rate / rate - 1
            results[f"tcp_rate_{rate}_{where}"] = {"goodput_bps": good, "ip_bps_estimate": ip_rate,
                                                   "error": err, "drops_queue": st["drops_queue"],
                                                   "max_qlen": st["max_qlen"]}
            detail = (f"goodput {good / 1e6:.4f} Mbit/s -> IP {ip_rate / 1e6:.4f} Mbit/s, error "
                      f"{err * 100:+.2f}%, queue drops {st['drops_queue']}, max_qlen {st['max_qlen']}")
            if where == "ingress":
                check(f"TCP rate {rate / 1e6:g} Mbit/s (queue at receiver ingress)", abs(err) < 0.02,
                      detail)
            else:
                # Known limitation, recorded not asserted: packets held in an
                # egress NFQUEUE still count against the sending socket, so
                # TCP small queues throttle a sender in the same namespace.
                print(f"  [info] TCP rate {rate / 1e6:g} Mbit/s, queue at sender egress: {detail}",
                      flush=True)


def test_loss(binpath, tmp, quick):
    print("loss", flush=True)
    secs = 10 if quick else 20
    for loss in (0.01, 0.05):
        emu = Emu(binpath, f"queue=0 loss={loss} seed=9 name=a-b", tmp)
        j = iperf(["-u", "-b", "40M", "-l", "1000"], secs)
        _, st = emu.stop()
        s = j["server_output_json"]["end"]["sum"]
        n, lost = s["packets"], s["lost_packets"]
        frac = lost / n
        half = 2.576 * (loss * (1 - loss) / n) ** 0.5
        results[f"loss_{loss}"] = {"packets": n, "lost": lost, "fraction": frac, "ci99": half,
                                   "emu_drops_loss": st["drops_loss"], "emu_pkts_in": st["pkts_in"]}
        check(f"loss {loss}", abs(frac - loss) <= half,
              f"{lost}/{n} = {frac * 100:.3f}% (99% CI +-{half * 100:.3f}%), emulator "
              f"drops_loss {st['drops_loss']}")


MC_SENDER = r"""
import socket, struct, sys, time
n, loop, join = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("10.99.0.1"))
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, loop)
if join:
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 socket.inet_aton("239.1.1.1") + socket.inet_aton("10.99.0.1"))
for i in range(n):
    s.sendto(struct.pack("!Id", i, time.clock_gettime(time.CLOCK_MONOTONIC)), ("239.1.1.1", 5000))
    time.sleep(0.01)
"""

MC_RECEIVER = r"""
import socket, struct, sys, time, json
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
r.bind(("239.1.1.1", 5000))
r.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
             socket.inet_aton("239.1.1.1") + socket.inet_aton("10.99.0.2"))
r.settimeout(float(sys.argv[1]))
print("ready", flush=True)
d = []
try:
    while True:
        b = r.recv(100)
        i, t = struct.unpack("!Id", b[:12])
        d.append((time.clock_gettime(time.CLOCK_MONOTONIC) - t) * 1e3)
except socket.timeout:
    pass
print(json.dumps(d))
"""


def test_multicast(binpath, tmp):
    print("multicast", flush=True)
    n = 100
    for loop, join, where in ((0, 0, "egress"), (1, 0, "egress"), (1, 1, "egress"),
                              (1, 1, "ingress")):
        ing = Ingress() if where == "ingress" else None
        if ing:
            ing.__enter__()
        emu = Emu(binpath, "queue=0 delay_us=20000 name=a-b", tmp, ns=B if ing else A)
        rx = subprocess.Popen(nsx(B, sys.executable, "-c", MC_RECEIVER, "1.5"),
                              stdout=subprocess.PIPE, text=True)
        rx.stdout.readline()
        before = emu.q()["pkts_in"]
        run(nsx(A, sys.executable, "-c", MC_SENDER, str(n), str(loop), str(join)))
        delays = json.loads(rx.communicate(timeout=10)[0])
        time.sleep(0.15)
        _, st = emu.stop()
        if ing:
            ing.__exit__(None, None, None)
        seen = st["pkts_in"] - before
        key = f"multicast_loop{loop}_join{join}_{where}"
        med = statistics.median(delays) if delays else None
        results[key] = {"sent": n, "received": len(delays), "emu_pkts_in": seen,
                        "one_way_median_ms": med}
        # Known: a sender that is itself a member of the group (and so gets a
        # looped-back copy) sends that copy through POSTROUTING too.
        factor = 2 if (loop and join and where == "egress") else 1
        ok = (len(delays) == n and med is not None and 19.9 < med < 21
              and n * factor <= seen <= n * factor + 10)
        check(f"multicast via queue at {where} (loop={loop}, sender joined={join})", ok,
              f"received {len(delays)}/{n}, one-way median {med:.3f} ms (20 ms configured), "
              f"emulator saw {seen} packets for {n} datagrams (expected {n * factor} + IGMP)")


def test_kill(binpath, tmp):
    print("fail closed on emulator death", flush=True)
    emu = Emu(binpath, "queue=0 delay_us=1000 name=a-b", tmp)
    alive = len(ping(3, 0.1))
    rc, final = emu.stop(signal.SIGTERM)
    check("SIGTERM exits 0 and writes final stats", rc == 0 and final["pkts_out"] >= 3,
          f"rc {rc}, pkts_out {final['pkts_out']}")
    dead = len(ping(3, 0.2))
    emu = Emu(binpath, "queue=0 delay_us=1000 name=a-b", tmp)
    alive2 = len(ping(3, 0.1))
    emu.stop(signal.SIGKILL)
    dead2 = len(ping(3, 0.2))
    results["kill"] = {"alive": alive, "after_sigterm": dead, "alive2": alive2, "after_sigkill": dead2}
    check("link stops when emulator exits", alive == 3 and dead == 0 and alive2 == 3 and dead2 == 0,
          f"pings answered: running {alive}, after SIGTERM {dead}, restarted {alive2}, "
          f"after SIGKILL {dead2}")


def test_red(binpath, tmp, quick):
    print("RED sanity (4 TCP flows, queue at receiver ingress)", flush=True)
    samples = []
    with Ingress():
        emu = Emu(binpath, "queue=0 rate_bps=2000000 delay_us=20000 limit_pkts=60 disc=red min_th=5 "
                  "max_th=15 max_p=0.1 weight=0.002 gentle=1 mean_pktsize=1500 name=a-b", tmp, ns=B)

        def sample():
            for _ in range(40):
                time.sleep(0.25)
                samples.append(emu.q()["red_avg"])

        t = threading.Thread(target=sample)
        t.start()
        j = iperf(["-P", "4"], 10 if quick else 15)
        t.join()
        _, st = emu.stop()
    mid = statistics.median(samples[8:-8] or samples)
    results["red"] = {"drops_queue": st["drops_queue"], "max_qlen": st["max_qlen"],
                      "red_avg_median": mid, "goodput_bps": server_rate(j)}
    # Slow-start bursts outrun the slow EWMA (w=0.002) and may touch the
    # limit; steady state must sit between min_th and 2*max_th.
    check("RED keeps avg between min_th and 2*max_th",
          st["drops_queue"] > 0 and 5 <= mid <= 30 and st["max_qlen"] <= 60,
          f"avg median {mid:.2f}, max_qlen {st['max_qlen']}, drops {st['drops_queue']}, "
          f"goodput {server_rate(j) / 1e6:.3f} Mbit/s")


def test_bdp(binpath, tmp, quick):
    print("large delay x rate (UDP 10 Mbit/s link, 200 ms delay)", flush=True)
    conf = "queue=0 rate_bps=10000000 delay_us=200000 limit_pkts=50 name=a-b"
    for where in ("ingress", "egress"):
        if where == "ingress":
            with Ingress():
                emu = Emu(binpath, conf, tmp, ns=B)
                j = iperf(["-u", "-b", "12M", "-l", "1400"], 8 if quick else 12)
                _, st = emu.stop()
        else:
            emu = Emu(binpath, conf, tmp)
            j = iperf(["-u", "-b", "12M", "-l", "1400"], 8 if quick else 12)
            _, st = emu.stop()
        ip_rate = server_rate(j, skip=3) * 1428 / 1400
        err = ip_rate / 10e6 - 1
        results[f"udp_bdp_{where}"] = {"ip_bps": ip_rate, "error": err, "max_in_flight_note":
                                       "egress: held packets count against the sender's SO_SNDBUF"}
        detail = f"receiver IP-level {ip_rate / 1e6:.3f} Mbit/s ({err * 100:+.1f}%), drops {st['drops_queue']}"
        if where == "ingress":
            check("UDP 10 Mbit/s x 200 ms (queue at receiver ingress)", abs(err) < 0.02, detail)
        else:
            print(f"  [info] UDP 10 Mbit/s x 200 ms, queue at sender egress: {detail}", flush=True)


def test_stall(binpath, tmp):
    print("netlink overflow (emulator stopped 1.5 s under 50k pps, queue at ingress)", flush=True)
    with Ingress():
        emu = Emu(binpath, "queue=0 name=a-b", tmp, ns=B)
        srv = subprocess.Popen(nsx(B, "iperf3", "-s", "-1", "-B", IP_B), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        cli = subprocess.Popen(nsx(A, "iperf3", "-c", IP_B, "-t", "5", "-u", "-b", str(50000 * 512),
                                   "-l", "64", "-w", "8M"), stdout=subprocess.DEVNULL)
        time.sleep(1.5)
        emu.p.send_signal(signal.SIGSTOP)
        time.sleep(1.5)
        emu.p.send_signal(signal.SIGCONT)
        cli.wait(timeout=30)
        srv.wait(timeout=10)
        after = len(ping(3, 0.1))
        _, st = emu.stop()
    results["stall"] = {k: st[k] for k in ("pkts_in", "pkts_out", "kernel_dropped",
                                           "kernel_user_dropped", "enobufs")}
    results["stall"]["pings_after"] = after
    check("recovers from netlink overflow", after == 3 and st["pkts_out"] > 100000,
          f"ENOBUFS reports {st['enobufs']}, kernel dropped {st['kernel_dropped']} (queue full) + "
          f"{st['kernel_user_dropped']} (socket full), passed {st['pkts_out']}, pings after {after}/3")


def test_two_queues(binpath, tmp):
    print("two queues in one process", flush=True)
    run(nsx(A, "iptables", "-t", "mangle", "-I", "POSTROUTING", "1", "-o", DEV_A, "-p", "icmp",
            "-j", "NFQUEUE", "--queue-num", "1"))
    try:
        emu = Emu(binpath, "queue=0 delay_us=10000 name=udp\nqueue=1 delay_us=30000 name=icmp", tmp)
        s = rtt_summary(ping(50, 0.02))
        emu.stop()
        st = emu.final["queues"]
    finally:
        run(nsx(A, "iptables", "-t", "mangle", "-D", "POSTROUTING", "-o", DEV_A, "-p", "icmp",
                "-j", "NFQUEUE", "--queue-num", "1"))
    check("ICMP on queue 1 gets its own delay", 30 < s["median"] < 30.5 and st["1"]["pkts_in"] >= 50
          and st["0"]["pkts_in"] == 0, f"median {s['median']:.3f} ms, queue1 in {st['1']['pkts_in']}, "
          f"queue0 in {st['0']['pkts_in']}")


def test_pps(binpath, tmp, quick):
    print("packet-rate capacity (64 B UDP payload, unlimited rate, no delay)", flush=True)
    secs = 5
    steps = [20000, 50000, 100000, 150000, 200000, 300000]
    out = []
    for pps in steps:
        for with_emu in (False, True):
            emu = None
            if with_emu:
                emu = Emu(binpath, "queue=0 name=a-b", tmp)
                c0 = emu.cpu_seconds()
            else:
                rule(False)
            try:
                # Large socket buffers so the receiving iperf3, which shares
                # the two cores with the sender and the emulator, is not
                # what overflows first.
                j = iperf(["-u", "-b", str(pps * 64 * 8), "-l", "64", "-w", "8M"], secs)
            finally:
                if not with_emu:
                    rule(True)
            s = j["server_output_json"]["end"]["sum"]
            sent = j["end"]["sum"]["packets"] if "packets" in j["end"]["sum"] else s["packets"]
            row = {"offered_pps": pps, "emulator": with_emu,
                   "achieved_pps": (s["packets"] - s["lost_packets"]) / s["seconds"],
                   "sent_pps": sent / secs, "loss": s["lost_percent"] / 100}
            if emu:
                cpu = (emu.cpu_seconds() - c0) / secs
                _, st = emu.stop()
                row.update(cpu=cpu, emu_out_pps=st["pkts_out"] / secs,
                           kernel_dropped=st["kernel_dropped"],
                           user_dropped=st["kernel_user_dropped"], enobufs=st["enobufs"],
                           late_avg_us=st["late_avg_us"], late_max_us=st["late_max_us"])
            out.append(row)
            print("   ", row, flush=True)
        if quick and pps >= 100000:
            break
    results["pps"] = out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "mcclab-linkemu"))
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="comma-separated subset: delay,rate,loss,mc,kill,red,bdp,stall,two,pps")
    a = ap.parse_args()
    binpath = os.path.abspath(a.bin)
    only = set(a.only.split(",")) if a.only else None
    want = lambda k: only is None or k in only
    tmp = tempfile.mkdtemp(prefix="le-validate-")
    setup()
    try:
        if want("kill"):
            test_fail_closed_no_emulator()
            test_kill(binpath, tmp)
        if want("delay"):
            test_delay(binpath, tmp, a.quick)
        if want("rate"):
            test_rate(binpath, tmp, a.quick)
        if want("loss"):
            test_loss(binpath, tmp, a.quick)
        if want("mc"):
            test_multicast(binpath, tmp)
        if want("bdp"):
            test_bdp(binpath, tmp, a.quick)
        if want("stall"):
            test_stall(binpath, tmp)
        if want("two"):
            test_two_queues(binpath, tmp)
        if want("red"):
            test_red(binpath, tmp, a.quick)
        if want("pps"):
            test_pps(binpath, tmp, a.quick)
    finally:
        teardown()
    results["checks"] = [{"name": n, "ok": ok, "detail": d} for n, ok, d in checks]
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)
    npass = sum(ok for _, ok, _ in checks)
    print(f"{npass} passed, {len(checks) - npass} failed")
    return 0 if npass == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
