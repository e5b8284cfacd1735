"""Measurement tools run against a live lab, apart from what they measure.

Multicast reach (``mcast`` sender and receiver, ``counters`` per-group nft
counters, ``reach`` the checks built on them) and link fidelity (``burst`` the
timestamping sender, receiver, pinger and stall watcher run inside nodes,
``fidelity`` their runners and statistics). Emulation itself lives in
``mcclab.links`` and routing in ``mcclab.routing``; probes only observe.
"""
