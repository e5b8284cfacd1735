#!/bin/sh
# End-to-end in a private network namespace (unshare -n, gone when the test ends):
# pings over loopback through NFQUEUE 0 and the emulator at 5 ms each way. Checks the
# first stats file comes before any traffic, verdicts keep the delay, the stats keep
# being rewritten by the writer thread (normal priority, the loop SCHED_FIFO), and
# SIGTERM writes final counters and exits 0; then, run again with --late-log-us 1 (so
# ordinary timer lateness is logged), that the stats list late verdicts with wall-clock
# times. Under the sanitizers this is the run that covers main.c. Needs root, unshare and iptables: says "skipped" without them (and
# fails instead under CI=true, where the machine has them).
bin=$(realpath "${1:-./mcclab-linkemu}")
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! command -v iptables >/dev/null; then
	if [ "$CI" = true ]; then echo "FAIL netns test: needs root, unshare and iptables"; exit 1; fi
	echo "skipped (needs root, unshare and iptables)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "queue=0 rate_bps=10000000 delay_us=5000 limit_pkts=40 name=lo" >"$tmp/c.conf"
cat >"$tmp/run.sh" <<'EOS'
tmp=$1 bin=$2
fail() { echo "FAIL netns test: $*"; cat "$tmp/err"; kill -KILL "$pid" 2>/dev/null; exit 1; }
ip link set lo up
"$bin" --config "$tmp/c.conf" --stats "$tmp/s.json" --rt-priority 10 2>"$tmp/err" &
pid=$!
i=0
while [ ! -f "$tmp/s.json" ]; do
	i=$((i + 1)); [ $i -gt 250 ] && fail "no stats file after 5 s"; sleep 0.02
done
iptables -w -t mangle -A POSTROUTING -o lo -j NFQUEUE --queue-num 0 || fail "iptables"
out=$(ping -n -q -c 40 -i 0.01 -W 2 127.0.0.1) || fail "ping: $out"
echo "$out" | grep -q " 40 received" || fail "lost echoes: $out"
min=$(echo "$out" | sed -n 's|.* = \([0-9.]*\)/.*|\1|p')
awk -v m="$min" 'BEGIN { exit !(m >= 10.0 && m < 12.0) }' || fail "min RTT $min ms, want 10-12"
t1=$(sed -n 's/^{"time": \([0-9.]*\),.*/\1/p' "$tmp/s.json")
sleep 0.35
t2=$(sed -n 's/^{"time": \([0-9.]*\),.*/\1/p' "$tmp/s.json")
awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(b - a >= 0.2) }' || fail "stats not rewritten: $t1 -> $t2"
if grep -q '"realtime": true' "$tmp/s.json"; then
	classes=$(ps -L -o cls= -p "$pid" | tr -d ' ' | sort | tr '\n' ' ')
	[ "$classes" = "FF TS " ] || fail "threads' scheduling classes: $classes (want FF TS)"
fi
kill -TERM "$pid"
wait "$pid" || fail "exit status $? after SIGTERM"
grep -q '"pkts_in": 80, .*"pkts_out": 80, ' "$tmp/s.json" || fail "final stats: $(cat "$tmp/s.json")"
grep -q '"late_log_us": 500, ' "$tmp/s.json" || fail "default late_log_us: $(cat "$tmp/s.json")"

# Late-verdict events: with a 1 us threshold nearly every timer wakeup is logged.
# Their times are CLOCK_REALTIME ns, so they must lie within this run's wall clock.
t0=$(date +%s%N)
"$bin" --config "$tmp/c.conf" --stats "$tmp/s2.json" --rt-priority 10 --late-log-us 1 \
	2>"$tmp/err" &
pid=$!
i=0
while [ ! -f "$tmp/s2.json" ]; do
	i=$((i + 1)); [ $i -gt 250 ] && fail "no stats file after 5 s (late log)"; sleep 0.02
done
out=$(ping -n -q -c 10 -i 0.01 -W 2 127.0.0.1) || fail "ping (late log): $out"
kill -TERM "$pid"
wait "$pid" || fail "exit status $? after SIGTERM (late log)"
t1=$(date +%s%N)
python3 - "$tmp/s2.json" "$t0" "$t1" <<'EOP' || fail "late events: $(cat "$tmp/s2.json")"
import json, sys
q = json.load(open(sys.argv[1]))["queues"]["0"]
t0, t1 = int(sys.argv[2]), int(sys.argv[3])
ev, total = q["late_events"], q["late_events_total"]
checks = {
    "late_log_us is 1": q["late_log_us"] == 1,
    "some events": total > 0 and len(ev) > 0,
    "ring holds min(total, 256)": len(ev) == min(total, 256),
    "at most one per verdict": total <= q["pkts_out"],
    "t0 <= due <= released <= t1": all(t0 <= d <= r <= t1 for d, r in ev),
    "each at least 1 us late": all(r - d >= 1000 for d, r in ev),
    "oldest first": all(a[1] <= b[1] for a, b in zip(ev, ev[1:])),
}
bad = [k for k, ok in checks.items() if not ok]
if bad:
    print("failed: " + ", ".join(bad) + f" (t0 {t0}, t1 {t1})")
sys.exit(1 if bad else 0)
EOP
echo "2 passed, 0 failed"
EOS
exec unshare -n sh "$tmp/run.sh" "$tmp" "$bin"
