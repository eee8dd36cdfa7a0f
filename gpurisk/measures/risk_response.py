"""risk_response: an intruder with response knowledge (knows A is in the release). SPEC §3.

    risk = P(A ∈ F2) · Pr(PU)                                                        (eq. 8)
    risk = Pr(PU)   when the intruder's file is a 100 % population file              (eq. 9)

Option ``p_f2`` (default 1, i.e. eq. 9). Kim & Jeong (2007) §3.1.2, eqs. 8-9.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures import _kim_jeong as kj


class RiskResponse(Measure):
    name = "risk_response"
    description = "Kim-Jeong risk under response knowledge, P(A in F2) Pr(PU)"
    needs = frozenset({"population"})
    reference = "Kim & Jeong (2007), eqs. (8) and (9)"
    options = {"p_f2": Option(float, 1.0, min=0.0, max=1.0, min_open=True, help="P(A in F2), the intruder's file")}
    shared_options = kj.SHARED
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        b, b_src = kj.p_f2(ctx, self.name)
        pu, N1 = kj.pr_pu(table)
        return Result(value=b * pu, extra={"p_f2": b, "p_f2_source": b_src, "pr_pu": pu, "N1": N1})


@hookimpl
def gpurisk_register_measures():
    return [RiskResponse]
