"""``pop_uniqueness``: the population uniques estimated from the sample (SPEC §10, issue 27).

Default (``model=auto`` under ``rule=gpurisk``): ``loglinear_eb``, E[N1 | sample] under a
log-linear Poisson–gamma model of the cells, Ê's (main effects plus a forest of two-way interactions,
each kept by its evidence, each tree rooted and a child's shares given its parent's shrunk towards
its own; ``loglinear_forest``, the default before, keeps each pair by a held-out test and smooths the
pair tables by a fixed κ), summed over every cell of the key space
(:mod:`gpurisk_arx.loglinear_n1`, which gives the formulas and the key-space assumption); it reads each
cell's categories, so the measure reads cells. The ARX models below read only the frequencies of
frequencies.

The value is the estimated NUMBER of population uniques (classes of size 1 in the population),
so that ``gpurisk validate`` pairs it with the true number ``pop_uniques``; ARX's "population
uniqueness" is that number over N, the extra ``share``. Models (option ``model``): ``pitman``
(Hoshino 2001), ``zayatz`` (Zayatz 1991), ``snb`` (Chen & Keller-McNulty 1998) and ``dankar``
(Dankar et al. 2012's decision rule, ARX's default). Formulas, fitting and their starting values
are in :mod:`gpurisk_arx.uniqueness`. N is the population's size when one is given, else n/π.
Option ``rule``: ``gpurisk`` (default) fits Pitman by its maximum likelihood over the whole parameter
space and reports E[N1 | sample] with ``se``, the one-sided (1 − α) bound ``upper`` and the two-sided
(1 − α) interval ``interval_lower``/``interval_upper`` (gpurisk's one convention), SNB with a
root scan, every value within what the sample allows; ``arx`` gives ARX's own numbers. ``model=auto``
is Dankar's decision rule under both (the validation's least biased choice for gpurisk's fits).
A model that does not apply, or whose fit does not converge, gives no value and a reason; the
chosen model, its iterations and every model tried are in the extras. Dankar's rule reads the
sampling fraction of the run (``--fraction``, a validate design's π, or n/N from a population).
"""
from __future__ import annotations

import math

import numpy as np

from gpurisk import BadInput, Context, Measure, Option, Result

from . import uniqueness as U

PREFIX = {"pitman": "pitman", "zayatz": "zayatz", "snb": "snb"}


class PopUniqueness(Measure):
    name = "pop_uniqueness"
    scenario = ("N1: people unique in the population on the keys, estimated from the sample (a "
                "spontaneous-recognition or fishing intruder; log-linear model of the cells)")
    description = ("population uniques N1 estimated from the sample, with an interval (a log-linear "
                   "Poisson-gamma model of the cells by default; Pitman by maximum likelihood, Zayatz, "
                   "SNB, Dankar's rule; rule=arx: ARX's numbers)")
    needs = frozenset({"fraction"})
    level = "file"
    reference = ("Skinner & Shlomo (2008); Bethlehem, Keller & Pannekoek (1990); "
                 "Dankar, El Emam, Neisa & Roffey (2012); Hoshino (2001); Zayatz (1991); "
                 "Chen & Keller-McNulty (1998); as in ARX")
    options = {
        "rule": Option(str, "gpurisk", choices=U.RULES,
                       help="gpurisk: Pitman by its maximum likelihood over the whole parameter space, "
                            "expected N1 given the sample, SNB with a root scan, values within what the "
                            "sample allows, an interval; arx: ARX's fits and numbers"),
        "model": Option(str, "auto", choices=("auto",) + U.MODELS + U.LL_MODELS,
                        help="auto (rule gpurisk: " + U.GPURISK_DEFAULT_MODEL + "; rule arx: dankar), "
                             "dankar (ARX's decision rule), pitman, zayatz, snb; rule gpurisk also "
                             "loglinear_eb (Poisson-gamma cells, Ê's model: main effects plus the "
                             "two-way interactions kept by their evidence, as a forest, each tree "
                             "rooted and a child's shares given its parent's shrunk towards its "
                             "own), loglinear_forest (the interactions a held-out test keeps, the "
                             "pair tables smoothed by a fixed kappa), loglinear_risk (those Ê's risk "
                             "criterion keeps), loglinear (main "
                             "effects tempered to the sample's n1 and n2), loglinear_main "
                             "(untempered main effects) or bethlehem "
                             "(one rate for every cell)"),
        "expectation": Option(str, "conditional", choices=("conditional", "finite", "limit"),
                              help="rule gpurisk, Pitman's N1: conditional (given the sample), finite "
                                   "(N (θ+α)_{N−1}/(θ+1)_{N−1}) or limit (Γ(θ+1)/Γ(θ+α) N^α, ARX's)"),
        "level": Option(float, None, help="rule gpurisk: level of the two-sided interval for N1 "
                                          "(interval_lower, interval_upper); default 1 − --alpha, "
                                          "as every interval; upper is the one-sided 1 − α bound"),
        "unseen_categories": Option(bool, True,
                                    help="log-linear models: add the population uniques in "
                                         "categories no sample record has, (1-pi)/pi times the "
                                         "model's P(F = 1 | f = 1) summed over the sample records "
                                         "alone in one of their categories (a Horvitz-Thompson "
                                         "sum); false: the model's cells only"),
        "structural_zeros": Option(bool, True,
                                   help="forest models (loglinear_eb, loglinear_forest): take the "
                                        "combinations of the other "
                                        "keys (all but the lone key of most categories) that no "
                                        "sample record has as possibly impossible, as many as the "
                                        "sample's count of combinations implies, and count their "
                                        "empty cells' uniques only that much; false: every "
                                        "combination is possible"),
        "k_estimator": Option(str, "sh3", choices=U.K_ESTIMATORS,
                              help="SNB's number of population classes: sh3 (Haas et al. 1995, as "
                                   "published), shlosser (1981) or arx (Sh3 as ARX computes it)"),
    }
    estimates = "pop_uniques"
    default = False       # iterative fits: run when named
    reads = "cells"       # the log-linear models read each cell's categories (the others need only
    #                       the frequencies of frequencies, n and N)

    def compute(self, table, ctx: Context) -> Result:
        """The one convention of levels (:mod:`gpurisk.core.levels`): ``upper`` the one-sided
        (1 − α) bound, the upper end of the fit's central (1 − 2α) interval, and
        ``interval_lower``/``interval_upper`` the two-sided interval at ``level`` (1 − α)."""
        alpha = float(ctx.alpha)
        given = ctx.option(self.name, "level", None)
        level = 1.0 - alpha if given is None else float(given)
        if not 0.0 < level < 1.0:
            raise BadInput(f"pop_uniqueness.level must lie strictly between 0 and 1, got {level}")
        r = self._at(table, ctx, level)
        if r.value is None or r.upper is None:
            return r
        if r.se is None:        # n1 = 0: the model-free bound is one-sided already, at 1 − α
            b = r if given is None else self._at(table, ctx, 1.0 - alpha)
            return Result(value=r.value, upper=b.upper, extra=dict(
                r.extra, interval_lower=r.extra.get("lower"), interval_upper=r.upper,
                interval_level=level, bound_level=1.0 - alpha))
        b = self._at(table, ctx, 1.0 - 2.0 * alpha)         # its upper end: the one-sided bound
        extra = dict(r.extra, interval_lower=r.extra.get("lower"), interval_upper=r.upper,
                     interval_level=level, lower=b.extra.get("lower"), level=1.0 - 2.0 * alpha,
                     bound_level=1.0 - alpha)
        return Result(value=r.value, se=r.se, upper=b.upper, extra=extra)

    def _at(self, table, ctx: Context, level: float) -> Result:
        """The estimate with its interval at ``level`` (``lower``, ``upper``)."""
        rule = ctx.option(self.name, "rule", "gpurisk")
        model = ctx.option(self.name, "model", "auto")
        if model == "auto":
            model = U.GPURISK_DEFAULT_MODEL if rule == "gpurisk" else "dankar"
        est = ctx.option(self.name, "k_estimator", "sh3")
        expectation = ctx.option(self.name, "expectation", "conditional")
        n = table.n
        if n == 0:
            return Result.not_applicable("the sample has no records")
        N = float(table.N) if table.N is not None else n / float(ctx.fraction)
        if model in U.LL_MODELS:
            if rule != "gpurisk":
                raise BadInput(f"pop_uniqueness.model={model} needs rule=gpurisk (rule=arx has ARX's "
                               "models: dankar, pitman, zayatz, snb)")
            return self._loglinear(table, ctx, model, N, level)
        sm = U.sample(table.fof_vector(), N)
        pi = float(ctx.fraction)        # the rule reads the given π (or n/N, as the host set it)
        fit, fits = table.cached(
            f"gpurisk_arx.pop_uniqueness.{rule}.{model}.{est}.{expectation}.{level!r}.{N!r}.{pi!r}",
            lambda: U.estimate(sm, model, est, pi, rule, expectation, level))
        extra = {"model": fit.model, "rule": rule, "decision": model, "iterations": fit.iterations,
                 "converged": fit.converged, "N": N, "fraction": pi, "n1": sm.n1, "n2": sm.n2,
                 "classes": sm.J}
        for m, f in fits.items():
            extra[f"{m}_uniques"] = f.value
            extra[f"{m}_iterations"] = f.iterations
            extra[f"{m}_converged"] = f.converged
            if f.reason:
                extra[f"{m}_reason"] = f.reason
            for k, v in f.params.items():
                extra[f"{m}_{k}"] = v if isinstance(v, str) else float(v)
        if fit.value is None:
            why = fit.reason if model != "dankar" or fit.reason else \
                "Dankar: no model applies (" + "; ".join(f.reason for f in fits.values() if f.reason) + ")"
            return Result.not_applicable(why, **extra)
        if fit.value is not None and not math.isfinite(fit.value):
            return Result.not_applicable(f"{fit.model}: the estimate is not finite", **extra)
        return _answer(fit, extra, N, level)

    def _loglinear(self, table, ctx: Context, model: str, N: float, level: float) -> Result:
        """N1 under a log-linear Poisson–gamma model of the cells (:mod:`.loglinear_n1`)."""
        from gpurisk.xp import to_host

        from . import loglinear_n1 as LL
        f = np.asarray(to_host(table.f), dtype=np.int64)
        codes = [np.asarray(to_host(c)) for c in table.cell_codes()]
        from gpurisk.models import category_ranks
        ranks = category_ranks(table.categories)
        unseen = bool(ctx.option(self.name, "unseen_categories", True))
        zeros = bool(ctx.option(self.name, "structural_zeros", True))
        fit = table.cached(f"gpurisk_arx.pop_uniqueness.{model}.{N!r}.{level!r}.{unseen}.{zeros}",
                           lambda: LL.fit(codes, f, N, model, level, ranks=ranks,
                                          names=list(table.keys), unseen=unseen, support=zeros))
        extra = {"model": model, "rule": "gpurisk", "decision": model, "N": N,
                 "fraction": float(ctx.fraction), "n1": int((f == 1).sum()),
                 "n2": int((f == 2).sum()), "classes": int((f > 0).sum()),
                 "key_space": LL.KEY_SPACE.get(model, LL.KEY_SPACE[None])}
        if "interactions" in fit.params:
            names = [str(k) for k in table.keys]
            extra["interactions"] = ", ".join(f"{names[a]} x {names[b]}"
                                              for a, b in fit.params["interactions"]) or "none"
        extra.update({f"{model}_{k}": float(v) for k, v in fit.params.items()
                      if not isinstance(v, (str, tuple))})
        if fit.value is None:
            return Result.not_applicable(fit.reason, **extra)
        # uniques alone in a category of some key: said, with the coverage measured there
        from gpurisk.models import lone_uniques
        lone = extra["lone_uniques"] = lone_uniques(table)
        n1 = extra["n1"]
        if lone > LONE_NOTE_SHARE * n1:
            extra["note"] = (
                f"{lone} of the {n1} sample uniques ({100.0 * lone / n1:.0f} %) are alone in a "
                "category of some key: the sample cannot show how large such a category is or how "
                "it spreads over the other keys, and the bound holds less often there (99 % bounds "
                "held N1 in 91 % of samples of random key sets of 14 real populations where 10-30 % "
                "of the uniques were such, 85-86 % where more were)")
        return _answer(fit, extra, N, level)


#: above this share of the sample uniques alone in a category of some key
#: (:func:`gpurisk.models.lone_uniques`) the log-linear N̂1 carries a note: in gpurisk's
#: bench/sweep_keysets.py (3 000 random key sets of the 14 populations of its study, π = 1, 5,
#: 10 %) the one-sided 99 % bound held N1 in 98.5 % of the samples where at most 10 % were such,
#: 90.8 % at 10-30 %, 86.2 % at 30-70 %, 85.1 % above (model error 0.125, issue 43's stop 68).
#: Where the note is shown, not a part of the estimate
LONE_NOTE_SHARE = 0.1


def _answer(fit, extra: dict, N: float, level: float) -> Result:
    """The measure's Result of a fit with a value: its share of N, its note, and its interval
    (``lower`` and ``level`` in the extras) where it has one; at n1 = 0 the interval has no s.e.
    (:func:`.fitted.none_unique_fit`)."""
    extra["share"] = fit.value / N
    if isinstance(fit.params.get("note"), str):
        extra["note"] = (fit.params["note"] if not extra.get("note") else
                         f"{fit.params['note']}; {extra['note']}")
    if fit.upper is None:
        return Result(value=float(fit.value), extra=extra)
    extra.update(lower=fit.lower, level=level)
    return Result(value=float(fit.value), se=fit.se, upper=fit.upper, extra=extra)
