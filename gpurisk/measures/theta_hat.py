"""theta_hat: Skinner & Elliot's estimator of Pr(correct match | unique match). SPEC §2.

    θ̂ = π n1 / (π n1 + 2(1−π) n2)                                          (eq. 7)
    v̂ = θ̂² · 2(1−π)[3(1−π) n3 + (2−π) n2] / [π n1 + 2(1−π) n2]²           (eq. 9)
    upper = θ̂ + z_{1−α} v̂^½   (one-sided, α = 0.01 by default: z = 2.326)

n_r are numbers of sample cells with f_j = r. Edge cases: n1 = 0 < n2 gives 0; n2 = 0 < n1 gives 1;
n1 = n2 = 0 leaves θ̂ undefined (NaN with a reason). π = 1 gives 1 when n1 > 0.
Skinner, C.J. and Elliot, M.J. (2002) JRSS B 64, 855-867.
"""
from __future__ import annotations

import math

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.measures._util import z_upper


def theta_hat(n1: int, n2: int, n3: int, pi: float) -> tuple[float, float]:
    """(θ̂, v̂) from n1, n2, n3 and π (eqs. 7 and 9); NaN when n1 = n2 = 0."""
    den = pi * n1 + 2.0 * (1.0 - pi) * n2
    if den == 0:
        return math.nan, math.nan
    th = pi * n1 / den
    v = th * th * 2.0 * (1.0 - pi) * (3.0 * (1.0 - pi) * n3 + (2.0 - pi) * n2) / (den * den)
    return th, v


class ThetaHat(Measure):
    name = "theta_hat"
    description = "Estimated Pr(correct match | unique match), with variance and upper bound"
    needs = frozenset({"fraction"})
    reference = "Skinner & Elliot (2002), eqs. (7) and (9)"
    estimates = "theta"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        n1, n2, n3 = table.n_r(1), table.n_r(2), table.n_r(3)
        th, v = theta_hat(n1, n2, n3, ctx.fraction)
        if math.isnan(th):
            return Result(value=math.nan, reason="no sample cell has f_j = 1 or 2, so no unique "
                          "match can happen: theta_hat is undefined")
        se = math.sqrt(v)
        return Result(value=th, se=se, upper=th + z_upper(ctx.alpha) * se,
                      extra={"alpha": ctx.alpha, "n1": n1, "n2": n2, "n3": n3})


@hookimpl
def gpurisk_register_measures():
    return [ThetaHat]
