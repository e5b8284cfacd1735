"""ORMCC: the mutants `make mutants` applies to its core (layout: docs/protocols.md)."""

from __future__ import annotations

TESTS = ["tests/unit/test_behaviour_ormcc.py", "tests/unit/test_ormcc_arrival.py"]

# (file, old, new, what)
MUTANTS = [
    ('sender.py',
     'rtt = max(arrival - ci.echo_ns / 1e9, self.params.min_rtt)',
     'rtt = max(now - ci.echo_ns / 1e9, self.params.min_rtt)',
     'RTT at handling time'),
    ('sender.py',
     'self._set_rate(now, min(self.rate, self.params.beta * trac))',
     'self._set_rate(now, min(self.rate, 0.9 * trac))',
     'decrease factor 0.9'),
    ('sender.py',
     'self._set_rate(now, min(self.rate, self.params.beta * trac))',
     'self._set_rate(now, min(self.rate, 0.5 * trac))',
     'decrease factor 0.5'),
    ('sender.py',
     'self.rate + self.size * 8 / self.rtt_cr)',
     'self.rate + 2 * self.size * 8 / self.rtt_cr)',
     'double the increase'),
    ('sender.py',
     'if self.last_cut is not None and now - self.last_cut < self.rtt_cr:',
     'if self.last_cut is not None and now - self.last_cut > self.rtt_cr:',
     'flip the once-per-RTT cut'),
    ('sender.py',
     '        self.rtt_cr = (1 - a) * self.rtt_cr + a * sample\n',
     '',
     'remove the RTT update'),
    ('sender.py',
     'elif self.mu.mean is not None and ci.trac < self.mu.mean - self.mu.dev:',
     'elif self.mu.mean is not None and ci.trac > self.mu.mean - self.mu.dev:',
     'flip the CR switch test'),
    ('receiver.py',
     'return self.avg.mean < cr.mu_cr - cr.sigma_cr',
     'return self.avg.mean < cr.mu_cr + cr.sigma_cr',
     'receiver: suppress less'),
    ('receiver.py',
     'if not cr.valid or cr.cr == self.rid:',
     'if True:',
     'receiver: no suppression'),
]
