"""theta_hat_dis: θ̂ by Monte Carlo Data Intrusion Simulation. SPEC §2.

Repeat K times: remove one sample record at random; copy it back with probability π; R_u = 1 when
its key then matches exactly one record, R_c = 1 when that match is the record itself.

    θ̂(K) = Σ R_c R_u / Σ R_u  →  θ̂ (eq. 7) as K → ∞                      (eq. 6, Proposition 1)

The K draws are made at once as arrays. Only the size f_j of the removed record's cell decides
R_u and R_c, and a record drawn uniformly lies in a cell of size 1 with probability n1/n and of size 2
with probability 2 n2/n, so each draw picks one of those three classes and then flips the copy-back
coin. The standard error is the delta-method s.e. of the ratio over the K draws.
Skinner & Elliot (2002) section 3, eq. 6.
"""
from __future__ import annotations

import math

import numpy as np

from ..hookspecs import hookimpl
from ..measure import Context, Measure, Result
from ._util import z_upper


def dis_draws(n1: int, n2: int, n: int, pi: float, K: int, rng: np.random.Generator):
    """(R_u, R_c) boolean arrays of K simulated intrusions on a sample of n records."""
    u = rng.random(K) * n
    fj = np.where(u < n1, 1, np.where(u < n1 + 2 * n2, 2, 3))
    back = rng.random(K) < pi
    rc = back & (fj == 1)
    ru = rc | (~back & (fj == 2))
    return ru, rc


class ThetaHatDIS(Measure):
    name = "theta_hat_dis"
    description = "theta_hat by Monte Carlo data intrusion simulation (K draws, seeded)"
    needs = frozenset({"fraction"})
    reference = "Skinner & Elliot (2002) §3, eq. 6, Proposition 1; SPEC §2"
    options = {"K": 200_000}
    estimates = "theta"

    def compute(self, table, ctx: Context) -> Result:
        K = int(ctx.option(self.name, "K", self.options["K"]))
        if K < 1:
            from ..errors import BadInput
            raise BadInput(f"theta_hat_dis: K must be a positive integer, got {K}")
        rng = np.random.default_rng(ctx.seed)
        ru, rc = dis_draws(table.n_r(1), table.n_r(2), table.n, ctx.fraction, K, rng)
        nu = int(ru.sum())
        if nu == 0:
            return Result(value=math.nan, reason=f"no unique match in {K} simulated intrusions "
                          "(no cell with f_j = 1 or 2)", extra={"K": K})
        th = int(rc.sum()) / nu
        # delta method for a ratio of means: var = mean((rc - th*ru)^2) / (K * mean(ru)^2)
        resid = rc.astype(np.float64) - th * ru
        se = math.sqrt(float(np.mean(resid * resid)) / K) / (nu / K)
        return Result(value=th, se=se, upper=th + z_upper(ctx.alpha) * se,
                      extra={"K": K, "unique_matches": nu})


@hookimpl
def gpurisk_register_measures():
    return [ThetaHatDIS]
