"""Small summaries of a cell table, for cell tables too large to bring into one process.

When most cells are unique the cell table is as large as the input. On the Dask backends
:func:`summarize` keeps the cells on the workers, in ranges of cells (buckets), and brings back only
what file-level measures of f_j and F_j read: numbers of cells and records, frequencies of
frequencies n_r = #{j : f_j = r} (and N_r), and the joint counts #{j : f_j = a, F_j = b} for a <= 3
(enough for theta, Pr(PU|SU), the method-A match probability and theta_hat). On the in-process
backends it reads the same numbers off the FreqTable.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from typing import Any, Callable

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.freq.partial import JOINT_MAX_F  # noqa: F401  (re-exported)
from gpurisk.freq.table import UniqueStats
from gpurisk.xp import readonly


@dataclass(frozen=True)
class CellSummary:
    n: int
    cells: int
    freq_of_freq: dict[int, int]
    N: int | None = None
    population_cells: int | None = None
    pop_freq_of_freq: dict[int, int] | None = None
    #: {(f_j, F_j): cells} for 1 <= f_j <= 3 (with a population)
    joint: dict[tuple[int, int], int] = field(default_factory=dict)
    weight_total: float | None = None
    backend: str = "pandas"
    buckets: int = 1

    def n_r(self, r: int) -> int:
        return self.freq_of_freq.get(int(r), 0)

    def to_dict(self) -> dict:
        return {"n": self.n, "N": self.N, "cells": self.cells, "population_cells": self.population_cells,
                "freq_of_freq": {str(r): c for r, c in sorted(self.freq_of_freq.items())},
                "pop_freq_of_freq": (None if self.pop_freq_of_freq is None else
                                     {str(r): c for r, c in sorted(self.pop_freq_of_freq.items())}),
                "joint": {f"{a},{b}": c for (a, b), c in sorted(self.joint.items())},
                "weight_total": self.weight_total, "backend": self.backend, "buckets": self.buckets}


def summary_of_table(table) -> CellSummary:
    """The summary of a FreqTable (any array namespace: only the summaries come to the host)."""
    from gpurisk.freq.partial import summary
    return _summary(summary(table.f, table.F, table.w), table.backend)


def _summary(d: dict, backend: str, buckets: int = 1) -> CellSummary:
    return CellSummary(n=d["n"], cells=d["cells"], freq_of_freq=d["fof"], N=d["N"],
                       population_cells=d["pop_cells"], pop_freq_of_freq=d["pop_fof"],
                       joint=d["joint"], weight_total=d["w"], backend=backend, buckets=buckets)


def combine(plan, parts: list[dict], backend: str) -> CellSummary:
    """Add up per-bucket summaries; raise the f_j > F_j error when any bucket found one."""
    bad = sum(p["bad"] for p in parts)
    if bad:
        from gpurisk.freq.partial import f_over_F_error, labels_of
        labels, f, F = [], [], []
        for p in parts:
            if p["bad_cells"] is not None:
                labels += labels_of(plan, p["bad_cells"]["words"])
                f += list(p["bad_cells"]["f"])
                F += list(p["bad_cells"]["F"])
        raise f_over_F_error(labels[:3], f[:3], F[:3], bad)
    total = {k: sum(p[k] for p in parts) for k in ("n", "cells")}
    if total["n"] == 0:
        raise BadInput("the sample has no records")
    total["w"] = None if parts[0]["w"] is None else float(sum(p["w"] for p in parts))
    total["fof"] = _add([p["fof"] for p in parts])
    total.update(N=None, pop_cells=None, pop_fof=None, joint={})
    if parts[0]["N"] is not None:
        total.update(N=sum(p["N"] for p in parts), pop_cells=sum(p["pop_cells"] for p in parts),
                     pop_fof=_add([p["pop_fof"] for p in parts]), joint=_add([p["joint"] for p in parts]))
    return _summary(total, backend, buckets=len(parts))


def _add(dicts):
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))


class CellsNotKept(RuntimeError):
    """A measure read a cell array of a :class:`SummaryTable` (its cells stayed on the workers)."""


@dataclass(frozen=True, eq=False)
class SummaryTable:
    """A frequency table known by its summaries only: what a distributed count brings back when every
    measure to run reads summaries (``Measure.reads = "summary"``), so the client holds a few
    dictionaries however many cells the table has.

    It answers what :class:`~gpurisk.freq.table.FreqTable` answers from summaries (n, N, the
    frequencies of frequencies n_r and N_r, the sample-unique statistics, the categories); asking it
    for a cell array (``f``, ``F``, ``w``, ``cell_id``, each record's cell) raises
    :class:`CellsNotKept`, which the host reports on that measure's row.
    """

    keys: tuple
    categories: list
    summary: CellSummary
    #: per key, the number of categories the sample holds (for the cardinality guard)
    sample_cards: tuple
    backend: str = "dask"
    xp: Any = np
    record_locator: Any = None
    stored_cell_codes: Any = None
    #: the maps of the bucket measures (``reads = "buckets"``) run where the cells are
    #: (:class:`gpurisk.freq.buckets.BucketMaps`), or None
    bucket_maps: Any = None
    #: what the measures that read cells gave on this table's cells, built on a worker
    #: (:func:`gpurisk.freq.subsets.table_measures`: ``{"results": {name: Result}, "warnings":
    #: [...]}``), or None
    worker_results: Any = None
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def cached(self, name: str, make: Callable[[], Any]):
        """As :meth:`gpurisk.freq.table.FreqTable.cached`: numpy arrays kept read-only."""
        if name not in self._memo:
            value = make()
            self._memo[name] = readonly(value) if isinstance(value, np.ndarray) else value
        return self._memo[name]

    def _no_cells(self, what: str):
        raise CellsNotKept(f"{what}: this table keeps only summaries (n, N, frequencies of "
                           "frequencies), its cells stayed where they were counted; a measure that "
                           "reads cells must declare reads = 'buckets' (map_bucket / reduce_buckets) or 'cells'")

    @property
    def f(self):
        self._no_cells("table.f")

    @property
    def F(self):
        return None if self.summary.N is None else self._no_cells("table.F")

    @property
    def w(self):
        return None if self.summary.weight_total is None else self._no_cells("table.w")

    @property
    def has_weights(self) -> bool:
        """Whether the sample's design weights were counted (``w`` is not None)."""
        return self.summary.weight_total is not None

    @property
    def cell_id(self):
        self._no_cells("table.cell_id")

    def record_cell(self):
        self._no_cells("table.record_cell()")

    @property
    def cards(self) -> tuple:
        return tuple(len(c) for c in self.categories)

    @property
    def n(self) -> int:
        return self.summary.n

    @property
    def N(self) -> int | None:
        return self.summary.N

    @property
    def sample_cells(self) -> int:
        return self.summary.cells

    @property
    def population_cells(self) -> int | None:
        return self.summary.population_cells

    def fof_vector(self) -> np.ndarray:
        def make():
            fof = self.summary.freq_of_freq
            Z = np.zeros(max([2] + [r + 1 for r in fof]), np.int64)
            for r, c in fof.items():
                Z[r] = c
            return Z
        return self.cached("Z", make)

    def freq_of_freq(self) -> dict:
        return dict(self.summary.freq_of_freq)

    def pop_freq_of_freq(self) -> dict | None:
        return None if self.summary.pop_freq_of_freq is None else dict(self.summary.pop_freq_of_freq)

    def n_r(self, r: int) -> int:
        return self.summary.n_r(r)

    def N_r(self, r: int) -> int:
        if self.N is None:
            raise ValueError("no population counts")
        return self.summary.pop_freq_of_freq.get(int(r), 0)

    def pop_uniques(self) -> int:
        return self.N_r(1)

    def unique_stats(self) -> UniqueStats:
        """From the joint counts #{j : f_j = 1, F_j = b}."""
        if self.N is None:
            raise ValueError("no population counts")

        def make():
            ones = sorted((b, c) for (a, b), c in self.summary.joint.items() if a == 1)
            return UniqueStats(n1=sum(c for _, c in ones), F_sum=sum(b * c for b, c in ones),
                               inv_F_sum=float(sum(c / b for b, c in ones)),
                               pop_unique=dict(ones).get(1, 0))
        return self.cached("su", make)


def summary_table(table) -> SummaryTable:
    """The :class:`SummaryTable` of a built table (what a distributed count of the same records
    brings back): for tests, and for measures checked against their ``reads = "summary"``."""
    from gpurisk.freq.guards import sample_categories
    return SummaryTable(tuple(table.keys), list(table.categories), summary_of_table(table),
                        tuple(sample_categories(table)), backend=table.backend)
