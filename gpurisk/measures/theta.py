"""theta: the true Pr(correct match | unique match) when the population is known. SPEC §2.

    θ = Σ_j I(f_j = 1) / Σ_j F_j I(f_j = 1)                                  (eq. 2)

Skinner & Elliot (2002) eq. 2.
"""
from __future__ import annotations

import math

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class Theta(Measure):
    name = "theta"
    description = "True Pr(correct match | unique match) given the population"
    needs = frozenset({"population"})
    reference = "Skinner & Elliot (2002), eq. (2)"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        s = table.unique_stats()
        if s.n1 == 0:
            return Result(value=math.nan, reason="no sample uniques (n1 = 0): theta is undefined")
        return Result(value=s.n1 / float(s.F_sum))


@hookimpl
def gpurisk_register_measures():
    return [Theta]
