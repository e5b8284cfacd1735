"""Every path, ``mcclab`` command and ``make`` target the README names exists; the docs
name nothing outside the repository.

The README is read as a user reads it: the inline code spans and code blocks
hold what one types or opens, and markdown links point at files. Each of those
is checked against the tree, the Typer app (walked as Click commands, so a
subcommand or option that is gone fails here) and the Makefile's targets.

Paths in the docs are checked the same way where they are links or name a file
under one of the repository's own folders; a doc also may not point outside
the repository (a home or scratch folder, a sibling checkout) or speak of the
work that produced it ("the issue", "the brief").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import typer.main

from mcclab.cli import app

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"

# Docs (relative to docs/) being rewritten into reference: every check runs on them,
# but their violations are tolerated until the rewrite lands. An entry may only go:
# a listed doc that passes fails the test until it is taken off. (Empty: the
# rewrite of webrc.md, stair.md, ormcc.md and rlc.md has landed.)
DOCS_UNDER_REWRITE: set[str] = set()

# What a run writes into its own folder (results/<experiment>/<run-id>/), as the
# README's table of a folder names it: not in the repository, so each is checked
# against the code that writes it instead (its name must appear in mcclab/).
RUN_FOLDER_ROOTS = {"run.json", "spec.yaml", "topology.yaml", "env.json", "summary.json",
                    "report.html", "logs", "tables", "figures", "captures", "sessions"}

# Slash-words in code spans that are not paths of this repository, with what they are.
NOT_PATHS = {
    "debian/bookworm64": "the Vagrant box",
    "mcclab/<lab>": "the lab's cgroup (under the cgroup v2 root)",
}

# Where a path outside the repository shows that a doc was written against a
# particular machine or session rather than for a reader of the repository.
OUTSIDE = re.compile(r"(?<![\w.])(/work/|/home/|/root/|\.\./shared\b|~/)")
# A scratch path is allowed only where the product itself uses it (a default in
# the Makefile or the code), since then it is a fact about mcclab.
SCRATCH = re.compile(r"(?<![\w.])/tmp/[\w.<>${}()/-]*")
WORK_TALK = re.compile(r"\b(?:the|this|that) (?:issue|brief)(?:'s)?\b|\bissue note\b"
                       r"|\bissue \d+\b", re.IGNORECASE)

INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"<[^>]*>|\b[A-Z][A-Z0-9_]*\b|\.\.\.|\*")
FILE_SUFFIX = re.compile(r"\.(md|py|ya?ml|json|ini|cfg|toml|txt|html|csv|gz|c|h|sh|ns|j2)$")


@dataclass(frozen=True)
class Found:
    """One thing a document names, and the line it is on."""

    doc: str
    line: int
    text: str


def _line_of(text: str, offset: int) -> int:
    """1-based line number of a character offset."""
    return text.count("\n", 0, offset) + 1


def code_spans(text: str, doc: str = "README.md") -> list[Found]:
    """The inline code spans (possibly wrapped over two lines) and every line of the
    code blocks."""
    blocks = list(FENCE.finditer(text))
    out = []
    for block in blocks:
        first = _line_of(text, block.start(1))
        out += [Found(doc, first + k, line) for k, line in enumerate(block.group(1).splitlines())
                if line.strip()]
    # Inline spans outside the blocks (a fence's own backticks are not a span).
    masked = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out += [Found(doc, _line_of(masked, m.start(1)), " ".join(m.group(1).split()))
            for m in INLINE.finditer(masked)]
    return out


def link_targets(text: str, doc: str) -> list[Found]:
    """Markdown link targets that are files of the repository (not URLs or anchors)."""
    out = []
    for m in LINK.finditer(text):
        target = m.group(1).split("#", 1)[0]
        if target and not re.match(r"[a-z]+:", target):
            out.append(Found(doc, _line_of(text, m.start(1)), target))
    return out


# ---- paths ----

@cache
def _top_level() -> frozenset[str]:
    """The repository's top-level entries that a path may start with."""
    return frozenset(p.name for p in REPO.iterdir() if not p.name.startswith(".")
                     or p.name == ".ci")


@cache
def _product_text() -> str:
    """The code and build files a run-folder name or a scratch path must appear in."""
    files = [REPO / "Makefile", *sorted((REPO / "mcclab").rglob("*.py")),
             *sorted((REPO / "agents").rglob("*.py"))]
    return "\n".join(p.read_text(errors="replace") for p in files)


def looks_like_path(word: str) -> bool:
    """A word one would open or cd into: a slash inside or a file suffix, no spaces."""
    if not word or " " in word or "://" in word or word.startswith(("-", "$", "/", "~")):
        return False
    if "=" in word:  # a setting such as MCCLAB_VM=0
        return False
    return "/" in word or bool(FILE_SUFFIX.search(word))


def path_problem(word: str, base: Path = REPO) -> str | None:
    """Why ``word``, a repository path relative to ``base``, does not name something there.

    A placeholder (``<lab>``, ``EXP``, ``...``) ends the checked part: what comes
    before it must exist. A path into a run's folder is checked against the code
    that writes it, and ``results/<experiment>/...`` against the experiments.
    """
    word = word.rstrip(".,;:")
    if word in NOT_PATHS or (base / word).exists():
        return None  # (an all-caps name such as README.md is a file, not a placeholder)
    placeholder = PLACEHOLDER.search(word)
    fixed = word[:placeholder.start()] if placeholder else word
    fixed = fixed.rstrip("/") if placeholder is None else fixed.rpartition("/")[0]
    parts = Path(word).parts
    if base == REPO and parts and parts[0] == "results":
        named = parts[1] if len(parts) > 1 and not placeholder else None
        if named not in (None, "index.html") and \
                not (REPO / "experiments" / f"{named}.yaml").exists():
            return f"{word}: no experiment {named!r} in experiments/"
        return None
    if base == REPO and parts and parts[0].rstrip("/") in RUN_FOLDER_ROOTS:
        name = Path(fixed).name if fixed else parts[0]
        if name and name not in _product_text():
            return f"{word}: a run folder's {name!r}, but nothing in mcclab/ writes it"
        return None
    if not fixed:
        return None
    if base == REPO and Path(fixed).parts[0] not in _top_level():
        return f"{word}: {Path(fixed).parts[0]!r} is not a top-level entry of the repository"
    if not (base / fixed).exists():
        return f"{word}: no such file or folder"
    return None


def _paths_in(spans: list[Found]) -> list[Found]:
    """The spans that are one path each."""
    return [s for s in spans if looks_like_path(s.text)]


# ---- commands ----

@dataclass(frozen=True)
class Command:
    """One command of the CLI: its subcommands (a group) and its option names."""

    options: frozenset[str]
    sub: dict[str, Command]


@cache
def cli_tree() -> Command:
    """The Typer app as a tree of commands, read through Click."""

    def walk(cmd) -> Command:  # noqa: ANN001 - a Click command
        options = frozenset(o for p in cmd.params for o in (*p.opts, *p.secondary_opts)
                            if o.startswith("-"))
        children = getattr(cmd, "commands", {}) or {}
        return Command(options | {"--help"}, {n: walk(c) for n, c in children.items()})

    return walk(typer.main.get_command(app))


def command_problems(text: str, tree: Command | None = None) -> list[str]:
    """What is wrong with each ``mcclab ...`` command line in ``text``.

    Each word after ``mcclab`` must be a subcommand while the command is a group
    (``a|b`` names alternatives, each checked); once it is a leaf, every
    ``--option`` up to a bare ``--`` must be one of its options.
    """
    tree = tree or cli_tree()
    problems = []
    for m in re.finditer(r"(?:^|(?<=[\s(`|/]))mcclab((?:\s+[^\s`]+)*)", text):
        words = m.group(1).replace("\\|", "|").split()
        frontier = [("mcclab", tree)]
        rest = words
        while rest and any(node.sub for _, node in frontier) \
                and not rest[0].startswith(("-", "[")):
            names = rest[0].split("|")
            step = []
            for name, node in frontier:
                for alt in names:
                    if alt not in node.sub:
                        problems.append(f"{name} has no subcommand {alt!r}")
                    else:
                        step.append((f"{name} {alt}", node.sub[alt]))
            frontier, rest = step, rest[1:]
        options = []
        for word in rest:
            if word == "--":
                break
            options += re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", word)
        for name, node in frontier:
            problems += [f"{name} has no option {o}" for o in options if o not in node.options]
    return problems


# ---- make ----

@cache
def make_targets() -> frozenset[str]:
    """The Makefile's targets (rules and .PHONY names)."""
    # A backslash continues a line (the .PHONY list runs over several).
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    targets = set()
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.][A-Za-z0-9_. -]*?)\s*::?(?!=)", line)
        if m and not line.startswith("\t"):
            targets.update(t for t in m.group(1).split() if not t.startswith("."))
        if line.startswith(".PHONY:"):
            targets.update(line.split(":", 1)[1].split())
    return frozenset(targets - {"$(MCCLAB)"})


def make_problems(text: str, targets: frozenset[str] | None = None) -> list[str]:
    """Each ``make TARGET`` in ``text`` whose target the Makefile lacks."""
    targets = targets if targets is not None else make_targets()
    return [f"make {t}: no such target in the Makefile"
            for t in re.findall(r"(?:^|(?<=[\s(`;&]))make\s+(?:-\S+\s+)*([a-z][\w-]*)", text)
            if t not in targets]


# ---- the checkers themselves: a typo must fail ----

def test_a_mistyped_path_fails():
    assert path_problem("docs/setup.md") is None
    assert path_problem("docs/stup.md") is not None
    assert path_problem("mcclab/routing/runner.py") is None
    assert path_problem("mcclab/net/routers.py") is not None
    assert path_problem("experiments/EXP.yaml") is None  # a placeholder: the folder exists
    assert path_problem("experiment/EXP.yaml") is not None
    assert path_problem("tables/per_second.csv") is None
    assert path_problem("tables/per_secnd.csv") is not None
    assert path_problem("results/default/20261121-203412-e1a3") is None
    assert path_problem("results/defualt/20261121-203412-e1a3") is not None


def test_a_mistyped_command_or_option_fails():
    assert command_problems("`mcclab run default --profile quick`") == []
    assert command_problems("`mcclab runn default`") == ["mcclab has no subcommand 'runn'"]
    assert command_problems("`mcclab run EXP --profil quick`") == \
        ["mcclab run has no option --profil"]
    assert command_problems("`mcclab topo show FILE [--dot]`") == []
    assert command_problems("`mcclab lab list|start|chek`") == \
        ["mcclab lab has no subcommand 'chek'"]
    assert command_problems("`mcclab exec r1 -- vtysh -c 'x' --not-ours`") == []


def test_a_mistyped_make_target_fails():
    assert make_problems("run `make experiment` or `make lint`") == []
    assert make_problems("`make experimnt`") == ["make experimnt: no such target in the Makefile"]
    assert make_problems("sudo make test PYTEST_ARGS=x") == []


def test_work_talk_and_outside_paths_are_seen():
    assert WORK_TALK.search("as the issue asks")
    assert WORK_TALK.search("see the brief")
    assert not WORK_TALK.search("an issue with timers")
    assert OUTSIDE.search("(`/work/shared/papers/ormcc.md`)")
    assert OUTSIDE.search("(`../shared/papers/x.md`)")
    assert not OUTSIDE.search("`/run/mcclab/<lab>/`")


# ---- the README ----

@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text()


def test_readme_paths_exist(readme):
    found = _paths_in(code_spans(readme)) + link_targets(readme, "README.md")
    assert len(found) > 30  # the README's tables were read at all
    bad = [f"{f.doc}:{f.line}: {p}" for f in found if (p := path_problem(f.text))]
    assert not bad, "\n".join(bad)


def test_readme_commands_exist(readme):
    spans = [s for s in code_spans(readme) if re.search(r"(?:^|\s)mcclab\s", s.text)]
    assert len(spans) > 15
    bad = [f"{s.doc}:{s.line}: {p}" for s in spans for p in command_problems(s.text)]
    assert not bad, "\n".join(bad)


def test_readme_make_targets_exist(readme):
    spans = [s for s in code_spans(readme) if re.search(r"(?:^|\s)make\s", s.text)]
    assert len(spans) > 5
    bad = [f"{s.doc}:{s.line}: {p}" for s in spans for p in make_problems(s.text)]
    assert not bad, "\n".join(bad)


def _layout_paths(readme: str) -> list[str]:
    """The first column of the README's layout table: every path it names."""
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return [m.rstrip("/") for row in rows for m in re.findall(r"`([^`]+)`", row)]


def test_readme_layout_names_every_folder(readme):
    listed = _layout_paths(readme)
    assert "mcclab/model" in listed
    # The top-level folders (tooling caches and build output aside) and the
    # packages of mcclab/ each need a row of their own, or a row of a folder inside.
    ignored = {"__pycache__", "build", ".git", ".vagrant", ".pytest_cache", ".ruff_cache",
               ".venv"}
    folders = [p.name for p in REPO.iterdir() if p.is_dir() and p.name not in ignored
               and not p.name.endswith(".egg-info") and (p.name == ".ci"
                                                          or not p.name.startswith("."))]
    folders += [f"mcclab/{p.name}" for p in (REPO / "mcclab").iterdir()
                if p.is_dir() and any(p.glob("*.py"))]
    missing = sorted(f for f in folders
                     if not any(entry == f or entry.startswith(f + "/") for entry in listed))
    assert not missing, f"the README's layout table has no row for: {missing}"


# ---- the docs ----

def _doc_path_problems(doc: Path) -> list[str]:
    """Broken links, and code spans naming a file under a repository folder that is not
    there (a path starting with docs/, mcclab/, agents/, ...)."""
    text = doc.read_text()
    bad = [f"{f.doc}:{f.line}: {p}" for f in link_targets(text, _name(doc))
           if (p := path_problem(f.text, doc.parent))
           and path_problem(f.text, REPO)]  # a link may be relative to docs/ or the root
    for f in _paths_in(code_spans(text, _name(doc))):
        first = Path(f.text).parts[0]
        if first in _top_level() and first != "results" and (p := path_problem(f.text)):
            bad.append(f"{f.doc}:{f.line}: {p}")
    return bad


def _doc_outside_problems(doc: Path) -> list[str]:
    """Paths outside the repository and talk of the work that wrote the doc."""
    bad = []
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        bad += [f"{_name(doc)}:{number}: names {m.group(0)!r} outside the repository"
                for m in OUTSIDE.finditer(line)]
        bad += [f"{_name(doc)}:{number}: names {m.group(0)!r}, a scratch path mcclab does "
                "not use" for m in SCRATCH.finditer(line) if m.group(0) not in _product_text()]
        bad += [f"{_name(doc)}:{number}: {m.group(0)!r} (say what is true, not who asked)"
                for m in WORK_TALK.finditer(line)]
    return bad


def _all_docs() -> list[Path]:
    """Every markdown doc under docs/, notebooks included."""
    return sorted(DOCS.rglob("*.md"))


def _name(doc: Path) -> str:
    """A doc's path relative to docs/ (``notebook/ormcc.md`` is not ``ormcc.md``)."""
    return doc.relative_to(DOCS).as_posix()


def _problems(doc: Path) -> list[str]:
    """Everything wrong with one doc."""
    return _doc_path_problems(doc) + _doc_outside_problems(doc)


def test_docs_name_only_what_is_in_the_repository():
    docs = {_name(doc): doc for doc in _all_docs()}
    assert len(docs) > 15
    problems = {name: _problems(doc) for name, doc in docs.items()}
    bad = [p for name, found in problems.items() if name not in DOCS_UNDER_REWRITE
           for p in found]
    assert not bad, "\n".join(bad)
    gone = sorted(DOCS_UNDER_REWRITE - set(docs))
    clean = sorted(name for name in DOCS_UNDER_REWRITE - set(gone) if not problems[name])
    assert not gone and not clean, \
        f"take {gone + clean} off DOCS_UNDER_REWRITE: they are gone or pass now"
