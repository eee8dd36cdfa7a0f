"""gpurisk's rule for the population uniques (issue 27): the models fitted properly.

Pitman at the maximum of its likelihood over the whole parameter space with E[N1 | sample] and an
interval (:mod:`.pitman_mle`); SNB from its seven starts and then a scan for a bracketed root
(:func:`.uniqueness.snb` with ``scan=True``); Zayatz as is; every value within what the sample allows,
n1 − (N − n) ≤ N1 ≤ N − (n − n1) (:func:`.pitman_mle.bounds`); no value ("not estimable") where every
sample record is unique; Dankar's decision rule over these fits. ARX's own fits stay in
:mod:`.uniqueness` (``rule="arx"``).
"""
from __future__ import annotations

import math

from . import pitman_mle as PM
from . import uniqueness as U
from .pitman_mle import bounds
from .uniqueness import Fit, Sample


def pitman_mle_fit(sm: Sample, expectation: str = "conditional", level: float = 0.95) -> Fit:
    """Pitman at the maximum of its likelihood over the parameter space (:mod:`.pitman_mle`), the
    expected N1 given the sample, and its interval."""
    if sm.n1 == 0:
        return none_unique_fit("pitman", sm, level)
    m = PM.fit(sm)
    if isinstance(m, str):
        return Fit("pitman", None, f"Pitman: {m}", converged=False)
    params = {"theta": m.theta, "alpha": m.alpha, "loglik": m.loglik,
              "branch": "finite-K" if m.K is not None else "alpha>=0"}
    if m.K is not None:
        params["K"] = float(m.K)
    u = PM.uniques(m.theta, m.alpha, sm, expectation)
    if not math.isfinite(u):
        return Fit("pitman", None, "Pitman: the expected number of population uniques is not finite "
                   f"at the fit (α = {m.alpha:.4g}, θ = {m.theta:.4g})", iterations=m.evaluations,
                   params=params)
    se, lo, hi = PM.interval(m, sm, expectation, level)
    if lo is not None and hi is not None:
        lo, hi = PM.count_interval(lo, hi, sm)
    return Fit("pitman", u, iterations=m.evaluations, params=params, se=se, lower=lo, upper=hi)


#: what a fit says where no sample record is unique
NONE_UNIQUE = ("no sample record is unique (n1 = 0), so no model of the uniques can be fitted: the "
               "estimate is 0, and the interval's upper end assumes only that each population unique "
               "is in the sample with probability π")


def none_unique_fit(model: str, sm: Sample, level: float) -> Fit:
    """N̂1 = 0 where n1 = 0, with the interval [0, U] of :func:`.pitman_mle.none_sampled_upper`."""
    return Fit(model, 0.0, params={"note": NONE_UNIQUE}, lower=0.0,
               upper=PM.none_sampled_upper(sm, level))


def _capped(fit: Fit, sm: Sample) -> Fit:
    """``fit`` with its value inside what the sample allows (pitman_mle.bounds), saying so."""
    if fit.value is None:
        return fit
    lo, hi = bounds(sm)
    v = min(max(fit.value, lo), hi)
    if v != fit.value:
        fit.params["capped_from"] = fit.value
        fit.value = v
    return fit


def estimate_gpurisk(sm: Sample, model: str = "pitman", estimator: str = "sh3",
                     pi: float | None = None, expectation: str = "conditional",
                     level: float = 0.95) -> tuple[Fit, dict[str, Fit]]:
    """The models fitted properly (issue 27): Pitman by :func:`pitman_mle_fit`, SNB with a scan for
    a bracketed root, Zayatz as is; each value within [n1 − (N − n), N − (n − n1)]; no value (a
    reason) when every sample record is unique, 0 with the interval of :func:`none_unique_fit`
    when none is; Dankar's decision rule over these fits."""
    if sm.n1 == sm.n and sm.n > 0 and sm.N > sm.n:
        why = ("not estimable: every sample record is unique (n1 = n), so the sample cannot tell how "
               "many population records are unique (anything from n1 − (N − n) to N − (n − n1))")
        fit = Fit(model, None, why, converged=False)
        return fit, {model: fit}
    if sm.n1 == 0:                 # every model gives 0; the interval needs none of them
        fit = none_unique_fit(model, sm, level)
        return fit, {model: fit}
    models = {"pitman": lambda: pitman_mle_fit(sm, expectation, level), "zayatz": lambda: U.zayatz(sm),
              "snb": lambda: U.snb(sm, estimator, scan=True)}
    if model != "dankar":
        fit = _capped(models[model](), sm)
        return fit, {model: fit}
    fits: dict[str, Fit] = {}
    if (sm.pi if pi is None else pi) <= 0.1 + 1e-12:
        fits["pitman"] = _capped(models["pitman"](), sm)
        if fits["pitman"].value is not None:
            return fits["pitman"], fits
        fits["zayatz"] = _capped(models["zayatz"](), sm)
        return fits["zayatz"], fits
    fits["zayatz"] = _capped(models["zayatz"](), sm)
    fits["snb"] = _capped(models["snb"](), sm)
    z, b = fits["zayatz"], fits["snb"]
    if b.value is None or (z.value is not None and z.value <= b.value):
        return z, fits
    return b, fits
