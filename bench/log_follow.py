"""Cost of reading the iperf3 servers' logs once a second: whole logs against appended lines.

    python bench/log_follow.py [--servers 64] [--seconds 1000]

The runner (``IperfWatch``) and the exporter (``SourceTally``) look at every iperf3
server's log once a second. Both ways are timed in the same run, on the same files,
interleaved second by second:

* **old**: read the whole log and parse it (``latest_interval_ends`` of its text);
* **new**: read and parse only the lines appended since the last look
  (``IperfFollower``).

Each simulated second appends one interval report to each of ``--servers`` logs
(what ``iperf3 -s --forceflush`` writes), then each way reads every log. Prints the
thread CPU per second of run for both at a few points of a ``--seconds``-long run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcclab.experiment.tables import IperfFollower, latest_interval_ends  # noqa: E402

HEAD = ("-----------------------------------------------------------\n"
        "Server listening on 5201 (test #1)\n"
        "-----------------------------------------------------------\n"
        "Accepted connection from 10.0.1.2, port 40000\n"
        "[  5] local 10.0.2.2 port 5201 connected to 10.0.1.2 port 40002\n"
        "[ ID] Interval           Transfer     Bitrate\n")


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=1000)
    args = ap.parse_args(argv)
    marks = sorted({10, args.seconds // 10, args.seconds // 2, args.seconds})
    with tempfile.TemporaryDirectory(prefix="mcb-logs-") as folder:
        logs = [Path(folder) / f"iperf-{i}.txt" for i in range(args.servers)]
        for log in logs:
            log.write_text(HEAD)
        followers = [IperfFollower(log) for log in logs]
        print(f"{args.servers} iperf3 logs, one report each a second; thread CPU per "
              "second of run to look at all of them:")
        print(f"{'at second':>10} {'old: whole logs':>17} {'new: appended':>15} {'new / old':>10}")
        for second in range(1, args.seconds + 1):
            line = (f"[  5] {second - 1:>7.2f}-{second:<7.2f}  sec   100 KBytes   "
                    f"819 Kbits/sec\n")
            for log in logs:
                with log.open("a") as fh:
                    fh.write(line)
            t = time.thread_time()
            for log in logs:
                old = latest_interval_ends(log.read_text(errors="replace"))
            t_old = time.thread_time() - t
            t = time.thread_time()
            for follower in followers:
                new = follower.new_intervals()
            t_new = time.thread_time() - t
            if old[-1] != new[-1].end:
                print("the two ways disagree: the comparison is void", file=sys.stderr)
                return 1
            if second in marks:
                print(f"{second:>10} {t_old * 1e3:>14.2f} ms {t_new * 1e3:>12.2f} ms "
                      f"{t_new / t_old:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
