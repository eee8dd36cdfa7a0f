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

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import scalar, to_host

JOINT_MAX_F = 3


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
    xp = table.xp
    kw = dict(n=table.n, cells=table.sample_cells, freq_of_freq=dict(table.freq_of_freq()),
              backend=table.backend)
    if table.w is not None:
        kw["weight_total"] = float(scalar(table.w.sum()))
    if table.F is not None:
        f, F = table.f, table.F
        kw.update(N=table.N, population_cells=int(scalar((F > 0).sum())),
                  pop_freq_of_freq=dict(table.pop_freq_of_freq()))
        small = (f > 0) & (f <= JOINT_MAX_F)
        # (f, F) pairs with f <= 3: F bounded by N, so f * (N + 1) + F is one exact int64 id
        ids = to_host(f[small].astype(xp.int64) * (table.N + 1) + F[small])
        pairs, cnt = np.unique(ids, return_counts=True)
        kw["joint"] = {(int(a // (table.N + 1)), int(a % (table.N + 1))): int(c)
                       for a, c in zip(pairs.tolist(), cnt.tolist())}
    return CellSummary(**kw)


def summarize(source, keys, population=None, sample_flag=None, weights=None, missing="category",
              backend=None, sep=None, buckets=None) -> CellSummary:
    """A :class:`CellSummary` of ``source`` (a frame, a Dask frame or a path) over ``keys``.

    On ``dask``/``dask-cudf`` the cells stay distributed in ``buckets`` ranges (default: one per
    eight partitions, at most 64); elsewhere the FreqTable is built and summarised.
    """
    from gpurisk.backends import require, resolve_backend
    keys = [keys] if isinstance(keys, str) else list(keys)
    name = resolve_backend(backend, source)
    if name not in ("dask", "dask-cudf"):
        from gpurisk.freq.engine import build_table
        if isinstance(source, str) or hasattr(source, "__fspath__"):
            from gpurisk.io import read_table
            source = read_table(source, sep=sep, columns=keys + [c for c in (sample_flag, weights) if c])
            if isinstance(population, str) or hasattr(population, "__fspath__"):
                population = read_table(population, sep=sep, columns=keys)
        return summary_of_table(build_table(source, keys, population=population,
                                            sample_flag=sample_flag, weights=weights,
                                            missing=missing, backend=name))
    require(name)
    from gpurisk.freq._dask import summary_dask
    plan, parts = summary_dask(source, keys, population=population, sample_flag=sample_flag,
                               weights=weights, missing=missing, gpu=(name == "dask-cudf"), sep=sep,
                               buckets=buckets)
    return combine(plan, parts, name)


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
    kw = dict(n=sum(p["n"] for p in parts), cells=sum(p["cells"] for p in parts),
              freq_of_freq=_add([p["fof"] for p in parts]), backend=backend, buckets=len(parts))
    if kw["n"] == 0:
        raise BadInput("the sample has no records")
    if parts[0]["w"] is not None:
        kw["weight_total"] = float(sum(p["w"] for p in parts))
    if parts[0]["N"] is not None:
        kw.update(N=sum(p["N"] for p in parts), population_cells=sum(p["pop_cells"] for p in parts),
                  pop_freq_of_freq=_add([p["pop_fof"] for p in parts]),
                  joint=_add([p["joint"] for p in parts]))
    return CellSummary(**kw)


def _add(dicts):
    out: dict = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))
