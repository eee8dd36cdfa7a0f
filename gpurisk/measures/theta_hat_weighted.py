"""theta_hat_weighted: θ̂ under unequal inclusion probabilities (experimental). SPEC §2.

The modified data intrusion simulation removes sample record i with probability
w_i / Σ_s w_k (w_i = 1/π_i, as if drawing one unit of the population) and copies it back with
probability π_i. A unique match is correct when a sample unique is copied back, and false when one
of a pair is not, so

    θ̂_w = n1 / (n1 + Σ_{i : f_{X_i} = 2} (1/π_i − 1))
         = n1 / (n1 + Σ_{j : f_j = 2} (w_j − 2)),   w_j = Σ_{i in cell j} w_i,

which is eq. 7 when every π_i = π (Skinner & Elliot 2002, eq. 7 and §5.3). As theta_hat, it is not estimable when the sample has no pair. The paper leaves the estimator's properties open (§5.3), so the
result carries ``experimental: true``. Weights must be design weights 1/π_i >= 1 (summing to about
the population size); weights normalised to the sample size are not, and make a cell's weight sum
smaller than its count: the measure then does not apply.
Skinner & Elliot (2002) §5.3.

It reads the cells bucket by bucket (``reads = "buckets"``): each bucket of cells gives the number of
cells whose weight sum is below their count and its share of Σ_{f_j = 2} (w_j − 2); the reduction
adds them and takes n1 = n_1 and n_2 from the frequencies of frequencies. On a Dask cluster the cells
stay on the workers.
"""
from __future__ import annotations

import math


from gpurisk.xp import scalar
from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.measures.theta_hat import not_estimable


def theta_hat_weighted(f, w) -> tuple[float, int, float]:
    """(θ̂_w, n1, Σ_{f_j=2} (w_j − 2)) from cell counts and cell weight sums (arrays of any one
    namespace: only the two sums come to the host)."""
    n1 = int(scalar((f == 1).sum()))
    d = float(scalar((w[f == 2] - 2.0).sum()))
    den = n1 + d
    return (n1 / den if den > 0 else math.nan), n1, d


class ThetaHatWeighted(Measure):
    name = "theta_hat_weighted"
    description = "theta_hat for unequal inclusion probabilities pi_i = 1/w_i (experimental)"
    needs = frozenset({"weights"})
    reference = "Skinner & Elliot (2002), §5.3 (modified data intrusion simulation)"

    reads = "buckets"

    def map_bucket(self, bucket, ctx: Context) -> dict:
        f, w = bucket.f, bucket.w
        low = scalar(((f > 0) & (w < f * (1.0 - 1e-12))).sum())
        return {"low": int(low), "d": float(scalar((w[f == 2] - 2.0).sum()))}

    def reduce_buckets(self, parts, table, ctx: Context) -> Result:
        low = sum(p["low"] for p in parts)
        if low:
            return Result.not_applicable(
                f"{low} cell(s) have a weight sum below their count, so some weight is "
                "below 1 (pi_i > 1): give design weights 1/pi_i, not normalised weights")
        n1, n2 = table.n_r(1), table.n_r(2)
        d = float(sum(p["d"] for p in parts))
        den = n1 + d
        th = n1 / den if den > 0 else math.nan
        extra = {"experimental": True, "n1": n1, "sum_pairs_w_minus_1": d}
        if n2 == 0 and n1 > 0:
            return Result(value=None, reason=not_estimable(n1, 0, table.n_r(3)),
                          extra=extra | {"estimable": False})
        if math.isnan(th):
            return Result(value=math.nan, reason="no sample cell has f_j = 1 or 2 (or every pair "
                          "has pi_i = 1): no unique match can happen", extra=extra)
        return Result(value=th, extra=extra)


@hookimpl
def gpurisk_register_measures():
    return [ThetaHatWeighted]
