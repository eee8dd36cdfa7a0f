"""risk_fishing_subsample: a fishing intruder whose file F2 contains the release F1. SPEC §3.

    risk = P(A ∈ F2) · (subsampling rate) · Pr(PU),  rate = P(A ∈ F1 | A ∈ F2)       (eq. 7)

Kim & Jeong's example: a 2 % release drawn as a 20 % subsample of a 10 % census sample held by the
intruder gives 0.1 × 0.2 × Pr(PU). Options: ``p_f2`` (default 1) and ``subsampling_rate`` (default
P(A ∈ F1) / P(A ∈ F2), with ``p_f1`` defaulting to π, so that the release's own fraction is kept).
Kim & Jeong (2007) §3.1.1, eq. 7.
"""
from __future__ import annotations

from gpurisk.errors import BadInput
from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures import _kim_jeong as kj


class RiskFishingSubsample(Measure):
    name = "risk_fishing_subsample"
    description = "Kim-Jeong fishing risk when the release is a subsample of the intruder's file"
    needs = frozenset({"population", "fraction"})
    reference = "Kim & Jeong (2007), eq. (7)"
    options = {"p_f2": Option(float, 1.0, min=0.0, max=1.0, min_open=True, help="P(A in F2), the intruder's file"),
               "subsampling_rate": Option(float, "p_f1 / p_f2", min=0.0, max=1.0, min_open=True,
                                          help="P(A in F1 | A in F2)")}
    shared_options = kj.SHARED
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        b, b_src = kj.p_f2(ctx, self.name)
        rate, r_src = kj.option(ctx, self.name, "subsampling_rate", None)
        if rate is None:
            a, a_src = kj.p_f1(ctx, self.name)
            if a > b:
                raise BadInput(f"{self.name}: P(A in F1) = {a:g} exceeds P(A in F2) = {b:g}, so the "
                               "release cannot be a subsample of the intruder's file; give "
                               "subsampling_rate or p_f2")
            rate, r_src = a / b, f"p_f1 ({a_src}) / p_f2"
        pu, N1 = kj.pr_pu(table)
        return Result(value=b * rate * pu, extra={"p_f2": b, "p_f2_source": b_src,
                                                  "subsampling_rate": rate, "rate_source": r_src,
                                                  "pr_pu": pu, "N1": N1})


@hookimpl
def gpurisk_register_measures():
    return [RiskFishingSubsample]
