"""SUDA scores, key contributions and DIS-SUDA probabilities from the MSUs of a table. SPEC §9.

Scores, summed over the MSUs S of record i (M keys; a record with no MSU scores 0):

    elliot (default):  weight of an MSU of size k = (M − k)!            (size M adds 1)
    ihsn:              weight of an MSU of size k = (2^(M−k) − 1) / C(M, k)   (size M adds 0)

``elliot`` reproduces sdcMicro 5.8.1 ``suda2(original_scores = TRUE)`` (its default) and the SDC
Practice Guide's SUDA column; ``ihsn`` reproduces ``original_scores = FALSE``. The weights do not
depend on ``max_msu``. Contribution of key k to record i: (sum of the weights of i's MSUs that
contain k) / suda_i, 0 when suda_i = 0; the file-level contribution of k is the same ratio over all
records' MSUs, in percent.

DIS-SUDA (sdcMicro's ``disScore``), given the fraction f of records an intruder could hold:

    dis_i = 1 / (1 + P (1 − f) / (f s_i^Q Σ_{j: s_j > 0} s_j^(−Q)))  for s_i > 0,  0 otherwise
    Q = 1 + (8 − M) / 20,   P = number of records whose full-key cell has exactly 2 records

Elliot, Manning & Ford (2002); Manning, Haglin & Keane (2008) (SUDA2); Elliot, Manning, Mayes, Gurd &
Bane (2005), "SUDA: A program for detecting special uniques" (DIS-SUDA); sdcMicro ``suda2``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.models.suda import MsuSet
from gpurisk.xp import scalar

SCORINGS = ("elliot", "ihsn")


def size_weights(M: int, scoring: str = "elliot") -> np.ndarray:
    """w[k] = the weight of an MSU of k keys, k = 0..M (w[0] unused, 0)."""
    if scoring not in SCORINGS:
        raise BadInput(f"scoring {scoring!r} is not one of {', '.join(SCORINGS)}")
    w = np.zeros(M + 1, dtype=np.float64)
    for k in range(1, M + 1):
        if scoring == "elliot":
            w[k] = float(math.factorial(M - k))
        else:
            w[k] = (2.0 ** (M - k) - 1.0) / math.comb(M, k)
    return w


def check_dis_fraction(f) -> float:
    try:
        v = float(f)
    except (TypeError, ValueError):
        raise BadInput(f"dis fraction {f!r} is not a number") from None
    if not 0.0 < v < 1.0:
        raise BadInput(f"dis fraction {f!r} must lie in (0, 1): the share of records an intruder holds")
    return v


@dataclass(frozen=True)
class Scores:
    """Per candidate (the table's cells with f_j = 1, in ``MsuSet.cells`` order), arrays in ``xp``:
    ``suda``, ``count`` (MSUs), ``min_size`` (smallest MSU, 0 if none), ``key_weight`` (M arrays: the
    weights of the candidate's MSUs that contain each key); and the file-level sums (host)."""

    scoring: str
    suda: Any
    count: Any
    min_size: Any
    key_weight: list
    total: float
    key_total: list

    def contributions(self) -> list:
        """Per key, the per-candidate contribution (key weight / suda; 0 where suda = 0)."""
        xp = _ns(self.suda)
        pos = self.suda > 0
        safe = xp.where(pos, self.suda, 1.0)
        return [xp.where(pos, kw / safe, 0.0) for kw in self.key_weight]

    def file_contributions(self) -> list[float]:
        """Per key, its share of all MSU weight containing it, in percent (NaN when no score)."""
        if self.total <= 0:
            return [math.nan] * len(self.key_total)
        return [100.0 * t / self.total for t in self.key_total]


def _ns(a):
    from gpurisk.xp import namespace
    return namespace(a)


def score(ms: MsuSet, scoring: str = "elliot") -> Scores:
    """SUDA scores of the candidates of ``ms`` under ``scoring`` (see the module docstring)."""
    xp = ms.xp
    M = ms.M
    w = size_weights(M, scoring)
    nc = ms.candidates
    if ms.msus == 0:
        z = xp.zeros(nc, dtype=xp.float64)
        return Scores(scoring, z, xp.zeros(nc, dtype=xp.int64), xp.zeros(nc, dtype=xp.int64),
                      [z] * M, 0.0, [0.0] * M)
    size = xp.asarray(ms.sizes)[ms.pair_subset]
    pw = xp.asarray(w)[size]
    suda = xp.bincount(ms.pair_cand, weights=pw, minlength=nc)
    count = xp.bincount(ms.pair_cand, minlength=nc).astype(xp.int64)
    # smallest MSU: pairs come out level by level, so write the sizes largest first
    min_size = xp.zeros(nc, dtype=xp.int64)
    for k in range(ms.max_msu, 0, -1):
        at = size == k
        min_size[ms.pair_cand[at]] = k
    member = np.zeros((M, len(ms.subsets)), dtype=np.float64)
    for j, s in enumerate(ms.subsets):
        member[list(s), j] = 1.0
    member = xp.asarray(member)
    key_weight = [xp.bincount(ms.pair_cand, weights=pw * member[v][ms.pair_subset], minlength=nc)
                  for v in range(M)]
    total = float(scalar(suda.sum()))
    key_total = [float(scalar(kw.sum())) for kw in key_weight]
    return Scores(scoring, suda, count, min_size, key_weight, total, key_total)


def dis_q(M: int) -> float:
    return 1.0 + (8.0 - M) / 20.0


def dis_suda(suda, M: int, P: int, fraction: float = 0.01):
    """DIS-SUDA probabilities of scores ``suda`` (an ``xp`` array holding every scored record once);
    ``P`` records lie in full-key cells of 2 records. See the module docstring."""
    xp = _ns(suda)
    f = check_dis_fraction(fraction)
    Q = dis_q(M)
    pos = suda > 0
    safe = xp.where(pos, suda, 1.0)
    denom_sum = float(scalar(xp.where(pos, safe ** (-Q), 0.0).sum()))
    if denom_sum == 0.0:
        return xp.zeros(suda.shape[0], dtype=xp.float64)
    odds = P * (1.0 - f) / (f * safe ** Q * denom_sum)
    return xp.where(pos, 1.0 / (1.0 + odds), 0.0)


def pairs_records(table) -> int:
    """P: records whose full-key cell holds exactly 2 records (2 n_2)."""
    return 2 * int(table.n_r(2))
