"""risk_fishing: a fishing intruder, release and intruder file independent. SPEC §3.

    risk = P(A ∈ F1) · P(A ∈ F2) · P(A ∈ P1),   P(A ∈ P1) = Pr(PU) = N1 / N          (eq. 6)

Options (see ``_kim_jeong``): ``p_f1`` (default π), ``p_f2`` (default 1: a 100 % intruder file).
Kim & Jeong (2007) §3.1.1, eq. 6.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures import _kim_jeong as kj


class RiskFishing(Measure):
    name = "risk_fishing"
    description = "Kim-Jeong fishing risk P(A in F1) P(A in F2) Pr(PU), independent files"
    needs = frozenset({"population", "fraction"})
    reference = "Kim & Jeong (2007), eq. (6)"
    options = {"p_f1": Option(float, "pi", min=0.0, max=1.0, min_open=True, help="P(A in F1), the released file"),
               "p_f2": Option(float, 1.0, min=0.0, max=1.0, min_open=True, help="P(A in F2), the intruder's file")}
    shared_options = kj.SHARED
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        a, a_src = kj.p_f1(ctx, self.name)
        b, b_src = kj.p_f2(ctx, self.name)
        pu, N1 = kj.pr_pu(table)
        return Result(value=a * b * pu, extra={"p_f1": a, "p_f1_source": a_src, "p_f2": b,
                                               "p_f2_source": b_src, "pr_pu": pu, "N1": N1})


@hookimpl
def gpurisk_register_measures():
    return [RiskFishing]
