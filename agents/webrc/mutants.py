"""WEBRC: the mutants `make mutants` applies to its core (layout: docs/protocols.md)."""

from __future__ import annotations

TESTS = ["tests/unit/test_behaviour_webrc.py"]

# (file, old, new, what)
MUTANTS = [
    ('receiver.py',
     'near = [s for s in self.event_starts if abs(at - s) < reach]',
     'near = [s for s in self.event_starts if abs(at - s) > reach]',
     'flip comparison'),
    ('receiver.py',
     'reach = artt + step  #',
     'reach = artt  #',
     'drop the spacing term'),
    ('receiver.py',
     'at = before + k * step',
     'at = now',
     'time at detection'),
    ('receiver.py',
     '        self.event_starts.append(at)\n',
     '',
     'remove the event-start update'),
    ('receiver.py',
     '                self.last_at[cn] = now\n',
     '',
     'remove the last-arrival update'),
    ('receiver.py',
     'step = (now - before) / (count + 1)',
     'step = (now - before) / count',
     'interpolation off by one'),
    ('receiver.py',
     'self.loss_event_end = max(self.loss_event_end, at + artt)',
     'self.loss_event_end = max(self.loss_event_end, now + artt)',
     'loss event blocks joins from detection'),
    ('receiver.py',
     'self.ssr = self.slow_start_rate(self.ssr_factor)\n',
     'self.ssr = min(self.ssr, self.slow_start_rate(self.ssr_factor))\n',
     'SSR only ever lowered'),
    ('receiver.py',
     'floor = bcr * (1 + 1 / p + 1 / p ** 2) if self.params.ssr_floor else 0.0',
     'floor = 0.0',
     'no SSMINR floor'),
    ('receiver.py',
     '1.0 if reason == "rr_lag" else self.ssr_factor',
     'self.ssr_factor',
     'RR-lag end of start-up at P * TRR'),
]
