"""Sampling designs for ``gpurisk validate``: many replicate samples of a population at once.

The population is encoded once (each record's cell index, ``cell``); a sampler returns, for a batch
of replicates, two aligned arrays ``(rep, rec)``: replicate number within the batch and population
record index of every sampled record. The sample counts of the whole batch are then one
``np.bincount(rep * C + cell[rec])`` (:func:`count_batch`). Nothing loops over records.

Designs (``--design``):

- ``bernoulli``: each record independently with probability π (n is random).
- ``srs``: simple random sampling without replacement, n = round(π N).
- ``stratified:COL``: proportionate stratified SRS, n_h = round(π N_h) within each value of COL
  (a missing value is its own stratum).
- ``systematic`` / ``systematic:COL``: 1 in L = 1/π records (L must be an integer), in the file's
  order or sorted (stably) by COL; every one of the L possible samples is enumerated once, as in
  Skinner & Elliot (2002) §6 — sorting by a stratum or geography column gives their implicitly
  stratified systematic design.

Drawn from the cells (:func:`cell_batches`, ``draw="cells"``; what a distributed population uses,
whose records stay on the workers): the bernoulli, srs and stratified designs need only cell counts,
since which records of a cell are drawn does not change the sample's counts. Bernoulli:
f_j ~ Binomial(F_j, π) independently; srs: (f_j) ~ multivariate hypergeometric(F; n = round(π N));
stratified: within each stratum h, the counts F_hj of the cells over the keys and the stratum column
give a multivariate hypergeometric draw of n_h = round(π N_h), summed over h into the keys' cells.
Same distribution of the sample counts as the record draws, another random stream. The systematic
design follows the records' order and has no cell form.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input

KINDS = ("bernoulli", "srs", "systematic", "stratified")
#: random numbers drawn per batch (replicates × population records); bounds a batch's memory
BATCH_CELLS = 1 << 22


@dataclass(frozen=True)
class Design:
    kind: str
    column: str | None = None

    @property
    def label(self) -> str:
        return self.kind + (f":{self.column}" if self.column else "")


def parse_design(text: str | Design) -> Design:
    """``bernoulli`` | ``srs`` | ``systematic[:COL]`` | ``stratified:COL``."""
    if isinstance(text, Design):
        return text
    kind, _, col = str(text).strip().partition(":")
    kind, col = kind.strip().lower(), col.strip() or None
    if kind not in KINDS:
        raise BadInput(f"design {text!r} is not one of bernoulli, srs, systematic[:COL], stratified:COL")
    if kind == "stratified" and not col:
        raise bad_input("design 'stratified' needs its stratum column: "
                        "{arg:--design stratified:COL|design='stratified:COL'}")
    if kind in ("bernoulli", "srs") and col:
        raise BadInput(f"design {kind!r} takes no column (got {text!r})")
    return Design(kind, col)


def systematic_interval(fraction: float) -> int:
    """L = 1/π, which must be an integer for systematic sampling."""
    L = round(1.0 / fraction)
    if L < 1 or abs(L * fraction - 1.0) > 1e-9:
        raise BadInput(f"systematic sampling needs 1/π to be an integer: π = {fraction:g} gives "
                       f"1/π = {1.0 / fraction:.6g}")
    return int(L)


def column_codes(frame: pd.DataFrame, col: str) -> np.ndarray:
    """Integer codes of a design column (missing values share one code), in sorted value order."""
    if col not in frame.columns:
        raise BadInput(f"design column {col!r} not in the population "
                       f"(its columns: {', '.join(map(str, list(frame.columns)[:20]))})")
    codes, _ = pd.factorize(frame[col], sort=True, use_na_sentinel=True)
    codes = codes.astype(np.int64)
    codes[codes < 0] = codes.max() + 1 if codes.size else 0
    return codes


def replicate_count(design: Design, fraction: float, replicates: int) -> int:
    return systematic_interval(fraction) if design.kind == "systematic" else int(replicates)


def batches(design: Design, fraction: float, replicates: int, N: int, rng: np.random.Generator,
            codes: np.ndarray | None = None) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """Yield ``(first, count, rep, rec)`` for consecutive batches of the design's replicates.

    ``codes`` are the design column's codes (strata, or the systematic sort key).
    """
    R = replicate_count(design, fraction, replicates)
    size = max(1, min(R, BATCH_CELLS // max(N, 1)))
    if design.kind == "systematic":
        order = np.argsort(codes, kind="stable") if codes is not None else np.arange(N)
        L = R
        start_of = np.empty(N, np.int64)
        start_of[order] = np.arange(N) % L           # which of the L samples each record falls in
        for first in range(0, R, size):
            count = min(size, R - first)
            rec = np.flatnonzero((start_of >= first) & (start_of < first + count))
            yield first, count, start_of[rec] - first, rec
        return
    for first in range(0, R, size):
        count = min(size, R - first)
        if design.kind == "bernoulli":
            rep, rec = np.nonzero(rng.random((count, N)) < fraction)
        else:
            strata = codes if design.kind == "stratified" else np.zeros(N, np.int64)
            rep, rec = _srs_within(strata, fraction, count, rng)
        yield first, count, rep, rec


#: designs that can be drawn from the population's cell counts alone
CELL_DESIGNS = ("bernoulli", "srs", "stratified")


def check_cell_design(design: Design) -> None:
    if design.kind not in CELL_DESIGNS:
        raise bad_input(f"design {design.label!r} draws records by their order, which drawing from "
                       "cell counts (a population read by Dask workers) does not give: use "
                       "{arg:--design bernoulli, srs or stratified:COL|design='bernoulli', 'srs' or "
                        "'stratified:COL'}, or {backend_pandas}")


def cell_batches(design: Design, fraction: float, replicates: int, F: np.ndarray,
                 rng: np.random.Generator, strata=None) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield ``(first, count, fmat)``: the (count × C) sample counts of consecutive batches of
    replicates, drawn from the cell counts F (see the module docstring); a batch holds at most
    BATCH_CELLS counts. Stratified: F are the counts of the cells over the keys and the stratum
    column and ``strata = (stratum of each such cell, index of its cell over the keys, C)``."""
    check_cell_design(design)
    F = np.asarray(F, dtype=np.int64)
    if design.kind == "stratified":
        yield from _stratified_cells(fraction, int(replicates), F, rng, *strata)
        return
    R, C = int(replicates), int(F.size)
    size = max(1, min(R, BATCH_CELLS // max(C, 1)))
    n = int(np.rint(fraction * F.sum()))
    for first in range(0, R, size):
        count = min(size, R - first)
        if design.kind == "bernoulli":
            f = rng.binomial(F[None, :], fraction, size=(count, C))
        else:
            f = rng.multivariate_hypergeometric(F, n, size=count, method="marginals")
        yield first, count, f.astype(np.int64, copy=False)


def _stratified_cells(fraction, R, F, rng, stratum, coarse, C):
    """:func:`cell_batches` of the stratified design: per stratum (a loop over strata, not records)
    a multivariate hypergeometric draw of n_h = round(π N_h) from its cells, added into the keys'
    cells (within a stratum each cell over the keys appears once, so the addition has no clashes)."""
    stratum = np.asarray(stratum, dtype=np.int64)
    coarse = np.asarray(coarse, dtype=np.int64)
    order = np.argsort(stratum, kind="stable")
    bounds = np.flatnonzero(np.diff(stratum[order])) + 1
    groups = np.split(order, bounds) if order.size else []
    size = max(1, min(R, BATCH_CELLS // max(int(C), 1)))
    for first in range(0, R, size):
        count = min(size, R - first)
        out = np.zeros((count, int(C)), dtype=np.int64)
        for g in groups:
            Fh = F[g]
            nh = int(np.rint(fraction * Fh.sum()))
            out[:, coarse[g]] += rng.multivariate_hypergeometric(Fh, nh, size=count,
                                                                 method="marginals")
        yield first, count, out


def stratum_sizes(strata: np.ndarray, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(N_h, n_h = round(π N_h)) per stratum code."""
    Nh = np.bincount(strata)
    return Nh, np.rint(fraction * Nh).astype(np.int64)


def _srs_within(strata: np.ndarray, fraction: float, count: int, rng: np.random.Generator):
    """SRS of n_h records within every stratum, for ``count`` replicates at once.

    Each record gets a uniform key u in [0, 1); sorting by stratum + u puts every stratum's records in
    random order; the first n_h of each stratum are the sample.
    """
    N = strata.size
    Nh, nh = stratum_sizes(strata, fraction)
    start = np.concatenate(([0], np.cumsum(Nh)[:-1]))
    key = rng.random((count, N)) + strata[None, :]
    order = np.argsort(key, axis=1, kind="stable")
    rank = np.arange(N)[None, :] - start[strata[order]]
    rep, pos = np.nonzero(rank < nh[strata[order]])
    return rep, order[rep, pos]


def count_batch(cell: np.ndarray, C: int, count: int, rep: np.ndarray, rec: np.ndarray) -> np.ndarray:
    """Sample counts f of every replicate of a batch: a (count × C) matrix, one bincount over the
    (replicate, cell) pairs' mixed-radix ids."""
    from gpurisk.freq.cellid import mixed_radix_ids
    flat = mixed_radix_ids([rep, cell[rec]], [count, C], dtype=np.int64)
    return np.bincount(flat, minlength=count * C).reshape(count, C)
