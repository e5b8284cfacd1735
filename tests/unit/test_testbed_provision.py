"""``mcclab testbed provision``: the Ansible inventory and command it builds, how it reads
Ansible's output, and the one-line error naming the host."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mcclab.cli import app
from mcclab.commands import Cmd
from mcclab.testbed.inventory import Host, Inventory
from mcclab.testbed.provision import (
    ProvisionError,
    ProvisionResult,
    ansible_inventory,
    close_commands,
    plan_provision,
    playbook_command,
    read_output,
    run_plan,
    ssh_wrapper,
    stream,
    summary_error,
)

REPO = Path(__file__).resolve().parents[2]

# Real output of ansible-playbook 2.14 with ansible/ansible.cfg (yaml results), in
# check mode: one host that cannot be reached.
UNREACHABLE = """\

PLAY [Provision an mcclab lab machine] *****************************************

TASK [Gathering Facts] *********************************************************
fatal: [s1]: UNREACHABLE! =>{blank}
    changed: false
    msg: 'Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 1:
        Connection refused'
    unreachable: true

PLAY RECAP *********************************************************************
{s1}
"""


def _recap(host: str, ok: int, changed: int, unreachable: int, failed: int) -> str:
    """A PLAY RECAP line as Ansible 2.14 prints it (padded, trailing blanks)."""
    return (f"{host:<27}: ok={ok:<4} changed={changed:<4} unreachable={unreachable:<4} "
            f"failed={failed:<4} skipped=0    rescued=0    ignored=0   ")


UNREACHABLE = UNREACHABLE.format(s1=_recap("s1", 0, 0, 1, 0), blank=" ")

# Two hosts: d1 would change the venv, r0's task failed (JSON on the fatal line, as
# the default callback prints it).
MIXED = """\
TASK [Gathering Facts] *********************************************************
ok: [d1]
ok: [r0]

TASK [python : Install mcclab editable into the venv] **************************
changed: [d1]
ok: [r0]

TASK [routers : Install FRR and smcroute] **************************************
ok: [d1]
fatal: [r0]: FAILED! => {"changed": false, "msg": "No package matching 'frr' is available"}

TASK [python : Write the install stamp] ****************************************
changed: [d1]

PLAY RECAP *********************************************************************
{d1}
{r0}
""".replace("{d1}", _recap("d1", 3, 2, 0, 0)).replace("{r0}", _recap("r0", 2, 0, 0, 1))


def _inventory(**settings) -> Inventory:
    hosts = {"s1": Host(address="172.30.0.4", user="root", identity_file="/k/client"),
             "d1": Host(address="pc2.emulab.net", user="alice", port=2222),
             "r0": Host(address="pc3.emulab.net")}
    return Inventory(source="hosts.ini", format="ansible-ini", hosts=hosts, **settings)


def test_ansible_inventory_keeps_each_login_and_becomes_root_only_where_needed():
    text = ansible_inventory(_inventory(), local_user="bob", control_path_dir="/w/cp")
    assert text.startswith("# Written by mcclab testbed provision from hosts.ini")
    data = yaml.safe_load(text)
    assert data["all"]["hosts"] == {
        "s1": {"ansible_host": "172.30.0.4", "ansible_port": 22, "ansible_user": "root",
               "ansible_ssh_private_key_file": "/k/client"},
        "d1": {"ansible_host": "pc2.emulab.net", "ansible_port": 2222,
               "ansible_user": "alice", "ansible_become": True},
        # no user: ssh logs in as the local user, bob, who is not root
        "r0": {"ansible_host": "pc3.emulab.net", "ansible_port": 22, "ansible_become": True},
    }
    common = data["all"]["vars"]
    assert common["ansible_python_interpreter"] == "/usr/bin/python3"
    assert common["ansible_control_path_dir"] == "/w/cp"
    assert shlex.split(common["ansible_ssh_common_args"]) == [
        "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
        "-o", "ConnectTimeout=10"]
    # a plain ssh client: Ansible's own, and its own way of copying files
    assert "ansible_ssh_executable" not in common
    assert "ansible_ssh_transfer_method" not in common
    # run by root, nobody without a user needs to become root
    assert "ansible_become" not in yaml.safe_load(
        ansible_inventory(_inventory(), local_user="root"))["all"]["hosts"]["r0"]


def test_ansible_inventory_takes_the_host_key_policy_and_the_client_command():
    inv = _inventory(strict_host_key_checking="yes", known_hosts="/a dir/known_hosts",
                     ssh_command=("ip", "netns", "exec", "mcl-x-ctl", "ssh"))
    common = yaml.safe_load(ansible_inventory(inv, "root", "/w/ssh"))["all"]["vars"]
    args = shlex.split(common["ansible_ssh_common_args"])
    assert args[args.index("-o", 2) + 1] == "StrictHostKeyChecking=yes"
    assert args[-2:] == ["-o", "UserKnownHostsFile=/a dir/known_hosts"]  # one word
    assert common["ansible_ssh_executable"] == "/w/ssh"
    assert common["ansible_ssh_transfer_method"] == "piped"


def test_the_ssh_wrapper_runs_the_client_command_with_ansible_s_arguments(tmp_path):
    assert ssh_wrapper(("ssh",)) is None
    script = tmp_path / "ssh"
    script.write_text(ssh_wrapper(("echo", "client", "it's")))
    script.chmod(0o700)
    out = subprocess.run([str(script), "-o", "A=b c", "--", "host", "cmd"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "client it's -o A=b c -- host cmd\n"


def test_playbook_command_is_the_projects_playbook_with_its_config(tmp_path):
    command = playbook_command(tmp_path / "inv.yml")
    assert command == Cmd(("env", f"ANSIBLE_CONFIG={REPO}/ansible/ansible.cfg",
                           "ANSIBLE_NOCOLOR=1", "PYTHONUNBUFFERED=1", "ansible-playbook",
                           "-i", str(tmp_path / "inv.yml"), f"{REPO}/ansible/site.yml"))
    # the same playbook and configuration .ci/run and the Vagrantfile use
    assert (REPO / "ansible" / "site.yml").is_file()
    assert (REPO / "ansible" / "ansible.cfg").is_file()
    ci = (REPO / ".ci" / "run").read_text()
    assert "ansible/site.yml" in ci and 'ANSIBLE_CONFIG="$PWD/ansible/ansible.cfg"' in ci
    checked = playbook_command(Path("/i.yml"), Path("/r"), check=True, tags=["base", "", "x"],
                               hosts_repo="/proj/mcclab")
    assert checked.argv[-6:] == ("/r/ansible/site.yml", "--check", "--tags", "base,x", "-e",
                                 "mcclab_repo=/proj/mcclab")
    assert checked.netns is None  # runs on the controller


def test_plan_writes_a_private_inventory_and_the_wrapper_only_when_needed(tmp_path):
    plan = plan_provision(_inventory(), tmp_path, check=True, local_user="root")
    assert set(plan.files) == {"inventory.yml"}
    assert plan.files["inventory.yml"][1] == 0o600
    assert "--check" in plan.command.argv
    assert plan.targets == {"s1": "root@172.30.0.4:22", "d1": "alice@pc2.emulab.net:2222",
                            "r0": "root@pc3.emulab.net:22"}
    wrapped = plan_provision(_inventory(ssh_command=("ip", "netns", "exec", "c", "ssh")),
                             tmp_path, local_user="root")
    assert wrapped.files["ssh"][1] == 0o700
    common = yaml.safe_load(wrapped.files["inventory.yml"][0])["all"]["vars"]
    assert common["ansible_ssh_executable"] == str(tmp_path / "ssh")
    assert common["ansible_control_path_dir"] == str(tmp_path / "cp")
    assert wrapped.ssh_command == ("ip", "netns", "exec", "c", "ssh")


def test_read_output_of_an_unreachable_host():
    recap, changed, failures = read_output(UNREACHABLE.splitlines())
    assert recap == {"s1": {"ok": 0, "changed": 0, "unreachable": 1, "failed": 0,
                            "skipped": 0, "rescued": 0, "ignored": 0}}
    assert changed == {}
    assert failures == {"s1": "unreachable: Failed to connect to the host via ssh: ssh: "
                              "connect to host 127.0.0.1 port 1: Connection refused"}


def test_read_output_of_changes_and_a_failed_task():
    recap, changed, failures = read_output(MIXED.splitlines())
    assert recap["d1"]["changed"] == 2 and recap["r0"]["failed"] == 1
    assert changed == {"d1": ["python : Install mcclab editable into the venv",
                              "python : Write the install stamp"]}
    assert failures == {"r0": "failed: No package matching 'frr' is available"}


def test_summary_error_is_one_line_naming_the_host():
    targets = {"s1": "root@127.0.0.1:1", "d1": "x@h:22", "r0": "root@h3:22"}
    result = ProvisionResult(4, *read_output(UNREACHABLE.splitlines()))
    assert summary_error(result, targets) == (
        "provisioning failed on s1 (root@127.0.0.1:1): unreachable: Failed to connect to "
        "the host via ssh: ssh: connect to host 127.0.0.1 port 1: Connection refused")
    mixed = ProvisionResult(2, *read_output(MIXED.splitlines()))
    assert summary_error(mixed, targets) == ("provisioning failed on r0 (root@h3:22): failed: "
                                             "No package matching 'frr' is available")
    both = ProvisionResult(2, *read_output((MIXED + UNREACHABLE).splitlines()))
    error = summary_error(both, targets)
    assert "\n" not in error and error.endswith("(also: s1)")
    assert summary_error(ProvisionResult(0, {"d1": {"changed": 2, "failed": 0}}), targets) is None
    assert "before naming a host" in summary_error(ProvisionResult(1), targets)
    assert "not installed" in summary_error(ProvisionResult(127), targets)


def test_run_plan_runs_the_command_and_raises_naming_the_host(tmp_path):
    plan = plan_provision(_inventory(), tmp_path, local_user="root")
    ran: list[Cmd] = []

    def fake(command: Cmd, echo):  # noqa: ANN001, ANN202
        ran.append(command)
        if command == plan.command:
            # Ansible made a master connection for a host in the private folder.
            (tmp_path / "cp" / "abc123").write_text("")
            for line in UNREACHABLE.splitlines():
                echo(line)
            return 4, UNREACHABLE.splitlines()
        return 0, []

    seen: list[str] = []
    with pytest.raises(ProvisionError, match=r"^provisioning failed on s1 \(root@172.30.0.4"
                                             r":22\): unreachable: Failed to connect"):
        run_plan(plan, tmp_path, seen.append, run=fake)
    assert seen == UNREACHABLE.splitlines()
    assert (tmp_path / "inventory.yml").read_text() == plan.files["inventory.yml"][0]
    assert (tmp_path / "inventory.yml").stat().st_mode & 0o777 == 0o600
    # the playbook first, then its master connection closed
    assert ran == [plan.command, *close_commands(("ssh",), [tmp_path / "cp" / "abc123"])]
    assert ran[1].argv == ("ssh", "-o", f"ControlPath={tmp_path}/cp/abc123", "-O", "exit",
                           "mcclab-provision")


def test_run_plan_returns_what_each_host_would_change(tmp_path):
    plan = plan_provision(_inventory(), tmp_path, check=True, local_user="root")
    good = MIXED.replace("failed=1", "failed=0").replace("fatal: [r0]", "ok: [r0]")
    result = run_plan(plan, tmp_path, lambda line: None,
                      run=lambda command, echo: (0, good.splitlines()))
    assert result.changed == {"d1": ["python : Install mcclab editable into the venv",
                                     "python : Write the install stamp"]}
    assert set(result.recap) == {"d1", "r0"}


def test_stream_hands_over_each_line_as_it_comes():
    seen: list[str] = []
    rc, lines = stream(Cmd(("sh", "-c", "echo one; echo two >&2; echo three; exit 3")),
                       seen.append)
    assert rc == 3
    assert lines == seen == ["one", "two", "three"]


def test_cli_dry_run_prints_the_inventory_and_the_command(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("s1 ansible_host=172.30.0.4 ansible_user=root\n"
                   "d1 ansible_host=172.30.0.5 ansible_user=root ansible_port=2200\n")
    result = CliRunner().invoke(app, ["testbed", "provision", "-i", str(inv), "--check",
                                      "--dry-run"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    hosts = yaml.safe_load(result.output.split("\nenv ")[0])["all"]["hosts"]
    assert hosts["d1"] == {"ansible_host": "172.30.0.5", "ansible_port": 2200,
                           "ansible_user": "root"}
    command = shlex.split(result.output.strip().splitlines()[-1])
    assert command[4:6] == ["ansible-playbook", "-i"] and command[-1] == "--check"


def test_cli_refuses_an_inventory_that_does_not_map_the_experiment(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("s1 ansible_host=172.30.0.4\n")
    result = CliRunner().invoke(app, ["testbed", "provision", "default", "-i", str(inv)])
    assert result.exit_code == 2
    assert "node 'd1' of topology 'webrc-dumbbell' has no host" in result.output


def test_without_an_experiment_every_listed_host_is_provisioned(tmp_path):
    from mcclab.testbed.inventory import InventoryError, load_inventory

    listed = tmp_path / "nodes.txt"
    listed.write_text("r0 pc1.emulab.net\ndelay0 pc9.emulab.net\n")
    inv = load_inventory(listed, None, user="alice")
    assert list(inv.hosts) == ["r0", "delay0"] and inv.ignored == ()
    # still refused: two nodes on one machine
    listed.write_text("r0 pc1.emulab.net\nr1 pc1.emulab.net\n")
    with pytest.raises(InventoryError, match="both on pc1.emulab.net:22"):
        load_inventory(listed, None)
