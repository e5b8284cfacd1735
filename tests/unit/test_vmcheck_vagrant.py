"""The Vagrant check's pure parts, the Makefile's VM branch, the Vagrantfile's settings
and the Grafana role's version pin and key-fingerprint check."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tarfile
import threading
import tomllib
from pathlib import Path

import jinja2
import pytest
import yaml

from mcclab.vmcheck import nsnet, vagrantbox, vagrantlabs
from mcclab.vmcheck import recipe as rc
from mcclab.vmcheck.vagrant import (
    compare_listings,
    host_results,
    isolation_ok,
    lab_isolation_script,
    link_port,
    network_state,
    remove_network_state,
    run_id_of,
)

REPO = Path(__file__).resolve().parents[2]
GRAFANA = REPO / "ansible" / "roles" / "grafana"


# ------------------------------------------------------------------ box and VAGRANT_HOME

def test_box_metadata_is_libvirt_qcow2_with_size_in_whole_gb():
    assert vagrantbox.metadata() == {"provider": "libvirt", "format": "qcow2",
                                     "virtual_size": rc.DISK_SIZE // 1024**3}
    assert vagrantbox.metadata(16 * 1024**3 + 1)["virtual_size"] == 17


def test_write_box_holds_the_three_files_and_leaves_the_image(tmp_path):
    image = tmp_path / "base.qcow2"
    image.write_bytes(b"QFI\xfb" + os.urandom(5000))
    box = vagrantbox.write_box(image, tmp_path / "box")
    with tarfile.open(box) as tar:
        assert sorted(tar.getnames()) == ["Vagrantfile", "box.img", "metadata.json"]
        assert tar.extractfile("box.img").read() == image.read_bytes()
        meta = json.loads(tar.extractfile("metadata.json").read())
        assert meta["provider"] == "libvirt" and meta["format"] == "qcow2"
        assert "Vagrant.configure" in tar.extractfile("Vagrantfile").read().decode()
    assert image.exists() and not (tmp_path / "box" / "box.img").exists()


def test_box_name_is_the_vagrantfiles_default():
    assert vagrantbox.box_name((REPO / "Vagrantfile").read_text()) == "debian/bookworm64"
    with pytest.raises(ValueError):
        vagrantbox.box_name('config.vm.box = "x"')


def test_home_vagrantfile_uses_the_key_and_points_mirrors_at_the_relay(tmp_path):
    text = vagrantbox.home_vagrantfile(tmp_path / "id_ed25519", ["deb.debian.org", "a.example"])
    assert f'"{tmp_path / "id_ed25519"}"' in text
    assert "insert_key = false" in text
    assert "192.168.121.1 a.example deb.debian.org" in text


def test_mirror_hosts_skips_comments():
    deb822 = ("Types: deb\n# http://snapshot.debian.org/archive/debian/2025\n"
              "URIs: http://deb.debian.org/debian\n")
    one_line = "deb [arch=amd64] https://mirror.example.org/debian bookworm main\n"
    assert vagrantbox.mirror_hosts([deb822, one_line]) == ["deb.debian.org",
                                                          "mirror.example.org"]


def test_check_env_sets_the_documented_variables(tmp_path):
    env = vagrantbox.check_env(tmp_path, {"mcclab_frr10_build": False}, 3, 6144, 10)
    assert env["MCCLAB_VM_LIBVIRT_DRIVER"] == "qemu"
    assert env["MCCLAB_VM_CPUS"] == "3" and env["MCCLAB_VM_MEMORY"] == "6144"
    assert json.loads(env["MCCLAB_VM_ANSIBLE_EXTRA_VARS"]) == {"mcclab_frr10_build": False}
    assert env["VAGRANT_HOME"] == str(tmp_path) and env["MCCLAB_TIMEOUT_SCALE"] == "10"


# ------------------------------------------------------------------ the check's readers

def test_run_id_and_port_from_the_announced_links():
    grafana = ("http://127.0.0.1:3000/d/mcclab-overview/x?orgId=1&var-run=20261121-210624-17e9"
               "&from=1&to=2")
    prom = ("http://127.0.0.1:9090/graph?g0.expr=mcc_agent_throughput_bps%7Brun%3D%22"
            "20261121-210624-17e9%22%7D&g0.range_input=1m")
    assert run_id_of(grafana) == run_id_of(prom) == "20261121-210624-17e9"
    assert link_port(grafana) == 3000 and link_port(prom) == 9090
    assert link_port("http://10.0.2.15:9090/graph") is None


def test_host_results_is_makes_output_not_its_recipe():
    out = ('[ -z "$run" ] || echo "results on this host: /c/${run%/}/ '
           '(report: /c/${run}report.html)"\n'
           "complete: /vagrant/results/default/1\n"
           "results on this host: /c/results/default/1/ "
           "(report: /c/results/default/1/report.html)\n")
    assert host_results(out) == (Path("/c/results/default/1"),
                                 Path("/c/results/default/1/report.html"))
    assert host_results(out.splitlines()[0]) is None


def test_network_state_is_found_and_removed(tmp_path):
    (tmp_path / "vagrant-libvirt" / "ports").mkdir(parents=True)
    (tmp_path / "vagrant-libvirt.pid").write_text("1074\n")
    (tmp_path / "default.pid").write_text("1\n")  # not the check's
    assert [p.name for p in network_state(tmp_path)] == ["vagrant-libvirt", "vagrant-libvirt.pid"]
    remove_network_state(tmp_path)
    assert network_state(tmp_path) == [] and (tmp_path / "default.pid").exists()


def test_compare_listings_names_missing_and_short_files(tmp_path):
    (tmp_path / "tables").mkdir()
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "tables" / "a.csv").write_text("12345")
    guest = "run.json 2\ntables/a.csv 6\nreport.html 10\n"
    assert compare_listings(guest, tmp_path) == ["tables/a.csv: 5 bytes, guest 6",
                                                 "missing report.html"]
    assert compare_listings("run.json 2\n", tmp_path) == []


GOOD = ["lab host mcl-h1", "lab 127.0.0.1 9090 refused ConnectionRefusedError",
        "lab 127.0.0.1 9463 refused ConnectionRefusedError",
        "lab 192.168.121.5 9090 refused ConnectionRefusedError",
        "lab 172.30.0.1 9090 refused ConnectionRefusedError", "lab 172.30.0.1 9463 CONNECTED",
        "vm 127.0.0.1 9090 CONNECTED", "vm 127.0.0.1 9463 refused ConnectionRefusedError"]


def test_isolation_verdict():
    assert isolation_ok(GOOD, 9090)
    leaked = [ln.replace("192.168.121.5 9090 refused ConnectionRefusedError",
                         "192.168.121.5 9090 CONNECTED") for ln in GOOD]
    assert not isolation_ok(leaked, 9090)
    # A probe that reaches nothing at all proves nothing.
    assert not isolation_ok([ln for ln in GOOD if "9463 CONNECTED" not in ln], 9090)
    # The forward's end (the VM's loopback) must answer.
    assert not isolation_ok([ln for ln in GOOD if not ln.startswith("vm ")], 9090)


def test_isolation_script_is_valid_shell():
    res = subprocess.run(["bash", "-n", "-c", lab_isolation_script(9090)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr


# ------------------------------------------------------------------ relays

def test_request_host():
    assert nsnet.request_host(b"GET /debian/x HTTP/1.1\r\nHost: Deb.Debian.org\r\n\r\n") == \
        "deb.debian.org"
    assert nsnet.request_host(b"GET / HTTP/1.1\r\nhost: h.example:8080\r\n\r\n") == "h.example"
    assert nsnet.request_host(b"GET / HTTP/1.0\r\n\r\n") is None


def test_relay_splices_both_ways():
    upstream = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        conn, _ = upstream.accept()
        with conn:
            data = b""
            while chunk := conn.recv(100):  # until the relay passes the client's EOF on
                data += chunk
            conn.sendall(data.upper())
    threading.Thread(target=echo, daemon=True).start()
    listener = socket.create_server(("127.0.0.1", 0))

    def connect(_c: socket.socket) -> tuple[socket.socket, bytes]:
        return socket.create_connection(upstream.getsockname()), b"first:"
    relay = nsnet.Relay(listener, connect).start()
    try:
        with socket.create_connection(listener.getsockname(), timeout=5) as c:
            c.sendall(b"hello")
            c.shutdown(socket.SHUT_WR)
            got = b""
            while chunk := c.recv(100):
                got += chunk
        assert got == b"FIRST:HELLO"
        assert relay.connections == 1
    finally:
        relay.close()
        upstream.close()


# ------------------------------------------------------------------ Makefile VM branch

def make_n(*args: str, cwd: Path = REPO) -> str:
    # Under `make test` this runs inside make: its MAKELEVEL and MAKEFLAGS would make the
    # inner make print "Entering directory" lines and inherit the outer one's flags.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    res = subprocess.run(["make", "--no-print-directory", "-n", "-f", str(REPO / "Makefile"),
                          *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_vm_branch_runs_in_the_vm_and_copies_results_back():
    out = make_n("MCCLAB_VM=1", "experiment", "EXPERIMENT=x", "PROFILE=quick",
                 "MCCLAB_TIMEOUT_SCALE=10")
    lines = out.splitlines()
    assert lines[0] == "vagrant rsync"
    assert ('vagrant ssh -c "cd /vagrant && sudo env MCCLAB_TIMEOUT_SCALE=10 make experiment '
            'EXPERIMENT=x PROFILE=quick"') in out
    assert "default:/vagrant/results/ results/" in out
    assert "results on this host:" in out and "ls -td results/x/*/" in out
    assert "mcclab run" not in out


def test_vm_branch_test_target_runs_in_the_vm():
    out = make_n("MCCLAB_VM=1", "test")
    assert 'vagrant ssh -c "cd /vagrant && sudo env  make test' in out
    assert "pytest" not in out


def test_local_branch_without_vm():
    out = make_n("MCCLAB_VM=0", "experiment", "EXPERIMENT=x")
    assert "mcclab run x --profile quick" in out and "vagrant" not in out


@pytest.mark.skipif(shutil.which("vagrant") is None and shutil.which("mnexec") is None,
                    reason="detection differs only where vagrant or mnexec is installed")
def test_a_machine_made_by_vagrant_up_selects_the_vm(tmp_path):
    (tmp_path / ".vagrant" / "machines" / "default" / "libvirt").mkdir(parents=True)
    (tmp_path / ".vagrant" / "machines" / "default" / "libvirt" / "id").write_text("x")
    assert make_n("experiment", cwd=tmp_path).startswith("vagrant rsync")


# ------------------------------------------------------------------ Vagrantfile settings

needs_vagrant = pytest.mark.skipif(shutil.which("vagrant") is None,
                                   reason="vagrant is not installed (apt-get install vagrant)")


def validate(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "checkout"
    work.mkdir(exist_ok=True)
    shutil.copy(REPO / "Vagrantfile", work / "Vagrantfile")
    full = os.environ | {"VAGRANT_HOME": str(tmp_path / "home"),
                        "VAGRANT_CHECKPOINT_DISABLE": "1", "VAGRANT_NO_COLOR": "1"} | env
    return subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=work, env=full,
                          capture_output=True, text=True, timeout=120)


@needs_vagrant
def test_vagrantfile_settings_from_the_environment(tmp_path):
    ok = validate(tmp_path, {"MCCLAB_VM_CPUS": "4", "MCCLAB_VM_MEMORY": "8192",
                             "MCCLAB_VM_BOX": "other/box", "MCCLAB_VM_LIBVIRT_DRIVER": "qemu",
                             "MCCLAB_VM_ANSIBLE_EXTRA_VARS": '{"mcclab_frr10_build": false}'})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = validate(tmp_path, {"MCCLAB_VM_ANSIBLE_EXTRA_VARS": "[1]"})
    assert bad.returncode != 0
    assert "must be a JSON object" in bad.stdout + bad.stderr
    bad_cpus = validate(tmp_path, {"MCCLAB_VM_CPUS": "two"})
    assert bad_cpus.returncode != 0


# ------------------------------------------------------------------ Grafana pin and key check

def grafana_defaults() -> dict:
    return yaml.safe_load((GRAFANA / "defaults" / "main.yml").read_text())


def test_grafana_is_pinned_to_the_dashboards_sdk_minor_version():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    sdk = next(d for d in deps if d.startswith("grafana-foundation-sdk"))
    major_minor = re.search(r"!?(\d+\.\d+)\.\d+$", sdk).group(1)
    assert grafana_defaults()["mcclab_grafana_version"] == f"{major_minor}.*"
    tasks = (GRAFANA / "tasks" / "grafana.yml").read_text()
    assert 'name: "grafana={{ mcclab_grafana_version }}"' in tasks
    assert "Pin: version {{ mcclab_grafana_version }}" in tasks


def _key_check_task() -> dict:
    tasks = yaml.safe_load((GRAFANA / "tasks" / "grafana.yml").read_text())
    names = [t["name"] for t in tasks]
    # Download to a staging file, read, check, and only then install as the keyring.
    order = ["Download Grafana's repository key", "Read the downloaded key's fingerprints",
             "Check the key's fingerprint against the pinned one",
             "Install the checked key as Grafana's apt keyring", "Add Grafana's apt repository"]
    assert [names.index(n) for n in order] == sorted(names.index(n) for n in order)
    return next(t for t in tasks if t["name"] == order[2])


def _evaluate(that: list[str], stdout: str, fingerprint: str) -> bool:
    env = jinja2.Environment()
    env.filters["split"] = lambda s, sep: s.split(sep)
    env.tests["match"] = lambda s, pattern: re.match(pattern, s) is not None
    names = {"mcclab_grafana_key_info": {"stdout_lines": stdout.splitlines()},
             "mcclab_grafana_key_fingerprint": fingerprint}
    return all(env.compile_expression(cond)(**names) for cond in that)


def _gpg_key(home: Path, uid: str) -> tuple[str, str]:
    """An armored public key made by gpg, and its fingerprint."""
    env = os.environ | {"GNUPGHOME": str(home)}
    home.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519",
                    "sign", "never"], env=env, check=True, capture_output=True)
    armored = subprocess.run(["gpg", "--armor", "--export", uid], env=env, check=True,
                             capture_output=True, text=True).stdout
    listing = subprocess.run(["gpg", "--with-colons", "--fingerprint", uid], env=env, check=True,
                             capture_output=True, text=True).stdout
    fpr = next(ln.split(":")[9] for ln in listing.splitlines() if ln.startswith("fpr:"))
    return armored, fpr


def _stop_agents(*homes: Path) -> None:
    """Stop the gpg-agent that gpg started for each home (gpg leaves it running)."""
    for home in homes:
        if home.is_dir():
            subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"],
                           capture_output=True, check=False)


@pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg is not installed")
def test_key_fingerprint_check_accepts_only_the_pinned_key(tmp_path, request):
    task = _key_check_task()
    tasks = yaml.safe_load((GRAFANA / "tasks" / "grafana.yml").read_text())
    task_cmd = next(t for t in tasks if t["name"] == "Read the downloaded key's fingerprints")
    cmd = task_cmd["ansible.builtin.command"]["cmd"]
    that = task["ansible.builtin.assert"]["that"]
    assert re.fullmatch(r"[0-9A-F]{40}", grafana_defaults()["mcclab_grafana_key_fingerprint"])
    # gpg starts an agent per home that outlives it: stop both at the end
    request.addfinalizer(lambda: _stop_agents(tmp_path / "a", tmp_path / "b"))
    key_a, fpr_a = _gpg_key(tmp_path / "a", "a@example.org")
    key_b, fpr_b = _gpg_key(tmp_path / "b", "b@example.org")

    def show(text: str) -> str:
        path = tmp_path / "key.asc"
        path.write_text(text)
        full = cmd.replace("{{ mcclab_grafana_key_download }}", str(path)).split()
        return subprocess.run(full, env=os.environ | {"GNUPGHOME": str(tmp_path / "empty")},
                              capture_output=True, text=True, check=True).stdout
    (tmp_path / "empty").mkdir(mode=0o700)
    assert _evaluate(that, show(key_a), fpr_a)
    assert not _evaluate(that, show(key_b), fpr_a)  # another key
    assert not _evaluate(that, show(key_a + key_b), fpr_a)  # the pinned key plus another


# ------------------------------------------------------------------ --labs: the labs in the VM

def test_parse_labs_keeps_order_and_drops_repeats():
    assert vagrantlabs.parse_labs("1,3") == [1, 3]
    assert vagrantlabs.parse_labs(" 3, 1,3,") == [3, 1]
    assert vagrantlabs.parse_labs("") == []
    for bad in ("x", "0", "1;3", "-1"):
        with pytest.raises(ValueError):
            vagrantlabs.parse_labs(bad)


def test_student_shell_runs_mcclab_as_root_in_the_synced_folder(tmp_path, monkeypatch):
    # The line's shape: sudo -i, then one bash -c argument.
    line = vagrantlabs.student_shell(("lab", "start", "1"), 10)
    words = shlex.split(line)
    assert words[:4] == ["sudo", "-i", "bash", "-c"] and len(words) == 5
    # What that bash runs, with the venv and /vagrant moved to temporary folders: the
    # venv's mcclab is found first, in the synced folder, with the arguments intact.
    venv, repo = tmp_path / "venv", tmp_path / "vagrant dir"
    venv.mkdir()
    repo.mkdir()
    fake = venv / "mcclab"
    fake.write_text('#!/bin/sh\npwd\necho "scale=$MCCLAB_TIMEOUT_SCALE"\n'
                    'for a in "$@"; do echo "[$a]"; done\n')
    fake.chmod(0o755)
    monkeypatch.setattr(vagrantlabs, "VENV_BIN", str(venv))
    monkeypatch.setattr(vagrantlabs, "GUEST_REPO", shlex.quote(str(repo)))
    args = ("lab", "check", "3", "--answers", "labs/03-why-cc/my answers.yaml")
    inner = shlex.split(vagrantlabs.student_shell(args, 7))[4]
    out = subprocess.run(["bash", "-c", inner], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"}, check=True).stdout.splitlines()
    assert out == [str(repo), "scale=7", *[f"[{a}]" for a in args]]


def test_copy_back_is_teachings_tar_through_vagrant_ssh():
    guest_side, host_side = vagrantlabs.copy_back_argv()
    assert guest_side == ["vagrant", "ssh", "-c", "sudo tar -C /vagrant -cf - results/labs"]
    assert host_side == ["tar", "-xf", "-"]
    teaching = (REPO / "docs" / "teaching.md").read_text()
    assert f"vagrant ssh -c '{guest_side[3]}' | tar -xf -" in teaching


def test_live_lab_steps_start_check_twice_and_reset():
    name, steps = vagrantlabs.lab_steps(1, REPO / "labs", REPO)
    assert name == "01-igmp-pim"
    assert [s.label for s in steps] == ["start", "handout", "check example",
                                        "check instructor", "reset"]
    assert steps[0].args == ("lab", "start", "1", "--timeout", "900")
    for step in steps[2:4]:
        answers = step.args[step.args.index("--answers") + 1]
        assert (REPO / answers).is_file() and step.args[:4] == ("lab", "check", "1", "--json")
    assert steps[2].title == "mcclab lab check 1 --json (example answers)"
    assert steps[3].title == "mcclab lab check 1 --json (instructor answers)"


def test_experiment_lab_steps_run_each_experiment_in_lab_yaml_order():
    _, steps = vagrantlabs.lab_steps(3, REPO / "labs", REPO)
    runs = [s.args for s in steps if s.label.startswith("run")]
    spec = yaml.safe_load((REPO / "labs" / "03-why-cc" / "lab.yaml").read_text())
    assert runs == [("lab", "run", "3", Path(e).stem) for e in spec["experiments"]]
    labels = [s.label for s in steps]
    assert labels.index("start") < labels.index("run cbr-tcp") < labels.index("check example")
    assert labels[-1] == "reset"


def _graded(number: int, answers: str, results: Path) -> dict:
    """The --json document of a real ``mcclab lab check`` on an empty work folder."""
    from mcclab.labs.actions import grade
    from mcclab.labs.catalogue import find
    from mcclab.labs.grade import as_json

    entry = find(number)
    return as_json(entry.spec, grade(entry, results, entry.dir / answers))


def test_example_answers_are_all_pending_and_pass_the_example_check(tmp_path):
    doc = _graded(3, "answers.example.yaml", tmp_path)
    assert {vagrantlabs.classify(r) for r in doc["results"]} == {"no-answer", "unchecked"}
    assert vagrantlabs.check_verdict(doc, example=True)[0]


def test_live_labs_example_answers_wait_for_captures_and_pass_the_example_check(tmp_path):
    # Lab 1 asks for a capture before it reads q3, q5, q6 and q7: pending, not a failure.
    doc = _graded(1, "answers.example.yaml", tmp_path)
    kinds = {r["id"]: vagrantlabs.classify(r) for r in doc["results"]}
    assert kinds["q1"] == "no-answer" and kinds["q3"] == "step-skipped"
    assert vagrantlabs.check_verdict(doc, example=True)[0]


def test_instructor_answers_without_runs_say_the_lab_did_not_run(tmp_path):
    doc = _graded(3, "instructor/answers.yaml", tmp_path)
    checked = [r for r in doc["results"] if r["status"] != "unchecked"]
    assert checked and all(vagrantlabs.classify(r) == "not-run" for r in checked)
    ok, note = vagrantlabs.check_verdict(doc, example=False)
    assert not ok and "not-run q1,q2,q3,q4,q5,q6" in note and note.startswith("0/6 pass")


def test_classify_tells_a_wrong_value_from_a_broken_run():
    cases = {
        ("fail", "your value 0.89 differs from your run's 0.71 by more than 0.03: in x"): "answer",
        ("fail", "your newest run of cbr-tcp (r1) is failed, not complete; run step 2"): "not-run",
        ("fail", "your run r1 cannot be read (no run.json); run step 2 again"): "not-run",
        ("fail", "your run r1 of cbr-tcp has no throughput for the flows: look"): "not-run",
        ("fail", "your run r1 has no rows of flow tcp: run step 2 again"): "not-run",
        ("fail", "q1 has no number for n5 (kbit/s)"): "answer",
        ("pending", "no run of webrc-tcp yet: do step 4 (mcclab lab run 3 webrc-tcp)"): "not-run",
        ("pending", "write the RP's address as q2 (step 2: show ip pim rp-info)"): "no-answer",
        ("pending", "capture r2-h2a while h2a joins 239.1.1.1 first (step 3)"): "step-skipped",
        ("error", "the check failed: KeyError: 'x'"): "broken",
        ("pass", "r2 has 2 PIM neighbours"): "pass",
        ("unchecked", "discussion question"): "unchecked",
    }
    for (status, message), kind in cases.items():
        assert vagrantlabs.classify({"status": status, "message": message}) == kind, message


def test_check_verdicts():
    def doc(*pairs):
        return {"passed": sum(s == "pass" for s, _ in pairs), "total": len(pairs),
                "results": [{"id": f"q{i}", "status": s, "message": m}
                            for i, (s, m) in enumerate(pairs, 1)]}
    wrong_value = ("fail", "your value 0.5 differs from your run's 0.7 by more than 0.03")
    no_run = ("pending", "no run of cbr-tcp yet: do step 2")
    assert vagrantlabs.check_verdict(doc(("pass", "ok"), wrong_value), example=False) == (
        True, "1/2 pass; answer q2, pass q1")
    assert not vagrantlabs.check_verdict(doc(("pass", "ok"), no_run), example=False)[0]
    assert not vagrantlabs.check_verdict(doc(("error", "boom")), example=False)[0]
    # A blank answer that passes (or fails on a value) is a bug of the template or check.
    assert not vagrantlabs.check_verdict(doc(("pass", "ok")), example=True)[0]
    assert vagrantlabs.check_verdict(doc(("pending", "write q1")), example=True)[0]
    assert vagrantlabs.check_verdict(None, example=False) == (False, "no JSON document")


def test_json_document_is_found_among_vagrants_lines():
    body = json.dumps({"lab": 3, "results": [{"id": "q1", "status": "pending", "message": "}"}],
                       "passed": 0, "total": 1}, indent=1)
    out = f"==> default: a notice {{not json}}\n{body}\nConnection to 192.168.121.5 closed.\n"
    assert vagrantlabs.json_document(out)["lab"] == 3
    assert vagrantlabs.json_document("no document") is None
    assert vagrantlabs.json_document('{"other": 1}') is None
