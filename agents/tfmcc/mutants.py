"""TFMCC: the mutants `make mutants` applies to its core (layout: docs/protocols.md)."""

from __future__ import annotations

TESTS = ["tests/unit/test_behaviour_tfmcc.py", "tests/unit/test_tfmcc_core.py"]

# (file, old, new, what)
MUTANTS = [
    ('estimators.py',
     '4 * rtt * 3 * math.sqrt(3 * p / 8)',
     'rtt * 3 * math.sqrt(3 * p / 8)',
     't_RTO = R in the equation'),
    ('estimators.py',
     'sent <= self.event_time + rtt:',
     'sent <= self.event_time:',
     'every loss is a loss event'),
    ('estimators.py',
     'WEIGHTS = (1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2)',
     'WEIGHTS = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)',
     'flat interval weights'),
    ('estimators.py',
     'mean = max(i_tot0 / w_tot0, i_tot1 / w_tot1)',
     'mean = i_tot1 / w_tot1',
     'ignore the open interval'),
    ('sender.py',
     'if self.clr is None or r.rate < self.clr_rate:',
     'if self.clr is None or r.rate > self.clr_rate:',
     'flip the CLR switch test'),
    ('sender.py',
     'step = dt * self.size * 8 / (self.rmax * self.rmax)',
     'step = 2 * dt * self.size * 8 / (self.rmax * self.rmax)',
     'double the increase limit'),
    ('sender.py',
     'self.target = 2 * reported',
     'self.target = 4 * reported',
     'slow start to four times the receive rate'),
    ('sender.py',
     '        if silent >= drop_after:',
     '        if False:',
     'never drop a silent CLR'),
    ('receiver.py',
     'return not own < (1 - self.p.suppress_margin) * bound',
     'return False',
     'receiver: no suppression'),
    ('receiver.py',
     'self.rtt = q * sample + (1 - q) * self.rtt',
     'self.rtt = sample',
     'receiver: RTT without smoothing'),
]
