"""Traffic sources and sinks that run inside the lab (beside iperf3)."""
