"""``k_anonymity``: the k a file achieves, and the records and cells that violate a given k
(sdcMicro ``print(sdc, "kAnon")``, ARX, pycanon).

A file is k-anonymous when every combination of key values present is shared by at least k records
(Samarati & Sweeney 1998). With n_r = #{cells j : f_j = r}:

    k achieved         = min {f_j : f_j > 0}     (the measure's value: the largest k the file
                                                  satisfies; pycanon's k; ``protect``'s criterion)
    records violating  = Σ_{r<k} r n_r          (sdcMicro's count, for the option k)
    cells violating    = Σ_{r<k} n_r

One name, one meaning in every command (issue 28): ``assess`` and ``scan`` report the k achieved,
as ``protect --criterion 'k_anonymity>=3'`` reads it; the violating records are an extra.

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
    description = ("the k the file achieves (smallest cell); records and cells with fewer than "
                   "the option k as extras")
    needs = frozenset()
    level = "file"
    reference = "Samarati & Sweeney (1998); sdcMicro kAnon print; pycanon k_anonymity"
    options = {"k": Option(int, 3, min=1, help="the k of k-anonymity")}
    reads = "summary"      # the frequencies of frequencies only: runs where the cells stay on the workers
    #: ``protect --criterion k_anonymity>=5`` reads the k the file achieves
    criterion_field = "k_achieved"
    #: under generalisation (cells merge) k_achieved never falls, the violating records and cells
    #: never rise (SPEC §11): protect prunes on criteria in the direction these allow
    monotone = {"k_achieved": +1, "value": +1, "records_violating": -1, "cells_violating": -1,
                "share_violating": -1}

    def compute(self, table, ctx: Context) -> Result:
        k = k_option(self.name, ctx, self.options["k"])
        fof = table.freq_of_freq()
        records = sum(r * c for r, c in fof.items() if r < k)
        cells = sum(c for r, c in fof.items() if r < k)
        n = table.n
        achieved = min(fof) if fof else 0
        return Result(value=achieved, extra={
            "k": k,
            "records_violating": records,
            "cells_violating": cells,
            "share_violating": records / n if n else 0.0,
            "k_achieved": achieved,
        })
