"""theta_hat_dis: θ̂ by Monte Carlo Data Intrusion Simulation. SPEC §2.

Repeat K times: remove one sample record at random; copy it back with probability π; R_u = 1 when
its key then matches exactly one record, R_c = 1 when that match is the record itself.

    θ̂(K) = Σ R_c R_u / Σ R_u  →  θ̂ (eq. 7) as K → ∞                      (eq. 6, Proposition 1)

Only the size f_j of the removed record's cell decides R_u and R_c, and a record drawn uniformly
lies in a cell of size 1 with probability n1/n and of size 2 with probability 2 n2/n. So the K draws
are simulated through their sufficient statistics, at O(1) cost whatever K: the numbers of draws
landing in each class are multinomial(K; n1/n, 2 n2/n, rest); of those in size-1 cells, a
binomial(π) number are copied back (R_c = R_u = 1); of those in size-2 cells, a binomial(1 − π)
number are not (R_u = 1, R_c = 0). The standard error is the delta-method s.e. of the ratio over
the K draws; the upper bound θ̂(K) + z s.e. is clipped to 1. As theta_hat, it is not estimable
when the sample has no pair (n2 = 0: every simulated unique match is correct, θ̂(K) = 1 ± 0).
(tests/test_measures_se.py checks this against a literal record-by-record simulation.)
Skinner & Elliot (2002) section 3, eq. 6.
"""
from __future__ import annotations

import math

import numpy as np

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures._util import z_upper
from gpurisk.measures.theta_hat import not_estimable, upper_bound


def dis_draws(n1: int, n2: int, n: int, pi: float, K: int, rng: np.random.Generator):
    """(Σ R_u, Σ R_c) over K simulated intrusions on a sample of n records."""
    p1, p2 = n1 / n, 2 * n2 / n
    k1, k2, _ = rng.multinomial(K, [p1, p2, max(0.0, 1.0 - p1 - p2)])
    rc = int(rng.binomial(k1, pi))            # unique cell, copied back: a correct unique match
    wrong = int(rng.binomial(k2, 1.0 - pi))   # pair cell, not copied back: a false unique match
    return rc + wrong, rc


class ThetaHatDIS(Measure):
    name = "theta_hat_dis"
    description = "theta_hat by Monte Carlo data intrusion simulation (K draws, seeded)"
    needs = frozenset({"fraction"})
    reference = "Skinner & Elliot (2002), §3, eq. (6) and Proposition 1"
    options = {"K": Option(int, 200_000, min=1, max=10**12,
                           help="simulated intrusions; the s.e. shrinks as 1/sqrt(K)")}
    estimates = "theta"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        K = int(ctx.option(self.name, "K", self.options["K"]))
        if K < 1:
            from gpurisk.errors import BadInput
            raise BadInput(f"theta_hat_dis: K must be a positive integer, got {K}")
        n1, n2 = table.n_r(1), table.n_r(2)
        if n2 == 0 and n1 > 0 and ctx.fraction < 1.0:
            return Result(value=None, reason=not_estimable(n1, n2, table.n_r(3)),
                          extra={"K": K, "estimable": False, "n1": n1, "n2": n2})
        rng = np.random.default_rng(ctx.seed)
        nu, nc = dis_draws(n1, n2, table.n, ctx.fraction, K, rng)
        if nu == 0:
            return Result(value=math.nan, reason=f"no unique match in {K} simulated intrusions "
                          "(no cell with f_j = 1 or 2)", extra={"K": K})
        th = nc / nu
        # delta method for a ratio of means: var = mean((rc - th*ru)^2) / (K * mean(ru)^2), where
        # rc - th*ru is 1 - th for the nc correct matches, -th for the nu - nc false ones, else 0
        ss = nc * (1.0 - th) ** 2 + (nu - nc) * th * th
        se = math.sqrt(ss / K / K) / (nu / K)
        return Result(value=th, se=se, upper=upper_bound(th, se, z_upper(ctx.alpha), "wald"),
                      extra={"K": K, "unique_matches": nu})


@hookimpl
def gpurisk_register_measures():
    return [ThetaHatDIS]
