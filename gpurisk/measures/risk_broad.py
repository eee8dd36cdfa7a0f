"""risk_broad: Kim & Jeong's broad definition, classes of size C weighted by 1/C. SPEC §3.

    risk = Σ_C (1/C) · P[(A ∈ F1) ∩ (A ∈ F2) ∩ (A ∈ S_1F1) ∩ (A ∈ P_C)]                (eq. 10)

A sample unique of the release that lies in a population class of size C = F_j is matched to the
right person with chance 1/C. With the release at hand, P[(A ∈ F1) ∩ (A ∈ S_1F1) ∩ (A ∈ P_C)] is
#{j : f_j = 1, F_j = C} / N, and the intruder's file is independent of the release, so

    risk = P(A ∈ F2) · (1/N) · Σ_j I(f_j = 1) / F_j.

The condition that A is also unique in the intruder's file (S_1F2) is not modelled: Kim & Jeong drop it
for a 100 % intruder file (the default ``p_f2`` = 1). Restricted to C = 1 the sum is the number of
sample uniques that are population unique, whose expectation under Bernoulli sampling is π N1 (the
narrow eq. 6). Kim & Jeong (2007) §3.2, eq. 10.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures import _kim_jeong as kj


class RiskBroad(Measure):
    name = "risk_broad"
    description = "Kim-Jeong broad risk: sample uniques weighted by 1/F_j, times P(A in F2), over N"
    needs = frozenset({"population"})
    reference = "Kim & Jeong (2007), eq. (10)"
    options = {"p_f2": Option(float, 1.0, min=0.0, max=1.0, min_open=True, help="P(A in F2), the intruder's file")}
    shared_options = kj.SHARED
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        b, b_src = kj.p_f2(ctx, self.name)
        expected = table.unique_stats().inv_F_sum
        return Result(value=b * expected / table.N,
                      extra={"p_f2": b, "p_f2_source": b_src, "expected_matches": expected})


@hookimpl
def gpurisk_register_measures():
    return [RiskBroad]
