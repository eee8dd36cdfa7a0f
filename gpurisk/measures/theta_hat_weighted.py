"""theta_hat_weighted: θ̂ under unequal inclusion probabilities (experimental). SPEC §2.

The modified data intrusion simulation removes sample record i with probability
w_i / Σ_s w_k (w_i = 1/π_i, as if drawing one unit of the population) and copies it back with
probability π_i. A unique match is correct when a sample unique is copied back, and false when one
of a pair is not, so

    θ̂_w = n1 / (n1 + Σ_{i : f_{X_i} = 2} (1/π_i − 1))
         = n1 / (n1 + Σ_{j : f_j = 2} (w_j − 2)),   w_j = Σ_{i in cell j} w_i,

which is eq. 7 when every π_i = π. As theta_hat, it is not estimable when the sample has no pair. The paper leaves the estimator's properties open (§5.3), so the
result carries ``experimental: true``. Weights must be design weights 1/π_i >= 1 (summing to about
the population size); weights normalised to the sample size are not, and make a cell's weight sum
smaller than its count: the measure then does not apply.
Skinner & Elliot (2002) §5.3.
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

    def compute(self, table, ctx: Context) -> Result:
        f, w = table.f, table.w
        low = int(scalar(((f > 0) & (w < f * (1.0 - 1e-12))).sum()))
        if low:
            return Result.not_applicable(
                f"{low} cell(s) have a weight sum below their count, so some weight is "
                "below 1 (pi_i > 1): give design weights 1/pi_i, not normalised weights")
        th, n1, d = theta_hat_weighted(f, w)
        extra = {"experimental": True, "n1": n1, "sum_pairs_w_minus_1": d}
        n2 = int(scalar((f == 2).sum()))
        if n2 == 0 and n1 > 0:
            return Result(value=None, reason=not_estimable(n1, 0, int(scalar((f == 3).sum()))),
                          extra=extra | {"estimable": False})
        if math.isnan(th):
            return Result(value=math.nan, reason="no sample cell has f_j = 1 or 2 (or every pair "
                          "has pi_i = 1): no unique match can happen", extra=extra)
        return Result(value=th, extra=extra)


@hookimpl
def gpurisk_register_measures():
    return [ThetaHatWeighted]
