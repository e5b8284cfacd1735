"""The command line and the root check that bench/agents.py and bench/onoff.py share
(bench/common.py), and that both scripts take them from there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import bench.agents
import bench.onoff
from bench.common import parse_bench_args, require_root


def test_counts_window_then_the_benchmarks_own_then_keep():
    def own(parser):  # noqa: ANN001, ANN202
        parser.add_argument("--seed", type=int, default=1)

    args = parse_bench_args("First paragraph.\n\nMore.", [8, 84], [], own)
    assert vars(args) == {"counts": [8, 84], "window": 10.0, "seed": 1, "keep": None}
    args = parse_bench_args("d", (3,), ["--counts", "1", "2", "--window", "2.5", "--seed",
                                        "7", "--keep", "/tmp/k"], own)
    assert (args.counts, args.window, args.seed, args.keep) == ([1, 2], 2.5, 7, Path("/tmp/k"))
    with pytest.raises(SystemExit):
        parse_bench_args("d", [1], ["--bogus"])


def test_help_lists_the_options_in_order_under_the_docs_first_paragraph(capsys):
    with pytest.raises(SystemExit) as done:
        bench.agents.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    # the description is the docstring's first paragraph, wrapped
    assert text.split("\n\n")[1].split() == bench.agents.__doc__.split("\n\n")[0].split()
    order = [text.index(flag) for flag in ("--counts", "--window", "--rate", "--no-scrape",
                                           "--keep")]
    assert order == sorted(order)


@pytest.mark.parametrize(("script", "message"), [
    (bench.onoff, "bench/onoff.py needs root (a network namespace)"),
    (bench.agents, "bench/agents.py needs root (network namespaces)"),
])
def test_without_root_each_benchmark_says_why_and_exits_2(script, message, monkeypatch,
                                                          capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert script.main(["--counts", "1"]) == 2
    assert capsys.readouterr().err == message + "\n"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert require_root("x", "y") and capsys.readouterr().err == ""
