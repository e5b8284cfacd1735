"""Link emulation: the per-direction rate, queue, delay and loss of every link.

Two backends emulate the same model (``LinkParams`` in mcclab/model/topology.py):

* ``kernel``: a tc tree per direction (prio: IGMP, PIM and ARP to a netem without
  loss, the rest to netem -> htb -> pfifo or red) on the transmitting
  interface, built as data in ``mcclab.links.kernel``;
* ``userspace``: the NFQUEUE emulator ``linkemu/mcclab-linkemu``, one process
  per node, one queue per direction, fail closed (``mcclab.links.userspace``).

``start_links(lab, progress)`` is the lab's hook; the returned LinkEmulation
reports its ``backend``, raises from ``check()`` if an emulator died, and gives
per-direction counters from ``counters()`` / ``records()``. See docs/links.md.
"""

from mcclab.links.counters import LinkCounters
from mcclab.links.emulation import (
    KernelEmulation,
    LinkEmulation,
    LinkEmulationError,
    UserspaceEmulation,
    link_problems,
    select_backend,
    selection_reason,
    start_links,
)
from mcclab.links.plan import Direction, Placement, plan_directions

__all__ = [
    "Direction",
    "KernelEmulation",
    "LinkCounters",
    "LinkEmulation",
    "LinkEmulationError",
    "Placement",
    "UserspaceEmulation",
    "link_problems",
    "plan_directions",
    "select_backend",
    "selection_reason",
    "start_links",
]
