"""match_prob_a: expected share of correct matches under attack method A. SPEC §2.

    P = Σ_j I(f_j = 1) / F_j  /  Σ_j I(f_j = 1)                              (eq. 3)

Skinner & Elliot (2002) eq. 3.
"""
from __future__ import annotations

import math

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class MatchProbA(Measure):
    name = "match_prob_a"
    description = "Pr(correct match) for a sample unique under attack method A (mean of 1/F_j)"
    needs = frozenset({"population"})
    reference = "Skinner & Elliot (2002), eq. (3) (attack method A)"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        s = table.unique_stats()
        if s.n1 == 0:
            return Result(value=math.nan, reason="no sample uniques (n1 = 0): method A never matches")
        return Result(value=s.inv_F_sum / s.n1)


@hookimpl
def gpurisk_register_measures():
    return [MatchProbA]
