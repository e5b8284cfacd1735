"""The Vagrant check's inputs as data: the libvirt box, the throw-away VAGRANT_HOME, the env.

A libvirt box is a tar of ``metadata.json`` (provider, image format, virtual
size in GB), a ``Vagrantfile`` (merged before the project's) and ``box.img`` (a
qcow2 image). The check's box holds the image ``make vm-check`` builds and is
added under the project Vagrantfile's box name in a VAGRANT_HOME made for one
check, so the committed Vagrantfile is used unchanged. What only this machine
needs (the check's ssh key, the registry relay's address in the guest's
/etc/hosts) goes into that VAGRANT_HOME's own Vagrantfile, which Vagrant merges
between the box's and the project's; its shell provisioner therefore runs
before the project's ``ansible_local``.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from mcclab.vmcheck import recipe as rc

PROVIDER = "libvirt"
# vagrant-libvirt's default management network (192.168.121.0/24): the host
# side of its bridge, where the check's registry relay listens.
MGMT_GATEWAY = "192.168.121.1"
_BOX_DEFAULT = re.compile(r'ENV\.fetch\(\s*"MCCLAB_VM_BOX"\s*,\s*"([^"]+)"\s*\)')


def box_name(vagrantfile_text: str) -> str:
    """The Vagrantfile's default box (the MCCLAB_VM_BOX fallback)."""
    m = _BOX_DEFAULT.search(vagrantfile_text)
    if not m:
        raise ValueError("the Vagrantfile names no default box "
                         '(ENV.fetch("MCCLAB_VM_BOX", "<box>"))')
    return m.group(1)


def metadata(disk_bytes: int = rc.DISK_SIZE) -> dict[str, object]:
    """metadata.json of a libvirt box whose image has ``disk_bytes`` of virtual size."""
    gib = -(-disk_bytes // 1024**3)  # whole GB, rounded up (vagrant-libvirt reads GB)
    return {"provider": PROVIDER, "format": "qcow2", "virtual_size": gib}


def box_vagrantfile() -> str:
    """The box's Vagrantfile: nothing beyond vagrant-libvirt's defaults."""
    return ("# mcclab vagrant-check box: the Debian 12 image of `make vm-check`.\n"
            'Vagrant.configure("2") do |config|\n'
            "  config.vm.provider :libvirt do |lv|\n"
            '    lv.disk_bus = "virtio"\n'
            "  end\n"
            "end\n")


def relay_hosts_line(hosts: list[str], gateway: str = MGMT_GATEWAY) -> str:
    """The guest's /etc/hosts line sending the mirror hosts to the registry relay."""
    return f"{gateway} {' '.join(sorted(hosts))}"


def home_vagrantfile(private_key: Path, mirror_hosts: list[str], boot_timeout: int = 1800,
                     gateway: str = MGMT_GATEWAY) -> str:
    """VAGRANT_HOME/Vagrantfile: this machine's settings, merged before the project's.

    The box's ``vagrant`` user accepts the check's key (the image's
    authorized_keys); the guest reaches the apt mirror through the relay on the
    management network's gateway (its only way out of the namespace).
    """
    line = relay_hosts_line(mirror_hosts, gateway)
    script = (f"grep -qxF {shlex.quote(line)} /etc/hosts || "
              f"echo {shlex.quote(line)} >> /etc/hosts")
    return ("# Written by mcclab's Vagrant check for one run (throw-away VAGRANT_HOME).\n"
            'Vagrant.configure("2") do |config|\n'
            f"  config.ssh.private_key_path = [{json.dumps(str(private_key))}]\n"
            "  config.ssh.insert_key = false\n"
            f"  config.vm.boot_timeout = {boot_timeout}\n"
            '  config.vm.provision "mcclab-check-registry-relay", type: "shell",\n'
            f"    inline: {json.dumps(script)}\n"
            "end\n")


def check_env(home: Path, extra_vars: dict[str, object], cpus: int, memory_mb: int,
              timeout_scale: int) -> dict[str, str]:
    """The environment of the check's vagrant and make commands (documented settings)."""
    return {
        "VAGRANT_HOME": str(home),
        "VAGRANT_DEFAULT_PROVIDER": PROVIDER,
        "VAGRANT_CHECKPOINT_DISABLE": "1",
        "VAGRANT_NO_COLOR": "1",
        "MCCLAB_VM_LIBVIRT_DRIVER": "qemu",
        "MCCLAB_VM_CPUS": str(cpus),
        "MCCLAB_VM_MEMORY": str(memory_mb),
        "MCCLAB_VM_ANSIBLE_EXTRA_VARS": json.dumps(extra_vars, sort_keys=True),
        "MCCLAB_TIMEOUT_SCALE": str(timeout_scale),
    }


def write_box(image: Path, folder: Path) -> Path:
    """``folder``/mcclab.box: metadata.json, Vagrantfile and ``image`` as box.img.

    box.img is a hard link to the cached image (same file system), so making the
    box copies nothing but the tar itself.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metadata.json").write_text(json.dumps(metadata(), sort_keys=True) + "\n")
    (folder / "Vagrantfile").write_text(box_vagrantfile())
    img = folder / "box.img"
    img.unlink(missing_ok=True)
    try:
        img.hardlink_to(image)
    except OSError:
        subprocess.run(["cp", "--sparse=always", str(image), str(img)], check=True)
    box = folder / "mcclab.box"
    subprocess.run(["tar", "-c", "-f", str(box), "-C", str(folder), "metadata.json",
                    "Vagrantfile", "box.img"], check=True)
    img.unlink()
    return box


def mirror_hosts(sources_texts: list[str]) -> list[str]:
    """Host names of the http(s) URIs in apt source files (what the relay may reach)."""
    hosts: list[str] = []
    for text in sources_texts:
        for m in re.finditer(r"https?://([A-Za-z0-9.-]+)", text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            if text[line_start:m.start()].lstrip().startswith("#"):
                continue
            if m.group(1) not in hosts:
                hosts.append(m.group(1))
    return hosts
