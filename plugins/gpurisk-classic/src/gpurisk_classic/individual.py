"""``indiv_risk``: Benedetti-Franconi individual risk, global risk and expected re-identifications.

Per record i in cell k: r_i = r_k (see :mod:`gpurisk_classic.risk`). As sdcMicro's ``measure_risk``:

    expected re-identifications  ER = Σ_i r_i = Σ_k f_k r_k
    global risk                     = ER / n           (the measure's value)

F̂_k, the estimated population count of cell k, comes from the option ``Fk`` (default ``auto``: the
first available of the next three): ``weights``, the sum of the design weights in the cell
(``--weights``, sdcMicro's Fk); ``population``, the population count F_k (``--population`` or
``--sample-flag``); ``fraction``, f_k / π (``--fraction``); or ``sample``, f_k itself: sdcMicro's
convention for data without weights, which treats the file as the population and makes every risk
1/f_k. That last one is never chosen by ``auto``: without weights, population or π the measure does
not apply (and says how to give one).

ER, the number of records above the threshold and the largest r_k are sums and a maximum over cells,
so the measure reads the cells bucket by bucket (``reads = "buckets"``): each bucket gives its share
of Σ_k f_k r_k, its records above the threshold and its largest risk; on a Dask cluster the cells
stay on the workers. n comes from the table's summaries.
"""
from __future__ import annotations

import numpy as np

from gpurisk import BadInput, Context, Measure, Result
from gpurisk.xp import scalar
from gpurisk import Option

from .risk import METHODS, cell_risk

FK_SOURCES = ("weights", "population", "fraction", "sample")


def estimated_population(table, ctx: Context, source: str = "auto",
                         name: str = "indiv_risk") -> tuple[np.ndarray | None, str]:
    """(F̂_k for every cell, in the table's namespace, or None when ``source`` is not available; the
    source used)."""
    if source not in ("auto",) + FK_SOURCES:
        raise BadInput(f"{name}.Fk={source!r} is not one of auto, {', '.join(FK_SOURCES)}")
    xp = table.xp
    f = table.f.astype(xp.float64)
    have = {"weights": _design_weights(table, ctx),
            "population": None if table.F is None else table.F.astype(xp.float64),
            "fraction": f / float(ctx.fraction) if ctx.fraction else None,
            "sample": f}
    if source == "auto":
        source = next((s for s in FK_SOURCES[:3] if have[s] is not None), "weights")
    if source == "weights" and table.w is not None and have["weights"] is None:
        return None, NORMALISED
    return have[source], source


#: the source named when the weights are normalised and no population size is given
NORMALISED = "normalised weights"


def _design_weights(table, ctx: Context):
    """F̂_k from the weights by gpurisk's one rule (:mod:`gpurisk.core.weights`, applied when the
    records are counted): design weights, a cell's weight sum below its count raised to it
    (calibrated weights below 1). Weights that gave no π are normalised weights without a population
    size (design weights give π = n/Σw): None."""
    from gpurisk.core.weights import design_cell_weights
    if table.w is None or ctx.fraction is None:
        return None
    return design_cell_weights(table.f, table.w, 1.0, table.xp)[0]


NO_FK = {"weights": "needs design weights ({weights})",
         "population": "needs population counts ({population} or {sample_flag})",
         "fraction": "needs the sampling fraction ({fraction})"}


def risk_options(name: str, ctx: Context, defaults) -> tuple[str, float]:
    method = ctx.option(name, "method", defaults["method"])
    if method not in METHODS:
        raise BadInput(f"{name}.method={method!r} is not one of {', '.join(METHODS)}")
    qual = ctx.option(name, "qual", defaults["qual"])
    try:
        qual = float(qual)
    except (TypeError, ValueError):
        raise BadInput(f"{name}.qual={qual!r} is not a number") from None
    if not 0.0 < qual <= 1.0:
        raise BadInput(f"{name}.qual={qual!r} is outside (0, 1]")
    return method, qual


def fk_missing(name: str, source: str, wanted: str) -> str:
    """Why F̂_k cannot be had from ``source`` (``wanted``: the option as given)."""
    if source == NORMALISED:
        return ("the weights sum to n: normalised weights, which say nothing of the population size; "
                "give it as {fraction} (π = n/N) to scale them to design weights, or give design "
                "weights 1/π_i")
    if wanted == "auto":
        return (f"needs an estimate of the population counts F_k: give {{weights}}, {{population}}, "
                f"{{sample_flag}} or {{fraction}} (or {{option:{name}.Fk=sample}} for sdcMicro's "
                "unweighted convention F_k = f_k)")
    return NO_FK[source]


def fk_below(below: int) -> str:
    return (f"the weights of {below} cell(s) sum to less than their "
            "sample count (design weights below 1?), so they cannot estimate F_k")


def cells_below(f, Fk) -> int:
    """The number of cells whose F̂_k is below their sample count f_k."""
    return int(scalar(((f > 0) & (Fk < f * (1 - 1e-9))).sum()))


def risk_of_cells(name: str, table, ctx: Context, defaults) -> tuple[np.ndarray | None, str, str | None]:
    """(r_k per cell or None, F̂ source, reason when the risk cannot be computed). ``table`` is a
    FreqTable or a bucket of its cells (anything with ``f``, ``F``, ``w`` and ``xp``)."""
    method, qual = risk_options(name, ctx, defaults)
    wanted = ctx.option(name, "Fk", defaults["Fk"])
    Fk, source = estimated_population(table, ctx, wanted, name)
    if Fk is None:
        return None, source, fk_missing(name, source, wanted)
    below = cells_below(table.f, Fk)
    if below:
        return None, source, fk_below(below)
    return cell_risk(table.f, Fk, method, qual), source, None


def record_risk(table, method: str = "approx", qual: float = 1.0, fraction: float | None = None,
                Fk: str = "auto") -> np.ndarray:
    """Each sample record's individual risk, in the sample's record order (sdcMicro's ``risk`` column).

    F̂_k as for the measure (option ``Fk``): the table's weights, else its population, else
    f_k / ``fraction``; ``Fk="sample"`` takes F̂_k = f_k (sdcMicro without weights).
    """
    if fraction is None and table.w is not None:       # design weights give π = n/Σw
        from gpurisk.inputs import resolve_fraction
        fraction = resolve_fraction(table, None)[0]
    ctx = Context(fraction=fraction,
                  options={IndividualRisk.name: {"method": method, "qual": qual, "Fk": Fk}})
    r, _, why = risk_of_cells(IndividualRisk.name, table, ctx, IndividualRisk.options)
    if r is None:
        from gpurisk.errors import BadInput
        from gpurisk.core.messages import phrase, stored
        python = stored(why).replace(f"{{option:{IndividualRisk.name}.Fk=sample}}", "Fk='sample'")
        raise BadInput(phrase(python, "python"), cli=phrase(why, "cli"))
    return r[table.record_cell()]


class IndividualRisk(Measure):
    name = "indiv_risk"
    description = "Benedetti-Franconi individual risk: global risk = expected re-identifications / n"
    needs = frozenset()
    level = "record"
    reference = ("Benedetti & Franconi (1998); Franconi & Polettini (2004) PSD LNCS 3050; "
                 "sdcMicro indivRisk / measure_risk")
    options = {"method": Option(str, "approx", choices=METHODS, help="approx or exact (sdcMicro)"),
               "qual": Option(float, 1.0, min=0.0, max=1.0, min_open=True,
                              help="quality factor multiplying the risks"),
               "threshold": Option(float, 0.1, min=0.0, max=1.0,
                                   help="count the records whose risk exceeds it"),
               "Fk": Option(str, "auto", choices=("auto",) + FK_SOURCES,
                            help="source of the estimated population counts F_k")}

    reads = "buckets"     # sums and a maximum over cells: each bucket of cells on its own

    def map_bucket(self, bucket, ctx: Context) -> dict:
        method, qual = risk_options(self.name, ctx, self.options)
        wanted = ctx.option(self.name, "Fk", self.options["Fk"])
        Fk, source = estimated_population(bucket, ctx, wanted, self.name)
        if Fk is None:
            return {"source": source, "missing": True}
        below = cells_below(bucket.f, Fk)
        if below:
            return {"source": source, "below": below}
        r = cell_risk(bucket.f, Fk, method, qual)
        thr = self._threshold(ctx)
        xp = bucket.xp
        f = bucket.f.astype(xp.float64)
        return {"source": source, "er": float(scalar(xp.dot(f, r))),
                "max": float(scalar(r.max())) if r.shape[0] else None,
                "above": int(scalar(f[r > thr].sum()))}

    def _threshold(self, ctx: Context) -> float:
        thr = ctx.option(self.name, "threshold", self.options["threshold"])
        try:
            return float(thr)
        except (TypeError, ValueError):
            raise BadInput(f"{self.name}.threshold={thr!r} is not a number") from None

    def reduce_buckets(self, parts, table, ctx: Context) -> Result:
        source = parts[0]["source"]
        if any(p.get("missing") for p in parts):
            wanted = ctx.option(self.name, "Fk", self.options["Fk"])
            return Result.not_applicable(fk_missing(self.name, source, wanted), Fk_from=source)
        below = sum(p.get("below", 0) for p in parts)
        if below:
            return Result.not_applicable(fk_below(below), Fk_from=source)
        er = float(sum(p["er"] for p in parts))
        maxes = [p["max"] for p in parts if p["max"] is not None]
        n = table.n
        return Result(value=er / n, extra={
            "expected_reidentifications": er,
            "global_risk_pct": 100.0 * er / n,
            "max_risk": max(maxes) if maxes else 0.0,
            "threshold": self._threshold(ctx),
            "records_above_threshold": int(sum(p["above"] for p in parts)),
            "method": ctx.option(self.name, "method", self.options["method"]),
            "Fk_from": source,
        })
