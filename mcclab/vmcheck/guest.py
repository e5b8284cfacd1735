"""What runs inside the VM, as data: copying the checkout in, the playbook, the checks.

The playbook is invoked the way Vagrant's ``ansible_local`` provisioner invokes it
for the project's Vagrantfile (checkout at /vagrant, ansible/ansible.cfg,
ansible/inventory.ini, ``--limit all``, ``--become``, ``mcclab_repo=/vagrant``).
Ansible itself comes from Debian (``ansible-core``, as .ci/run installs it).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from mcclab.vmcheck.ssh import remote
from mcclab.vmcheck.wheels import GUEST_WHEELHOUSE

GUEST_REPO = "/vagrant"
VENV_PY = "/opt/mcclab/venv/bin/python"
RESULTS = f"{GUEST_REPO}/results"
VM_RESULTS = f"{RESULTS}/vm-check"
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}
# CPU work in the guest runs about 10x slower than on the host (TCG; measured by a
# trial run and by the check's step times): readiness waits inside
# the checks are stretched by that factor (mcclab.slowdown), their targets are not.
TIMEOUT_SCALE = 10
# PYTHONFAULTHANDLER: a crash in native code (the quick run once died of SIGSEGV
# in the VM) leaves the Python stack in the log.
CHECK_ENV = {"PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1",
             "MCCLAB_TIMEOUT_SCALE": str(TIMEOUT_SCALE)}


def unpack_checkout() -> str:
    """Guest side of the copy: an empty /vagrant owned by vagrant, the tar stream unpacked."""
    return (f"sudo rm -rf {GUEST_REPO} && sudo install -d -o vagrant -g vagrant {GUEST_REPO} && "
            f"tar -x -C {GUEST_REPO}")


def unpack_wheelhouse() -> str:
    """Guest side of the wheelhouse copy: a fresh folder (root's), the tar stream unpacked."""
    return (f"sudo rm -rf {GUEST_WHEELHOUSE} && sudo install -d {GUEST_WHEELHOUSE} && "
            f"sudo tar -x --no-same-owner -C {GUEST_WHEELHOUSE}")


def extra_vars(optional_packages: bool = False) -> dict[str, object]:
    """The playbook's extra vars: Vagrantfile's, the optional-packages knob, no FRR 10.

    FRR 10's build (about 95 s of compiling natively) would take some ten
    times that under emulation, and no check here uses it: the multicast
    check is Debian's FRR, and CI builds FRR 10 on a real Debian 12.
    """
    out: dict[str, object] = {"mcclab_repo": GUEST_REPO, "mcclab_frr10_build": False}
    if not optional_packages:
        out["mcclab_optional_packages"] = []
    return out


def install_ansible() -> str:
    """Debian's ansible-core, as CI installs it (the playbook uses builtin modules only).

    Without recommends: ansible-core recommends the full ``ansible`` collection
    package, tens of thousands of files, minutes to unpack under emulation. The
    cached image has it already (baked in natively), and then this only checks
    that it is there: the ``apt-get update`` alone took ~30 s under emulation,
    and the playbook's own apt task refreshes stale lists anyway.
    """
    install = (remote(["apt-get", "update", "-q"], APT_ENV, sudo=True) + " && "
               + remote(["apt-get", "install", "-y", "-q", "--no-install-recommends",
                         "ansible-core"], APT_ENV, sudo=True))
    return (f"if command -v ansible-playbook >/dev/null; then ansible-playbook --version; "
            f"else {install}; fi")


def playbook(optional_packages: bool = False) -> str:
    """ansible-playbook as ``ansible_local`` runs it for the Vagrantfile.

    Without ``optional_packages`` the playbook's documented knob
    ``mcclab_optional_packages: []`` leaves out Chromium (only the report
    screenshot tests use it, which the check does not run): with it, its ~200
    dependencies made the first run take over 25 minutes under emulation.
    ``ANSIBLE_PIPELINING`` sends each module to its interpreter on stdin instead
    of writing and running a temporary file: fewer emulated process starts.
    """
    extra = json.dumps(extra_vars(optional_packages))
    return remote(
        ["ansible-playbook", "--limit=all", "--inventory-file=ansible/inventory.ini",
         f"--extra-vars={extra}", "--become", "ansible/site.yml"],
        {"ANSIBLE_CONFIG": "ansible/ansible.cfg", "ANSIBLE_PIPELINING": "1", "ANSIBLE_NOCOLOR": "1",
         "ANSIBLE_FORCE_COLOR": "0", "PYTHONUNBUFFERED": "1"} | APT_ENV, cwd=GUEST_REPO,
        sudo=True)


@dataclass
class Recap:
    """Totals over the hosts in a PLAY RECAP."""

    ok: int = 0
    changed: int = 0
    unreachable: int = 0
    failed: int = 0

    @property
    def success(self) -> bool:
        """No host failed or was unreachable."""
        return self.failed == 0 and self.unreachable == 0


_RECAP_FIELD = re.compile(r"\b(ok|changed|unreachable|failed)=(\d+)")


def parse_recap(output: str) -> Recap | None:
    """The PLAY RECAP of an ansible-playbook run (None if there is none)."""
    _, sep, after = output.rpartition("PLAY RECAP")
    if not sep:
        return None
    recap = Recap()
    found = False
    for line in after.splitlines():
        fields = dict(_RECAP_FIELD.findall(line))
        if not fields:
            continue
        found = True
        for key, value in fields.items():
            setattr(recap, key, getattr(recap, key) + int(value))
    return recap if found else None


def changed_tasks(output: str) -> list[str]:
    """Names of the tasks that reported ``changed`` (for the idempotency error)."""
    out, task = [], ""
    for line in output.splitlines():
        if line.startswith("TASK ["):
            task = line[6:].split("]")[0]
        elif line.startswith("changed:") and task and task not in out:
            out.append(task)
    return out


JOBS = "/var/tmp/mcclab-vmcheck"
RUNNING = "running"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Job:
    """A long guest command run detached (own session) and polled with short ssh calls.

    One long ssh session lost its connection under emulation (exit 255 after
    266 s, the guest too busy to answer keepalives), which killed the command
    with it. A detached job outlives its ssh call; the check polls its status
    file and the new part of its log, and ends its process group on timeout.
    """

    name: str
    root: str = JOBS

    def __post_init__(self) -> None:
        if not _SLUG.match(self.name):
            raise ValueError(f"job name {self.name!r}: lowercase letters, digits and '-' only")

    @property
    def folder(self) -> str:
        """Guest folder with the job's log, status and process group id."""
        return f"{self.root}/{self.name}"

    def start(self, command: str) -> str:
        """Guest command starting ``command`` as root in a new session; returns at once.

        The status file appears (by rename, so never half-written) only when the
        command has ended; the pgid file names the session's process group.
        """
        d = self.folder
        body = (f"echo $$ > {d}/pgid; ( {command} ) > {d}/out.log 2>&1 < /dev/null; "
                f"echo $? > {d}/rc.part; mv {d}/rc.part {d}/rc")
        return (f"sudo rm -rf {d} && sudo install -d -m 0755 {d} && "
                f"sudo setsid -f sh -c {shlex.quote(body)} > /dev/null 2>&1 < /dev/null")

    def poll(self, offset: int) -> str:
        """Guest command printing the exit status (or ``running``), then the log from ``offset``.

        The status is read before the log, so once it is there the log is complete.
        """
        d = self.folder
        return (f"sudo sh -c 'cat {d}/rc 2>/dev/null || echo {RUNNING}; "
                f"tail -c +{offset + 1} {d}/out.log 2>/dev/null'")

    def stop(self, grace: float = 10.0) -> str:
        """Guest command ending the job's process group: SIGTERM, then SIGKILL.

        ``kill -SIG -PGID`` without ``--``: dash's builtin kill refuses ``--``.
        """
        d = self.folder
        return (f"sudo sh -c 'g=$(cat {d}/pgid 2>/dev/null) || exit 0; "
                f"kill -TERM -$g 2>/dev/null; sleep {grace:g}; kill -KILL -$g 2>/dev/null; "
                "exit 0'")


def parse_poll(output: bytes) -> tuple[int | None, bytes]:
    """(exit status or None while running, new log bytes) from a ``Job.poll`` answer."""
    first, _, rest = output.partition(b"\n")
    text = first.decode(errors="replace").strip()
    if text == RUNNING:
        return None, rest
    try:
        return int(text), rest
    except ValueError:
        raise ValueError(f"unexpected job status {text!r}") from None


@dataclass(frozen=True)
class Check:
    """One check run inside the VM, as root, from the checkout."""

    name: str
    argv: list[str]
    timeout: float
    job: str = "check"
    env: dict[str, str] = field(default_factory=dict)  # on top of CHECK_ENV

    def command(self) -> str:
        """The guest shell command."""
        return remote(self.argv, CHECK_ENV | self.env, cwd=GUEST_REPO, sudo=True)


def checks(fidelity_args: list[str]) -> list[Check]:
    """The inner checks, in order: link fidelity (kernel), multicast join/leave, IGMP on a
    lossy kernel-emulated link, quick run."""
    return [
        Check("link fidelity (kernel backend)",
              [VENV_PY, "bench/bench_links.py", "--design", "vm", "--backend", "kernel",
               "--out-dir", VM_RESULTS, "--raw", f"{VM_RESULTS}/fidelity-kernel.json",
               "--wait", "600", *fidelity_args], 1800, "fidelity"),
        Check("multicast join/leave across FRR routers",
              [VENV_PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
               "tests/integration/test_multicast_routing.py",
               "-k", "(reaches_only_joined_receivers and frr and chain3 and not frr10) "
                     "or frr_prunes_upstream"], 900, "multicast"),
        # The kernel tree's control band (mcclab/links/kernel.py): the test's lab on the
        # kernel backend, which this host's kernel (no netem) never runs.
        Check("IGMP and PIM spared by a lossy link (kernel backend)",
              [VENV_PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
               "tests/integration/test_control_packets.py"], 600, "control",
              {"MCCLAB_TEST_LINK_BACKEND": "kernel"}),
        Check("quick default experiment",
              # `-m mcclab` (mcclab/__main__.py): `-m mcclab.cli` imports the CLI and
              # exits 0 without running anything.
              [VENV_PY, "-m", "mcclab", "run", "default", "--profile", "quick", "--wait", "600"],
              1500, "experiment"),
    ]


def pack_results() -> str:
    """Guest side of bringing the results back: a tar of /vagrant/results on stdout."""
    return f"sudo tar -c -C {shlex.quote(GUEST_REPO)} results"
