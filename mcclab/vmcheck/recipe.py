"""What goes into the VM image, as data: packages, guest files, chroot commands.

Everything here is pure so it can be unit-tested; `image.py` carries it out. The
host's package-registry settings (apt sources, apt proxy options, extra CA
certificates, pip index and certificate) are replicated into the guest, because
the guest reaches the registries the same way the host does: through QEMU's
user-mode network, i.e. through the host's own sockets.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# debootstrap's default variant (required + important) plus a kernel, a boot loader,
# SSH, sudo, Python and CA certificates;
# rsync because the Debian Vagrant boxes ship it (Vagrant's rsync synced folder needs
# it in the guest before any provisioner runs; the Vagrant check boots this image).
PACKAGES = ("linux-image-amd64", "grub-pc", "openssh-server", "sudo", "python3",
            "ca-certificates", "rsync")
# Vagrant's ansible_local would apt-install Ansible at provisioning, but dpkg
# byte-compiling ansible-core under emulation took 220 s per run; apt in the
# chroot does it natively, once, for the cached image. (debootstrap --include
# cannot: it does not resolve python3-cryptography's dependencies.)
PREINSTALL = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
              "--no-install-recommends", "ansible-core"]
# Blocks service starts while packages are installed in the chroot (the guest
# starts them at boot, as on a machine where apt installed them).
POLICY_RC_D = "/usr/sbin/policy-rc.d"
# Guest-side dpkg tuning, for the apt runs that remain inside the VM: no fsync
# per file (the overlay is thrown away) and no man-db index rebuild per package.
DPKG_UNSAFE_IO = ("/etc/dpkg/dpkg.cfg.d/mcclab-unsafe-io", "force-unsafe-io\n")
MAN_DB_AUTO_UPDATE = "/var/lib/man-db/auto-update"
MAN_DB_SELECTION = "man-db man-db/auto-update boolean false"
USER = "vagrant"
HOSTNAME = "mcclab"
ROOT_LABEL = "mcclab-root"
DISK_SIZE = 16 * 1024**3  # sparse; the provisioned VM uses about 6 GB
PART_OFFSET = 1024**2  # first partition at 1 MiB (sector 2048), the MBR gap holds grub
KERNEL_CMDLINE = "console=ttyS0,115200n8 net.ifnames=0"
# QEMU user-mode networking's built-in DNS forwarder (it asks the host's resolver).
SLIRP_DNS = "10.0.2.3"
CA_DIR = "/usr/local/share/ca-certificates"
SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

# apt.conf options that decide how the host reaches its mirror (not local tuning).
_APT_OPTION = re.compile(r'^\s*Acquire::[\w:.-]*(Proxy|Check-Valid-Until|Check-Date)\b[^;]*;',
                         re.MULTILINE | re.IGNORECASE)
_PIP_ENV = {"PIP_INDEX_URL": "index-url", "PIP_EXTRA_INDEX_URL": "extra-index-url",
            "PIP_TRUSTED_HOST": "trusted-host", "PIP_PROXY": "proxy",
            "PIP_DEFAULT_TIMEOUT": "timeout"}


@dataclass(frozen=True)
class GuestFile:
    """A file written into the image's root filesystem."""

    path: str
    content: str
    mode: int = 0o644


@dataclass
class Recipe:
    """Everything that determines the cached image (its digest names the cache entry)."""

    mirror: str = DEFAULT_MIRROR
    files: list[GuestFile] = field(default_factory=list)
    authorized_key: str = ""
    host_key_pub: str = ""
    # What the playbook installs with apt, read from ansible/ (mcclab.vmcheck.playbook).
    playbook_packages: tuple[str, ...] = ()
    debconf: tuple[str, ...] = ()
    # The playbook's venv, created by its own command, with the project's
    # dependencies installed from the wheelhouse (copied into the image first);
    # ``wheels`` names the wheelhouse's files, so new wheels make a new image.
    venv_command: tuple[str, ...] = ()
    venv_install: tuple[str, ...] = ()
    wheels: tuple[str, ...] = ()

    def debootstrap_argv(self, target: str) -> list[str]:
        """The debootstrap command that creates the root filesystem in ``target``."""
        return ["debootstrap", "--include=" + ",".join(PACKAGES), SUITE, target, self.mirror]

    def preinstall_commands(self) -> list[list[str]]:
        """Chroot commands (run with /proc) installing what the playbook would install.

        The playbook's apt tasks use apt's defaults (Recommends included), and so
        does this; ansible-core is installed as ``ansible_local`` would, minus its
        Recommends (the full ``ansible`` collection package, unused here).
        """
        cmds = [["sh", "-c", f"echo {shlex.quote(MAN_DB_SELECTION)} | debconf-set-selections"
                 f" && rm -f {MAN_DB_AUTO_UPDATE}"]]
        for line in self.debconf:
            cmds.append(["sh", "-c", f"echo {shlex.quote(line)} | debconf-set-selections"])
        cmds.append(PREINSTALL)
        if self.playbook_packages:
            cmds.append(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                         "-q", *self.playbook_packages])
        if self.venv_command:
            cmds.append(list(self.venv_command))
            if self.venv_install:
                cmds.append(list(self.venv_install))
        return cmds

    def digest(self) -> str:
        """A short hash of everything that goes into the image."""
        data = {"suite": SUITE, "mirror": self.mirror, "packages": PACKAGES,
                "cmdline": KERNEL_CMDLINE, "size": DISK_SIZE,
                "chroot": [*self.preinstall_commands(), USERADD, *chroot_commands()],
                "build_files": [list(DPKG_UNSAFE_IO), POLICY_RC_D],
                "files": [(f.path, f.content, f.mode) for f in self.files],
                "keys": [self.authorized_key, self.host_key_pub], "wheels": list(self.wheels)}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def base_files() -> list[GuestFile]:
    """Guest configuration that does not depend on the host."""
    return [
        GuestFile("/etc/hostname", f"{HOSTNAME}\n"),
        GuestFile("/etc/hosts", f"127.0.0.1 localhost\n127.0.1.1 {HOSTNAME}\n"
                                "::1 localhost ip6-localhost ip6-loopback\n"),
        GuestFile("/etc/fstab", f"LABEL={ROOT_LABEL} / ext4 errors=remount-ro 0 1\n"),
        # net.ifnames=0 keeps the one NIC at eth0 whatever PCI slot QEMU gives it.
        GuestFile("/etc/systemd/network/10-eth0.network",
                  "[Match]\nName=eth0\n\n[Network]\nDHCP=ipv4\n"),
        GuestFile("/etc/resolv.conf", f"nameserver {SLIRP_DNS}\n"),
        GuestFile(f"/etc/sudoers.d/{USER}", f"{USER} ALL=(ALL) NOPASSWD:ALL\n", 0o440),
        GuestFile("/etc/ssh/sshd_config.d/mcclab.conf",
                  "PasswordAuthentication no\nUseDNS no\n"),
        GuestFile("/etc/default/grub", (
            "GRUB_DEFAULT=0\nGRUB_TIMEOUT=0\nGRUB_DISTRIBUTOR=Debian\n"
            'GRUB_CMDLINE_LINUX_DEFAULT=""\n'
            f'GRUB_CMDLINE_LINUX="{KERNEL_CMDLINE}"\n'
            'GRUB_TERMINAL="serial console"\n'
            'GRUB_SERIAL_COMMAND="serial --speed=115200"\n')),
    ]


USERADD = ["useradd", "--create-home", "--shell", "/bin/bash", "--groups", "sudo", USER]


def chroot_commands() -> list[list[str]]:
    """Commands run in the root filesystem after the guest files are written (no /proc)."""
    return [
        ["chown", "-R", f"{USER}:{USER}", f"/home/{USER}/.ssh"],
        ["update-ca-certificates"],
        ["systemctl", "enable", "systemd-networkd.service"],
        ["apt-get", "clean"],
    ]


def apt_options(conf_texts: list[str]) -> str:
    """The host's apt options about how to reach the mirror (proxies, snapshot validity)."""
    found: list[str] = []
    for text in conf_texts:
        for m in _APT_OPTION.finditer(text):
            line = m.group(0).strip()
            if line not in found:
                found.append(line)
    return "".join(line + "\n" for line in found)


def sources_mirror(sources: str) -> str | None:
    """The first Debian (non-security) URI in a deb822 ``.sources`` or one-line ``.list``."""
    for line in sources.splitlines():
        line = line.strip()
        if line.startswith("URIs:"):
            for uri in line.split()[1:]:
                if "security" not in uri:
                    return uri
        elif line.startswith("deb "):
            parts = [p for p in line.split()[1:] if not p.startswith("[")]
            if parts and "security" not in parts[0] and "/debian" in parts[0]:
                return parts[0]
    return None


def pip_conf(host_conf: str | None, env: dict[str, str], custom_cas: bool,
             wheelhouse: str | None = None) -> str | None:
    """A guest /etc/pip.conf equivalent to the host's pip settings (file and environment).

    Paths on the host (find-links, a cert file) do not exist in the guest; the
    certificate becomes the guest's system bundle, which holds the host's extra CAs.
    With ``wheelhouse``, pip installs only from that guest folder (no index) and
    leaves byte-compiling to the first import (compiling the whole of numpy,
    pandas and matplotlib at a tenth of the host's speed took minutes).
    """
    cfg = configparser.ConfigParser(interpolation=None)
    if host_conf:
        cfg.read_string(host_conf)
    if not cfg.has_section("global"):
        cfg.add_section("global")
    for var, key in _PIP_ENV.items():
        if env.get(var):
            cfg.set("global", key, env[var])
    for section in cfg.sections():
        for key in ("find-links", "cert", "client-cert"):
            cfg.remove_option(section, key)
    if custom_cas or env.get("PIP_CERT") or (host_conf and "cert" in host_conf):
        cfg.set("global", "cert", SYSTEM_CA_BUNDLE)
    if wheelhouse:
        cfg.set("global", "find-links", wheelhouse)
        cfg.set("global", "no-index", "true")
        if not cfg.has_section("install"):
            cfg.add_section("install")
        cfg.set("install", "no-compile", "true")
    if not any(cfg.items(s) for s in cfg.sections()):
        return None
    lines = []
    for section in cfg.sections():
        lines.append(f"[{section}]")
        lines += [f"{k} = {v}" for k, v in cfg.items(section)]
    return "\n".join(lines) + "\n"
