"""r1, r1u, r2, r3, r4, b1: identification risk of sample-unique records by search method. SPEC §5.

Each measure evaluates its formula (see :mod:`gpurisk.measures.search_methods`; Skinner (2007) eqs.
5, 10, 7, 8, 8, 9) at p̂_x = μ̂_x / n, μ̂ the IPF fit of the log-linear model with all two-way
interactions (:mod:`gpurisk.models.loglinear`, fitted once per table and shared by the six), for every
sample-unique record. The file-level value is the sum of the risks, i.e. the expected number of
correct identifications among the sample uniques; ``extra`` holds their number, mean, maximum, the
numbers above the thresholds, and the IPF's iterations and final margin discrepancy.

N is the option ``population_size`` (``--option record_risk.population_size=N`` sets it for all six),
else the population's size, else n/π. r3 needs the option ``y``, r4 ``database_size``; b1 takes
``p_tilde`` (default p̂). The measure does not apply (with the reason) when N is unknown, a needed
option is missing, or K exceeds ``max_cells``.
"""
from __future__ import annotations

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import to_host
from gpurisk.hookspecs import hookimpl
from gpurisk.models.loglinear import MAX_CELLS, MAX_ITER, TOL, check_cells, sample_levels
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures import search_methods as sm

SHARED = "record_risk"  # option namespace read by all six measures


class SearchRisk(Measure):
    method = ""
    needs = frozenset({"records"})
    level = "record"
    default = False  # fits a log-linear model: run when named (--measures r1,r2)
    options = {
        "population_size": Option(float, None, min=0.0, min_open=True,
                                  help="N (default: the population's size, else n/pi)"),
        "thresholds": Option(list, [0.1, 0.5], item=float, min=0.0, max=1.0,
                             help="count the records whose risk exceeds each"),
        "tol": Option(float, TOL, min=0.0, min_open=True, help="IPF tolerance, in records"),
        "max_iter": Option(int, MAX_ITER, min=1, help="IPF iteration limit"),
        "max_cells": Option(float, MAX_CELLS, min=1.0, help="largest dense table fitted"),
    }
    shared_options = SHARED

    def opt(self, ctx: Context, key: str):
        return ctx.option(self.name, key, ctx.option(SHARED, key, self.options.get(key)))

    def compute(self, table, ctx: Context) -> Result:
        from gpurisk.models.record_model import build_model, method_summary
        N_given = self.opt(ctx, "population_size")
        if N_given is None and table.N is None and ctx.fraction is None:
            return Result.not_applicable("needs the population size N: give the option "
                                         f"{SHARED}.population_size, a population or the fraction")
        if self.method == "r3" and self.opt(ctx, "y") is None:
            return Result.not_applicable(f"needs y, the number of non-matches: {{option:{self.name}.y=Y}}")
        if self.method == "r4" and self.opt(ctx, "database_size") is None:
            return Result.not_applicable("needs the database size: "
                                         f"{{option:{self.name}.database_size=D}}")
        max_cells = float(self.opt(ctx, "max_cells"))
        try:
            check_cells(sample_levels(table)[1], max_cells, table.keys)
        except BadInput as exc:
            return Result.not_applicable(str(exc))
        model = build_model(table, (self.method,), population_size=N_given, fraction=ctx.fraction,
                            y=self.opt(ctx, "y"), database_size=self.opt(ctx, "database_size"),
                            p_tilde=self.opt(ctx, "p_tilde"), tol=float(self.opt(ctx, "tol")),
                            max_iter=int(self.opt(ctx, "max_iter")), max_cells=max_cells)
        su = table.xp.flatnonzero(table.f == 1)      # on the table's device
        thresholds = [float(t) for t in self.opt(ctx, "thresholds")]
        if su.shape[0] == 0:
            return Result.not_applicable("no sample-unique record (n1 = 0)",
                                         iterations=model.fit.iterations,
                                         discrepancy=model.fit.discrepancy)
        r = to_host(model.risks(model.p_cell[su])[self.method])   # n1 risks, for the summary
        s = method_summary(r, np.ones(r.size, np.int64), thresholds)
        extra = {"records": s["records"], "mean": s["mean"], "max": s["max"]}
        extra.update({f"above_{k}": v for k, v in s["above"].items()})
        extra.update(N=model.N, N_source=model.N_source, K=model.fit.K,
                     iterations=model.fit.iterations, discrepancy=model.fit.discrepancy,
                     converged=model.fit.converged)
        return Result(value=s["sum"], extra=extra)


def _make(method: str, extra_options: dict | None = None) -> type[SearchRisk]:
    desc, eq = sm.METHODS[method]
    attrs = {
        "name": method,
        "method": method,
        "description": f"expected correct identifications of sample uniques, search method "
                       f"{method}: {desc} (p̂ from the two-way log-linear model)",
        "reference": f"Skinner (2007), eq. ({eq.split()[-1]})",
        "options": {**SearchRisk.options.specs, **(extra_options or {})},
        "__doc__": f"Search method {method} ({eq}): {desc}.",
        "__module__": __name__,
    }
    return type(f"SearchRisk_{method}", (SearchRisk,), attrs)


R1 = _make("r1")
R1u = _make("r1u")
R2 = _make("r2")
R3 = _make("r3", {"y": Option(float, None, min=0.0, help="non-matches seen before the match")})
R4 = _make("r4", {"database_size": Option(float, None, min=1.0, help="size of the database searched")})
B1 = _make("b1", {"p_tilde": Option(float, None, min=0.0, max=1.0, help="match probability (default p-hat)")})


@hookimpl
def gpurisk_register_measures():
    return [R1, R1u, R2, R3, R4, B1]
