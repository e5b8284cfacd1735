"""The VM check's pure parts: QEMU/ssh command lines, the image recipe, playbook recaps,
the comparison table. (The check itself is `make vm-check`, not part of `make test`.)"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcclab.vmcheck import compare, guest, image, playbook, qemu, wheels
from mcclab.vmcheck import recipe as rc
from mcclab.vmcheck.procs import priority_prefix
from mcclab.vmcheck.ssh import Keys, SshTimeout, ssh_argv, wait_for_ssh


def spec(tmp_path: Path, **kw) -> qemu.VmSpec:
    return qemu.VmSpec(disk=tmp_path / "o.qcow2", ssh_port=40022,
                       console_log=tmp_path / "console.log", pidfile=tmp_path / "q.pid", **kw)


def option_values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_qemu_forwards_ssh_on_loopback_only_and_has_no_bridge(tmp_path):
    argv = qemu.qemu_argv(spec(tmp_path))
    netdevs = option_values(argv, "-netdev")
    assert netdevs == ["user,id=net0,hostfwd=tcp:127.0.0.1:40022-:22"]
    for nd in netdevs:
        for fwd in [p for p in nd.split(",") if p.startswith("hostfwd=")]:
            host = fwd.split(":")[1]
            assert ipaddress.ip_address(host).is_loopback
    joined = " ".join(argv)
    for forbidden in ("tap", "bridge", "br0", "-net nic", "vde", "socket,", "macvtap"):
        assert forbidden not in joined
    assert "-nic" not in argv and "-net" not in argv
    # one NIC, on the user-mode netdev
    assert option_values(argv, "-device") == ["virtio-net-pci,netdev=net0"]


def test_qemu_is_tcg_at_normal_priority_by_default_and_disk_boots_unless_a_kernel_is_given(
        tmp_path):
    argv = qemu.qemu_argv(spec(tmp_path))
    assert argv[0] == qemu.QEMU  # no chrt, no nice: a user's check runs at normal priority
    assert option_values(argv, "-accel") == ["tcg,thread=multi"]
    # max without the AVX family: QEMU 7.2's AVX2 emulation mis-sorts in numpy
    assert option_values(argv, "-cpu") == ["max,avx=off,avx2=off,fma=off,f16c=off"]
    assert option_values(argv, "-smp") == ["2"]
    assert "-kernel" not in argv and "-enable-kvm" not in argv
    assert option_values(argv, "-pidfile") == [str(tmp_path / "q.pid")]
    direct = qemu.qemu_argv(spec(tmp_path, nice=0, kernel=Path("/k"), initrd=Path("/i"),
                                 append="root=LABEL=x"))
    assert direct[0] == qemu.QEMU
    assert option_values(direct, "-kernel") == ["/k"]
    assert option_values(direct, "-append") == ["root=LABEL=x"]


def test_overlay_is_backed_by_the_base_image():
    argv = qemu.overlay_argv(Path("/c/base.qcow2"), Path("/c/run/o.qcow2"))
    assert argv[:2] == ["qemu-img", "create"]
    assert option_values(argv, "-b") == ["/c/base.qcow2"] and argv[-1] == "/c/run/o.qcow2"


def test_free_port_is_bindable_on_loopback():
    port = qemu.free_port()
    assert 1024 <= port <= 65535


def test_ssh_pins_the_host_key_and_uses_loopback(tmp_path):
    argv = ssh_argv(Keys(tmp_path), 40022, "true")
    opts = option_values(argv, "-o")
    assert "StrictHostKeyChecking=yes" in opts and "BatchMode=yes" in opts
    assert f"UserKnownHostsFile={tmp_path / 'known_hosts'}" in opts
    assert argv[-3:] == ["vagrant@127.0.0.1", "--", "true"]
    assert option_values(argv, "-p") == ["40022"]


def test_wait_for_ssh_gives_up_with_the_vm_s_story(tmp_path):
    with pytest.raises(SshTimeout, match="(?s)stopped before ssh answered.*console says bye"):
        wait_for_ssh(Keys(tmp_path), 1, 10, alive=lambda: False,
                     why_dead=lambda: "console says bye")


def test_keys_are_generated_once_and_pinned(tmp_path):
    keys = Keys(tmp_path / "k")
    assert keys.ensure() is True
    first = keys.client.read_text()
    assert keys.ensure() is False and keys.client.read_text() == first
    pin = keys.known_hosts.read_text().split()
    assert pin[0] == "mcclab-vmcheck" and pin[1] == "ssh-ed25519"
    assert pin[2] == keys.host.with_suffix(".pub").read_text().split()[1]
    assert (tmp_path / "k").stat().st_mode & 0o077 == 0


def test_stale_qemu_only_matches_a_qemu_running_that_disk(tmp_path):
    pidfile = tmp_path / "q.pid"
    pidfile.write_text(str(os.getpid()))  # this pytest process is not a QEMU
    assert qemu.stale_qemu(pidfile, tmp_path / "o.qcow2") is None
    assert qemu.stale_qemu(tmp_path / "missing.pid", tmp_path / "o.qcow2") is None


def test_kill_group_ends_the_whole_group():
    proc = subprocess.Popen([sys.executable, "-c",
                             "import subprocess,time; subprocess.Popen(['sleep','60']); "
                             "time.sleep(60)"], start_new_session=True)
    time.sleep(0.3)
    qemu.kill_group(proc.pid, grace=2.0, proc=proc)
    assert proc.poll() is not None
    # the grandchild too (zombies aside: init reaps); signals land asynchronously
    deadline = time.monotonic() + 3.0
    while live_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_members(proc.pid) == []


def live_members(pgid: int) -> list[int]:
    """Pids in process group ``pgid`` that are not zombies."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(d.name))
    return out


# ------------------------------------------------------------------ recipe


def test_apt_options_keep_only_how_the_mirror_is_reached():
    texts = ['Acquire::Check-Valid-Until "false";\nAcquire::Languages "none";\n',
             'Acquire::http::Proxy "http://proxy:3128";\nAPT::Sandbox::User "root";\n',
             'Acquire::Check-Valid-Until "false";\n']
    assert rc.apt_options(texts) == ('Acquire::Check-Valid-Until "false";\n'
                                     'Acquire::http::Proxy "http://proxy:3128";\n')


def test_sources_mirror_from_deb822_and_one_line_lists():
    deb822 = ("Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm\n\n"
              "Types: deb\nURIs: http://deb.example/debian-security\n")
    assert rc.sources_mirror(deb822) == "http://deb.example/debian"
    assert rc.sources_mirror("deb [arch=amd64] http://m.example/debian bookworm main\n") == \
        "http://m.example/debian"
    assert rc.sources_mirror("deb https://packages.cloud.google.com/apt cloud-sdk main\n") is None


def test_pip_conf_carries_index_and_swaps_host_paths_for_the_guest_bundle():
    conf = rc.pip_conf("[global]\ncert = /host/ca.pem\nfind-links = /opt/wheels\n",
                       {"PIP_INDEX_URL": "https://pypi.example/simple"}, custom_cas=True)
    assert conf is not None
    assert "index-url = https://pypi.example/simple" in conf
    assert f"cert = {rc.SYSTEM_CA_BUNDLE}" in conf
    assert "/opt/wheels" not in conf and "/host/ca.pem" not in conf
    assert rc.pip_conf(None, {}, custom_cas=False) is None


def test_host_recipe_replicates_registry_settings_and_keys(tmp_path):
    etc = tmp_path / "etc"
    (etc / "apt" / "sources.list.d").mkdir(parents=True)
    (etc / "apt" / "apt.conf.d").mkdir()
    (etc / "apt" / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n")
    (etc / "apt" / "sources.list.d" / "x.list.disabled").write_text("deb http://no/ x main\n")
    (etc / "apt" / "apt.conf.d" / "99proxy").write_text('Acquire::http::Proxy "http://p:1";\n')
    cas = tmp_path / "ca"
    cas.mkdir()
    (cas / "corp.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    keys = Keys(tmp_path / "keys")
    keys.ensure()
    r = image.host_recipe(keys, etc=etc, env={}, ca_dir=cas)
    paths = {f.path: f for f in r.files}
    assert r.mirror == "http://mirror.example/debian"
    assert "/etc/apt/sources.list.d/debian.sources" in paths
    assert not any("disabled" in p for p in paths)
    assert paths["/etc/apt/apt.conf.d/90mcclab-host"].content == 'Acquire::http::Proxy "http://p:1";\n'
    assert f"{rc.CA_DIR}/corp.crt" in paths
    assert paths["/etc/pip.conf"].content.strip().endswith(f"cert = {rc.SYSTEM_CA_BUNDLE}")
    assert paths["/etc/sudoers.d/vagrant"].content == "vagrant ALL=(ALL) NOPASSWD:ALL\n"
    assert paths["/etc/sudoers.d/vagrant"].mode == 0o440
    assert paths["/home/vagrant/.ssh/authorized_keys"].content == \
        keys.client.with_suffix(".pub").read_text()
    assert r.debootstrap_argv("/t")[-3:] == ["bookworm", "/t", "http://mirror.example/debian"]
    for pkg in ("linux-image-amd64", "grub-pc", "openssh-server", "sudo", "python3"):
        assert pkg in r.debootstrap_argv("/t")[1]
    # the digest names the cache entry: any change to what goes in changes it
    other = image.host_recipe(keys, etc=etc, env={"PIP_INDEX_URL": "https://x/simple"},
                              ca_dir=cas)
    assert r.digest() == image.host_recipe(keys, etc=etc, env={}, ca_dir=cas).digest()
    assert r.digest() != other.digest()


def test_write_files_replaces_symlinks_and_sets_modes(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "resolv.conf").symlink_to("/run/elsewhere")
    image.write_files(tmp_path, [rc.GuestFile("/etc/resolv.conf", "nameserver 10.0.2.3\n"),
                                 rc.GuestFile("/etc/sudoers.d/v", "x\n", 0o440)])
    assert not (tmp_path / "etc" / "resolv.conf").is_symlink()
    assert (tmp_path / "etc" / "resolv.conf").read_text() == "nameserver 10.0.2.3\n"
    assert (tmp_path / "etc" / "sudoers.d" / "v").stat().st_mode & 0o777 == 0o440


def test_disk_layout_puts_the_filesystem_at_the_partition(tmp_path):
    assert "start=2048" in image.sfdisk_script()
    argv = image.mkfs_argv(Path("/r"), Path("/d.raw"))
    assert f"offset={rc.PART_OFFSET}" in argv and argv[-3:] == ["/r", "/d.raw", argv[-1]]
    assert int(argv[-1]) * 4096 + rc.PART_OFFSET == rc.DISK_SIZE
    assert "-L" in argv and rc.ROOT_LABEL in argv


def test_leftover_mounts_sees_a_mount_below_a_folder():
    assert image.leftover_mounts(Path("/proc")) == ["/proc"] or \
        "/proc" in image.leftover_mounts(Path("/proc"))
    assert image.leftover_mounts(Path("/nonexistent-mcclab")) == []


# ------------------------------------------------------------------ guest


RECAP = """
TASK [base : Install base packages] ****
ok: [localhost]
TASK [python : Install mcclab editable into the venv] ****
changed: [localhost]

PLAY RECAP *********************************************************************
localhost                  : ok=52   changed=3    unreachable=0    failed=0    skipped=9
other                      : ok=1    changed=1    unreachable=0    failed=1    skipped=0
"""


def test_parse_recap_totals_over_hosts():
    r = guest.parse_recap(RECAP)
    assert r is not None
    assert (r.ok, r.changed, r.unreachable, r.failed) == (53, 4, 0, 1)
    assert not r.success
    assert guest.parse_recap("ERROR! the playbook could not be found") is None
    assert guest.changed_tasks(RECAP) == ["python : Install mcclab editable into the venv"]


def test_playbook_is_invoked_as_vagrant_ansible_local_does():
    cmd = guest.playbook()
    assert cmd.startswith("cd /vagrant && sudo env ")  # sudo cannot run `cd`
    assert "ANSIBLE_CONFIG=ansible/ansible.cfg" in cmd
    assert "--inventory-file=ansible/inventory.ini" in cmd and "--limit=all" in cmd
    assert '"mcclab_repo": "/vagrant"' in cmd and cmd.endswith("ansible/site.yml")
    assert '"mcclab_optional_packages": []' in cmd
    assert "mcclab_optional_packages" not in guest.playbook(optional_packages=True)


def test_checks_cover_kernel_fidelity_multicast_control_packets_and_the_quick_run():
    checks = guest.checks(["--quick"])
    fid, mcast, control, run = (c.argv for c in checks)
    assert fid[1] == "bench/bench_links.py" and fid[4:6] == ["--backend", "kernel"]
    assert "--design" in fid and fid[fid.index("--design") + 1] == "vm"
    assert "tests/integration/test_multicast_routing.py" in mcast
    # the control band is checked on the kernel backend, never on auto's fallback
    assert "tests/integration/test_control_packets.py" in control
    assert "MCCLAB_TEST_LINK_BACKEND=kernel" in checks[2].command()
    assert "MCCLAB_TEST_LINK_BACKEND" not in checks[1].command()
    assert run[-6:] == ["run", "default", "--profile", "quick", "--wait", "600"]
    # and the CLI accepts those arguments (parsed only, nothing runs)
    import typer.main

    from mcclab.cli import app
    group = typer.main.get_command(app)
    args = run[run.index("-m") + 2:]
    ctx = group.make_context("mcclab", list(args))
    sub = group.get_command(ctx, args[0])
    assert sub is not None
    sub.make_context(args[0], list(args[1:]), parent=ctx)
    # the module must be one that runs the CLI: `python -m mcclab.cli` exits 0 doing nothing
    module = run[run.index("-m") + 1]
    res = subprocess.run([sys.executable, "-m", module, "run", "--help"], capture_output=True,
                         text=True, env=os.environ | {"COLUMNS": "200"}, timeout=120)
    assert res.returncode == 0 and "--profile" in res.stdout
    assert all(c.command().startswith("cd /vagrant && sudo env ") for c in checks)


# ------------------------------------------------------------------ comparison


def result(group: str, disc: str = "droptail", udp: float = 3.2e6, red: list | None = None,
           verdicts: dict | None = None) -> dict:
    return {"setting": {"group": group, "rate": 3.2e6, "delay": 0.01, "loss": 0.0,
                        "limit": 40, "disc": disc, "gentle": False},
            "rtt": {"median": 20.3, "p99": 20.9}, "rtt_expected": 20.42, "udp_bps": udp,
            "tcp_bps": 3.19e6, "tcp_applicable": True, "loss": {},
            "queue": {"queue_at_drop": 40} if disc == "droptail" else {}, "red": red or [],
            "verdicts": verdicts or {"udp rate ±2%": True, "rtt median": True}}


def test_comparison_lines_up_the_two_backends_per_setting_and_quantity():
    red = [{"target": 0.03, "drop_fraction": 0.031, "avg_queue_owd": 6.0, "curve_avg": 9.5}]
    kernel_red = [dict(red[0], curve_avg_linux=6.5)]  # only the kernel side has Linux's curve
    kernel = {"results": [result("rate", udp=3.0e6, verdicts={"udp rate ±2%": False}),
                          result("red", "red", red=kernel_red)]}
    user = {"results": [result("rate"), result("red", "red", red=[dict(red[0],
                                                                       avg_queue_owd=9.4)])]}
    rows = compare.comparison(kernel, user)
    by = {(r[0].split(":")[0], r[1]): r for r in rows}
    udp = by[("rate", "UDP rate (Mbit/s)")]
    assert udp[3].ok is False and udp[3].text.startswith("3.000 (-6.2%)")
    assert udp[4].ok is True
    red_row = by[("red", "RED avg queue at f=0.03 (pkt)")]
    assert red_row[2] == "9.5 ± 1.0" and red_row[3].ok is False and red_row[4].ok is True
    assert red_row[3].text == "6.0 (f 3.1%; Linux red's curve 6.5)"
    assert red_row[4].text == "9.4 (f 3.1%)"
    text = compare.markdown(rows)
    assert "| kernel (VM) | userspace (host) |" in text and "MISS" in text
    assert compare.misses(kernel) == ["rate: 3.2 Mbit/s, 10 ms, 0%, 40 pkt droptail: udp rate ±2%"]


def test_comparison_with_one_side_missing_shows_dashes():
    rows = compare.comparison({"results": [result("rate")]}, None)
    assert rows and all(r[4].text == "-" for r in rows)


# ---------------------------------------------------------------- scheduling


def test_priority_prefix_is_empty_at_normal_priority_and_chrt_idle_or_nice_otherwise():
    assert priority_prefix() == []
    assert priority_prefix(idle=True) == ["chrt", "--idle", "0"]
    assert priority_prefix(nice=19) == ["nice", "-n", "19"]
    assert priority_prefix(nice=5, idle=True) == ["chrt", "--idle", "0", "nice", "-n", "5"]
    with pytest.raises(ValueError):
        priority_prefix(nice=-5)  # raising priority is not what this is for
    with pytest.raises(ValueError):
        priority_prefix(nice=20)


def test_qemu_runs_under_sched_idle_or_nice_when_asked(tmp_path):
    idle = qemu.qemu_argv(spec(tmp_path, idle=True))
    assert idle[:4] == ["chrt", "--idle", "0", qemu.QEMU]
    niced = qemu.qemu_argv(spec(tmp_path, nice=19))
    assert niced[:4] == ["nice", "-n", "19", qemu.QEMU]
    # the prefixes are real commands that exec the rest (QEMU keeps the pid, so the
    # process group and the stale-QEMU pidfile match still work)
    out = subprocess.run([*priority_prefix(nice=3, idle=True), sys.executable, "-c",
                          "import os; print(os.sched_getscheduler(0), os.nice(0))"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(os.SCHED_IDLE), str(min(19, os.nice(0) + 3))]  # 19 is the ceiling


# ---------------------------------------------------------------- playbook → image


def write_yaml(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def fake_ansible(root: Path) -> Path:
    a = root / "ansible"
    write_yaml(a / "site.yml", "- hosts: all\n  roles:\n    - role: base\n    - extra\n")
    write_yaml(a / "group_vars" / "all.yml", "opt_pkgs: [big]\n")
    write_yaml(a / "roles" / "base" / "defaults" / "main.yml",
               "base_pkgs: [a, b]\nopt_pkgs: [ignored]\nmcclab_pip_extras: dev\n")
    write_yaml(a / "roles" / "base" / "tasks" / "main.yml", """
- name: Preseed
  ansible.builtin.debconf:
    name: wireshark-common
    question: wireshark-common/install-setuid
    vtype: boolean
    value: "false"
- name: Install
  ansible.builtin.apt:
    name: "{{ base_pkgs + opt_pkgs }}"
    update_cache: true
- name: Only sometimes
  ansible.builtin.apt:
    name: [conditional]
  when: something
""")
    write_yaml(a / "roles" / "extra" / "tasks" / "main.yml",
               "- apt:\n    name: [b, c]\n    state: present\n- apt:\n    name: d\n")
    return a


def test_playbook_packages_are_read_from_roles_defaults_and_extra_vars(tmp_path):
    a = fake_ansible(tmp_path)
    assert playbook.roles(a) == ["base", "extra"]
    prov = playbook.provisioning(a)
    # group_vars outrank role defaults; duplicates dropped; `when:` tasks left to the playbook
    assert prov.packages == ("a", "b", "big", "c", "d")
    assert prov.debconf == ("wireshark-common wireshark-common/install-setuid boolean false",)
    assert prov.pip_extras == "dev"
    assert playbook.provisioning(a, {"opt_pkgs": []}).packages == ("a", "b", "c", "d")


def test_playbook_reader_follows_a_roles_static_imports(tmp_path):
    a = fake_ansible(tmp_path)
    tasks = a / "roles" / "extra" / "tasks"
    write_yaml(tasks / "main.yml", "- apt:\n    name: [b]\n"
               "- ansible.builtin.import_tasks: build.yml\n"
               "- import_tasks: {file: later.yml}\n  when: maybe\n")
    write_yaml(tasks / "build.yml", "- apt:\n    name: [cc, make]\n")
    write_yaml(tasks / "later.yml", "- apt:\n    name: [never]\n")
    # the imported file's packages in place; a conditional import left to the playbook
    assert playbook.provisioning(a).packages == ("a", "b", "big", "cc", "make")
    write_yaml(tasks / "main.yml", "- import_tasks: \"{{ which }}.yml\"\n")
    with pytest.raises(playbook.PlaybookError, match="only a plain file name"):
        playbook.provisioning(a)


def test_playbook_reader_refuses_what_it_does_not_understand(tmp_path):
    with pytest.raises(playbook.PlaybookError):
        playbook.evaluate("{{ pkgs | select('x') }}", {"pkgs": []})
    with pytest.raises(playbook.PlaybookError):
        playbook.evaluate("{{ missing }}", {})
    with pytest.raises(playbook.PlaybookError):
        playbook.evaluate("{{ s }}", {"s": "not-a-list"})
    a = fake_ansible(tmp_path)
    write_yaml(a / "roles" / "extra" / "tasks" / "main.yml",
               "- apt:\n    name: [x]\n    state: absent\n")
    with pytest.raises(playbook.PlaybookError):
        playbook.provisioning(a)


def test_the_project_playbook_s_packages_go_into_the_image():
    prov = playbook.provisioning(Path(__file__).resolve().parents[2] / "ansible",
                                 guest.extra_vars())
    # one package from each apt role; the optional ones follow the knob
    for pkg in ("mininet", "iperf3", "frr", "smcroute", "prometheus"):
        assert pkg in prov.packages
    # FRR 10 is not built in the VM (guest.extra_vars): the knob is the playbook's own
    ansible = Path(__file__).resolve().parents[2] / "ansible"
    assert playbook.variables(ansible)["mcclab_frr10_build"] is True
    assert playbook.variables(ansible, guest.extra_vars())["mcclab_frr10_build"] is False
    routers = (ansible / "roles" / "routers" / "tasks" / "main.yml").read_text()
    assert "when: mcclab_frr10_build | bool" in routers
    assert "chromium" not in prov.packages
    r = rc.Recipe(playbook_packages=prov.packages, debconf=prov.debconf)
    cmds = r.preinstall_commands()
    install = cmds[-1]
    assert install[:6] == ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install",
                           "-y", "-q"]
    # as the playbook's apt tasks: Recommends included
    assert tuple(install[6:]) == prov.packages and "--no-install-recommends" not in install
    assert rc.PREINSTALL in cmds
    assert any("man-db/auto-update boolean false" in " ".join(c) for c in cmds)
    assert any("wireshark-common/install-setuid" in " ".join(c) for c in cmds)
    assert r.digest() != rc.Recipe(playbook_packages=prov.packages[:-1],
                                   debconf=prov.debconf).digest()


def test_chroot_installs_see_proc_in_a_private_mount_namespace_only():
    argv = image.chroot_with_proc(Path("/r"), ["apt-get", "install", "x"])
    assert argv[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    assert argv[-5:] == ["chroot-with-proc", "/r", "apt-get", "install", "x"]
    # run against / (chroot / is a no-op): the namespace has one more mount, the host none
    before = Path("/proc/self/mounts").read_text().count("\n")
    res = subprocess.run(image.chroot_with_proc(Path("/"), ["sh", "-c",
                                                            "wc -l < /proc/self/mounts"]),
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"needs root for unshare --mount: {res.stderr.strip()}")
    assert int(res.stdout) == before + 1
    assert Path("/proc/self/mounts").read_text().count("\n") == before


def test_guest_pip_installs_from_the_wheelhouse_only_and_does_not_byte_compile():
    conf = rc.pip_conf("[global]\ncert = /host/ca.pem\n", {}, custom_cas=False,
                       wheelhouse=wheels.GUEST_WHEELHOUSE)
    assert conf is not None
    lines = conf.splitlines()
    assert f"find-links = {wheels.GUEST_WHEELHOUSE}" in lines and "no-index = true" in lines
    assert lines[lines.index("[install]") + 1] == "no-compile = true"
    assert "wheelhouse" not in (rc.pip_conf("[global]\ncert = /c\n", {}, False) or "")


def test_wheelhouse_requirements_and_digest_follow_pyproject():
    text = """
[build-system]
requires = ["setuptools>=66"]
[project]
name = "p"
dependencies = ["pandas>=2.1", "PyYAML>=6"]
[project.optional-dependencies]
dev = ["pytest>=8"]
docs = ["sphinx"]
"""
    reqs = wheels.requirements(text, "dev")
    assert reqs == ["setuptools>=66", "wheel", "pandas>=2.1", "PyYAML>=6", "pytest>=8"]
    assert "sphinx" in wheels.requirements(text, "dev,docs")
    with pytest.raises(ValueError):
        wheels.requirements(text, "nope")
    d = wheels.digest(reqs, (3, 11), "x86_64")
    assert d == wheels.digest(list(reqs), (3, 11), "x86_64")
    assert d != wheels.digest(reqs[:-1], (3, 11), "x86_64")
    assert d != wheels.digest(reqs, (3, 12), "x86_64")
    argv = wheels.pip_wheel_argv("/py", reqs, Path("/w"))
    assert argv[:4] == ["/py", "-m", "pip", "wheel"] and argv[-len(reqs):] == reqs
    assert argv[argv.index("--wheel-dir") + 1] == "/w"


def test_wheel_files_ignores_partial_downloads(tmp_path):
    for name in ("numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "grafana_foundation_sdk-1769699379!11.6.0-py3-none-any.whl",
                 "pip-unpack-xyz.whl.part", "junk.whl"):
        (tmp_path / name).write_text("")
    assert [p.name for p in wheels.wheel_files(tmp_path)] == [
        "grafana_foundation_sdk-1769699379!11.6.0-py3-none-any.whl",
        "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl"]


def test_playbook_runs_with_pipelining_and_the_wheelhouse_is_unpacked_as_root():
    assert "ANSIBLE_PIPELINING=1" in guest.playbook()
    cmd = guest.unpack_wheelhouse()
    assert f"sudo tar -x --no-same-owner -C {wheels.GUEST_WHEELHOUSE}" in cmd
    assert cmd.startswith(f"sudo rm -rf {wheels.GUEST_WHEELHOUSE}")


def test_run_logged_returns_the_output_and_timestamps_the_log(tmp_path):
    from mcclab.vmcheck.procs import run_logged
    log = tmp_path / "x.log"
    rc_, out = run_logged(["sh", "-c", "echo PLAY RECAP; echo ok=1"], log, 30)
    assert rc_ == 0 and out == "PLAY RECAP\nok=1\n"
    lines = log.read_text().splitlines()
    assert lines[-2].endswith("] PLAY RECAP") and lines[-2].startswith("[")
    assert float(lines[-1][1:].split(" s]")[0]) >= 0


def test_tar_into_guest_streams_a_folder_and_reports_failure(tmp_path, monkeypatch):
    from mcclab.vmcheck import run as vmrun
    from mcclab.vmcheck.procs import CommandFailed

    house, dest = tmp_path / "house", tmp_path / "dest"
    house.mkdir()
    dest.mkdir()
    (house / "a-1.0-py3-none-any.whl").write_bytes(b"wheel")
    # The guest side is a local shell: what the ssh command would run, run here.
    monkeypatch.setattr(vmrun, "ssh_argv", lambda keys, port, command: ["sh", "-c", command])
    check = object.__new__(vmrun.Check)
    check.keys, check.port = object(), 0
    check.log = lambda name: tmp_path / f"{name}.log"
    monkeypatch.setattr(vmrun.guest, "unpack_wheelhouse", lambda: f"tar -x -C {dest}")
    check.copy_wheelhouse(house)
    assert (dest / "a-1.0-py3-none-any.whl").read_bytes() == b"wheel"
    monkeypatch.setattr(vmrun.guest, "unpack_wheelhouse", lambda: "exit 3")
    with pytest.raises(CommandFailed, match="the wheelhouse"):
        check.copy_wheelhouse(house)


# ---------------------------------------------------------------- session 3


@pytest.fixture
def fake_sudo(tmp_path, monkeypatch):
    """A `sudo` that just runs its arguments (the guest's vagrant user has NOPASSWD sudo)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    (bindir / "sudo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")


def _sh(command: str, timeout: float = 20) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["sh", "-c", command], capture_output=True, timeout=timeout)


def _poll_until_done(job: guest.Job, timeout: float = 20) -> tuple[int, bytes, int]:
    offset, seen, polls = 0, b"", 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        polls += 1
        status, new = guest.parse_poll(_sh(job.poll(offset)).stdout)
        offset += len(new)
        seen += new
        if status is not None:
            return status, seen, polls
        time.sleep(0.1)
    raise AssertionError("job never finished")


def test_detached_job_outlives_its_starter_and_reports_status_and_the_whole_log(
        tmp_path, fake_sudo):
    job = guest.Job("check-1", root=str(tmp_path / "jobs"))
    started = time.monotonic()
    res = _sh(job.start("echo 'one two'; sleep 0.6; echo three; exit 3"))
    # the starting call returns at once: the command runs on in its own session
    assert res.returncode == 0 and time.monotonic() - started < 0.5
    status, log, polls = _poll_until_done(job)
    assert status == 3 and log == b"one two\nthree\n"
    assert polls > 1  # it was seen running before it ended
    pgid = int((tmp_path / "jobs" / "check-1" / "pgid").read_text())
    assert pgid != os.getpgid(0)  # not in the starter's process group


def test_detached_job_is_stopped_by_its_process_group(tmp_path, fake_sudo):
    job = guest.Job("exp", root=str(tmp_path / "jobs"))
    _sh(job.start("sleep 60 & sleep 60; echo never"))
    pgid_file = tmp_path / "jobs" / "exp" / "pgid"
    deadline = time.monotonic() + 5
    while not pgid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pgid = int(pgid_file.read_text())
    assert _sh(job.stop(grace=0.5)).returncode == 0
    deadline = time.monotonic() + 5
    alive = True
    while alive and time.monotonic() < deadline:
        alive = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True).returncode == 0
        time.sleep(0.1)
    assert not alive, "the job's process group survived stop()"
    status, _ = guest.parse_poll(_sh(job.poll(0)).stdout)
    assert status is None  # killed: no status written, the check reports the timeout itself


def test_parse_poll_and_job_names():
    assert guest.parse_poll(b"running\nabc") == (None, b"abc")
    assert guest.parse_poll(b"0\n") == (0, b"")
    assert guest.parse_poll(b"124\nx\ny\n") == (124, b"x\ny\n")
    with pytest.raises(ValueError):
        guest.parse_poll(b"")
    with pytest.raises(ValueError):
        guest.Job("../etc")
    assert [c.job for c in guest.checks([])] == ["fidelity", "multicast", "control",
                                                  "experiment"]


def test_checks_stretch_readiness_waits_for_the_emulated_cpu():
    for chk in guest.checks([]):
        assert f"MCCLAB_TIMEOUT_SCALE={guest.TIMEOUT_SCALE}" in chk.command()
    assert guest.TIMEOUT_SCALE == 10


def test_ssh_keepalives_tolerate_a_busy_guest(tmp_path):
    argv = ssh_argv(Keys(tmp_path), 2222, "true")
    opts = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-o")
    assert int(opts["ServerAliveInterval"]) * int(opts["ServerAliveCountMax"]) >= 300


def test_install_ansible_only_checks_when_the_image_has_it():
    cmd = guest.install_ansible()
    assert cmd.startswith("if command -v ansible-playbook")
    assert "apt-get update" in cmd.split("else", 1)[1]


def test_the_project_playbook_s_venv_command_is_read_from_the_python_role():
    prov = playbook.provisioning(Path(__file__).resolve().parents[2] / "ansible",
                                 guest.extra_vars())
    assert prov.venv == "/opt/mcclab/venv"
    assert prov.venv_command == ("/usr/bin/python3", "-m", "venv", "--system-site-packages",
                                 "/opt/mcclab/venv")


def test_substitute_fills_nested_string_variables_only():
    names = {"a": "/opt", "b": "{{ a }}/venv", "n": 3}
    assert playbook.substitute("{{ b }}/bin/python", names) == "/opt/venv/bin/python"
    for bad in ("{{ n }}", "{{ missing }}", "{{ a | realpath }}"):
        with pytest.raises(playbook.PlaybookError):
            playbook.substitute(bad, names)


def test_image_creates_the_venv_and_installs_the_dependencies_from_the_wheelhouse(tmp_path):
    keys = Keys(tmp_path / "keys")
    keys.ensure()
    prov = playbook.Provisioning(("mininet",), (), "dev", "/opt/v",
                                 ("/usr/bin/python3", "-m", "venv", "/opt/v"))
    r = image.host_recipe(keys, etc=tmp_path, env={}, ca_dir=tmp_path / "none", prov=prov,
                          wheelhouse=wheels.GUEST_WHEELHOUSE, venv_reqs=["numpy>=1"],
                          wheels=["numpy-2.0-cp311-cp311-linux_x86_64.whl"])
    cmds = r.preinstall_commands()
    apt = next(i for i, c in enumerate(cmds) if "mininet" in c)
    venv = cmds.index(["/usr/bin/python3", "-m", "venv", "/opt/v"])
    pip = cmds[venv + 1]
    assert apt < venv  # python3-venv comes with the playbook's packages
    assert pip[:3] == ["/opt/v/bin/python", "-m", "pip"] and pip[-1] == "numpy>=1"
    assert "--no-index" in pip and pip[pip.index("--find-links") + 1] == wheels.GUEST_WHEELHOUSE
    # new wheels or requirements make a new image
    other = image.host_recipe(keys, etc=tmp_path, env={}, ca_dir=tmp_path / "none", prov=prov,
                              wheelhouse=wheels.GUEST_WHEELHOUSE, venv_reqs=["numpy>=1"],
                              wheels=["numpy-2.1-cp311-cp311-linux_x86_64.whl"])
    assert other.digest() != r.digest()
    # without requirements nothing of the venv goes into the image
    bare = image.host_recipe(keys, etc=tmp_path, env={}, ca_dir=tmp_path / "none", prov=prov)
    assert not bare.venv_install and ["/usr/bin/python3", "-m", "venv", "/opt/v"] not in \
        bare.preinstall_commands()
    with pytest.raises(ValueError):
        image.build_rootfs(r, tmp_path / "root", lambda argv: None)  # no wheelhouse given


def test_runtime_requirements_leave_out_the_build_system():
    text = ('[build-system]\nrequires = ["setuptools>=68"]\n[project]\nname = "x"\n'
            'dependencies = ["pandas>=2"]\n[project.optional-dependencies]\ndev = ["pytest"]\n')
    assert wheels.runtime_requirements(text, "dev") == ["pandas>=2", "pytest"]
    assert "setuptools>=68" in wheels.requirements(text, "dev")


def test_the_image_build_does_not_see_the_host_s_pip_settings():
    env = image.build_env({"PATH": "/usr/bin", "PIP_FIND_LINKS": "/opt/wheels",
                           "PIP_INDEX_URL": "https://x/simple", "LANG": "C.UTF-8"})
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8"}


def test_steps_print_a_line_each_when_the_output_is_not_a_terminal(tmp_path, monkeypatch):
    # Rich's live display shows nothing in a log: there, each step's start and its
    # outcome are printed as lines, so a 30-min check shows progress.
    import io

    from rich.console import Console
    from rich.progress import Progress

    from mcclab.vmcheck import run

    out = io.StringIO()
    monkeypatch.setattr(run, "console", Console(file=out, force_terminal=False, width=200))
    chk = run.Check(opts=run.Options(), out=tmp_path)
    chk.progress = Progress(console=run.console)
    with chk.progress:
        with chk.step("boot"):
            pass
        with pytest.raises(RuntimeError), chk.step("provision"):
            raise RuntimeError("apt failed")
    lines = out.getvalue().splitlines()
    assert "... boot" in lines and "... provision" in lines
    assert any(line.startswith("✓ boot (0 s)") for line in lines), lines
    assert any(line.startswith("✗ provision (0 s) — apt failed") for line in lines), lines
