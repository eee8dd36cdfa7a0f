"""``k_anonymity``: records and cells that violate k-anonymity (sdcMicro ``print(sdc, "kAnon")``, ARX).

A file is k-anonymous when every combination of key values present is shared by at least k records
(Samarati & Sweeney 1998). With n_r = #{cells j : f_j = r}:

    records violating  = Σ_{r<k} r n_r          (the measure's value; sdcMicro's count)
    cells violating    = Σ_{r<k} n_r
    k achieved         = min {f_j : f_j > 0}     (the largest k the file satisfies; pycanon's k)

Counts only: no records are read.
"""
from __future__ import annotations

from gpurisk import BadInput, Context, Measure, Result
from gpurisk import Option


def k_option(name: str, ctx: Context, default) -> int:
    k = ctx.option(name, "k", default)
    if isinstance(k, bool) or not isinstance(k, (int, float)) or int(k) != k or k < 1:
        raise BadInput(f"{name}.k={k!r} is not an integer >= 1")
    return int(k)


class KAnonymity(Measure):
    name = "k_anonymity"
    description = "records in cells with fewer than k records (k-anonymity violations)"
    needs = frozenset()
    level = "file"
    reference = "Samarati & Sweeney (1998); sdcMicro kAnon print; pycanon k_anonymity"
    options = {"k": Option(int, 3, min=1, help="the k of k-anonymity")}
    reads = "summary"      # the frequencies of frequencies only: runs where the cells stay on the workers
    #: ``protect --criterion k_anonymity>=5`` reads the k the file achieves
    criterion_field = "k_achieved"
    #: under generalisation (cells merge) k_achieved never falls, the violating records and cells
    #: never rise (SPEC §11): protect prunes on criteria in the direction these allow
    monotone = {"k_achieved": +1, "value": -1, "cells_violating": -1, "share_violating": -1}

    def compute(self, table, ctx: Context) -> Result:
        k = k_option(self.name, ctx, self.options["k"])
        fof = table.freq_of_freq()
        records = sum(r * c for r, c in fof.items() if r < k)
        cells = sum(c for r, c in fof.items() if r < k)
        n = table.n
        return Result(value=records, extra={
            "k": k,
            "cells_violating": cells,
            "share_violating": records / n if n else 0.0,
            "k_achieved": min(fof) if fof else 0,
        })
