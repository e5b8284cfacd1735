"""Build the cached base image from Debian packages, without mounts or loop devices.

1. debootstrap (Debian 12, kernel, grub, sshd, sudo, python3) into a directory;
2. install, natively in the chroot, ansible-core and the Debian packages the
   playbook's apt tasks name (read from ansible/, see ``playbook.py``), with
   service starts blocked by policy-rc.d;
3. write the guest files and keys, run the chroot commands (useradd, CA, networkd);
4. lay the directory out as an ext4 partition inside a raw disk (``mkfs.ext4 -d``
   at the partition's offset, partition table by sfdisk on the file);
5. convert to qcow2, boot it once with QEMU's direct kernel boot and install grub
   from inside the guest (``grub-install /dev/vda``), power off;
6. publish ``base-<digest>.qcow2`` by rename, so a half-built image is never used.

Nothing on the host is mounted: debootstrap mounts /proc and /sys inside its
target while it installs, and unmounts them itself (``leftover_mounts`` checks);
the package installs see a /proc mounted in a private mount namespace of their
own (``unshare --mount``), which the kernel tears down with the last process in
it, even if the check is SIGKILLed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from mcclab.vmcheck import recipe as rc
from mcclab.vmcheck.playbook import Provisioning
from mcclab.vmcheck.ssh import Keys
from mcclab.vmcheck.wheels import GUEST_WHEELHOUSE, venv_install_argv

Run = Callable[[list[str]], None]


def host_recipe(keys: Keys, etc: Path = Path("/etc"), env: dict[str, str] | None = None,
                ca_dir: Path = Path(rc.CA_DIR), prov: Provisioning | None = None,
                wheelhouse: str | None = None, venv_reqs: list[str] | None = None,
                wheels: list[str] | None = None) -> rc.Recipe:
    """The recipe for this host: its mirror, apt/pip settings and CAs, the check's keys.

    ``prov``: what the playbook installs, preinstalled in the image; ``wheelhouse``:
    the guest folder its pip installs from. With ``venv_reqs`` (and the
    wheelhouse's file names in ``wheels``) the playbook's venv is created in the
    image by the playbook's own command and those requirements installed into it.
    """
    env = dict(os.environ) if env is None else env
    sources = _enabled_sources(etc / "apt")
    mirror = next((m for _, text in sources if (m := rc.sources_mirror(text))), None)
    files = rc.base_files()
    for path, text in sources:
        files.append(rc.GuestFile(f"/etc/apt/{path}", text))
    confs = sorted((etc / "apt" / "apt.conf.d").glob("*")) if (etc / "apt").exists() else []
    texts = [p.read_text(errors="replace") for p in confs if p.is_file()]
    if (etc / "apt" / "apt.conf").is_file():
        texts.append((etc / "apt" / "apt.conf").read_text(errors="replace"))
    if opts := rc.apt_options(texts):
        files.append(rc.GuestFile("/etc/apt/apt.conf.d/90mcclab-host", opts))
    cas = sorted(ca_dir.glob("*.crt")) if ca_dir.exists() else []
    for ca in cas:
        files.append(rc.GuestFile(f"{rc.CA_DIR}/{ca.name}", ca.read_text()))
    host_pip = etc / "pip.conf"
    pip = rc.pip_conf(host_pip.read_text() if host_pip.exists() else None, env, bool(cas),
                      wheelhouse)
    if pip:
        files.append(rc.GuestFile("/etc/pip.conf", pip))
    client_pub = keys.client.with_suffix(".pub").read_text()
    files.append(rc.GuestFile(f"/home/{rc.USER}/.ssh/authorized_keys", client_pub, 0o600))
    files.append(rc.GuestFile("/etc/ssh/ssh_host_ed25519_key", keys.host.read_text(), 0o600))
    host_pub = keys.host.with_suffix(".pub").read_text()
    files.append(rc.GuestFile("/etc/ssh/ssh_host_ed25519_key.pub", host_pub))
    files.append(rc.GuestFile(*rc.DPKG_UNSAFE_IO))
    venv_command = prov.venv_command if prov and venv_reqs else ()
    venv_install = (tuple(venv_install_argv(prov.venv, venv_reqs))
                    if prov and venv_reqs and venv_command else ())
    return rc.Recipe(mirror=mirror or rc.DEFAULT_MIRROR, files=files,
                     authorized_key=client_pub, host_key_pub=host_pub,
                     playbook_packages=prov.packages if prov else (),
                     debconf=prov.debconf if prov else (),
                     venv_command=venv_command, venv_install=venv_install,
                     wheels=tuple(wheels or ()) if venv_install else ())


def build_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment of the image build's commands: the host's, minus its PIP_* settings.

    The chroot's pip installs from the wheelhouse only; the host's pip settings
    (e.g. a ``PIP_FIND_LINKS`` to a host path) reach the guest through its
    /etc/pip.conf instead, and must not leak into the build.
    """
    return {k: v for k, v in env.items() if not k.startswith("PIP_")}


def _enabled_sources(apt: Path) -> list[tuple[str, str]]:
    """(path under /etc/apt, text) of the host's enabled apt source files."""
    out = []
    if (apt / "sources.list").is_file():
        out.append(("sources.list", (apt / "sources.list").read_text()))
    folder = apt / "sources.list.d"
    if folder.is_dir():
        for p in sorted(folder.iterdir()):
            if p.suffix in (".list", ".sources") and p.is_file():
                out.append((f"sources.list.d/{p.name}", p.read_text()))
    return out


def write_files(root: Path, files: list[rc.GuestFile]) -> None:
    """Write the guest files into the root filesystem ``root``."""
    for f in files:
        dest = root / f.path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink():
            dest.unlink()  # e.g. a resolv.conf link left by debootstrap
        dest.write_text(f.content)
        dest.chmod(f.mode)


def sfdisk_script() -> str:
    """One bootable Linux partition from 1 MiB to the end of the disk (MBR, for grub-pc)."""
    return f"label: dos\nstart={rc.PART_OFFSET // 512}, type=83, bootable\n"


def mkfs_argv(root: Path, disk: Path) -> list[str]:
    """mkfs.ext4 filling the partition with ``root``'s tree, written at its offset in ``disk``."""
    blocks = (rc.DISK_SIZE - rc.PART_OFFSET) // 4096
    return ["mkfs.ext4", "-q", "-F", "-L", rc.ROOT_LABEL, "-b", "4096",
            "-E", f"offset={rc.PART_OFFSET}", "-d", str(root), str(disk), str(blocks)]


def grub_commands() -> list[str]:
    """Run in the guest on its first (direct-kernel) boot: make the disk boot by itself."""
    return ["sudo grub-install --target=i386-pc /dev/vda",
            "sudo update-grub",
            "sudo apt-get clean",
            "sudo fstrim -v /"]


def leftover_mounts(under: Path) -> list[str]:
    """Mount points at or below ``under`` (none may remain after a build)."""
    prefix = str(under.resolve())
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            out.append(point)
    return out


def chroot_with_proc(root: Path, cmd: list[str]) -> list[str]:
    """``cmd`` in the chroot ``root`` with /proc mounted in a private mount namespace.

    The mount exists only in that namespace: the host never sees it, and it goes
    away with the namespace's last process however the command ends.
    """
    script = 'mount -t proc proc "$1/proc" && root="$1" && shift && exec chroot "$root" "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script,
            "chroot-with-proc", str(root), *cmd]


def build_rootfs(recipe: rc.Recipe, root: Path, run: Run, wheelhouse: Path | None = None
                 ) -> None:
    """debootstrap into ``root``, preinstall the playbook's packages, configure for the check.

    ``wheelhouse`` (the host's) is copied to the guest's wheelhouse folder before
    the chroot commands, which install the venv's requirements from it.
    """
    if root.exists():
        shutil.rmtree(root)
    run(recipe.debootstrap_argv(str(root)))
    if wheelhouse is not None:
        shutil.copytree(wheelhouse, root / GUEST_WHEELHOUSE.lstrip("/"))
    elif recipe.venv_install:
        raise ValueError("the recipe installs the venv from a wheelhouse: pass it")
    write_files(root, [rc.GuestFile(*rc.DPKG_UNSAFE_IO),
                       rc.GuestFile(rc.POLICY_RC_D, "#!/bin/sh\nexit 101\n", 0o755)])
    # Before the guest files: resolv.conf is still the host's copy here.
    for cmd in recipe.preinstall_commands():
        run(chroot_with_proc(root, cmd))
    (root / rc.POLICY_RC_D.lstrip("/")).unlink()
    run(["chroot", str(root), *rc.USERADD])  # before the files: they include its ~/.ssh
    write_files(root, recipe.files)
    for cmd in rc.chroot_commands():
        run(["chroot", str(root), *cmd])


def make_disk(root: Path, raw: Path, qcow2: Path, run: Run) -> None:
    """The raw partitioned disk with ``root`` as its ext4 partition, then qcow2."""
    raw.unlink(missing_ok=True)
    with raw.open("wb") as f:
        f.truncate(rc.DISK_SIZE)
    subprocess.run(["sfdisk", "-q", str(raw)], input=sfdisk_script(), text=True, check=True,
                   capture_output=True)
    run(mkfs_argv(root, raw))
    run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(qcow2)])
    raw.unlink()


def kernel_files(root: Path) -> tuple[Path, Path]:
    """The newest kernel and initrd installed in ``root``."""
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if not kernels:
        raise FileNotFoundError(f"no kernel in {root}/boot")
    kernel = kernels[-1]
    initrd = root / "boot" / kernel.name.replace("vmlinuz-", "initrd.img-")
    return kernel, initrd
