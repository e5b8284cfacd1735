"""ssh into the VM: keys made for the check, the host key pinned, loopback only."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mcclab.vmcheck.qemu import LOOPBACK

HOST_ALIAS = "mcclab-vmcheck"
ALIVE_INTERVAL = 30
ALIVE_COUNT = 10


class SshTimeout(RuntimeError):
    """The VM did not answer ssh in time."""


@dataclass(frozen=True)
class Keys:
    """The check's keypair (client) and the guest's host key, kept in the cache directory."""

    folder: Path

    @property
    def client(self) -> Path:
        """Private key the check logs in with."""
        return self.folder / "id_ed25519"

    @property
    def host(self) -> Path:
        """The guest's sshd host key (private half goes into the image)."""
        return self.folder / "ssh_host_ed25519_key"

    @property
    def known_hosts(self) -> Path:
        """known_hosts pinning the guest's host key under HOST_ALIAS."""
        return self.folder / "known_hosts"

    def ensure(self) -> bool:
        """Generate whatever is missing; True if anything was generated."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        made = False
        for key, comment in ((self.client, "mcclab-vmcheck"), (self.host, "mcclab-vm-host")):
            if not key.exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                                "-f", str(key)], check=True)
                made = True
        pub = self.host.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"{HOST_ALIAS} {pub[0]} {pub[1]}\n")
        return made


def ssh_argv(keys: Keys, port: int, command: str | None = None, user: str = "vagrant",
             connect_timeout: int = 10) -> list[str]:
    """ssh to the guest through the 127.0.0.1 forward, host key checked against the pin."""
    argv = ["ssh", "-p", str(port), "-i", str(keys.client),
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
            "-o", f"HostKeyAlias={HOST_ALIAS}", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={keys.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "HostKeyAlgorithms=ssh-ed25519",
            "-o", f"ConnectTimeout={connect_timeout}",
            # A guest busy under emulation answers keepalives late: allow 5 minutes.
            "-o", f"ServerAliveInterval={ALIVE_INTERVAL}",
            "-o", f"ServerAliveCountMax={ALIVE_COUNT}", "-o", "LogLevel=ERROR",
            f"{user}@{LOOPBACK}"]
    if command is not None:
        argv += ["--", command]
    return argv


def remote(argv: list[str], env: dict[str, str] | None = None, cwd: str | None = None,
           sudo: bool = False) -> str:
    """One shell command line for the guest from an argv (quoted), with env, cwd, sudo."""
    parts = []
    if cwd:
        parts.append(f"cd {shlex.quote(cwd)} &&")
    if sudo:
        parts.append("sudo")
    if env:
        parts.append("env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()))
    parts.append(shlex.join(argv))
    return " ".join(parts)


def wait_for_ssh(keys: Keys, port: int, timeout: float, alive: Callable[[], bool],
                 why_dead: Callable[[], str], interval: float = 2.0) -> float:
    """Poll until ``ssh true`` succeeds; returns the seconds it took.

    Raises SshTimeout (with the last ssh error) after ``timeout`` seconds, or
    as soon as ``alive()`` says the VM is gone (with ``why_dead()``).
    """
    start = time.monotonic()
    last = ""
    while True:
        if not alive():
            raise SshTimeout(f"the VM stopped before ssh answered.\n{why_dead()}")
        res = subprocess.run(ssh_argv(keys, port, "true", connect_timeout=5),
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=60)
        if res.returncode == 0:
            return time.monotonic() - start
        last = (res.stderr or res.stdout).strip()
        if time.monotonic() - start > timeout:
            raise SshTimeout(f"ssh to {LOOPBACK}:{port} did not answer within {timeout:.0f} s "
                             f"(last error: {last or 'none'}).\n{why_dead()}")
        time.sleep(interval)
