"""``l_diversity``: how many different values of a sensitive variable each key cell holds.

Machanavajjhala et al. (2007), as sdcMicro's ``ldiversity`` computes them per cell j, from the
counts f_jv of the sensitive values v among the cell's f_j records:

    distinct l_j = #{v : f_jv > 0}
    entropy  l_j = exp(-Σ_v (f_jv/f_j) log(f_jv/f_j))

A missing sensitive value counts as one more value, unless the cell holds nothing else (then
distinct l_j = 0), as in sdcMicro. The file's l is the smallest over the sample's cells (the
measure's value is the distinct l; the entropy l is an extra), and the records and cells below the
option ``l`` are counted.

API choice: the sensitive variable is not a key, so it is not in the FreqTable. The measure names it
with a column option (``--option l_diversity.sensitive=COL``), declares it in ``column_options``,
and reads it with ``ctx.column``; the per-cell distribution comes from the engine's public
``gpurisk.cell_value_counts`` (vectorised pair counting), so no plugin re-implements counting.
"""
from __future__ import annotations

import numpy as np

from gpurisk import BadInput, Context, Measure, Result
from gpurisk.xp import to_host
from gpurisk import Option


def l_option(name: str, ctx: Context, default) -> int:
    val = ctx.option(name, "l", default)
    if isinstance(val, bool) or not isinstance(val, (int, float)) or int(val) != val or val < 1:
        raise BadInput(f"{name}.l={val!r} is not an integer >= 1")
    return int(val)


def cell_diversity(table, values, name: str = "sensitive") -> tuple[np.ndarray, np.ndarray]:
    """(distinct l_j, entropy l_j) of every cell of ``table`` (0 and 1 for cells without records)."""
    from gpurisk import cell_value_counts   # gpurisk >= the release that added it; imported late
    cv = cell_value_counts(table, values, name=name)
    distinct = cv.distinct()
    distinct[cv.only_missing()] = 0
    return distinct, np.exp(cv.entropy())


class LDiversity(Measure):
    name = "l_diversity"
    scenario = ("l: the fewest distinct values of the sensitive variable in a cell; an intruder who "
                "places a person in a cell learns it with probability up to 1/l (attribute disclosure)")
    description = "distinct and entropy l-diversity of a sensitive variable (smallest over cells)"
    needs = frozenset({"records", "columns"})
    level = "record"
    reference = "Machanavajjhala et al. (2007) ACM TKDD 1(1); sdcMicro ldiversity"
    options = {"sensitive": Option(str, None, help="the sensitive column"),
               "l": Option(int, 2, min=1, help="count the cells with fewer distinct values")}
    column_options = ("sensitive",)

    def compute(self, table, ctx: Context) -> Result:
        column = str(ctx.option(self.name, "sensitive", self.options["sensitive"]))
        if column in table.keys:
            raise BadInput(f"sensitive column {column!r} is one of the key variables")
        want = l_option(self.name, ctx, self.options["l"])
        distinct, entropy_l = cell_diversity(table, ctx.column(column), column)
        f = to_host(table.f)          # the cell distributions are on the host (cell_value_counts)
        occupied = f > 0
        below = occupied & (distinct < want)
        below_e = occupied & (entropy_l < want * (1 - 1e-12))
        return Result(value=int(distinct[occupied].min()), extra={
            "entropy_l": float(entropy_l[occupied].min()),
            "l": want,
            "cells_below_l": int(below.sum()),
            "records_below_l": int(f[below].sum()),
            "cells_below_l_entropy": int(below_e.sum()),
            "records_below_l_entropy": int(f[below_e].sum()),
            "sensitive": column,
        })
