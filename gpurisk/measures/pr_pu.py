"""pr_pu: the proportion of population units that are population unique. SPEC §2, §3.

    Pr(PU) = N1 / N

Skinner & Elliot (2002) section 2; Kim & Jeong (2007) P(A ∈ P1).
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class PrPU(Measure):
    name = "pr_pu"
    description = "Pr(PU): share of population units that are unique in the population"
    needs = frozenset({"population"})
    reference = "Skinner & Elliot (2002), §2.2 (Pr(PU) = N1/N); Kim & Jeong (2007), P(A ∈ P1) in eqs. (6)-(9)"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        N1 = table.pop_uniques()
        return Result(value=N1 / table.N, extra={"N1": N1})


@hookimpl
def gpurisk_register_measures():
    return [PrPU]
