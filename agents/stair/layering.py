"""Layering schemes of STAIR (Byers et al., IEEE/ACM ToN 2006, sec. III-IV) as pure functions.

Rates are in units of the base-layer rate ``B_0`` (integers). A *subscription*
is the set of groups a receiver has joined; a group is named ``("C", j)`` for
cumulative layer ``j`` or ``("N", i)`` for non-cumulative layer ``i``. Every
scheme offers the same operations, each returning the new subscription and the
joins and leaves it costs:

* ``increase``: additive increase by one unit (Fib schemes: the "increase by 1"
  rule of sec. IV-A, one join and at most ``len(offsets)`` leaves);
* ``decrease_one``: the inverse of ``increase`` (footnote 1: two joins, one leave
  for Fib1);
* ``multiplicative_decrease``: drop the top non-cumulative layer (Fib), the top
  cumulative layer (Std. Cum), or both (Hybrid, sec. V-A).

The metrics of sec. III-A (density, reception granularity, dilation,
join/leave complexity) and the MD factor of Fig. 3 are computed from these
operations by :func:`reachable`, :func:`density`, :func:`reception_granularity`,
:func:`worst_dilation`, :func:`complexity` and :func:`md_factors`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

Group = tuple[str, int]
Subscription = frozenset[Group]

TAU = (1 + math.sqrt(5)) / 2  # golden ratio: Fib1's growth, dilation limit (Lemma 3)


@dataclass(frozen=True)
class Step:
    """The result of one operation: the new subscription and the groups joined and left."""

    sub: Subscription
    joins: frozenset[Group]
    leaves: frozenset[Group]


def _step(old: Subscription, new: Subscription) -> Step:
    """The joins and leaves that turn ``old`` into ``new``."""
    return Step(new, new - old, old - new)


def ncl(*layers: int) -> Subscription:
    """A subscription to the given non-cumulative layers."""
    return frozenset(("N", i) for i in layers)


def fib_rates(offsets: tuple[int, ...], n: int) -> list[int]:
    """The first ``n`` layer rates of ``B_i = 1 + sum(B_{i-d} for d in offsets)``, ``B_{<0} = 0``.

    Offsets ``(1, 2)`` give Fib1 (Def. 5), ``(1, 3)`` Fib2 (Def. 6), ``(1, 2, 3)``
    Fib3 (Def. 7).
    """
    rates: list[int] = []
    for i in range(n):
        rates.append(1 + sum(rates[i - d] for d in offsets if i - d >= 0))
    return rates


class Scheme(ABC):
    """A layering scheme: group rates, a starting subscription (rate 1) and the operations."""

    name: str

    @abstractmethod
    def group_rate(self, group: Group) -> int:
        """The rate of one group, in base units."""

    @abstractmethod
    def initial(self) -> Subscription:
        """The subscription at rate 1 (the base layer)."""

    @abstractmethod
    def increase(self, sub: Subscription) -> Step:
        """Additive increase by one unit."""

    @abstractmethod
    def multiplicative_decrease(self, sub: Subscription) -> Step:
        """The scheme's approximate halving."""

    def rate(self, sub: Iterable[Group]) -> int:
        """Total rate of a subscription (or of a union of subscriptions)."""
        return sum(self.group_rate(g) for g in sub)

    def decrease_one(self, sub: Subscription, canonical: dict[int, Subscription]) -> Step:
        """Decrease by one unit: move to the subscription that increases to ``sub``'s rate.

        ``canonical`` maps rates to the subscriptions reached by increases
        (:func:`canonical_subscriptions`).
        """
        return _step(sub, canonical[self.rate(sub) - 1])


class FibScheme(Scheme):
    """Non-cumulative layers with ``B_i = 1 + sum(B_{i-d})`` (Fib1, Fib2, Fib3)."""

    def __init__(self, name: str, offsets: tuple[int, ...], layers: int = 64):
        self.name = name
        self.offsets = offsets
        self.rates = fib_rates(offsets, layers)

    def group_rate(self, group: Group) -> int:
        return self.rates[group[1]]

    def initial(self) -> Subscription:
        return ncl(0)

    def increase(self, sub: Subscription) -> Step:
        """Join the lowest layer ``i`` not held, leave layers ``i - d`` (sec. IV-A)."""
        return _step(sub, fib_increase(sub, self.offsets))

    def multiplicative_decrease(self, sub: Subscription) -> Step:
        """Leave the highest layer (sec. IV-A); the base layer is never left."""
        if len(sub) <= 1:
            return _step(sub, sub)
        return _step(sub, sub - {max(sub, key=lambda g: g[1])})


def fib_increase(sub: Subscription, offsets: tuple[int, ...] = (1, 2)) -> Subscription:
    """The Fib "increase by 1" rule on a set of ``("N", i)`` groups."""
    held = {i for _, i in sub}
    i = 0
    while i in held:
        i += 1
    return frozenset((sub | {("N", i)}) - {("N", i - d) for d in offsets})


class StdNonCumulative(Scheme):
    """The standard layers 1, 1, 2, 4, ... joined non-cumulatively (sec. III-B).

    Layer 0 (the base) is mandatory; rate ``K`` is the base plus the binary
    representation of ``K - 1`` over layers ``1..``, so every integer rate is
    reachable but an increase may cost ``O(log R)`` joins and leaves.
    """

    name = "Std. NonCum"

    def group_rate(self, group: Group) -> int:
        return 1 if group[1] == 0 else 2 ** (group[1] - 1)

    def subscription(self, rate: int) -> Subscription:
        """The subscription at ``rate``."""
        rest = rate - 1
        return ncl(0, *(b + 1 for b in range(rest.bit_length()) if rest >> b & 1))

    def initial(self) -> Subscription:
        return self.subscription(1)

    def increase(self, sub: Subscription) -> Step:
        return _step(sub, self.subscription(self.rate(sub) + 1))

    def multiplicative_decrease(self, sub: Subscription) -> Step:
        """Halve exactly (rate ``K`` to ``ceil(K / 2)``), whatever it costs."""
        return _step(sub, self.subscription((self.rate(sub) + 1) // 2))


class StdCumulative(Scheme):
    """Cumulative layers 1, 1, 2, 4, ...: level ``l`` receives ``2**(l-1)`` (sec. III-A).

    Only powers of two are reachable, so there is no additive increase: ``increase``
    moves to the next reachable rate (one join) and is what the scheme can do.
    """

    name = "Std. Cum"

    def group_rate(self, group: Group) -> int:
        return 1 if group[1] == 0 else 2 ** (group[1] - 1)

    def initial(self) -> Subscription:
        return frozenset({("C", 0)})

    def increase(self, sub: Subscription) -> Step:
        return _step(sub, sub | {("C", len(sub))})

    def multiplicative_decrease(self, sub: Subscription) -> Step:
        if len(sub) <= 1:
            return _step(sub, sub)
        return _step(sub, sub - {("C", len(sub) - 1)})


def cl_thresholds(alpha: float, limit: int) -> list[int]:
    """Cumulative rates ``ceil(alpha**j)`` up to ``limit`` (duplicates removed, sec. IV-C).

    The cumulative layers' own rates are the differences: ``C_0 = 1`` and
    ``C_j = T_j - T_{j-1}``; with ``alpha = 2`` this is 1, 1, 2, 4, ...
    """
    out = [1]
    j = 1
    while out[-1] <= limit:
        t = math.ceil(round(alpha ** j, 9))
        if t > out[-1]:
            out.append(t)
        j += 1
    return out


class Hybrid(Scheme):
    """Cumulative layers at powers of ``alpha`` capped by Fib1 non-cumulative layers (sec. IV-C).

    Rate ``K = T_j + r`` with ``T_j`` the largest cumulative threshold not above
    ``K``: layers ``CL_0..CL_j`` plus the Fib1 layers of ``r``. An increase that
    reaches ``T_{j+1}`` joins ``CL_{j+1}`` and leaves every NCL; any other increase
    is Fib1's. Multiplicative decrease leaves the top CL and the top NCL; if the
    NCL part left over no longer fits under the lower CL level (its rate reaches the
    next threshold) it is carried into that CL, as an increase would have done.
    """

    def __init__(self, alpha: float, limit: int = 1 << 20):
        if alpha <= 1:
            raise ValueError("alpha must be above 1")
        self.alpha = alpha
        self.name = f"Hybrid(alpha={alpha:g})"
        self.thresholds = cl_thresholds(alpha, limit)
        self.fib = FibScheme("Fib1", (1, 2))

    def group_rate(self, group: Group) -> int:
        kind, i = group
        if kind == "N":
            return self.fib.rates[i]
        return self.thresholds[i] - (self.thresholds[i - 1] if i else 0)

    def initial(self) -> Subscription:
        return frozenset({("C", 0)})

    @staticmethod
    def split(sub: Subscription) -> tuple[int, Subscription]:
        """(number of cumulative layers held, the non-cumulative part)."""
        cls = sum(1 for k, _ in sub if k == "C")
        return cls, frozenset(g for g in sub if g[0] == "N")

    def _cls(self, n: int) -> Subscription:
        return frozenset(("C", j) for j in range(n))

    def increase(self, sub: Subscription) -> Step:
        cls, ncls = self.split(sub)
        if self.rate(sub) + 1 >= self.thresholds[cls]:
            return _step(sub, self._cls(cls + 1))
        return _step(sub, self._cls(cls) | fib_increase(ncls))

    def multiplicative_decrease(self, sub: Subscription) -> Step:
        cls, ncls = self.split(sub)
        if cls > 1:
            cls -= 1
        ncls = _drop_top(ncls)
        # The NCL part must stay below the next threshold of the lower CL level, or the
        # next increase would swap every NCL for a CL (a decrease); leave more NCLs.
        while ncls and self.fib.rate(ncls) >= self.thresholds[cls] - self.thresholds[cls - 1]:
            ncls = _drop_top(ncls)
        return _step(sub, self._cls(cls) | ncls)

    def subscription(self, rate: int) -> Subscription:
        """The subscription at ``rate`` reached by increases from 1."""
        cls = max(j for j, t in enumerate(self.thresholds) if t <= rate) + 1
        rest = rate - self.thresholds[cls - 1]
        return self._cls(cls) | (fib_subscription(rest) if rest else frozenset())


def _drop_top(ncls: Subscription) -> Subscription:
    """Leave the highest non-cumulative layer (if any)."""
    return ncls - {max(ncls, key=lambda g: g[1])} if ncls else ncls


_FIB1_CANON: list[Subscription] = [frozenset()]


def fib_subscription(rate: int) -> Subscription:
    """Fib1's subscription at ``rate`` as reached by increases from 0 (memoised)."""
    while len(_FIB1_CANON) <= rate:
        _FIB1_CANON.append(fib_increase(_FIB1_CANON[-1]))
    return _FIB1_CANON[rate]


def fib1() -> FibScheme:
    """Fib1 (Def. 5): 1, 2, 4, 7, 12, 20, 33, ..."""
    return FibScheme("Fib1", (1, 2))


def fib2() -> FibScheme:
    """Fib2 (Def. 6): 1, 2, 3, 5, 8, 12, 18, 27, ..."""
    return FibScheme("Fib2", (1, 3))


def fib3() -> FibScheme:
    """Fib3 (Def. 7): 1, 2, 4, 8, 15, 28, ..."""
    return FibScheme("Fib3", (1, 2, 3))


# --- metrics (sec. III-A) -------------------------------------------------------------


def canonical_subscriptions(scheme: Scheme, limit: int) -> dict[int, Subscription]:
    """Rate -> subscription reached by repeated increases from the initial one, up to ``limit``."""
    sub = scheme.initial()
    out = {scheme.rate(sub): sub}
    while True:
        sub = scheme.increase(sub).sub
        r = scheme.rate(sub)
        if r > limit:
            return out
        out[r] = sub


def reachable(scheme: Scheme, limit: int) -> set[Subscription]:
    """Every subscription of rate ``<= limit`` reached from the initial one by any sequence
    of increases and multiplicative decreases."""
    start = scheme.initial()
    seen = {start}
    todo = [start]
    while todo:
        sub = todo.pop()
        for nxt in (scheme.increase(sub).sub, scheme.multiplicative_decrease(sub).sub):
            if nxt not in seen and scheme.rate(nxt) <= limit:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def density(scheme: Scheme, limit: int) -> int:
    """Def. 1: the number of groups used to reach every integral rate in ``[1, limit]``."""
    subs = canonical_subscriptions(scheme, limit).values()
    return len(frozenset().union(*subs))


def reception_granularity(scheme: Scheme, limit: int) -> float:
    """Def. 2: ``max_i i / A_i`` over ``i`` in ``[1, limit]``, ``A_i`` the largest rate ``<= i``."""
    rates = sorted(canonical_subscriptions(scheme, limit))
    worst, k = 1.0, 0
    for i in range(1, limit + 1):
        while k + 1 < len(rates) and rates[k + 1] <= i:
            k += 1
        worst = max(worst, i / rates[k])
    return worst


@dataclass(frozen=True)
class DilationCurve:
    """Fig. 5: for each maximum downstream rate ``M``, the worst-case dilation ``C / M``."""

    rates: list[int]
    dilation: list[float]

    def worst(self, low: int = 1) -> float:
        """The largest dilation over maximum rates ``>= low``."""
        return max(d for m, d in zip(self.rates, self.dilation, strict=True) if m >= low)


def dilation_curve(scheme: Scheme, limit: int,
                   subs: Iterable[Subscription] | None = None) -> DilationCurve:
    """Def. 4, worst case over receivers: receivers may hold any subscriptions of rate ``<= M``
    (default: every reachable one), so the link carries the union of their groups."""
    pool = sorted(subs if subs is not None else reachable(scheme, limit), key=scheme.rate)
    by_rate: dict[int, set[Group]] = {}
    union: set[Group] = set()
    for sub in pool:
        union |= sub
        by_rate[scheme.rate(sub)] = set(union)
    rates = sorted(by_rate)
    return DilationCurve(rates, [scheme.rate(by_rate[m]) / m for m in rates])


def worst_dilation(scheme: Scheme, limit: int, low: int = 1) -> float:
    """The session dilation bound: worst over maximum rates in ``[low, limit]``."""
    return dilation_curve(scheme, limit).worst(low)


@dataclass(frozen=True)
class Complexity:
    """Def. 3: worst-case joins and leaves of one operation."""

    joins: int
    leaves: int

    @property
    def total(self) -> int:
        """Joins plus leaves."""
        return self.joins + self.leaves


def complexity(steps: Iterable[Step]) -> Complexity:
    """Worst-case joins and leaves over the given steps (each maximised on its own)."""
    steps = list(steps)
    return Complexity(max(len(s.joins) for s in steps), max(len(s.leaves) for s in steps))


def md_factors(scheme: Scheme, limit: int, low: int = 2) -> dict[int, float]:
    """Fig. 3: rate after / rate before a multiplicative decrease, for a receiver that has
    increased up to each available bandwidth ``K`` in ``[low, limit]``."""
    out = {}
    for k, sub in canonical_subscriptions(scheme, limit).items():
        if k >= low:
            out[k] = scheme.rate(scheme.multiplicative_decrease(sub).sub) / k
    return out


def lemma1_holds(sub: Subscription) -> bool:
    """Lemma 1 on a Fib1 subscription written as a bit string (base layer rightmost):
    from the first one on the left, runs of zeros are one or two long, and after a run of
    two there is no zero further right."""
    layers = {i for _, i in sub}
    if not layers:
        return True
    bits = "".join("1" if i in layers else "0" for i in range(max(layers), -1, -1))
    runs = [len(r) for r in bits.split("1")[1:]]  # zero runs after each one, left to right
    seen_two = False
    for run in runs:
        if run == 0:
            continue
        if run > 2 or seen_two:
            return False
        seen_two = run == 2
    return True



def fibonacci(n: int) -> list[int]:
    """``F_0 = F_1 = 1``, ``F_i = F_{i-1} + F_{i-2}`` (the paper's indexing, sec. IV-A)."""
    out = [1, 1]
    while len(out) < n:
        out.append(out[-1] + out[-2])
    return out[:n]


def lemma2_bounds(j: int) -> tuple[float, float]:
    """Lemma 2: the (smallest, largest) MD factor when Fib1's top layer ``j`` is left."""
    f = fibonacci(j + 5)
    return (f[j + 1] - j - 1) / (f[j + 3] - j - 2), (f[j + 3] - j - 3) / (f[j + 4] - j - 4)


def lemma3_bound(j: int) -> float:
    """Lemma 3: Fib1's dilation when the highest layer held downstream is ``j``."""
    f = fibonacci(j + 5)
    return (f[j + 4] - j - 4) / (f[j + 3] - j - 2)


def lemma4_bound(alpha: float, fib_dilation: float = 1.62) -> float:
    """Lemma 4: the hybrid scheme's dilation ``1 + 1.62 (alpha - 1) / alpha``."""
    return 1 + fib_dilation * (alpha - 1) / alpha


@dataclass(frozen=True)
class TableRow:
    """One row of Fig. 2, measured at maximum rate ``R``."""

    scheme: str
    density: int
    granularity: float
    dilation: float
    increase: Complexity
    decrease_one: Complexity
    md: Complexity


def fig2_row(scheme: Scheme, limit: int) -> TableRow:
    """Fig. 2's columns for one scheme, computed from its operations over rates ``[1, limit]``."""
    canon = canonical_subscriptions(scheme, limit)
    subs = [s for r, s in canon.items() if r < limit]
    inc = complexity(scheme.increase(s) for s in subs)
    dec = complexity(scheme.decrease_one(s, canon) for r, s in canon.items() if r - 1 in canon)
    md = complexity(scheme.multiplicative_decrease(s) for r, s in canon.items() if r > 1)
    return TableRow(scheme.name, density(scheme, limit), reception_granularity(scheme, limit),
                    worst_dilation(scheme, limit), inc, dec, md)
