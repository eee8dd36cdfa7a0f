"""theta_hat_weighted: θ̂ under unequal inclusion probabilities (experimental). SPEC §2.

The modified data intrusion simulation removes sample record i with probability
w_i / Σ_s w_k (w_i = 1/π_i, as if drawing one unit of the population) and copies it back with
probability π_i. A unique match is correct when a sample unique is copied back, and false when one
of a pair is not, so

    θ̂_w = n1 / (n1 + Σ_{i : f_{X_i} = 2} (1/π_i − 1))
         = n1 / (n1 + Σ_{j : f_j = 2} (w_j − 2)),   w_j = Σ_{i in cell j} w_i,

which is eq. 7 when every π_i = π (Skinner & Elliot 2002, eq. 7 and §5.3). As theta_hat, it is not estimable when the sample has no pair. The paper leaves the estimator's properties open (§5.3), so the
result carries ``experimental: true``, and it gives no variance estimator: the s.e. is withheld
with that reason (:data:`NO_SE`). Weights are read by the one rule of :mod:`gpurisk.core.weights`:
design weights as they are, calibrated weights with a cell's weight sum below its count raised to
the count, normalised weights (Σw ≈ n) scaled by 1/π where π is given and otherwise not applicable
with one line saying how to give the population size.
Skinner & Elliot (2002) §5.3.

It reads the cells bucket by bucket (``reads = "buckets"``): each bucket of cells gives its Σf, Σw,
the number of cells raised to their count and its share of Σ_{f_j = 2} (w_j − 2), for the weights
as given and scaled by 1/π; the reduction adds them, picks by the rule, and takes n1 = n_1 and n_2
from the frequencies of frequencies. On a Dask cluster the cells
stay on the workers.
"""
from __future__ import annotations

import math


from gpurisk.xp import scalar
from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.measures.theta_hat import not_estimable
from gpurisk.core.weights import (WeightRule, design_cell_weights, normalised_reason,
                                  weight_rule)


#: why θ̂_w has no s.e.
NO_SE = ("no s.e.: Skinner & Elliot (2002, §5.3) give θ̂_w no variance estimator and leave its "
         "properties open")


def theta_hat_weighted(f, w) -> tuple[float, int, float]:
    """(θ̂_w, n1, Σ_{f_j=2} (w_j − 2)) from cell counts and cells' design-weight sums (arrays of any
    one namespace: only the two sums come to the host)."""
    n1 = int(scalar((f == 1).sum()))
    d = float(scalar((w[f == 2] - 2.0).sum()))
    den = n1 + d
    return (n1 / den if den > 0 else math.nan), n1, d


def _pairs_part(f, w, scale, xp) -> tuple[int, float]:
    """(cells raised to their count, Σ_{f_j=2} (w_j − 2)) of the cells' design weights."""
    dw, low = design_cell_weights(f, w, scale, xp)
    return int(scalar(low.sum())), float(scalar((dw[f == 2] - 2.0).sum()))


def weighted_result(n1: int, n2: int, n3: int, d: float, rule: WeightRule, raised: int) -> Result:
    """θ̂_w's Result from n1, n2, n3 and Σ_{f_j=2} (w_j − 2) of the design weights."""
    den = n1 + d
    th = n1 / den if den > 0 else math.nan
    extra = {"experimental": True, "n1": n1, "sum_pairs_w_minus_1": d, "se_reason": NO_SE,
             "weights": rule.words(), "cells_raised_to_count": raised}
    if n2 == 0 and n1 > 0:
        return Result(value=None, reason=not_estimable(n1, 0, n3), extra=extra | {"estimable": False})
    if math.isnan(th):
        return Result(value=math.nan, reason="no sample cell has f_j = 1 or 2 (or every pair "
                      "has pi_i = 1): no unique match can happen", extra=extra)
    return Result(value=th, extra=extra)


class ThetaHatWeighted(Measure):
    name = "theta_hat_weighted"
    description = "theta_hat for unequal inclusion probabilities pi_i = 1/w_i (experimental)"
    needs = frozenset({"weights"})
    reference = "Skinner & Elliot (2002), §5.3 (modified data intrusion simulation)"

    reads = "buckets"

    def map_bucket(self, bucket, ctx: Context) -> dict:
        f, w, xp = bucket.f, bucket.w, bucket.xp
        out = {"n": int(scalar(f.sum())), "total": float(scalar(w.sum()))}
        out["raised"], out["d"] = _pairs_part(f, w, 1.0, xp)
        if ctx.fraction:
            out["raised_s"], out["d_s"] = _pairs_part(f, w, 1.0 / float(ctx.fraction), xp)
        return out

    def reduce_buckets(self, parts, table, ctx: Context) -> Result:
        rule = weight_rule(sum(p["n"] for p in parts), sum(p["total"] for p in parts), ctx.fraction)
        if not rule.usable:
            return Result.not_applicable(normalised_reason(rule))
        tail = "" if rule.kind == "design" else "_s"
        d = float(sum(p["d" + tail] for p in parts))
        raised = sum(p["raised" + tail] for p in parts)
        return weighted_result(table.n_r(1), table.n_r(2), table.n_r(3), d, rule, raised)


@hookimpl
def gpurisk_register_measures():
    return [ThetaHatWeighted]
