#!/usr/bin/env python3
"""Print the slowest tests and the totals from pytest's JUnit XML (``make test`` writes it).

usage: slowest.py JUNIT_XML [N]     (N defaults to 20)

Each test's time is setup + call + teardown, so a module's lab bring-up counts
against its first test and its teardown against its last. Standard library only:
CI runs it whether or not the project's venv was built.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def main(argv: list[str]) -> int:
    """Print the table; 0 on success, 2 when the file is missing or unreadable."""
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    top = int(argv[2]) if len(argv) > 2 else 20
    try:
        root = ET.parse(argv[1]).getroot()
    except (OSError, ET.ParseError) as exc:
        print(f"no test durations: {argv[1]}: {exc}", file=sys.stderr)
        return 2
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    cases = []
    for case in root.iter("testcase"):
        if not case.get("name"):
            continue  # the placeholder pytest writes when the session is stopped mid-test
        outcome = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "ok")
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        cases.append((float(case.get("time", 0) or 0), outcome, name))
    cases.sort(reverse=True)
    wall = sum(float(s.get("time", 0) or 0) for s in suites)
    total = sum(t for t, _, _ in cases)
    print(f"slowest {min(top, len(cases))} of {len(cases)} tests (setup + call + teardown):")
    for t, outcome, name in cases[:top]:
        print(f"  {t:8.1f}s  {outcome:7s} {name}")
    counts = {k: sum(1 for _, o, _ in cases if o == k) for k in ("ok", "failure", "error",
                                                                   "skipped")}
    print(f"total: {len(cases)} tests, {total:.0f}s in tests, {wall:.0f}s wall "
          f"(pytest's own count); ok {counts['ok']}, failures {counts['failure']}, "
          f"errors {counts['error']}, skipped {counts['skipped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
