"""`make vm-check`: build a Debian 12 VM from Debian packages, boot it under QEMU (TCG),
provision it with the project's playbook and run the kernel link backend, a multicast
join/leave check and the quick default experiment inside it. See docs/vm-check.md.
"""
