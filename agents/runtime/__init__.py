"""The shared agent runtime: wire format, session model, event loop, membership, statistics,
event log, metrics, and the glue (:mod:`agents.runtime.agent`) between a protocol core and
its environment (real sockets or the simulator)."""
