"""suda, dis_suda: SUDA special-uniques scores and DIS-SUDA probabilities, file-level. SPEC §9.

For record i, an MSU is a subset S of the M keys with c_S(i) = 1 and c_{S∖{k}}(i) > 1 for every k ∈ S
(subsets of at most ``max_msu`` keys searched). Score of i = Σ over its MSUs of the weight of |S| = k:

    elliot (default):  (M − k)!                     (sdcMicro 5.8.1 suda2, original_scores = TRUE)
    ihsn:              (2^(M−k) − 1) / C(M, k)      (suda2, original_scores = FALSE)

    dis_i = 1 / (1 + P (1 − f) / (f s_i^Q Σ_{j: s_j > 0} s_j^(−Q))),  Q = 1 + (8 − M)/20,
    P = records in full-key cells of 2 records, f = ``dis_fraction`` (default: π when known, else 0.01)

``suda``'s value is the number of records with a score > 0 (extra: maximum and total score, MSUs by
size, each key's contribution in percent); ``dis_suda``'s value is the sum of the DIS-SUDA
probabilities, the expected number of correct matches (extra: maximum, mean over scored records).
Elliot, Manning & Ford (2002), IJUFKS 10; Manning, Haglin & Keane (2008), DMKD 16 (SUDA2);
Elliot, Manning, Mayes, Gurd & Bane (2005), UNECE/Eurostat work session (DIS-SUDA); sdcMicro
``suda2``. The search and scores live in
:mod:`gpurisk.models.suda`, :mod:`gpurisk.models.suda_scores`, :mod:`gpurisk.models.suda_table`.
"""
from __future__ import annotations

import math

from gpurisk.errors import BadInput
from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option

SHARED = "suda"


class _Suda(Measure):
    needs = frozenset()
    level = "record"
    reads = "cells"
    default = False     # a walk over the lattice of key subsets: run when named (--measures suda)
    shared_options = SHARED
    options = {
        "max_msu": Option(int, None, min=1, help="largest MSU searched, in keys (default: all keys)"),
        "scoring": Option(str, "elliot", choices=("elliot", "ihsn"),
                          help="elliot (sdcMicro's default) or ihsn (original_scores = FALSE)"),
    }

    def opt(self, ctx: Context, key: str):
        return ctx.option(self.name, key, ctx.option(SHARED, key, self.options.get(key)))

    def _summary(self, table, ctx: Context, dis_fraction: float):
        from gpurisk.models import suda_table as st
        try:
            st.check_identifier_keys(table)
            return st.summary(table, self.opt(ctx, "max_msu"), self.opt(ctx, "scoring"), dis_fraction), None
        except BadInput as exc:
            return None, str(exc)


class Suda(_Suda):
    name = "suda"
    description = "SUDA: records with a special-uniques score > 0 (minimal sample uniques per record)"
    reference = ("Elliot, Manning & Ford (2002) special uniques; Manning, Haglin & Keane (2008) "
                 "SUDA2; sdcMicro suda2")

    def compute(self, table, ctx: Context) -> Result:
        s, why = self._summary(table, ctx, 0.5)
        if s is None:
            return Result.not_applicable(why)
        extra = {"scoring": s["scoring"], "max_msu": s["max_msu"], "sample_uniques": s["sample_uniques"],
                 "max_score": s["max_score"], "total_score": s["total_score"], "msus": s["msus"]}
        extra.update({f"msus_size_{k}": v for k, v in s["msus_by_size"].items()})
        extra.update({f"contrib_pct_{k}": (None if math.isnan(v) else v)
                      for k, v in s["contributions_pct"].items()})
        return Result(value=s["records_scored"], extra=extra)


class DisSuda(_Suda):
    name = "dis_suda"
    description = "DIS-SUDA: expected correct matches (sum of per-record match probabilities)"
    reference = ("Elliot et al. (2005) DIS-SUDA, with the DIS of Skinner & Elliot (2002); "
                 "sdcMicro suda2")
    options = {**_Suda.options.specs,
               "dis_fraction": Option(float, None, min=0.0, max=1.0, min_open=True, max_open=True,
                                      help="share f of records an intruder holds (default: π when "
                                           "known, else 0.01)")}

    def compute(self, table, ctx: Context) -> Result:
        f = self.opt(ctx, "dis_fraction")
        source = "option"
        if f is None:
            f, source = (ctx.fraction, "fraction") if ctx.fraction is not None and ctx.fraction < 1 \
                else (0.01, "default")
        s, why = self._summary(table, ctx, f)
        if s is None:
            return Result.not_applicable(why)
        scored = s["records_scored"]
        return Result(value=s["dis_sum"], extra={
            "scoring": s["scoring"], "max_msu": s["max_msu"], "dis_fraction": s["dis_fraction"],
            "dis_fraction_from": source, "Q": s["dis_Q"], "P": s["dis_P"], "max": s["dis_max"],
            "mean_scored": s["dis_sum"] / scored if scored else 0.0, "records_scored": scored,
            **({"warning": s["warnings"][0]} if s["warnings"] else {})})


@hookimpl
def gpurisk_register_measures():
    return [Suda, DisSuda]
