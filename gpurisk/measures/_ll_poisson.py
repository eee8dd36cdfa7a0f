"""Shared by tau1_ll and matches_ll: the log-linear Poisson model of Skinner & Shlomo (2008).

Model (Skinner & Shlomo 2008, section 2): the population counts are independent, F_j ~ Poisson(λ_j);
Bernoulli sampling with probability π gives f_j ~ Poisson(π λ_j) and, independently,
F_j − f_j ~ Poisson((1 − π) λ_j). So given a sample unique (f_j = 1), F_j = 1 + X_j with
X_j ~ Poisson(m_j), m_j = (1 − π) λ_j, and

    E[I(F_j = 1) | f_j = 1] = exp(−m_j)                        (the term of τ1)
    E[1/F_j | f_j = 1]      = (1 − exp(−m_j)) / m_j             (the term of τ2 = E)

λ_j is estimated by λ̂_j = μ̂_j / π, μ̂ the maximum-likelihood fit of a log-linear model of the sample
counts f_j: main effects only (``model=independence``, the default: μ̂_j = n Π_v f_v(x_jv)/n in
closed form) or all two-way interactions (``two_way``: :mod:`gpurisk.models.loglinear`, IPF on the
cells where every fitted margin is positive, never a dense K-cell array). Only the sample-unique
cells' μ̂ are read. With ``dispersion=moment`` (default) a cell's λ_j varies around the model by a
gamma factor whose variance α is estimated by moments (:func:`dispersion_moment`, :func:`nb_terms`:
the negative-binomial smoothing of Rinott & Shlomo 2006 with a moment α). Which model: on 5 real
populations (docs/validation.md) the two-way model overfits sparse samples (Ê 11-95 % low, τ̂1 23-100 % low), the
independence model alone overstates (up to +41 %), and the gamma factor takes most of that
back (median |bias| of Ê 3.8 %, worst +29 %). What is left is the main-effects model's, not the
dispersion estimate's (bench/ll_bias_causes.py: no estimator of α removes it; the one two-way margin
the population needs does, but choosing it from the sample by a simple rule overfits).
Skinner & Shlomo's own model-choice criterion is not implemented (the paper's text is not at hand to
check it against).

Variance. The Poisson terms, given λ: the cells are independent given λ, so
Var(τ1 | f) = Σ_{f_j=1} e^{−m_j}(1 − e^{−m_j}) and Var(τ2 | f) = Σ_{f_j=1} [E(1/F_j²) − E(1/F_j)²] with

    E[1/(1 + X)²] = e^{−m} (Ei(m) − γ − ln m) / m               (Σ_k m^k / (k! (k+1)²) summed)

That is the spread of the true τ1, E around their model expectations, not the error of λ̂ nor the
model's bias: on real populations it was 0.15-0.8 of the real sd (bench/validate_trust.py). The
s.e. reported is therefore sqrt((k · s.e._Poisson)² + (c · estimate)²) with k = ``se_factor`` = 2
and c = ``model_error`` = 0.12 (a relative model error), calibrated on that study (see SE_FACTOR);
``se_poisson`` keeps the Poisson part. ``upper`` = estimate + z_{1−α} s.e.; ``interval_lower`` and
``interval_upper`` the two-sided 1 − α interval, clipped to [0, n1].
Skinner, C. and Shlomo, N. (2008) Assessing identification risk in survey microdata using log-linear
models. J. Amer. Statist. Assoc. 103, 989-1001.
"""
from __future__ import annotations

import math

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.measure import Context, Measure, Result
from gpurisk.measures._util import z_upper
from gpurisk.models.loglinear import MAX_CELLS, MAX_ITER, TOL, check_cells, sample_levels
from gpurisk.options import Option
from gpurisk.xp import scalar, to_host

#: the log-linear models offered (option ``model``): margins fitted
MODELS = ("independence", "two_way")
#: how the cells may vary around the model (option ``dispersion``)
DISPERSIONS = ("moment", "none")
SHARED = "loglinear_risk"      # option namespace read by tau1_ll and matches_ll
#: the s.e.'s calibration (module docstring): on 5 real populations × 3 key sets × π = 1, 5, 10 %
#: (bench/validate_trust.py, 50 samples a cell) the Poisson terms' s.e. was 0.15-0.8 of the real
#: sd and the model's bias reached 29 % (E) and 44 % (τ1); with these two the two-sided 99 %
#: interval ± 2.576 s.e. covered the truth in ≥ 98 % of the samples of all 38 cells with median
#: n2 ≥ 10, for both E and τ1 (calibrated on the same study: in-sample; docs/validation.md)
SE_FACTOR = 2.0
MODEL_ERROR = 0.12
_EULER = 0.5772156649015329


def tau1_terms(m):
    """(E[I(F = 1) | f = 1], Var) per sample unique, m = (1 − π) λ."""
    t = np.exp(-m)
    return t, t * (1.0 - t)


def inverse_terms(m):
    """(E[1/F | f = 1], Var(1/F | f = 1)) per sample unique, m = (1 − π) λ (see the module doc)."""
    m = np.asarray(m, dtype=np.float64)
    small = m < 1e-6
    big = m > 600.0
    mid = ~small & ~big
    e1 = np.empty_like(m)
    e2 = np.empty_like(m)
    e1[small] = 1.0 - m[small] / 2.0 + m[small] ** 2 / 6.0
    e2[small] = 1.0 - 3.0 * m[small] / 4.0
    mm = m[~small]
    e1[~small] = -np.expm1(-mm) / mm
    if mid.any():
        from scipy.special import expi
        x = m[mid]
        e2[mid] = np.exp(-x) * (expi(x) - _EULER - np.log(x)) / x
    if big.any():   # e^{−m} Ei(m) = (1/m) Σ_k k!/m^k (asymptotic); the rest is below e^{−600}
        x = m[big]
        e2[big] = sum(math.factorial(k) / x**k for k in range(8)) / (x * x)
    return e1, np.maximum(e2 - e1 * e1, 0.0)


def nb_terms(m, alpha, pi, kind):
    """(term, its variance) per sample unique under the Poisson-gamma model (option dispersion).

    λ_j = λ̂_j γ_j, γ_j ~ Gamma(mean 1, variance α): given f_j = 1 the cell's Λ_j is
    Gamma(shape a = 1/α + 1, rate b = 1/(α λ̂_j) + π), so with c = (1 − π)/b

        E[I(F_j = 1) | f_j = 1] = E e^{−(1−π)Λ} = (1 + c)^{−a}
        E[1/F_j | f_j = 1]      = ∫_0^1 E e^{−(1−π)Λu} du = α [1 − (1 + c)^{−1/α}] / c

    (both → the Poisson terms as α → 0). The variance of 1/F is the Poisson one at the posterior
    mean of (1 − π)Λ (an approximation; the study measures the s.e.'s coverage)."""
    lam_m = np.asarray(m, dtype=np.float64)           # (1 − π) λ̂
    if alpha <= 1e-12:
        return (tau1_terms if kind == "tau1" else inverse_terms)(lam_m)
    q = 1.0 - pi
    lam = lam_m / q if q > 0 else np.zeros_like(lam_m)
    with np.errstate(divide="ignore", over="ignore"):
        b = 1.0 / (alpha * np.maximum(lam, 1e-300)) + pi
        c = q / b
    if kind == "tau1":
        t = np.exp(-(1.0 / alpha + 1.0) * np.log1p(c))
        return t, t * (1.0 - t)
    zero = c <= 0.0                                   # π = 1 or λ̂ = 0: F = 1
    cs = np.where(zero, 1.0, c)
    t = np.where(zero, 1.0, alpha * -np.expm1(-np.log1p(cs) / alpha) / cs)
    post = q * (1.0 / alpha + 1.0) / b                # E[(1 − π)Λ | f = 1]
    return t, inverse_terms(post)[1]


def dispersion_moment(table, mu_all, sum_mu2) -> float:
    """α̂ = Σ_j [(f_j − μ̂_j)² − f_j] / Σ_j μ̂_j² over every cell of the table (at least 0): the
    moment estimator of the gamma variance, E[(f − μ)² − f] = α μ² under the Poisson-gamma model.
    ``mu_all``: μ̂ of the sampled cells; ``sum_mu2``: Σ μ̂² over all cells (cells with f = 0 add
    μ̂² only, so no K-cell array is needed)."""
    f = np.asarray(to_host(table.f), dtype=np.float64)
    s = f > 0
    fs, ms = f[s], np.asarray(mu_all, dtype=np.float64)[s]
    num = float(np.sum(fs * fs) - 2.0 * np.sum(fs * ms) + sum_mu2 - fs.sum())
    return max(num / sum_mu2, 0.0) if sum_mu2 > 0 else 0.0


def model_margins(model: str, d: int) -> list[tuple[int, ...]] | None:
    """The margins of a model over d keys (None: every pair, the default of fit_two_way)."""
    if model == "two_way":
        return None
    if model == "independence":
        return [(v,) for v in range(d)]
    raise BadInput(f"log-linear model {model!r} is not one of {', '.join(MODELS)}")


def sample_unique_means(table, model="two_way", tol=TOL, max_iter=MAX_ITER, max_cells=MAX_CELLS):
    """(μ̂ of the sample-unique cells as a host array, the fit or None, α̂); the two-way fit is
    computed once per table and settings (shared with r1, ...); the independence model's μ̂ is
    closed-form, n Π_v (f_v(x_v) / n), computed once per table too (tau1_ll and matches_ll share it
    in a scan)."""
    model_margins(model, len(table.keys))
    if model == "independence":
        return table.cached("_ll_independence", lambda: _means(table, model, tol, max_iter, max_cells))
    return _means(table, model, tol, max_iter, max_cells)


def _means(table, model, tol, max_iter, max_cells):
    su = table.f == 1
    all_codes = table.cell_codes()
    xp, n = table.xp, float(table.n)
    if model == "independence":   # closed form: μ̂_j = n Π_v f_v(x_jv) / n (one-way margins)
        w = table.f.astype(xp.float64)
        mu_all = xp.full(all_codes[0].shape[0], n, dtype=xp.float64)
        sum_mu2 = n * n
        for c, k in zip(all_codes, table.cards):
            p = xp.bincount(c, weights=w, minlength=int(k)) / n
            mu_all *= p[c]
            sum_mu2 *= float(scalar((p * p).sum()))
        fit = None
    else:
        from gpurisk.models.record_model import cached_fit   # the fit r1, ... use: shared
        fit = cached_fit(table, tol, max_iter, max_cells)
        mu_all = fit.p_hat_codes(all_codes) * fit.n
        vals = fit.dense if fit.dense is not None else fit.mu_support
        sum_mu2 = float(scalar((vals * vals).sum()))
    mu_all = np.asarray(to_host(mu_all), dtype=np.float64)
    alpha = dispersion_moment(table, mu_all, sum_mu2)
    return mu_all[np.asarray(to_host(su))], fit, alpha


class LoglinearPoisson(Measure):
    """Base of tau1_ll and matches_ll: the fit, the terms, the Result."""

    needs = frozenset({"fraction"})
    default = False            # fits a log-linear model: run when named
    reads = "cells"
    shared_options = SHARED
    options = {
        "model": Option(str, "independence", choices=MODELS,
                        help="log-linear model of the sample counts: independence = main effects "
                             "(closed form), two_way = main effects and all two-way interactions "
                             "(IPF; Skinner & Shlomo's usual choice, which overfits sparse samples)"),
        "dispersion": Option(str, "moment", choices=DISPERSIONS,
                             help="moment = a gamma-distributed cell effect around the model, its "
                                  "variance by moments (negative binomial); none = Poisson"),
        "se_factor": Option(float, SE_FACTOR, min=1.0,
                            help="multiplies the Poisson terms' s.e. (which takes λ̂ as known)"),
        "model_error": Option(float, MODEL_ERROR, min=0.0,
                              help="relative model error added to the s.e.: se² = (se_factor · "
                                   "Poisson s.e.)² + (model_error · estimate)²"),
        "tol": Option(float, TOL, min=0.0, min_open=True, help="IPF tolerance, in records"),
        "max_iter": Option(int, MAX_ITER, min=1, help="IPF iteration limit"),
        "max_cells": Option(float, 1e30, min=1.0,
                            help="largest table K fitted (the fit runs on the support cells when "
                                 "they are sparse, so K itself may be far beyond memory)"),
    }
    #: what the subclass sums: "tau1" (I(F = 1)) or "inverse" (1/F)
    kind = "tau1"

    def opt(self, ctx: Context, key: str):
        return ctx.option(self.name, key, ctx.option(SHARED, key, self.options.get(key)))

    def compute(self, table, ctx: Context) -> Result:
        pi = float(ctx.fraction)
        n1 = table.n_r(1)
        model = str(self.opt(ctx, "model"))
        extra = {"n1": n1, "model": model, "pi": pi}
        if n1 == 0:       # no sample unique: τ1 = E = 0 exactly
            return Result(value=0.0, se=0.0, upper=0.0, extra=extra)
        max_cells = float(self.opt(ctx, "max_cells"))
        dispersion = str(self.opt(ctx, "dispersion"))
        if dispersion not in DISPERSIONS:
            raise BadInput(f"{self.name}: dispersion={dispersion!r} is not one of "
                           f"{', '.join(DISPERSIONS)}")
        extra["dispersion"] = dispersion
        try:
            if model != "independence":      # the closed form forms no K-cell array
                check_cells(sample_levels(table)[1], max_cells, table.keys)
            mu, fit, alpha = sample_unique_means(table, model, float(self.opt(ctx, "tol")),
                                          int(self.opt(ctx, "max_iter")), max_cells)
        except BadInput as exc:
            return Result.not_applicable(f"the log-linear fit is not available: {exc}", **extra)
        except MemoryError:
            return Result.not_applicable("the log-linear fit needs more memory than there is "
                                         "(too many support cells)", **extra)
        m = (1.0 - pi) * mu / pi            # (1 − π) λ̂
        alpha = alpha if dispersion == "moment" else 0.0
        t, v = nb_terms(m, alpha, pi, self.kind)
        extra["alpha"] = alpha
        value = float(t.sum())
        se_p = math.sqrt(float(v.sum()))
        k, c = float(self.opt(ctx, "se_factor")), float(self.opt(ctx, "model_error"))
        se = math.hypot(k * se_p, c * value)
        z = z_upper(ctx.alpha)
        z2 = z_upper(ctx.alpha / 2.0)
        extra |= {"se_poisson": se_p, "se_factor": k, "model_error": c,
                  "lower": max(value - z * se, 0.0),
                  "interval_lower": max(value - z2 * se, 0.0),
                  "interval_upper": min(value + z2 * se, float(n1)),
                  "mean_lambda": float(mu.mean() / pi)}
        if fit is not None:
            extra |= {"iterations": fit.iterations, "discrepancy": fit.discrepancy,
                      "converged": bool(fit.converged), "K": fit.K, "sparse_fit": fit.sparse}
        if fit is not None and not fit.converged:
            extra["note"] = (f"IPF stopped after {fit.iterations} cycles with a margin "
                             f"discrepancy of {fit.discrepancy:.3g} records (tol {fit.tol:g})")
        return Result(value=value, se=se, upper=min(value + z * se, float(n1)), extra=extra)
