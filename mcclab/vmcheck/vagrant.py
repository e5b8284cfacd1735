"""`make vagrant-check`: the README's laptop path, `vagrant up` then `make experiment`, for real.

The committed Vagrantfile with Debian's vagrant and vagrant-libvirt, QEMU
software emulation (libvirt driver ``qemu``), and the box built from the image
``make vm-check`` caches (``vagrantbox``). libvirtd, Vagrant and libvirt's
management bridge run in a network namespace the check creates (``nsnet``): no
bridge or private address range appears in the root namespace. Then, from this
host: the run's results folder arrived complete, its report opens in headless
Chromium (screenshot kept), and Prometheus answered on the forwarded port with
the run's series while it ran; experiment hosts in the VM could not connect to
it. ``vagrant destroy -f`` ends it, and the check looks for every kind of
leftover (domain, volume, network, pool, process, namespace, mount).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from mcclab.refuse import alert
from mcclab.vmcheck import guest, nsnet, vagrantbox, vagrantlabs
from mcclab.vmcheck.procs import CommandFailed, priority_prefix, run_logged
from mcclab.vmcheck.qemu import kill_group
from mcclab.vmcheck.run import HOST_TOOLS, REPO, Check, Options, console, summary_table
from mcclab.vmcheck.ssh import Keys

# vm-check's image build's tools too (run.HOST_TOOLS), and Vagrant's.
TOOLS = (*HOST_TOOLS, "vagrant", "virsh", "libvirtd", "virtlogd", "ip", "rsync", "make")
CHROMIUM = "/usr/bin/chromium"
LIBVIRT_SOCK = Path("/run/libvirt/libvirt-sock")
# Runtime state libvirtd keeps for the management network (dnsmasq's pid file, the
# ports folder); it stays after libvirtd ends, so the check removes it then.
NETWORK_STATE = Path("/run/libvirt/network")
POOL = "default"
FORWARDED = (3000, 9090)  # the Vagrantfile's forwarded guest ports
_LINK = re.compile(r"(live dashboards|live metrics \(Prometheus[^)]*\)): (http://\S+)")
_HOST_RESULTS = re.compile(r"results on this host: (\S+?)/? \(report: (\S+)\)")


def run_id_of(link: str) -> str | None:
    """The run id in a dashboard or Prometheus link (``var-run=`` or ``run="..."``)."""
    text = urllib.parse.unquote_plus(link)
    m = re.search(r'var-run=([^&\s]+)', text) or re.search(r'run="([^"]+)"', text)
    return m.group(1) if m else None


def link_port(link: str) -> int | None:
    """The port of an http://127.0.0.1:PORT/... link."""
    parsed = urllib.parse.urlparse(link)
    return parsed.port if parsed.hostname == "127.0.0.1" else None


def host_results(output: str) -> tuple[Path, Path] | None:
    """(folder, report) from make's last ``results on this host: ...`` line.

    Lines with ``$`` are make's echo of its recipe (``${run%/}``), not its output.
    """
    found = [m for m in _HOST_RESULTS.finditer(output) if "$" not in m.group(0)]
    return (Path(found[-1].group(1)), Path(found[-1].group(2))) if found else None


def compare_listings(guest_text: str, host_root: Path) -> list[str]:
    """Files (``path size`` lines from the guest) missing or of another size on the host."""
    problems = []
    for line in guest_text.splitlines():
        if not line.strip():
            continue
        path, _, size = line.rpartition(" ")
        local = host_root / path
        if not local.is_file():
            problems.append(f"missing {path}")
        elif str(local.stat().st_size) != size:
            problems.append(f"{path}: {local.stat().st_size} bytes, guest {size}")
    return problems


EXPORTER_PORT = 9463  # mcclab's exporter, on the control gateway (reachable by design)


def lab_isolation_script(port: int, control_port: int = EXPORTER_PORT) -> str:
    """Guest shell: from a lab host's namespace, try the monitoring port on every VM address.

    The lab host is the first ``mcl-*`` namespace with a control interface
    (``ctl0``). Each of the VM's IPv4 addresses (root namespace) is tried on
    ``port`` (Prometheus, which must be refused everywhere: it listens on
    127.0.0.1) and on ``control_port`` (the exporter on the control gateway,
    which must connect somewhere: the probe can reach the VM at all). Lines:
    ``lab <addr> <port> CONNECTED|refused``, and ``vm <addr> <port> ...`` for the
    VM's own 127.0.0.1, where the tunnel ends.
    """
    probe = ("import socket,sys\n"
             "tag=sys.argv[1]\n"
             "for a in sys.argv[2:]:\n"
             "  for p in (PORT, CTL):\n"
             "    s=socket.socket(); s.settimeout(3)\n"
             "    try: s.connect((a,p)); print(tag,a,p,'CONNECTED')\n"
             "    except OSError as e: print(tag,a,p,'refused',e.__class__.__name__)\n"
             "    finally: s.close()\n").replace("PORT", str(port)).replace(
                 "CTL", str(control_port))
    return ("ns=; for n in $(ip netns list | awk '/^mcl-/{print $1}'); do "
            "if sudo ip -n \"$n\" link show ctl0 >/dev/null 2>&1; then ns=$n; break; fi; done; "
            "[ -n \"$ns\" ] || { echo 'no lab namespace with ctl0'; exit 3; }; "
            "echo \"lab host $ns\"; "
            "addrs=$(ip -4 -o addr show | awk '{split($4,a,\"/\"); print a[1]}'); "
            f"sudo ip netns exec \"$ns\" python3 -c {shlex.quote(probe)} lab $addrs; "
            f"python3 -c {shlex.quote(probe)} vm 127.0.0.1")


def isolation_ok(lines: list[str], port: int, control_port: int = EXPORTER_PORT) -> bool:
    """Lab host refused on ``port`` at every address, yet connected to the exporter somewhere;
    the VM's own 127.0.0.1 answers on ``port`` (where the forward ends)."""
    lab = [ln.split() for ln in lines if ln.startswith("lab ")]
    on_port = [f for f in lab if len(f) >= 4 and f[2] == str(port)]
    control = [f for f in lab if len(f) >= 4 and f[2] == str(control_port)]
    vm = [ln.split() for ln in lines if ln.startswith("vm ")]
    return (bool(on_port) and all(f[3] == "refused" for f in on_port)
            and any(f[3] == "CONNECTED" for f in control)
            and any(len(f) >= 4 and f[2] == str(port) and f[3] == "CONNECTED" for f in vm))


@dataclass
class VagrantCheck:
    """State of one Vagrant check."""

    chk: Check
    netns: str
    run_dir: Path
    cpus: int = 2
    memory_mb: int = 4096
    daemons: list[subprocess.Popen[bytes]] = field(default_factory=list)
    relays: list[nsnet.Relay] = field(default_factory=list)
    host_ports: dict[int, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    pool_existed: bool = True
    volumes_before: set[str] = field(default_factory=set)
    vagrant_up_done: bool = False
    findings: dict[str, object] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        """The check's results folder."""
        return self.chk.out

    @property
    def checkout(self) -> Path:
        """The copy of the checkout the check runs Vagrant and make in."""
        return self.run_dir / "checkout"

    def ns(self, argv: list[str]) -> list[str]:
        """``argv`` inside the check's namespace."""
        return nsnet.exec_argv(self.netns, argv)

    def virsh(self, *args: str, check: bool = True) -> str:
        """virsh against the check's libvirtd."""
        res = subprocess.run(self.ns(["virsh", "-q", "-c", "qemu:///system", *args]),
                             capture_output=True, text=True, timeout=120)
        if check and res.returncode != 0:
            raise CommandFailed(f"virsh {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    # ------------------------------------------------------------ libvirt in the namespace

    def start_libvirt(self) -> None:
        """The namespace, virtlogd and libvirtd in it (SCHED_IDLE: QEMU inherits it)."""
        nsnet.create(self.netns)
        log = self.chk.log("libvirtd")
        log.parent.mkdir(parents=True, exist_ok=True)
        for daemon in ("virtlogd", "libvirtd"):
            with log.open("ab") as f:
                proc = subprocess.Popen(self.ns(priority_prefix(idle=True) + [daemon]),
                                        stdin=subprocess.DEVNULL, stdout=f,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            self.daemons.append(proc)
        deadline = time.monotonic() + 120
        while True:
            res = subprocess.run(self.ns(["virsh", "-c", "qemu:///system", "version"]),
                                 capture_output=True, text=True, timeout=60)
            if res.returncode == 0:
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.daemons):
                raise CommandFailed(f"libvirtd did not answer: {res.stderr.strip()} "
                                    f"(log: {log})")
            time.sleep(1)
        pools = self.virsh("pool-list", "--all", "--name").split()
        self.pool_existed = POOL in pools
        if self.pool_existed:
            self.volumes_before = set(self.virsh("vol-list", POOL).split()[::2])

    def stop_libvirt(self) -> None:
        """End libvirtd and virtlogd by their pids, then delete the namespace."""
        for proc in reversed(self.daemons):
            kill_group(proc.pid, 15.0, proc)
        self.daemons.clear()
        remove_network_state()
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            nsnet.delete(self.netns)

    # ------------------------------------------------------------ steps

    def prepare(self, base: Path) -> str:
        """The box, the throw-away VAGRANT_HOME with it added, the checkout copy."""
        home = self.run_dir / "vagrant-home"
        home.mkdir(parents=True)
        hosts = host_mirrors()
        assert self.chk.keys is not None
        (home / "Vagrantfile").write_text(
            vagrantbox.home_vagrantfile(self.chk.keys.client, hosts))
        extra = {k: v for k, v in guest.extra_vars().items() if k != "mcclab_repo"}
        self.env = os.environ | vagrantbox.check_env(home, extra, self.cpus, self.memory_mb,
                                                     guest.TIMEOUT_SCALE)
        name = vagrantbox.box_name((REPO / "Vagrantfile").read_text())
        box = vagrantbox.write_box(base, self.run_dir / "box")
        self.chk.host(["vagrant", "box", "add", "--name", name, str(box)], "vagrant-box", 1800,
                      "vagrant box add", env=self.env)
        box.unlink()
        # The working tree as a user's rsync would send it (tracked files with their
        # edits, and new files git does not ignore): Vagrant and make run in this
        # copy, so nothing is written into the shared checkout.
        files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], cwd=REPO, capture_output=True,
                               check=True).stdout.split(b"\0")
        present = b"\0".join(f for f in files if f and (REPO / f.decode()).exists())
        self.checkout.mkdir()
        tar = subprocess.Popen(["tar", "-c", "--null", "-T", "-"], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        untar = subprocess.Popen(["tar", "-x", "-C", str(self.checkout)], stdin=tar.stdout)
        assert tar.stdin is not None and tar.stdout is not None
        tar.stdin.write(present)
        tar.stdin.close()
        tar.stdout.close()
        if tar.wait(300) != 0 or untar.wait(300) != 0:
            raise CommandFailed("copying the checkout failed")
        return name

    def vagrant_up(self) -> None:
        """`vagrant up` (the README's first command) in the namespace."""
        self.vagrant_up_done = True  # from here on, destroy in any case
        self.chk.host(self.ns(["vagrant", "up"]), "vagrant-up", 5400, "vagrant up",
                      env=self.env | {"PWD": str(self.checkout)}, cwd=self.checkout)
        status = subprocess.run(self.ns(["vagrant", "status", "--machine-readable"]),
                                cwd=self.checkout, env=self.env, capture_output=True,
                                text=True, timeout=300).stdout
        self.findings["vagrant_status"] = [ln for ln in status.splitlines()
                                           if ",provider-name," in ln or ",state," in ln]
        if ",state,running" not in status:
            raise CommandFailed(f"the machine is not running after vagrant up: {status[-300:]}")

    def forward_ports(self) -> None:
        """This host's 127.0.0.1 to the namespace's 127.0.0.1 (where Vagrant's tunnels listen)."""
        for port in FORWARDED:
            try:
                relay = nsnet.port_relay(self.netns, port)
            except OSError:
                relay = nsnet.port_relay(self.netns, port, listen_port=0)  # taken here
            self.relays.append(relay)
            self.host_ports[port] = nsnet.listen_port(relay)
        self.findings["host_ports"] = self.host_ports

    def ssh_config(self) -> Path:
        """Vagrant's ssh settings for the machine, for short guest commands."""
        path = self.run_dir / "ssh-config"
        res = subprocess.run(self.ns(["vagrant", "ssh-config"]), cwd=self.checkout,
                             env=self.env, capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            raise CommandFailed(f"vagrant ssh-config: {res.stderr.strip()}")
        path.write_text(res.stdout)
        return path

    def guest(self, command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A short command in the guest (plain ssh with Vagrant's settings, in the namespace)."""
        return subprocess.run(self.ns(["ssh", "-F", str(self.run_dir / "ssh-config"),
                                       "-o", "ConnectTimeout=60", "default", command]),
                              capture_output=True, text=True, timeout=timeout)

    def experiment(self) -> tuple[int, str]:
        """The README's second command, `make experiment`, with live checks while it runs."""
        self.ssh_config()
        log = self.chk.log("make-experiment")
        argv = self.ns(["make", "experiment"])
        proc_out: list[str] = []
        live: dict[str, object] = {}
        watcher_done = threading.Event()

        def watch() -> None:
            """On the announced link: Prometheus through the forward, isolation, screenshot."""
            deadline = time.monotonic() + 3600
            while not watcher_done.is_set() and time.monotonic() < deadline:
                text = "".join(proc_out)
                m = _LINK.search(text)
                if m:
                    try:
                        live.update(self.live_checks(m.group(2), live))
                    except Exception as exc:  # recorded: the step then fails with its reason
                        live["error"] = repr(exc)
                    return
                time.sleep(2)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()

        def status(line: str) -> None:
            proc_out.append(line + "\n")
            self.chk.status("make experiment")(line)
        rc_, output = run_logged(argv, log, 5400, status, env=self.env | {
            "PWD": str(self.checkout)}, cwd=self.checkout)
        watcher_done.set()
        watcher.join(600)
        self.findings["live"] = live
        return rc_, output

    def live_checks(self, link: str, found: dict[str, object]) -> dict[str, object]:
        """While the run runs: its series through the forward, the lab hosts locked out.

        Fills ``found`` as it goes (what was learnt survives an exception).
        """
        found["link"] = link
        run = run_id_of(link)
        port = link_port(link)
        found["run"] = run
        if port not in self.host_ports:
            found["error"] = f"the link's port {port} is not one the Vagrantfile forwards"
            return found
        host_port = self.host_ports[port]
        # First, while the lab is surely up: can an experiment host reach Prometheus?
        iso = self.guest(lab_isolation_script(port))
        found["isolation"] = (iso.stdout + iso.stderr).strip().splitlines()
        found["isolation_ok"] = iso.returncode == 0 and isolation_ok(found["isolation"], port)
        base = f"http://127.0.0.1:{host_port}"
        query = f'count by (__name__) ({{run="{run}"}})'
        deadline = time.monotonic() + 300
        names: list[str] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": query})
                with urllib.request.urlopen(url, timeout=30) as r:
                    data = json.load(r)
                names = sorted(x["metric"].get("__name__", "") for x in data["data"]["result"])
                if any(n.startswith("mcc_agent_") for n in names) and any(
                        n.startswith("mcc_link_") for n in names):
                    break
            time.sleep(5)
        found["series_names"] = names
        found["prometheus_ok"] = bool(names) and any(n.startswith("mcc_agent_") for n in names)
        # The announced link itself, opened on this host (its port mapped to the relay's).
        shot = self.out / "live-link.png"
        local = link.replace(f"127.0.0.1:{port}", f"127.0.0.1:{host_port}", 1)
        found["live_link_screenshot"] = self.screenshot(local, shot)
        return found

    def screenshot(self, url: str, png: Path) -> bool:
        """Headless Chromium renders ``url`` into ``png``; True if it wrote an image."""
        # A profile of its own: another Chromium on the host may hold the default one.
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                f"--user-data-dir={self.run_dir / 'chromium'}",
                "--hide-scrollbars", "--window-size=1280,1600", f"--screenshot={png}",
                "--virtual-time-budget=15000", url]
        rc_, _ = run_logged(argv, self.chk.log("chromium"), 300)
        return rc_ == 0 and png.is_file() and png.stat().st_size > 10_000

    def check_results(self, output: str) -> dict[str, object]:
        """The run's folder on this host: where make said, complete, the same as the guest's."""
        found: dict[str, object] = {}
        printed = host_results(output)
        if printed is None:
            found["error"] = "make experiment printed no host results path"
            return found
        folder, report = printed
        found["folder"], found["report"] = str(folder), str(report)
        found["under_host_results"] = folder.is_relative_to(self.checkout / "results")
        record = json.loads((folder / "run.json").read_text()) if (folder / "run.json").is_file() \
            else {}
        found["status"] = record.get("status")
        rel = folder.relative_to(self.checkout)
        res = self.guest(f"cd /vagrant && sudo find {rel} -type f -printf '%P %s\\n'")
        found["guest_files"] = len(res.stdout.splitlines())
        found["problems"] = compare_listings(res.stdout, folder) if res.returncode == 0 else [
            f"guest listing failed: {res.stderr.strip()}"]
        found["host_files"] = sum(1 for p in folder.rglob("*") if p.is_file())
        found["has"] = {name: (folder / name).exists() for name in
                        ("report.html", "run.json", "tables/metrics.csv.gz", "summary.json")}
        found["report_screenshot"] = self.screenshot(report.as_uri(),
                                                     self.out / "report.png")
        shutil.copytree(folder, self.out / "host-results" / folder.name)
        return found

    def vagrant_ssh(self, command: str, log: str, timeout: float, what: str,
                    stdout_to: IO[bytes] | None = None) -> tuple[int, str]:
        """``vagrant ssh -c COMMAND`` from the checkout copy, as a user types it."""
        return run_logged(self.ns(vagrantlabs.vagrant_ssh_argv(command)), self.chk.log(log),
                          timeout, self.chk.status(what), stdout_to=stdout_to,
                          env=self.env | {"PWD": str(self.checkout)}, cwd=self.checkout)

    def copy_labs_back(self) -> int:
        """docs/teaching.md's tar of ``results/labs`` through ``vagrant ssh -c``, unpacked
        into the checkout copy and the check's results; the number of files."""
        tar = self.run_dir / "labs.tar"
        guest_side, host_side = vagrantlabs.copy_back_argv()
        with tar.open("wb") as f:
            rc_, _ = self.vagrant_ssh(guest_side[-1], "labs-copy", 1800, "copy labs back",
                                      stdout_to=f)
        if rc_ != 0:
            raise CommandFailed(f"copying results/labs back: exit {rc_}")
        for dest in (self.checkout, self.out / "host-results"):
            dest.mkdir(parents=True, exist_ok=True)
            with tar.open("rb") as f:
                subprocess.run(host_side, stdin=f, cwd=dest, check=True, timeout=600)
        tar.unlink()
        return sum(1 for p in (self.out / "host-results" / "results" / "labs").rglob("*")
                   if p.is_file())

    def labs(self, numbers: list[int]) -> None:
        """Each lab's student commands in the VM, one step each (``--labs``)."""
        scale = guest.TIMEOUT_SCALE
        for number in numbers:
            name, steps = vagrantlabs.lab_steps(number, self.checkout / "labs", self.checkout)
            for lab_step in steps:
                if lab_step.label == "reset":
                    # The work folder goes home before reset clears it (answers stay).
                    with self.chk.step(f"lab {number}: work folder to the host") as st:
                        try:
                            st.note = f"{self.copy_labs_back()} files under results/labs"
                        except (CommandFailed, subprocess.SubprocessError, OSError) as exc:
                            # recorded; the lab's reset and the next labs still run
                            st.ok, st.note = False, str(exc)[:200]
                with self.chk.step(f"lab {number}: {lab_step.title}") as st:
                    log = f"lab-{name}-{lab_step.label.replace(' ', '-')}"
                    rc_, output = self.vagrant_ssh(
                        vagrantlabs.student_shell(lab_step.args, scale), log,
                        lab_step.timeout, f"lab {number} {lab_step.label}")
                    st.note = f"exit {rc_}"
                    if lab_step.label.startswith("check"):
                        doc = vagrantlabs.json_document(output)
                        ok, note = vagrantlabs.check_verdict(
                            doc, example=lab_step.label == "check example")
                        self.findings[f"lab {number} {lab_step.label}"] = doc
                        st.ok, st.note = ok and rc_ == 0, f"exit {rc_}, {note}"
                    elif lab_step.label == "handout":
                        m = re.search(r"handout: (\S+\.html)", output)
                        st.ok = rc_ == 0 and m is not None
                        st.note += f", {m.group(1)}" if m else ", no handout path"
                    else:
                        st.ok = rc_ == 0

    def destroy(self) -> None:
        """`vagrant destroy -f`, then the box's volume and the pool if the check made them."""
        if self.vagrant_up_done:
            self.vagrant_up_done = False
            self.chk.host(self.ns(["vagrant", "destroy", "-f"]), "vagrant-destroy", 900,
                          "vagrant destroy", env=self.env, cwd=self.checkout)
        if LIBVIRT_SOCK.exists() and self.daemons:
            with contextlib.suppress(CommandFailed, subprocess.SubprocessError):
                for name in self.virsh("list", "--all", "--name").split():
                    self.virsh("destroy", name, check=False)
                    self.virsh("undefine", name, "--remove-all-storage", check=False)
            with contextlib.suppress(CommandFailed, subprocess.SubprocessError):
                if POOL in self.virsh("pool-list", "--all", "--name").split():
                    for vol in self.virsh("vol-list", POOL).split()[::2]:
                        if vol not in self.volumes_before:
                            self.virsh("vol-delete", "--pool", POOL, vol, check=False)
                    if not self.pool_existed:
                        self.virsh("pool-destroy", POOL, check=False)
                        self.virsh("pool-undefine", POOL, check=False)
                for net in self.virsh("net-list", "--all", "--name").split():
                    if net.startswith("vagrant-libvirt"):
                        self.virsh("net-destroy", net, check=False)
                        self.virsh("net-undefine", net, check=False)

    def leftovers_in_libvirt(self) -> list[str]:
        """Domains, the check's volumes and pool, active networks (libvirtd still up)."""
        found = [f"domain {d}" for d in self.virsh("list", "--all", "--name").split()]
        pools = self.virsh("pool-list", "--all", "--name").split()
        if POOL in pools:
            found += [f"volume {v}" for v in self.virsh("vol-list", POOL).split()[::2]
                      if v not in self.volumes_before]
            if not self.pool_existed:
                found.append(f"pool {POOL}")
        found += [f"active network {n}" for n in self.virsh("net-list", "--name").split()]
        found += [f"network {n}" for n in self.virsh("net-list", "--all", "--name").split()
                  if n.startswith("vagrant-libvirt")]
        return found


def network_state(folder: Path = NETWORK_STATE) -> list[Path]:
    """The management network's runtime files libvirtd left in ``folder``."""
    return sorted(folder.glob("vagrant-libvirt*")) if folder.is_dir() else []


def remove_network_state(folder: Path = NETWORK_STATE) -> None:
    """Remove them (only once libvirtd has ended)."""
    for path in network_state(folder):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def leftovers_on_host(netns: str, run_dir: Path) -> list[str]:
    """Processes, namespace, mounts and root-namespace bridges the check could leave."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            name = Path(argv[0].decode(errors="replace")).name
            text = b" ".join(argv).decode(errors="replace")
            if name in ("libvirtd", "virtlogd") or (
                    name == "qemu-system-x86_64" and "guest=" in text and "checkout" in text) or (
                    name == "dnsmasq" and "/var/lib/libvirt/dnsmasq/" in text) or (
                    name == "ssh" and " -L " in text and str(run_dir.parent) in text) or (
                    str(run_dir) in text and name not in ("bash", "sh")):
                found.append(f"process {proc.name} {text[:100]}")
    if nsnet.exists(netns):
        found.append(f"namespace {netns}")
    found += [f"libvirt runtime file {p}" for p in network_state()]
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1]
        if netns in point or point.startswith(str(run_dir)):
            found.append(f"mount {point}")
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True).stdout
    found += [f"root-namespace link {ln.split()[0]}" for ln in links.splitlines()
              if ln.startswith(("virbr", "vnet"))]
    return found


def host_mirrors(etc_apt: Path = Path("/etc/apt")) -> list[str]:
    """The host names of this host's apt sources (the registry relay's allowed hosts)."""
    files = [etc_apt / "sources.list", *sorted((etc_apt / "sources.list.d").glob("*"))]
    texts = [p.read_text() for p in files
             if p.is_file() and (p.suffix in (".list", ".sources") or p.name == "sources.list")]
    hosts = vagrantbox.mirror_hosts(texts)
    if not hosts:
        raise CommandFailed(f"no apt mirror host in {etc_apt} (the guest needs one)")
    return hosts


def preflight() -> str | None:
    """Why the check cannot run here (None if it can)."""
    if os.geteuid() != 0:
        return "make vagrant-check must run as root (libvirtd, namespaces, debootstrap)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return (f"missing host tools: {', '.join(missing)} (apt-get install vagrant "
                "vagrant-libvirt libvirt-daemon-system qemu-system-x86 qemu-utils debootstrap "
                "dnsmasq-base rsync; see docs/vagrant-check.md for installing libvirt without "
                "its default network)")
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing (the report screenshot needs it)"
    plugins = subprocess.run(["vagrant", "plugin", "list"], capture_output=True, text=True,
                             env=os.environ | {"VAGRANT_CHECKPOINT_DISABLE": "1"}).stdout
    if "vagrant-libvirt" not in plugins:
        return "the vagrant-libvirt plugin is missing (apt-get install vagrant-libvirt)"
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if (proc / "comm").read_text().strip() in ("libvirtd", "virtlogd"):
                    return (f"a {(proc / 'comm').read_text().strip()} runs already (pid "
                            f"{proc.name}): the check runs its own and would share its sockets")
    return None


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(cache: Path, out: Path | None, cpus: int, memory_mb: int, rebuild: bool,
        labs: list[int] | None = None) -> int:
    """The whole check; 0 only if every step passed and nothing was left behind.

    ``labs``: classroom labs to run in the VM after ``make experiment`` (vagrantlabs).
    """
    if why := preflight():
        console.print(alert(why))
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = out or REPO / "results" / f"vagrant-check-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    opts = Options(cache=cache, out=out, rebuild=rebuild, idle=True, host_fidelity=False)
    chk = Check(opts, out, keys=Keys(cache / "keys"))
    run_dir = cache / f"vagrant-{os.getpid()}"
    vc = VagrantCheck(chk, f"mcclab-vagrant-{os.getpid()}", run_dir, cpus, memory_mb)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    t0 = time.monotonic()
    chk.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                            TimeElapsedColumn(), console=console)
    interrupted = False
    ok = False
    left: list[str] = []
    results: dict[str, object] = {}
    try:
        with chk.progress:
            house = chk.wheelhouse()
            base = chk.image(house)
            with chk.step("libvirtd in a network namespace, registry relay") as st:
                vc.start_libvirt()
                hosts = host_mirrors()
                vc.findings["mirror_hosts"] = hosts
                vc.relays.append(nsnet.registry_relay(vc.netns, set(hosts)))
                st.note = (f"{vc.netns}, libvirtd pid {vc.daemons[-1].pid} (SCHED_IDLE), "
                           f"relay to {', '.join(hosts)}")
            run_dir.mkdir()
            with chk.step("box from the cached image, added in a throw-away VAGRANT_HOME") as st:
                name = vc.prepare(base)
                st.note = f"{name} (libvirt, qcow2)"
            try:
                with chk.step("vagrant up (libvirt, driver qemu)") as st:
                    vc.vagrant_up()
                    vc.forward_ports()
                    st.note = "; ".join(vc.findings.get("vagrant_status", []))[:120]
                with chk.step("make experiment (on the host, runs in the VM)") as st:
                    rc_, output = vc.experiment()
                    st.note = f"exit {rc_}"
                    if rc_ != 0:
                        st.ok = False
                with chk.step("results on the host, report in Chromium") as st:
                    results = vc.check_results(output)
                    st.ok = (results.get("status") == "complete" and not results.get("problems")
                             and bool(results.get("report_screenshot"))
                             and bool(results.get("under_host_results"))
                             and all(results.get("has", {}).values()))  # type: ignore[union-attr]
                    st.note = (f"{results.get('status')}, {results.get('host_files')} files "
                               f"(guest {results.get('guest_files')}), "
                               f"problems {len(results.get('problems', []))}")  # type: ignore[arg-type]
                with chk.step("live: Prometheus via the forward, lab hosts locked out") as st:
                    live = vc.findings.get("live", {})
                    assert isinstance(live, dict)
                    st.ok = bool(live.get("prometheus_ok")) and bool(live.get("isolation_ok"))
                    st.note = (f"{len(live.get('series_names', []))} metric names for run "
                               f"{live.get('run')}, isolation "
                               f"{'ok' if live.get('isolation_ok') else 'FAILED'}"
                               + (f", {live['error']}" if live.get("error") else ""))
                if labs:
                    vc.labs(labs)
            finally:
                with chk.step("vagrant destroy -f, box volume and pool removed"):
                    vc.destroy()
                    left = vc.leftovers_in_libvirt()
    except KeyboardInterrupt:
        interrupted = True
        console.print("[red]interrupted[/red]: cleaning up")
    except (CommandFailed, subprocess.SubprocessError, OSError, AssertionError) as exc:
        console.print(alert("Vagrant check failed:", exc, sep=" "))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with contextlib.suppress(Exception):
            vc.destroy()
        for relay in vc.relays:
            relay.close()
        vc.stop_libvirt()
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(cache / "build", ignore_errors=True)
        left += leftovers_on_host(vc.netns, run_dir)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    minutes = (time.monotonic() - t0) / 60
    ok = all(s.ok for s in chk.steps) and not left and not interrupted and bool(chk.steps)
    console.print(summary_table(chk.steps))
    summary = {"ok": ok, "minutes": minutes, "steps": [s.__dict__ for s in chk.steps],
               "left_behind": left, "findings": vc.findings, "results": results}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    console.print("left behind: " + (", ".join(left) if left else "nothing (no domain, "
                  "volume, network, pool, process, namespace or mount)"))
    console.print(f"{'[green]Vagrant check passed' if ok else '[red]Vagrant check FAILED'}[/] "
                  f"in {minutes:.1f} min; results and logs: {out}")
    return 0 if ok else (130 if interrupted else 1)


app = typer.Typer(add_completion=False)


@app.command()
def main(
    cache: Path = typer.Option(Path("/var/cache/mcclab-vm"), help="image cache (shared with "
                               "make vm-check)"),
    out: Path = typer.Option(None, help="results folder (default results/vagrant-check-<time>)"),
    cpus: int = typer.Option(2, help="MCCLAB_VM_CPUS for the VM"),
    memory: int = typer.Option(4096, help="MCCLAB_VM_MEMORY (MiB) for the VM"),
    rebuild: bool = typer.Option(False, help="rebuild the cached image (cold run)"),
    labs: str = typer.Option("", help="classroom labs to run in the VM after make experiment, "
                             "as a student types them, e.g. 1,3 (docs/vagrant-check.md)"),
) -> None:
    """`vagrant up` and `make experiment` from this host, checked end to end."""
    try:
        numbers = vagrantlabs.parse_labs(labs)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--labs") from None
    raise typer.Exit(run(cache, out, cpus, memory, rebuild, numbers))


if __name__ == "__main__":
    sys.exit(app())
