"""STAIR: the mutants `make mutants` applies to its core (layout: docs/protocols.md)."""

from __future__ import annotations

TESTS = ["tests/unit/test_behaviour_stair.py"]

# (file, old, new, what)
MUTANTS = [
    ('receiver.py',
     '        if self.period_loss or now - self.last_md < self.p.md_holdoff:',
     '        if now - self.last_md < self.p.md_holdoff:',
     'drop the per-period rule'),
    ('receiver.py',
     '        self.period_loss = True\n        self.last_md = now',
     '        self.last_md = now',
     'remove the period-loss update'),
    ('receiver.py',
     '        if sl != self.stairs[0]:\n            return actions\n'
     '        self.period_loss = False\n',
     '        if sl != self.stairs[0]:\n            return actions\n',
     'never reopen a decrease period'),
    ('receiver.py',
     'if ext.kind == SL and sl in self.cycles:',
     'if ext.kind == SL and sl == self.stairs[0]:',
     'only the first layer recycles'),
    ('receiver.py',
     'if self.full[sl] and not self.lossy[sl] and',
     'if self.full[sl] and',
     'increase after a lossy period'),
    ('receiver.py',
     '        self.full[sl] = True\n',
     '',
     'remove the whole-period update'),
    ('receiver.py',
     '            self.lossy[sl] = True\n',
     '            pass\n',
     'losses never mark a period'),
]
