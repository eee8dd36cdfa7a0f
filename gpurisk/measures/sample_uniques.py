"""sample_uniques: the number of sample uniques n1 = #{j : f_j = 1}. SPEC §1, §3.

Kim & Jeong (2007) count sample uniques beside population uniques; with no population this is the
only uniqueness count a release's own file gives.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result


class SampleUniques(Measure):
    name = "sample_uniques"
    description = "Number of sample uniques n1 (records alone in their sample cell)"
    reference = "Skinner & Elliot (2002), §2.1 (n_1); Kim & Jeong (2007), eq. (2)"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers
    #: merging cells never creates a sample unique (SPEC §11): protect prunes on n1 <= x
    monotone = {"value": -1}

    def compute(self, table, ctx: Context) -> Result:
        return Result(value=float(table.n_r(1)))


@hookimpl
def gpurisk_register_measures():
    return [SampleUniques]
