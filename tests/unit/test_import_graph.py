"""The import graph of the mcclab package: no cycles, and analysis reads only the results folder.

The graph is read from the source with :mod:`ast`, so it holds every import a
module can run: at its top and inside its functions (an import moved into a
function still runs, and had hidden a cycle in the analysis). Only imports under
``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Cycles still to remove; an entry here may only shrink.
KNOWN_CYCLES: set[frozenset[str]] = set()

# The runner writes results folders and the analysis reads them: neither package
# imports the other. What both need of the spec (reference quantities, figure
# references, TCP models, the plugin registry that checks the names a spec uses)
# lives in these modules of mcclab.model, which import neither package; the runner
# gets its report builder injected by the CLI (RunOptions.analyse, SweepOptions.report).
SHARED_SPEC_MODULES = ("mcclab.model.quantities", "mcclab.model.tcp_models",
                       "mcclab.model.plugins")


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name (a package by its own)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING:`` (never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def import_graph(root: Path, package: str = "mcclab") -> dict[str, set[str]]:
    """For each module of the package, the package's modules it imports anywhere in its code.

    ``from a.b import c`` is an edge to ``a.b.c`` when that is a module, else to
    ``a.b``; a relative import is resolved against the importing module. The
    parent packages Python initialises on the way are not edges: every submodule
    has them, and they cannot close a cycle unless a package imports its own
    submodule back, which shows as that submodule's edge.
    """
    modules = _modules(root, package)

    def owner(name: str) -> str | None:
        """The longest module name that ``name`` starts with."""
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_only(tree)
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    prefix = here[:len(here) - node.level + 1]
                    base = ".".join([*prefix, base] if base else prefix)
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                               for a in node.names)
        graph[name] = {m for t in targets if (m := owner(t)) is not None and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's cycles: each strongly connected component of two or more modules, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        """Tarjan's algorithm, with an explicit stack (the graph is a few hundred deep)."""
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def closed_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first), to show."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & set(component)):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")


def _write(root: Path, files: dict[str, str]) -> Path:
    """A package tree under ``root`` from relative paths and their source."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# ---- the finder itself, on small packages ----

def test_an_import_inside_a_function_closes_a_cycle(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/report.py": "from pkg.sweep import load\n",
        "pkg/sweep.py": "def build():\n    from pkg import report\n    return report\n",
        "pkg/alone.py": "import json\n",
    })
    graph = import_graph(root, "pkg")
    assert graph["pkg.sweep"] == {"pkg.report"}
    assert cycles(graph) == [["pkg.report", "pkg.sweep"]]
    assert closed_path(graph, cycles(graph)[0]) == ["pkg.report", "pkg.sweep", "pkg.report"]


def test_relative_and_package_imports_resolve_to_modules(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "from . import a\n",
        "pkg/a.py": "from .sub import b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from ..a import thing\nfrom pkg.sub import c\n",
        "pkg/sub/c.py": "import pkg.sub\n",
    })
    graph = import_graph(root, "pkg")
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.sub.b"}, "pkg.sub": set(),
                     "pkg.sub.b": {"pkg.a", "pkg.sub.c"}, "pkg.sub.c": {"pkg.sub"}}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_type_checking_imports_never_run_and_are_not_edges(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                     "    from pkg.a import A\nelse:\n    import json\n"),
    })
    graph = import_graph(root, "pkg")
    assert graph["pkg.b"] == set()
    assert cycles(graph) == []


# ---- the mcclab package ----

@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(REPO)


def test_the_graph_sees_the_package(graph):
    # A walk that found nothing would pass every check below.
    assert len(graph) > 100
    assert "mcclab.analysis.results" in graph["mcclab.analysis.summary"]


def test_no_import_cycle_among_mcclab_modules(graph):
    found = [c for c in cycles(graph) if frozenset(c) not in KNOWN_CYCLES]
    assert not found, "import cycles: " + "; ".join(
        f"{' -> '.join(closed_path(graph, c))} (of {len(c)} modules)" for c in found)


def _edges(graph: dict[str, set[str]], source: str, target: str) -> list[str]:
    """Every import from a module under ``source`` of a module under ``target``."""
    def under(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    return sorted(f"{module} -> {imported}" for module, targets in graph.items()
                  if under(module, source) for imported in targets if under(imported, target))


def test_the_edge_finder_sees_a_cross_package_import(tmp_path):
    # The two checks below pass on an empty answer; this one shows _edges can answer.
    root = _write(tmp_path, {
        "pkg/__init__.py": "", "pkg/analysis/__init__.py": "",
        "pkg/analysis/report.py": "def f():\n    from pkg.experiment.spec import X\n",
        "pkg/experiment/__init__.py": "", "pkg/experiment/spec.py": "X = 1\n",
        "pkg/experimental.py": "from pkg.analysis import report\n",
    })
    graph = import_graph(root, "pkg")
    assert _edges(graph, "pkg.analysis", "pkg.experiment") == [
        "pkg.analysis.report -> pkg.experiment.spec"]
    assert _edges(graph, "pkg.experiment", "pkg.analysis") == []  # experimental is not under it


def test_analysis_imports_nothing_from_the_experiment_package(graph):
    bad = _edges(graph, "mcclab.analysis", "mcclab.experiment")
    assert not bad, "analysis imports the experiment package (read the folder through " \
                    "mcclab.resultsdir, the spec through mcclab.model): " + "; ".join(bad)


def test_the_experiment_package_imports_nothing_from_analysis(graph):
    bad = _edges(graph, "mcclab.experiment", "mcclab.analysis")
    assert not bad, "the experiment package imports the analysis (inject it: " \
                    "RunOptions.analyse, SweepOptions.report): " + "; ".join(bad)


@pytest.mark.parametrize("module", SHARED_SPEC_MODULES)
def test_the_shared_spec_modules_import_neither_package(graph, module):
    assert module in graph
    assert not {m for m in graph[module]
                if m.startswith(("mcclab.analysis", "mcclab.experiment"))}, graph[module]


def test_the_results_folder_contract_depends_on_nothing_in_mcclab(graph):
    # Writer and reader both import it; it must not pull either in.
    assert graph.get("mcclab.resultsdir") == set()
