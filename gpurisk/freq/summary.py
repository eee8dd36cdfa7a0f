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

from gpurisk.errors import BadInput
from gpurisk.freq.partial import JOINT_MAX_F  # noqa: F401  (re-exported)


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


def summarize(source, keys, population=None, sample_flag=None, weights=None, missing="category",
              backend=None, sep=None, buckets=None) -> CellSummary:
    """A :class:`CellSummary` of ``source`` (a frame, a Dask frame or a path) over ``keys``.

    Read and checked through :class:`gpurisk.Inputs`. On ``dask``/``dask-cudf`` the cells stay
    distributed in ``buckets`` ranges (default: one per eight partitions, at most 64); elsewhere the
    FreqTable is built and summarised.
    """
    from gpurisk.inputs import Inputs
    inputs = Inputs(source, keys, population=population, sample_flag=sample_flag, weights=weights,
                    missing=missing, backend=backend, sep=sep)
    if not inputs.distributed:
        return summary_of_table(inputs.count(guard=False).table)
    from gpurisk.freq._dask import summary_dask
    frames = inputs.read()
    plan, parts = summary_dask(frames.sample, list(inputs.keys), population=frames.population,
                               sample_flag=sample_flag, weights=weights, missing=missing,
                               gpu=(inputs.backend == "dask-cudf"), sep=sep, buckets=buckets)
    return combine(plan, parts, inputs.backend)


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
