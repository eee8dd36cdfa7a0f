"""bethlehem_flag: 1 when Pr(PU) exceeds Bethlehem et al.'s rule of thumb, else 0. SPEC §3.

    flag = I(N1 / N > threshold),  threshold = 0.001 (0.1 %) by default (option ``threshold``)

Bethlehem, Keller & Pannekoek (1990), as used by Kim & Jeong (2007) §4.
"""
from __future__ import annotations

from gpurisk.errors import BadInput
from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures import _kim_jeong as kj


class BethlehemFlag(Measure):
    name = "bethlehem_flag"
    description = "1 when Pr(PU) = N1/N exceeds Bethlehem's 0.1 % threshold, else 0"
    needs = frozenset({"population"})
    reference = "Bethlehem, Keller & Pannekoek (1990); Kim & Jeong (2007), §4"
    options = {"threshold": Option(float, 0.001, min=0.0, max=1.0, min_open=True, max_open=True,
                                   help="flag when Pr(PU) exceeds it")}
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        t = ctx.option(self.name, "threshold", self.options["threshold"])
        try:
            t = float(t)
        except (TypeError, ValueError):
            raise BadInput(f"option {self.name}.threshold={t!r} is not a number") from None
        if not 0.0 < t < 1.0:
            raise BadInput(f"option {self.name}.threshold={t!r} must lie in (0, 1)")
        pu, N1 = kj.pr_pu(table)
        return Result(value=1.0 if pu > t else 0.0, extra={"pr_pu": pu, "threshold": t, "N1": N1})


@hookimpl
def gpurisk_register_measures():
    return [BethlehemFlag]
