"""The checkpoint of a ``protect`` search, so that a killed run resumes (``--checkpoint FILE``).

What a search computes per node that costs anything is each scenario's criterion values, kept per
projection of the node onto the scenario's keys. Those are written, atomically, every
``every`` seconds and when the search ends or is interrupted; a new run with the same checkpoint
starts from them (tables are rebuilt only where a value is missing). The file carries a fingerprint
of the settings and of the counted table (:func:`gpurisk.io.checkpoint.fingerprint`): a checkpoint
written for other data, hierarchies, criteria or π is refused, never mixed in.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Mapping

from gpurisk.io.atomic import write_text_atomic
from gpurisk.io.checkpoint import fingerprint, load_checked


class SearchState:
    def __init__(self, path, settings: Mapping, table, every: float = 10.0):
        self.path = Path(path)
        arrays = [table.cell_id, table.f] + ([table.F] if table.F is not None else [])
        self.fp = fingerprint(settings, arrays)
        self.every = float(every)
        self._last = time.monotonic()
        self.loaded = 0

    def load(self, n_scenarios: int) -> list[dict]:
        """The kept values per scenario ({projection: [value per criterion]}), empty if no file."""
        caches: list[dict] = [dict() for _ in range(n_scenarios)]
        if not self.path.exists():
            return caches
        doc = load_checked(self.path, self.fp,
                           unreadable=f"{{arg:--checkpoint|checkpoint}} {str(self.path)!r} is not a protect checkpoint",
                           mismatch=f"{{arg:--checkpoint|checkpoint}} {str(self.path)!r} was written for other data or "
                                    "settings (keys, scenarios, hierarchies, criteria, π); remove it "
                                    "or name another file")
        for s, rows in enumerate(doc.get("scenarios", [])[:n_scenarios]):
            for proj, vals in rows:
                caches[s][tuple(int(x) for x in proj)] = [None if v is None else float(v)
                                                         for v in vals]
        self.loaded = sum(len(c) for c in caches)
        return caches

    def maybe_save(self, caches: list[dict]) -> None:
        if time.monotonic() - self._last >= self.every:
            self.save(caches)

    def save(self, caches: list[dict]) -> None:
        def clean(v):
            return None if v is None or (isinstance(v, float) and math.isnan(v)) else v
        doc = {"fingerprint": self.fp,
               "scenarios": [[[list(k), [clean(v) for v in vals]] for k, vals in c.items()]
                             for c in caches]}
        write_text_atomic(self.path, json.dumps(doc))
        self._last = time.monotonic()
