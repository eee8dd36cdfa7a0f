"""pop_uniques: the number of population uniques N1 = #{j : F_j = 1}. SPEC §3.

Kim & Jeong (2007) Table 2 counts, for each subset of the key variables, the persons who are unique in
the population on that subset: one cell with F_j = 1 is one such person.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class PopUniques(Measure):
    name = "pop_uniques"
    description = "Number of population uniques N1 (persons alone in their population cell)"
    needs = frozenset({"population"})
    reference = "Kim & Jeong (2007), Table 2"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers
    #: merging cells never creates a population unique (SPEC §11): protect prunes on N1 <= x
    monotone = {"value": -1}

    def compute(self, table, ctx: Context) -> Result:
        return Result(value=float(table.pop_uniques()))


@hookimpl
def gpurisk_register_measures():
    return [PopUniques]
