"""Just enough PromQL reading to check dashboards: which metrics and labels an expression uses.

This is not a parser of the whole language. It tokenises an expression and
classifies identifiers by context: a name followed by ``(`` is a function or
aggregation, names in ``by (...)`` / ``on (...)`` lists and on the left of a
matcher are labels, keywords are skipped, anything else is a metric name. The
dashboards keep to the subset it understands; anything else (``label_replace``
and ``label_join``, which make up labels from strings) is refused, so a check
can never pass by not seeing something.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Grafana's variables, replaced by representative values before reading or running.
GRAFANA_DEFAULTS = {"__rate_interval": "5s", "__interval": "1s", "__range": "60s"}

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<duration>\[[^\]]*\])
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<matchop>=~|!~|!=|==|<=|>=|=)
  | (?P<punct>[(){},^*/%+\-<>@])
""", re.VERBOSE)

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "inf", "nan", "start", "end"}
LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
REFUSED_FUNCTIONS = {"label_replace", "label_join"}


class PromqlError(ValueError):
    """An expression outside the subset this reader understands."""


@dataclass(frozen=True)
class Matcher:
    """One label matcher inside ``{...}``."""

    label: str
    op: str
    value: str


@dataclass
class Usage:
    """What an expression refers to."""

    metrics: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)  # in matchers and by/on lists
    matchers: list[tuple[str | None, Matcher]] = field(default_factory=list)  # (metric, m)
    grouping: list[tuple[set[str], set[str]]] = field(default_factory=list)  # (metrics, labels)

    def label_values(self, label: str) -> set[str]:
        """Values an equality matcher on ``label`` asks for anywhere in the expression."""
        return {m.value for _, m in self.matchers if m.label == label and m.op == "="}


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Replace Grafana's ``$name`` and ``${name}`` by values (unknown names stay)."""
    values = {**GRAFANA_DEFAULTS, **variables}

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)


def _tokens(expr: str) -> list[tuple[str, str]]:
    """(kind, text) pairs; raises on characters outside the subset."""
    out, pos = [], 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise PromqlError(f"cannot read {expr[pos:pos + 20]!r} in {expr!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind != "ws":
            out.append((kind, m.group(0)))
    return out


def _unquote(text: str) -> str:
    """The value of a PromQL string literal."""
    body = text[1:-1]
    return body if text[0] == "`" else re.sub(r"\\(.)", r"\1", body)


def read(expr: str) -> Usage:
    """The metrics, labels and matchers an expression uses (variables substituted first)."""
    toks = _tokens(substitute(expr, {"run": "RUN"}))
    usage = Usage()
    i = 0
    last_metric: str | None = None
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ("", "")
        if kind == "ident":
            if text in REFUSED_FUNCTIONS:
                raise PromqlError(f"{text} is not supported in dashboards: {expr!r}")
            if text in LABEL_LIST_KEYWORDS and nxt[1] == "(":
                j = i + 2
                group: set[str] = set()
                while j < len(toks) and toks[j][1] != ")":
                    if toks[j][0] == "ident":
                        group.add(toks[j][1])
                    elif toks[j][1] != ",":
                        raise PromqlError(f"unexpected {toks[j][1]!r} in a label list: {expr!r}")
                    j += 1
                usage.labels |= group
                usage.grouping.append((set(usage.metrics), group))
                i = j + 1
                continue
            if text == "offset":
                # `offset 5m`: the duration reads as a number and a unit, not a metric.
                i += 3 if nxt[0] == "number" else 2
                continue
            if text.lower() in KEYWORDS or nxt[1] == "(" or nxt[1] in ("by", "without"):
                # A function, an aggregation (`sum by (x) (...)`), or a keyword.
                i += 1
                continue
            usage.metrics.add(text)
            last_metric = text
            i += 1
            continue
        if text == "{":
            # A selector's matchers; `{` right after a metric name belongs to it.
            owner = last_metric if i > 0 and toks[i - 1][1] == last_metric else None
            j = i + 1
            while j < len(toks) and toks[j][1] != "}":
                if toks[j][1] == ",":
                    j += 1
                    continue
                if j + 2 >= len(toks) or toks[j][0] != "ident" or toks[j + 1][0] != "matchop" \
                        or toks[j + 2][0] != "string":
                    raise PromqlError(f"cannot read the matchers of {expr!r}")
                label, op, value = toks[j][1], toks[j + 1][1], _unquote(toks[j + 2][1])
                if label == "__name__":
                    if op != "=":
                        raise PromqlError(f"only __name__= is supported: {expr!r}")
                    usage.metrics.add(value)
                else:
                    usage.labels.add(label)
                usage.matchers.append((owner, Matcher(label, op, value)))
                j += 3
            i = j + 1
            continue
        i += 1
    return usage
