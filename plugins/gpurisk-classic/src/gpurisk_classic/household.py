"""``household_risk``: hierarchical (household) risk, as sdcMicro's ``measure_risk(..., hid=)``.

A household is re-identified when any of its members is: with r_i the individual risk of record i
(:mod:`gpurisk_classic.individual`), every member of household h gets

    r_h = 1 - Π_{i in h} (1 - r_i),

and, over the n records, ER_hier = Σ_i r_{h(i)} (expected re-identifications) and the hierarchical
risk ER_hier / n (the measure's value). Options ``method``, ``qual`` and ``Fk`` as for ``indiv_risk``.
Computed as r_h = -expm1(Σ_{i in h} log1p(-r_i)), one
``bincount`` over household codes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpurisk import BadInput, Context, Measure, Result
from gpurisk.xp import namespace, scalar, to_device
from gpurisk import Option

from .individual import FK_SOURCES, risk_of_cells
from .risk import METHODS


def household_codes(values, column: str) -> tuple[np.ndarray, int]:
    """(household code of each record, number of households); a missing id is bad input."""
    codes, uniques = pd.factorize(pd.Series(values), use_na_sentinel=True)
    bad = codes < 0
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise BadInput(f"household column {column!r} has {int(bad.sum())} missing value(s) "
                       f"(first sample rows {rows})")
    return codes, len(uniques)


def household_of_records(record_risk, codes, households: int):
    """r_h of each record's household: 1 - Π (1 - r_i) over its members (in ``record_risk``'s
    namespace; host ``codes`` are moved there)."""
    xp = namespace(record_risk)
    codes = to_device(codes, xp)
    with np.errstate(divide="ignore"):
        logs = xp.bincount(codes, weights=xp.log1p(-record_risk), minlength=households)
    return -xp.expm1(logs)[codes]


class HouseholdRisk(Measure):
    name = "household_risk"
    scenario = ("households: the risk that a household is re-identified through any one of its "
                "members (1 − Π(1 − r_i)), each matched as indiv_risk matches")
    description = "hierarchical risk: a household is re-identified when any member is (1 - Π(1 - r_i))"
    needs = frozenset({"records", "columns"})
    level = "record"
    reference = "sdcMicro measure_risk (hid, fast_hier); Templ, Kowarik & Meindl (2015) JSS 67(4)"
    options = {"household": Option(str, None, help="column of household ids"),
               "method": Option(str, "approx", choices=METHODS, help="approx or exact (sdcMicro)"),
               "qual": Option(float, 1.0, min=0.0, max=1.0, min_open=True,
                              help="quality factor multiplying the risks"),
               "Fk": Option(str, "auto", choices=("auto",) + FK_SOURCES,
                            help="source of the estimated population counts F_k")}
    column_options = ("household",)

    def compute(self, table, ctx: Context) -> Result:
        column = str(ctx.option(self.name, "household", self.options["household"]))
        if column in table.keys:
            raise BadInput(f"household column {column!r} is one of the key variables")
        r, source, why = risk_of_cells(self.name, table, ctx, self.options)
        if r is None:
            return Result.not_applicable(why, Fk_from=source)
        codes, households = household_codes(ctx.column(column), column)
        per_record = household_of_records(r[table.record_cell()], codes, households)
        er = float(scalar(per_record.sum()))
        n = int(per_record.shape[0])
        return Result(value=er / n, extra={
            "expected_reidentifications": er,
            "hier_risk_pct": 100.0 * er / n,
            "households": households,
            "max_household_risk": float(scalar(per_record.max())) if n else 0.0,
            "Fk_from": source,
        })
