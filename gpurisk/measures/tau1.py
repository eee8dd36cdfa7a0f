"""tau1: the number of sample uniques that are population uniques (needs the population). SPEC §4.

    τ1 = Σ_j I(f_j = 1) I(F_j = 1)

Camerlenghi, Favaro, Naulet & Panero (2021), the functional τ1 of their introduction.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class Tau1(Measure):
    name = "tau1"
    description = "True number of sample uniques that are population uniques"
    needs = frozenset({"population"})
    reference = "Camerlenghi, Favaro, Naulet & Panero (2021), definition of τ1"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        s = table.unique_stats()
        return Result(value=float(s.pop_unique), extra={"n1": s.n1})


@hookimpl
def gpurisk_register_measures():
    return [Tau1]
