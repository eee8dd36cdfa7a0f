"""matches: E, the expected number of correct matches, from the population counts (the truth).

    E = Σ_{j: f_j = 1} 1 / F_j

An intruder who matches each sample unique to one record of the population drawn at random from its
key cell is right with probability 1/F_j; E sums that over the sample uniques. It is n1 times
``match_prob_a`` (Skinner & Elliot 2002, eq. 3, attack method A) and the τ2 of Skinner & Shlomo
(2008). ``matches_ll`` estimates it from the sample alone.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class Matches(Measure):
    name = "matches"
    description = "Expected number of correct matches E = sum over sample uniques of 1/F_j (population)"
    needs = frozenset({"population"})
    reference = "Skinner & Elliot (2002), eq. (3) times n1; Skinner & Shlomo (2008), tau2"
    reads = "summary"

    def compute(self, table, ctx: Context) -> Result:
        s = table.unique_stats()
        return Result(value=float(s.inv_F_sum), extra={"n1": s.n1})


@hookimpl
def gpurisk_register_measures():
    return [Matches]
