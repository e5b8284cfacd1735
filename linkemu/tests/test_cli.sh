#!/bin/sh
# Config rejection must exit 2 with a message naming line and key; needs no
# root and no netlink (--check stops after parsing).
bin=${1:-./mcclab-linkemu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

expect() { # name, want_rc, want_stderr_substring, config_text
	printf '%s\n' "$4" >"$tmp/c.conf"
	"$bin" --check --config "$tmp/c.conf" 2>"$tmp/err"
	rc=$?
	if [ "$rc" = "$2" ] && { [ -z "$3" ] || grep -qF -- "$3" "$tmp/err"; }; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "FAIL $1: rc=$rc stderr=$(cat "$tmp/err")"
	fi
}

expect good 0 "" "# two links
queue=0 rate_bps=1000000 delay_us=50000 name=r1-eth0
queue=1 disc=red limit_pkts=40 min_th=5 max_th=15 max_p=0.1 weight=0.002 gentle=1"
expect unknown-key 2 "c.conf:2: key 'foo': unknown key" "queue=0
queue=1 foo=1"
expect bad-value 2 "c.conf:1: key 'loss'" "queue=0 loss=2"
expect dup-queue 2 "c.conf:2: key 'queue': queue 0 already defined" "queue=0
queue=0"
expect empty 2 "no queues defined" "# nothing"
"$bin" --check --config /nonexistent/x.conf 2>/dev/null
if [ $? = 2 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL missing file"; fi
printf 'queue=0\n' >"$tmp/ok.conf"
"$bin" --check --config "$tmp/ok.conf" --spin-us 100 --spin-budget-ms 50 2>/dev/null
if [ $? = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL spin budget"; fi
"$bin" --check --config "$tmp/ok.conf" --spin-budget-ms 1001 2>"$tmp/err"
if [ $? = 2 ] && grep -qF -- "--spin-budget-ms: bad value '1001'" "$tmp/err"; then
	pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL spin budget range"; fi
for v in -1 abc "" 60000001; do
	"$bin" --check --config "$tmp/ok.conf" --late-log-us "$v" 2>"$tmp/err"
	if [ $? = 2 ] && grep -qF -- "--late-log-us: bad value '$v'" "$tmp/err"; then
		pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL late log '$v'"; fi
done
"$bin" --check --config "$tmp/ok.conf" --late-log-us 0 2>/dev/null
if [ $? = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL late log off"; fi
"$bin" --bogus 2>/dev/null
if [ $? = 2 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL bad option"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
