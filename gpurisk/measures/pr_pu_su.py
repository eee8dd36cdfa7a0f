"""pr_pu_su: Pr(population unique | sample unique). SPEC §2.

    Pr(PU | SU) = Σ_j I(f_j = 1, F_j = 1) / Σ_j I(f_j = 1)

Skinner & Elliot (2002) section 2.
"""
from __future__ import annotations

import math

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class PrPUgivenSU(Measure):
    name = "pr_pu_su"
    description = "Pr(PU|SU): share of sample uniques that are population uniques"
    needs = frozenset({"population"})
    reference = "Skinner & Elliot (2002), §2.2 and eq. (3)"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        s = table.unique_stats()
        if s.n1 == 0:
            return Result(value=math.nan, reason="no sample uniques (n1 = 0): Pr(PU|SU) is undefined")
        return Result(value=s.pop_unique / s.n1, extra={"tau1": s.pop_unique})


@hookimpl
def gpurisk_register_measures():
    return [PrPUgivenSU]
