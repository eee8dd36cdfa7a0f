"""Shared by tau1_ll and matches_ll: the log-linear Poisson model of Skinner & Shlomo (2008).

Model (Skinner & Shlomo 2008, section 2): the population counts are independent, F_j ~ Poisson(λ_j);
Bernoulli sampling with probability π gives f_j ~ Poisson(π λ_j) and, independently,
F_j − f_j ~ Poisson((1 − π) λ_j). So given a sample unique (f_j = 1), F_j = 1 + X_j with
X_j ~ Poisson(m_j), m_j = (1 − π) λ_j, and

    E[I(F_j = 1) | f_j = 1] = exp(−m_j)                        (the term of τ1)
    E[1/F_j | f_j = 1]      = (1 − exp(−m_j)) / m_j             (the term of τ2 = E)

The model of the sample counts (option ``model``): ``eb`` (the default since issue 43) is main effects
plus a forest of two-way interactions, each kept by its Bayes factor over independence and shrunk
by an empirical-Bayes prior (:mod:`gpurisk.models.eb_forest`; option ``eb_smoothing``: ``rooted``,
the default, each tree rooted and a child's categories given its parent's shrunk towards the
child's shares, or ``joint``, each pair's table shrunk towards independence), with α̂ by zero-truncated
likelihood (``dispersion=auto``: :mod:`gpurisk.models.dispersion`); ``auto_cv`` (the default before) is
main effects plus
the two-way interactions whose held-out log-likelihood gain in random halves of the sample passes a
z test (:mod:`gpurisk.models.model_choice`), kept by decreasing gain while they form a forest
(:mod:`gpurisk.models.forest`: a decomposable model, closed form; ``max_interactions`` caps them,
for ``eb`` too);
``independence`` main effects only, μ̂_j = n Π_v f_v(x_jv)/n; ``two_way`` all two-way interactions
(:mod:`gpurisk.models.loglinear`, IPF on the cells where every fitted margin is positive, never a
dense K-cell array). With ``dispersion=moment`` (``auto`` for every model but ``eb``) a cell's λ_j varies around the model by a
gamma factor of variance α, estimated by moments over every cell (:func:`dispersion_moment`: the
negative-binomial smoothing of Rinott & Shlomo 2006 with a moment α). Only the sample uniques'
cells are read.

How a sample unique's λ_j is taken from the fit (option ``prior``). ``plugin`` is Skinner &
Shlomo's λ̂_j = μ̂_j/π. But the unique's own record is in every margin μ̂_j is fitted from, which
pulls μ̂_j up where those margins are small: on three-key sets Ê ran 10-17 % low. ``loo`` (the
default) gives each sample unique the prior the other n − 1 records give its cell: with c_v the
sample count of its category of each fitted margin v (a key's own, or the kept pair's joint one;
its own record included) and s_v = c_v − 1 + 1/2 (Jeffreys' prior for a Poisson mean, so a margin
the record is alone in still counts), the prior mean on the sample scale and its relative variance
(each margin's posterior Gamma(s_v), independent, times the gamma cell effect; matched by its first
two moments to one gamma, :func:`loo_prior`) are

    μ̃_j = (n − 1) Π_v s_v/(n − 1),      α̃_j = (1 + α̂) Π_v (1 + 1/s_v) − 1,

and the terms are those of :func:`nb_terms` at λ̃_j = μ̃_j/π with α̃_j. With ``two_way`` the plug-in
is used (its margins are not in closed form).

Which defaults: on 5 real populations × 3 key sets × π = 1, 5, 10 % (docs/validation.md,
bench/validate_trust.py, 200 samples a cell) over the 38 cells with median n2 ≥ 10, Ê was within
±10 % of E in 24 cells with main effects and the plug-in (worst +28 %), 32 with ``auto_cv`` without
the test and the plug-in (worst −18 %), and in 37-38 with ``auto_cv`` and ``loo`` (worst −11 %, three
seeds). On 16 key sets not used to choose anything it was within ±10 % in 23 of 32 cells (main
effects and the plug-in: 22), and far off where a key set needs more than one interaction (FARS
race, hispanic, state, injury, sex: +37 to +89 %). The two-way model overfits samples this sparse
(Ê 11-95 % low). ``risk`` chooses the forest by a form of Skinner & Shlomo's own
criterion, a risk-weighted over-dispersion score in a forward selection
(:mod:`gpurisk.models.risk_choice`); ``cv_risk`` starts that selection from ``auto_cv``'s forest.
On 14 real populations (docs/validation.md, issue 43) neither beat ``auto_cv`` (82 of 126 cells
within ±10 %: ``risk`` 79, ``cv_risk`` 82), so neither is the default. On the same cells ``eb`` with
``truncated`` is within ±10 % in 91 (82 with ``auto_cv``), within ±20 % in 102 (99), and the
leave-one-population-out choice among ``auto_cv``, ``eb`` and the two α̂ picks it for every one of
the 14 populations left out: it became the default (docs/validation.md). Its rooted smoothing
(``eb_smoothing=rooted``, issue 43's fifth stop) has Ê within ±10 % in 97 of the 126 cells against
93 for the joint one (100 samples a cell), τ̂1 within ±20 % in 78 against 74, and the
leave-one-population-out choice between the two picks it for all 14. Its s.e. keeps the
calibrated factors below (fitted under ``auto_cv``) and has no model-choice spread (the shrinkage,
not a test, handles a pair the sample cannot tell).

Variance. The Poisson terms, given λ: the cells are independent given λ, so
Var(τ1 | f) = Σ_{f_j=1} e^{−m_j}(1 − e^{−m_j}) and Var(τ2 | f) = Σ_{f_j=1} [E(1/F_j²) − E(1/F_j)²] with

    E[1/(1 + X)²] = e^{−m} (Ei(m) − γ − ln m) / m               (Σ_k m^k / (k! (k+1)²) summed)

That is the spread of the true τ1, E around their model expectations, not the error of λ̂ nor the
model's bias, nor the model choice's spread. The s.e. reported is therefore
sqrt((k · s.e._Poisson)² + (c · estimate)² + se_choice²), k = ``se_factor`` and c = ``model_error`` (a relative
model error) calibrated per measure on that study (SE_CALIBRATION: 3.25 and 0.06 for E, 1.5 and
0.10 for τ1), plus, with ``model=auto_cv``, the model choice's spread (``se_choice``, option
``choice_spread``): Σ_m w_m (T_m − T)² over the forests m one held-out test away from the kept one,
T_m the estimate under m and w_m the chance that test goes the other way
(:func:`gpurisk.models.forest.doubtful`); ``se_poisson`` keeps the Poisson part. With ``interval=model`` nothing is fitted: k = 1, c = 0, the variance of 1/F is the Poisson-gamma
one (:func:`inverse_square`), the choice's spread is over bootstrap selections (``risk``,
``cv_risk``), and where the risk criterion at the kept forest still signals misfit (|T_h| > 1.96)
its bias estimate B̂_h moves the bound on the side it points to, with a note (option
``misfit_widen``: B̂_h < 0, the estimate low, raises the upper bound and the interval's upper end
by |B̂_h|; B̂_h > 0 lowers the lower ones), while the s.e. stays the model's. With the leave-one-out
prior the uniques' terms also covary through the margins they share (a unique's category share
is unknown to every unique in that category): :func:`shared_variance` adds, by the delta method,
Σ_margins Σ_categories rv_g [(Σ_g d_j)² − Σ_g d_j²], d_j each term's slope in ln μ
(:func:`nb_terms`), rv_g the share's relative variance the prior gives (``se_shared``, beside
``se_poisson`` in quadrature; option ``shared_margins``). A sum of few skewed terms is not normal:
the upper bound and the interval's upper end are Cornish-Fisher's, value + s.e. (z + (z² − 1) γ/6),
γ = Σ κ3_j / s.e.³ from each term's third cumulant (:func:`third_cumulants`, E[1/F³] by
:func:`inverse_cube`), never below the normal ones (``skewness``; option ``skew_bound``); the
uniques of the smallest variances that together can move the ends by at most SKEW_TOL of an s.e.
(|κ3_j| ≤ Var_j: each term lies in [0, 1]) are left out of E's Σ κ3 (:func:`skew_uniques`); τ1's
κ3 = t(1 − t)(1 − 2t) is summed over every unique (cheaper than choosing which). Under ``eb``
α̂ is uncertain too, which the per-cell variance (α taken as known) leaves out: the estimate is
recomputed at the ends of α̂'s one-s.e. profile-likelihood interval (the zero-truncated likelihood
within ½ of its maximum: :func:`gpurisk.models.dispersion.alpha_profile`) and half their difference,
``se_alpha``, enters in quadrature. The misfit's widening holds each cell's share of B̂_h within
±1/e (:class:`gpurisk.models.risk_choice.Score`: a cell's term can be off by no more), where the
first-order share of one cell can be far larger (``misfit_bias_first_order`` keeps that sum). On the
14 populations of docs/validation.md that interval's s.e./sd is within 0.7-1.5 in 111 cells against
the calibrated one's 25 and its bound holds in 117 (calibrated: 98): it is matches_ll's default
since issue 43's sixth stop, and tau1_ll's since its seventh (INTERVAL_DEFAULT: τ̂1's bound holds in
111 cells against the calibrated one's 113, its s.e./sd within 0.7-1.5 in 104 against 37, and no
factor is fitted). ``upper`` = estimate + z_{1−α} s.e. (Cornish-Fisher's
under ``interval=model``; + |B̂_h| where the misfit points low); ``interval_lower`` and
``interval_upper`` the two-sided 1 − α interval (made the same way), clipped to [0, n1].
Skinner, C. and Shlomo, N. (2008) Assessing identification risk in survey microdata using log-linear
models. J. Amer. Statist. Assoc. 103, 989-1001.
"""
from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.measure import Context, Measure, Result
from gpurisk.measures._util import z_upper
from gpurisk.models.dispersion import alpha_of, loglik, profile_of, truncated_alpha
from gpurisk.models.loglinear import MAX_CELLS, MAX_ITER, TOL, check_cells, sample_levels
from gpurisk.models.model_choice import Z_CHOICE
from gpurisk.options import Option
from gpurisk.xp import scalar, to_host

#: the log-linear models offered (option ``model``): margins fitted
MODELS = ("auto_cv", "eb", "risk", "cv_risk", "independence", "two_way")
#: how the cells may vary around the model (option ``dispersion``)
DISPERSIONS = ("auto", "moment", "truncated", "none")
#: how the s.e. is formed (option ``interval``)
INTERVALS = ("calibrated", "model")
#: each measure's default interval (issue 43's sixth stop; docs/validation.md, 14 populations, 126
#: cells, 100 samples a cell). Ê's is the model's own (no fitted factor; the margins' covariance;
#: the upper ends for the sum's skewness; the misfit's bias, bounded cell by cell, moving the bound
#: it points to): its 99 % bound held E in ≥ 98 % of the samples in 117 cells (calibrated: 98),
#: with s.e./sd within 0.7-1.5 in 111 (25).
#: τ̂1's is the model's too since issue 43's seventh stop (the study re-run on 9f7e769): its bound
#: held τ1 in ≥ 98 % of the samples in 111 cells against the calibrated one's 113, with s.e./sd
#: within 0.7-1.5 in 104 against 37 (median 1.08 against 1.76), and it fits no factor to these
#: populations (the calibrated one's × 1.5 and 10 % were); the cells it loses are where τ̂1 is
#: biased low (FARS's and STAR's small key sets at 1 %: −26 % and −38 %)
INTERVAL_DEFAULT = {"inverse": "model", "tau1": "model"}
#: how model=eb shrinks a kept pair (option ``eb_smoothing``)
SMOOTHINGS = ("rooted", "joint")
#: how a sample unique's λ is taken from the fit (option ``prior``)
PRIORS = ("loo", "plugin")
#: the leave-one-out prior's pseudo-count per fitted margin (Jeffreys' prior for a Poisson mean)
LOO_PSEUDO = 0.5
SHARED = "loglinear_risk"      # option namespace read by tau1_ll and matches_ll
#: the s.e.'s calibration (module docstring), one pair per measure: (se_factor, model_error) of
#: matches_ll and tau1_ll. Chosen on 5 real populations × 3 key sets × π = 1, 5, 10 %, 400 samples a
#: cell (``bench/validate_trust.py --seed 23`` and ``--seed 22``, each ``--replicates 200 --variants
#: raw_se,raw_poisson --replicates-csv``, then ``bench/calibrate_ll_se.py`` on both) as the pair with the
#: narrowest intervals whose two-sided 99 % interval ± 2.576 s.e. covers the truth in ≥ 98 % of the
#: samples of every one of the 38 cells with median n2 ≥ 10. Checked on new samples (seed 24) and
#: with one population left out at a time: docs/validation.md.
SE_CALIBRATION = {"inverse": (3.25, 0.06), "tau1": (1.5, 0.10)}
SE_FACTOR, MODEL_ERROR = SE_CALIBRATION["inverse"]
_EULER = 0.5772156649015329


def tau1_terms(m):
    """(E[I(F = 1) | f = 1], Var) per sample unique, m = (1 − π) λ."""
    t = np.exp(-m)
    return t, t * (1.0 - t)


#: E[1/(1 + X)²] = e^{−m} S(m), S(m) = (Ei(m) − γ − ln m)/m = Σ_k m^k / ((k + 1)(k + 1)!), is
#: evaluated on SERIES_MIN ≤ m ≤ TAYLOR_MAX from Taylor expansions of S about c = 1/2, 3/2, ..., of
#: TAYLOR_DEGREE (|m − c| ≤ 1/2: the first term left out is below 1e-18 of S), elsewhere by
#: ``scipy.special.expi`` (an asymptotic series above 40, as fast). On [0.1, 40] the two agree to a
#: few 1e-16 (both within 1e-15 of exact sums: tests/test_loglinear_risk.py), the series at 10-40x
#: the speed (bench/bench_scan_headline.py). Below 0.1 ``expi`` is kept, so that the s.e. stays what
#: it was to 1e-12, although the series is the more accurate there: Ei(m) − γ − ln m loses digits
#: to cancellation (2.5e-10 relative at m = 1.5e-6, 5e-12 at 1e-4; the series 2e-16)
SERIES_MIN = 0.1
TAYLOR_MAX = 40
TAYLOR_DEGREE = 16
_POWER_TERMS = 160      # terms of S's power series shifted: the first left out is < 1e-45 of S(40)


@functools.lru_cache(maxsize=1)
def taylor_table() -> np.ndarray:
    """B with S(c_i + t) = Σ_j B[j, i] t^j, c_i = i + 1/2 (i = 0 .. TAYLOR_MAX − 1, j = 0 ..
    TAYLOR_DEGREE): the power series' coefficients 1/((k + 1)(k + 1)!) (each correctly rounded)
    shifted to every c_i at once by repeated synthetic division, which adds positive numbers only
    (so each B[j, i] is within a few ulps; tests check it against exactly rounded sums)."""
    c = np.arange(TAYLOR_MAX) + 0.5
    a = [np.full(TAYLOR_MAX, 1 / ((k + 1) * math.factorial(k + 1))) for k in range(_POWER_TERMS + 1)]
    for i in range(TAYLOR_DEGREE + 1):
        for k in range(_POWER_TERMS - 1, i - 1, -1):
            a[k] = a[k] + c * a[k + 1]
    table = np.array(a[:TAYLOR_DEGREE + 1])
    table.flags.writeable = False
    return table


def series_s(x):
    """S(x) = (Ei(x) − γ − ln x)/x for 0 ≤ x ≤ TAYLOR_MAX (numpy), from :func:`taylor_table`."""
    table = taylor_table()
    i = np.minimum(x.astype(np.intp), TAYLOR_MAX - 1)
    t = x - (i + 0.5)
    p = np.take(table[TAYLOR_DEGREE], i)
    for j in range(TAYLOR_DEGREE - 1, -1, -1):
        p *= t
        p += np.take(table[j], i)
    return p


def inverse_terms(m):
    """(E[1/F | f = 1], Var(1/F | f = 1)) per sample unique, m = (1 − π) λ (see the module doc).

    Every formula works element by element: each is applied to the whole array and the few
    elements outside its range are then overwritten (no boolean copies of the bulk)."""
    m = np.asarray(m, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = -np.expm1(-m) / m
    e2 = np.exp(-m) * series_s(np.minimum(m, TAYLOR_MAX))    # right on [SERIES_MIN, TAYLOR_MAX]
    low = np.flatnonzero(m < SERIES_MIN)
    high = np.flatnonzero(m > TAYLOR_MAX)
    if low.size or high.size:
        out = np.concatenate([low, high])
        x = m[out]
        small = x < 1e-6
        big = x > 600.0
        mid = ~small & ~big
        v = np.empty_like(x)
        if mid.any():
            from scipy.special import expi
            xm = x[mid]
            v[mid] = np.exp(-xm) * (expi(xm) - _EULER - np.log(xm)) / xm
        if big.any():   # e^{−m} Ei(m) = (1/m) Σ_k k!/m^k (asymptotic); the rest is below e^{−600}
            xb = x[big]
            v[big] = sum(math.factorial(k) / xb**k for k in range(8)) / (xb * xb)
        if small.any():
            xs = x[small]
            v[small] = 1.0 - 3.0 * xs / 4.0
            e1[out[small]] = 1.0 - xs / 2.0 + xs ** 2 / 6.0
        e2[out] = v
    return e1, np.maximum(e2 - e1 * e1, 0.0)


def nb_terms(m, alpha, pi, kind, exact: bool = False, variance: bool = True, slope: bool = False):
    """(term, its variance) per sample unique under the Poisson-gamma model (option dispersion).

    λ_j = λ̂_j γ_j, γ_j ~ Gamma(mean 1, variance α) (α a number, or one per cell as
    :func:`loo_prior` gives): given f_j = 1 the cell's Λ_j is
    Gamma(shape a = 1/α + 1, rate b = 1/(α λ̂_j) + π), so with c = (1 − π)/b

        E[I(F_j = 1) | f_j = 1] = E e^{−(1−π)Λ} = (1 + c)^{−a}
        E[1/F_j | f_j = 1]      = ∫_0^1 E e^{−(1−π)Λu} du = α [1 − (1 + c)^{−1/α}] / c

    (both → the Poisson terms as α → 0). The variance of 1/F is the Poisson one at the posterior
    mean of (1 − π)Λ (an approximation; the study measures the s.e.'s coverage); with ``exact`` it is
    the Poisson-gamma one, E[1/F² | f = 1] − E[1/F | f = 1]² (:func:`inverse_square`). Without
    ``variance`` the variance of 1/F is not computed (None). With ``slope``, a third array: each
    term's derivative in ln λ̂ (α held), from d ln c/d ln λ̂ = 1/(1 + π α λ̂):

        E's term:  [(1 + c)^{−a} − t] / (1 + π α λ̂),     τ1's:  −a c (1 + c)^{−a−1} / (1 + π α λ̂)

    (e^{−m} − t and −m e^{−m} in the Poisson limit, m = (1 − π) λ̂)."""
    lam_m = np.asarray(m, dtype=np.float64)           # (1 − π) λ̂
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0 and float(alpha) <= 1e-12:
        out = (tau1_terms if kind == "tau1" else inverse_terms)(lam_m)
        if not slope:
            return out
        em = np.exp(-lam_m)
        return (*out, -lam_m * em if kind == "tau1" else em - out[0])
    alpha = np.maximum(alpha, 1e-300)
    q = 1.0 - pi
    lam = lam_m / q if q > 0 else np.zeros_like(lam_m)
    with np.errstate(divide="ignore", over="ignore"):
        b = 1.0 / (alpha * np.maximum(lam, 1e-300)) + pi
        c = q / b
    if kind == "tau1":
        t = np.exp(-(1.0 / alpha + 1.0) * np.log1p(c))
        if not slope:
            return t, t * (1.0 - t)
        return t, t * (1.0 - t), -(1.0 / alpha + 1.0) * c / (1.0 + c) * t / (1.0 + pi * alpha * lam)
    zero = c <= 0.0                                   # π = 1 or λ̂ = 0: F = 1
    cs = np.where(zero, 1.0, c)
    log_c = np.log1p(cs)
    em = np.expm1(-log_c / alpha)                     # (1 + c)^{−1/α} − 1
    t = np.where(zero, 1.0, alpha * -em / cs)
    d = None
    if slope:        # (1 + c)^{−a} = (1 + c)^{−1/α} / (1 + c)
        d = np.where(zero, 0.0, ((1.0 + em) / (1.0 + cs) - t) / (1.0 + pi * alpha * lam))
    if not variance:
        return (t, None, d) if slope else (t, None)
    if exact:
        v = np.maximum(inverse_square(cs, 1.0 / alpha + 1.0, zero) - t * t, 0.0)
    else:
        post = q * (1.0 / alpha + 1.0) / b                # E[(1 − π)Λ | f = 1]
        v = inverse_terms(post)[1]
    return (t, v, d) if slope else (t, v)


#: Gauss-Legendre nodes of :func:`inverse_square`'s integral, and how many e-folds of its
#: exponential factor it covers (beyond, the integrand is below e^{−50} of its start). 20 nodes
#: are within 2e-11 (relative) of 64 nodes' sum over c in [1e-9, 1e12] and a − 1 in [1e-9, 1e13]
#: (400 000 random points), and the variance E[1/F²] − E[1/F]² within 1.5e-7 of 64 nodes' (the
#: subtraction's own cancellation: 24 nodes give the same), at under a third of the cost
LEGENDRE_NODES = 20
EFOLDS = 50.0


@functools.lru_cache(maxsize=1)
def _legendre():
    x, w = np.polynomial.legendre.leggauss(LEGENDRE_NODES)
    return (x + 1.0) / 2.0, w / 2.0                    # on [0, 1]


def _slices(c, a, chunk: int):
    """(start, c, a − 1, L = ln(1 + c), W = min(L, EFOLDS/(a − 1))) of ``chunk`` uniques at a time,
    as columns: what :func:`inverse_square` and :func:`inverse_cube` integrate over."""
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), c.shape)
    for i in range(0, c.shape[0], chunk):
        cc, aa = c[i:i + chunk, None], a[i:i + chunk, None] - 1.0
        L = np.log1p(cc)
        yield i, cc, aa, L, np.minimum(L, EFOLDS / aa)


def inverse_square(c, a, zero=None, chunk: int = 1 << 11):
    """E[1/F² | f = 1] under the Poisson-gamma model (:func:`nb_terms`: F − 1 negative binomial with
    pgf E s^X = (1 + c(1 − s))^{−a}). From 1/(1 + X)² = ∫_0^1 (1/t) ∫_0^t s^X ds dt,
    E[1/F²] = ∫_0^1 H(t)/t dt with H(t) = [(1 + c(1 − t))^{1−a} − (1 + c)^{1−a}] / (c (a − 1)); with
    w = ln(1 + c(1 − t)), L = ln(1 + c),

        E[1/F²] = ∫_0^L e^{(1−a)w} [−expm1((1 − a)(L − w))] / ((a − 1) c expm1(L − w)) dw,

    a smooth integrand (finite at w = L), taken by Gauss-Legendre on [0, min(L, EFOLDS/(a − 1))].
    ``c``, ``a`` per sample unique (``a`` may be a number); ``zero``: where F = 1 surely (1).
    Taken ``chunk`` uniques at a time: their chunk × LEGENDRE_NODES temporaries stay in the
    processor's cache (2 048: 1.75 times as fast as 32 768, the same numbers)."""
    xg, wg = _legendre()
    c, out = np.asarray(c, dtype=np.float64), np.empty(np.shape(c))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i, cc, aa, L, W in _slices(c, a, chunk):
            w = W * xg
            f = (np.exp(-aa * w) * -np.expm1(-aa * (L - w))) / (aa * cc * np.expm1(L - w))
            out[i:i + chunk] = (f @ wg) * W[:, 0]
    # F = 1 almost surely where X's mean a·c is tiny (not where c alone is: a gamma of tiny variance
    # at a large a has c tiny and X about Poisson(a c), which the integral still gives)
    small = c * a < 1e-8
    out = np.where(small, 1.0 - 0.75 * c * a, out)     # P(X = 1) ≈ a c adds 1/4 − 1
    if zero is not None:
        out = np.where(zero, 1.0, out)
    return out


def inverse_cube(c, a, zero=None, chunk: int = 1 << 11):
    """E[1/F³ | f = 1] under the Poisson-gamma model (:func:`inverse_square`'s F). From
    1/(1 + X)³ = ½ ∫_0^1 (ln s)² s^X ds, E[1/F³] = ∫_0^1 H(t) (−ln t)/t dt (H as there), so in
    :func:`inverse_square`'s w

        E[1/F³] = ∫_0^L f(w) [ln c − w − ln expm1(L − w)] dw,

    f its integrand (−ln t = ln c − w − ln expm1(L − w), which is 0 at w = 0). The bracket has a
    logarithmic singularity at w = L, so the nodes are taken in y with w = W(1 − y²) (dw = 2Wy dy),
    W = min(L, EFOLDS/(a − 1)): LEGENDRE_NODES nodes are within 3·10⁻⁵ of the negative binomial's
    own series (c in [10⁻³, 50], a − 1 in [0.05, 50]; tests/test_skew_bound.py)."""
    xg, wg = _legendre()
    c, out = np.asarray(c, dtype=np.float64), np.empty(np.shape(c))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i, cc, aa, L, W in _slices(c, a, chunk):
            w = W * (1.0 - xg * xg)
            e = np.expm1(L - w)
            f = (np.exp(-aa * w) * -np.expm1(-aa * (L - w))) / (aa * cc * e)
            out[i:i + chunk] = (f * (np.log(cc) - w - np.log(e)) * (2.0 * xg)) @ wg * W[:, 0]
    small = c * a < 1e-8                               # F = 1 almost surely (as inverse_square)
    out = np.where(small, 1.0 - (7.0 / 8.0) * c * a, out)     # P(X = 1) ≈ a c adds 1/8 − 1
    if zero is not None:
        out = np.where(zero, 1.0, out)
    return out


def third_cumulants(mu, alpha, pi: float, kind: str, terms=None, variances=None):
    """Per sample unique, the third cumulant of its term's variable (1/F or I(F = 1)) under the
    Poisson-gamma model at (1 − π) μ/π (:func:`nb_terms`): E X³ − 3 E X² E X + 2 (E X)³, from
    :func:`inverse_square` and :func:`inverse_cube` for 1/F, t(1 − t)(1 − 2t) for I(F = 1).
    ``terms``, ``variances``: the terms and their variances already computed (:func:`nb_terms`
    with ``exact``), so E X² = Var + t² is not computed again. On slices (:func:`by_chunks`)."""
    def part(m, al, *known):
        if kind == "tau1" and known:     # from the terms alone
            t = known[0]
            return (t * (1.0 - t) * (1.0 - 2.0 * t),)
        lam_m = (1.0 - pi) * np.asarray(m, dtype=np.float64) / pi
        al = np.maximum(np.asarray(al, dtype=np.float64), 1e-12)
        if known:
            t, m2 = known[0], known[1] + known[0] * known[0]
        else:
            t, m2 = nb_terms(lam_m, al, pi, kind, exact=True)
            m2 = m2 + t * t
        if kind == "tau1":
            return (t * (1.0 - t) * (1.0 - 2.0 * t),)
        q = 1.0 - pi
        lam = lam_m / q if q > 0 else np.zeros_like(lam_m)
        with np.errstate(divide="ignore", over="ignore"):
            c = q / (1.0 / (al * np.maximum(lam, 1e-300)) + pi)
        zero = c <= 0.0
        m3 = inverse_cube(np.where(zero, 1.0, c), 1.0 / al + 1.0, zero)
        return (m3 - 3.0 * m2 * t + 2.0 * t ** 3,)
    known = () if terms is None else (terms, variances)
    return by_chunks(part, 1, mu, alpha, *known)[0]


def loo_prior(n: float, counts, alpha, a0: float = LOO_PSEUDO):
    """(μ̃, α̃): each sample unique's prior mean (sample scale) and relative variance, from the other
    n − 1 records (option ``prior=loo``, module docstring). ``counts``: per fitted margin, the sample
    count of each unique's category of it (its own record included); ``alpha``: the cell effect's
    variance α̂. μ̃ = (n − 1) Π_v s_v/(n − 1), α̃ = (1 + α̂) Π_v (1 + 1/s_v) − 1, s_v = c_v − 1 + a0.
    A margin is an array (exponent 1, counted), a tuple (counts, exponent, counted), or a smoothed
    pair (c_ab, c_a, c_b, α_ab) of :mod:`gpurisk.models.eb_forest`, whose s_ab = c_ab − 1 +
    α_ab q̃_a q̃_b (q̃_v = (c_v − 1 + a0)/(n − 1)) enters as s_ab/(n − 1 + α_ab), counted, or a
    child given its parent (:class:`gpurisk.models.eb_forest.Arc`: c_pc, c_p, c_c, β), whose share
    is Beta(s, S − s), s = c_pc − 1 + β q̃_c, S = c_p − 1 + β: it enters as s/S with relative
    variance (S − s)/(s (S + 1)). Computed on slices of CHUNK uniques (:func:`by_chunks`)."""
    from gpurisk.models.eb_forest import Arc
    margins = [c if isinstance(c, tuple) else (c, 1, True) for c in counts]
    # arrays, or forest_counts' counts gathered when sliced (gpurisk.models.forest.AtRows)
    arrays = [c if hasattr(c, "shape") else np.asarray(c)
              for m in margins for c in (m[:3] if len(m) == 4 else m[:1])]
    n1 = float(n - 1)

    def part(*cs):
        mu = np.full(np.shape(cs[0]), n1)
        rv = np.full(np.shape(cs[0]), 1.0 + float(alpha))
        i = 0
        for m in margins:
            if isinstance(m, Arc):   # a child given its parent: Beta(s, S − s) of the others
                cpc, cp, cc = (np.asarray(c, dtype=np.float64) for c in cs[i:i + 3])
                i += 3
                s = cpc - 1.0 + m.beta * (cc - 1.0 + a0) / n1
                big = cp - 1.0 + m.beta
                mu *= s / big
                rv *= 1.0 + (big - s) / (s * (big + 1.0))
                continue
            if len(m) == 4:          # a smoothed pair: its counts, its keys' counts, α_ab
                cab, ca, cb = (np.asarray(c, dtype=np.float64) for c in cs[i:i + 3])
                i += 3
                al = m[3]
                s = cab - 1.0 + al * ((ca - 1.0 + a0) / n1) * ((cb - 1.0 + a0) / n1)
                mu *= s / (n1 + al)
                rv *= 1.0 + 1.0 / s
                continue
            s = np.asarray(cs[i], dtype=np.float64) - 1.0 + a0
            i += 1
            mu *= (s / n1) ** m[1]
            if m[2]:
                rv *= 1.0 + 1.0 / s
        return mu, rv - 1.0
    return by_chunks(part, 2, *arrays)


#: per-unique formulas (:func:`loo_prior`, :func:`unique_terms`) run on slices of this many sample
#: uniques: their temporaries stay in the processor's cache and take a few slices' memory, not the
#: uniques' (each element's value is the same: every formula works element by element)
CHUNK = 1 << 16


def by_chunks(fn, n_out: int, *arrays, chunk: int | None = None):
    """The ``n_out`` arrays ``fn(*arrays)`` returns, computed on slices of ``chunk`` elements and
    written into arrays of the whole length: element by element what ``fn`` gives on the whole
    arrays, for an ``fn`` that works element by element. An argument that is not an array of the
    first one's length (a number) is passed whole. ``chunk``: default CHUNK. Where there are at least
    THREADED_CHUNKS slices they are shared among the CPUs this process may use (at most
    TERMS_THREADS; numpy releases the GIL): each slice is written by one thread, so the numbers are
    the same."""
    chunk = CHUNK if chunk is None else int(chunk)
    size = int(np.shape(arrays[0])[0]) if np.ndim(arrays[0]) else 0
    if size <= chunk:
        return fn(*arrays)
    sliced = [np.ndim(a) == 1 and np.shape(a)[0] == size for a in arrays]
    out = [np.empty(size) for _ in range(n_out)]

    def one(start):
        part = fn(*(a[start:start + chunk] if cut else a for a, cut in zip(arrays, sliced)))
        for o, p in zip(out, part):
            o[start:start + chunk] = p
    starts = range(0, size, chunk)
    from gpurisk.freq.schedule import usable_cpus
    threads = min(TERMS_THREADS, usable_cpus())
    if threads > 1 and len(starts) >= THREADED_CHUNKS:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads, thread_name_prefix="gpurisk-terms") as pool:
            for _ in pool.map(one, starts):
                pass
    else:
        for start in starts:
            one(start)
    return tuple(out)


#: by_chunks shares its slices among at most this many threads, where there are at least
#: THREADED_CHUNKS of them (fewer cost less than starting threads)
TERMS_THREADS = 4
THREADED_CHUNKS = 16


def unique_terms(mu, alpha, pi: float, kind: str, exact: bool = False, variance: bool = True,
                 slope: bool = False):
    """:func:`nb_terms` at (1 − π) μ/π (μ per sample unique, on the sample scale), on slices of
    CHUNK uniques (:func:`by_chunks`; the same numbers); without ``variance``, (terms, None); with
    ``slope``, each term's derivative in ln μ third."""
    if slope:
        return by_chunks(lambda m, a: nb_terms((1.0 - pi) * m / pi, a, pi, kind, exact,
                                               slope=True), 3, mu, alpha)
    if not variance:
        return by_chunks(lambda m, a: nb_terms((1.0 - pi) * m / pi, a, pi, kind, exact,
                                               variance=False)[:1], 1, mu, alpha)[0], None
    return by_chunks(lambda m, a: nb_terms((1.0 - pi) * m / pi, a, pi, kind, exact), 2, mu, alpha)


def shared_variance(n: float, counts, slope, a0: float = LOO_PSEUDO) -> float:
    """The covariance the sample uniques' terms share through the fitted margins: uniques in one
    category of a margin share its unknown share, whose relative variance the leave-one-out prior
    gives each unique alone (:func:`loo_prior`: 1/s, or the arc's (S − s)/(s (S + 1))), so the
    variance of their sum has, besides each term's own, the cross terms

        Σ_margins Σ_categories rv_g [(Σ_{j in g} d_j)² − Σ_{j in g} d_j²],   d_j = ∂t_j/∂ln μ_j

    (the delta method over the margins' shares, one margin at a time). ``slope``: d_j per unique;
    ``counts``: :func:`loo_prior`'s. Margins whose uncertainty the prior leaves out add nothing.
    Each margin's two sums per category are taken in one pass over the uniques (their categories
    looked up a slice at a time; the margins side by side on the CPUs this process may use, as
    :func:`by_chunks`); rv_g is computed per category, not per unique."""
    from gpurisk.models.eb_forest import Arc
    n1 = float(n - 1)
    d = np.asarray(slope, dtype=np.float64)
    dd = d * d
    margins = []
    for m in counts:
        if isinstance(m, Arc):
            margins.append((m.pair, m))
        elif isinstance(m, tuple) and len(m) == 3 and m[2] and hasattr(m[0], "at"):
            margins.append((m[0], None))

    def one(margin) -> float:
        at, arc = margin
        table = np.asarray(at.counts, dtype=np.float64)
        size, groups = int(at.rows.shape[0]), int(table.shape[0])
        first, second = np.zeros(groups), np.zeros(groups)
        rep = np.full(groups, -1, dtype=np.int64) if arc is not None else None
        # slices long enough that each slice's two bincounts of the categories cost little
        step = max(SHARED_CHUNK, 4 * groups)
        for start in range(0, size, step):
            rows = at.rows[start:start + step]
            ids = at.at(rows)
            first += np.bincount(ids, weights=d[start:start + step], minlength=groups)
            second += np.bincount(ids, weights=dd[start:start + step], minlength=groups)
            if rep is not None:
                rep[ids] = rows           # a cell of each category (all of one give the same)
        if arc is None:
            rv = 1.0 / np.maximum(table - 1.0 + a0, a0)
            return float(np.sum(rv * (first * first - second)))
        held = np.flatnonzero(rep >= 0)
        cells = rep[held]
        cp = np.asarray(arc.parent.counts, dtype=np.float64)[arc.parent.at(cells)]
        cc = np.asarray(arc.child.counts, dtype=np.float64)[arc.child.at(cells)]
        sh = table[held] - 1.0 + arc.beta * (cc - 1.0 + a0) / n1
        big = cp - 1.0 + arc.beta
        rv = (big - sh) / (sh * (big + 1.0))
        return float(np.sum(rv * (first[held] ** 2 - second[held])))
    from gpurisk.freq.schedule import usable_cpus
    threads = min(TERMS_THREADS, usable_cpus(), len(margins))
    if threads > 1 and d.shape[0] >= THREADED_CHUNKS * CHUNK:   # the margins side by side
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads, thread_name_prefix="gpurisk-shared") as pool:
            parts = list(pool.map(one, margins))
    else:
        parts = [one(m) for m in margins]
    return max(sum(parts), 0.0)


#: the skewed bound leaves out the uniques that together can move the upper ends by at most this
#: share of an s.e. (a numerical tolerance: the largest shift the terms' range allows,
#: :func:`skew_uniques`)
SKEW_TOL = 0.01


def skew_uniques(variances, budget: float):
    """The sample uniques whose third cumulants the skewed bound sums (their positions, in order),
    or None for none: those left out are the ones of the smallest variances whose sum is at most
    ``budget``. A term lies in [0, 1], so |κ3_j| ≤ Var_j, and the left-out part of Σ κ3 is at most
    ``budget`` in size: with budget = 6 · SKEW_TOL · se³/(z² − 1) it moves the Cornish-Fisher
    ends, (z² − 1)/6 · Σ κ3/se², by at most SKEW_TOL of an s.e. (the FARS and Adult scans of
    issue 43: 97 % and 83 % of their uniques left out, where E[1/F³] was most of the bound's cost)."""
    v = np.asarray(variances, dtype=np.float64)
    if float(v.sum()) <= budget:
        return None
    order = np.argsort(v, kind="stable")
    out = int(np.searchsorted(np.cumsum(v[order]), budget, side="right"))
    return np.sort(order[out:])


#: :func:`shared_variance` looks the uniques' categories up this many at a time (at least)
SHARED_CHUNK = 1 << 16


def dispersion_moment(table, mu_all, sum_mu2) -> float:
    """α̂ = Σ_j [(f_j − μ̂_j)² − f_j] / Σ_j μ̂_j² over every cell of the table (at least 0): the
    moment estimator of the gamma variance, E[(f − μ)² − f] = α μ² under the Poisson-gamma model.
    ``mu_all``: μ̂ of the sampled cells; ``sum_mu2``: Σ μ̂² over all cells (cells with f = 0 add
    μ̂² only, so no K-cell array is needed)."""
    f = np.asarray(to_host(table.f), dtype=np.float64)
    s = f > 0
    fs, ms = f, np.asarray(mu_all, dtype=np.float64)
    if not s.all():             # cells seen in the population only (no copy when every f_j > 0)
        fs, ms = fs[s], ms[s]
    return _moment(fs, ms, sum_mu2)


def _moment(fs, ms, sum_mu2) -> float:
    """:func:`dispersion_moment` from the sampled cells' f_j (float64) and μ̂_j, in their order (the
    two products in one buffer)."""
    buf = np.multiply(fs, fs)
    ff = np.sum(buf)
    fm = np.sum(np.multiply(fs, ms, out=buf))
    del buf
    num = float(ff - 2.0 * fm + sum_mu2 - fs.sum())
    return max(num / sum_mu2, 0.0) if sum_mu2 > 0 else 0.0


def model_margins(model: str, d: int) -> list[tuple[int, ...]] | None:
    """The margins of a model over d keys (None: every pair, the default of fit_two_way)."""
    if model == "two_way":
        return None
    if model in ("independence", "auto_cv", "risk", "cv_risk"):
        return [(v,) for v in range(d)]
    raise BadInput(f"log-linear model {model!r} is not one of {', '.join(MODELS)}")


def sample_unique_means(table, model="two_way", tol=TOL, max_iter=MAX_ITER, max_cells=MAX_CELLS):
    """(μ̂ of the sample-unique cells as a host array, the fit or None, α̂, the uniques' margin counts
    for :func:`loo_prior`, or None for the two-way fit); the two-way fit is
    computed once per table and settings (shared with r1, ...); the independence model's μ̂ is
    closed-form, n Π_v (f_v(x_v) / n), computed once per table too (tau1_ll and matches_ll share it
    in a scan)."""
    model_margins(model, len(table.keys))
    if model == "independence":
        return table.cached("_ll_independence", lambda: _means(table, model, tol, max_iter, max_cells))
    return _means(table, model, tol, max_iter, max_cells)


def auto_cv_means(table, splits: int = 1, seed: int = 0, z: float = Z_CHOICE, max_pairs=None,
                  dispersion: str = "moment"):
    """(μ̂ of the sample-unique cells, α̂, the kept pairs of key indices (a list, maybe empty), the
    uniques' margin counts for :func:`loo_prior`, the doubtful alternatives [(weight, μ̂, α̂,
    counts)]) under main effects + the forest of interactions the held-out tests keep
    (:mod:`gpurisk.models.forest`, at most ``max_pairs``; None: the forest's limit; the
    alternatives: :func:`gpurisk.models.forest.doubtful`); on the host, closed form, no K-cell
    array."""
    def make():
        from gpurisk.models.forest import choose_forest, doubtful
        codes, f, cards, ranks, margins = sample_margins(table)
        limit = len(codes) - 1 if max_pairs is None else int(max_pairs)
        edges, scores = choose_forest(codes, f, cards, splits, seed, z, ranks, table.keys, limit,
                                      margins)
        mu, alpha, counts = forest_model(margins, edges, dispersion)
        alts = [(w, *forest_model(margins, es, dispersion))
                for w, es in doubtful(edges, scores, z, limit)]
        return mu, alpha, edges, counts, alts
    return table.cached(f"_ll_auto_cv_{int(splits)}_{int(seed)}_{float(z)!r}_{max_pairs}"
                        f"_{dispersion}", make)


def eb_means(table, max_pairs=None, dispersion: str = "moment", profile: bool = False,
             smoothing: str = "rooted"):
    """As :func:`auto_cv_means` (and, last, the rooted form's arcs (parent, child), None with
    ``smoothing="joint"``), main effects + the forest of smoothed interactions of
    :mod:`gpurisk.models.eb_forest` (each pair kept by its evidence, shrunk towards independence by
    its empirical-Bayes prior: ``smoothing`` "rooted", each tree rooted and a child's categories
    given its parent's shrunk towards the child's shares, or "joint", the pair's table shrunk towards
    independence); the uniques' counts are :func:`gpurisk.models.eb_forest.rooted_counts` or
    :func:`gpurisk.models.eb_forest.loo_counts` factors and there are no alternatives (the
    shrinkage, not a test, handles a pair the sample cannot tell)."""
    if smoothing not in SMOOTHINGS:
        raise BadInput(f"eb_smoothing={smoothing!r} is not one of {', '.join(SMOOTHINGS)}")

    def make():
        from gpurisk.models import eb_forest
        margins = sample_margins(table)[4]
        edges, alphas, _ = eb_forest.choose(margins, max_pairs, shrinkage=smoothing == "joint")
        if smoothing == "rooted":
            roots, arcs = eb_forest.orient(margins, edges)
            mu, sum_mu2 = eb_forest.rooted_means(margins, roots, arcs)
        else:
            mu, sum_mu2 = eb_forest.means(margins, edges, alphas)
        f = margins.f
        ll = None           # the truncated likelihood, its cells grouped once (α̂'s profile too)
        if dispersion != "truncated":
            alpha = _moment(f, mu, sum_mu2)
        else:
            ll = loglik(f, mu)
            alpha = alpha_of(ll)
        su = np.flatnonzero(f == 1)
        if smoothing == "rooted":
            return (mu[su], alpha, edges, eb_forest.rooted_counts(margins, roots, arcs, su), [],
                    ll, [(p, c) for p, c, _ in arcs])
        return mu[su], alpha, edges, eb_forest.loo_counts(margins, edges, alphas, su), [], ll, None
    key = f"_ll_eb_{max_pairs}_{dispersion}_{smoothing}"
    mu, alpha, edges, counts, alts, ll, arcs = table.cached(key, make)
    span = None
    if profile and dispersion == "truncated":     # α̂'s one-s.e. profile interval, asked apart
        span = table.cached(key + "_profile", lambda: profile_of(ll, alpha))
    return mu, alpha, edges, counts, alts, span, arcs


def sample_margins(table):
    """(codes per key (host arrays of the smallest integer dtype), counts f, categories per key,
    category ranks, :class:`Margins`) of the sample's cells and categories only: a table that also
    holds the population's cells and categories (validate, --population) gives what the sample
    alone gives. Each key's counts are the table's margins of f where it has them (a scan's), at the
    seen categories, else summed here in the same pass that finds the seen categories (whole
    numbers: the same sums). Where every cell is sampled (a sample's own table) the codes and f are
    the table's own arrays, not copies."""
    def make():
        from gpurisk.freq.rollup import codes_at, known_margins
        from gpurisk.models.forest import Margins
        from gpurisk.models.model_choice import category_ranks
        sampled = table.f > 0
        seen = slice(None) if bool(scalar(sampled.all())) else table.xp.flatnonzero(sampled)
        f = to_host(table.f[seen])
        known = known_margins(table)
        weights = None if known is not None else np.asarray(f, dtype=np.float64)
        codes, cards, ranks, kept, ones = [], [], [], [], []
        all_codes, all_ranks = codes_at(table, seen), category_ranks(table.categories)
        if weights is not None:       # every key's counts in one pass over the weights
            sums = _chunked_bincounts(all_codes, weights, [r.shape[0] for r in all_ranks])
        for v, (c, r) in enumerate(zip(all_codes, all_ranks)):
            if weights is None:
                present = np.bincount(c, minlength=r.shape[0]) > 0     # the categories seen
            else:
                one = sums[v]
                present = one > 0                                     # (every f here is > 0)
            used = np.flatnonzero(present)
            codes.append(c if used.shape[0] == r.shape[0] else     # the smallest integer dtype
                         (np.cumsum(present) - 1).astype(c.dtype)[c])
            cards.append(int(used.shape[0]))
            ranks.append(r[used])
            kept.append(used)
            if weights is not None:
                ones.append(one[used])
        if known is not None:
            ones = [np.asarray(to_host(m), dtype=np.float64)[u] for m, u in zip(known, kept)]
        margins = Margins(codes, f if weights is None else weights, cards, ones)  # f as floats
        return codes, f, cards, ranks, margins
    return table.cached("_ll_sample_margins", make)


#: :func:`_chunked_bincounts` reads the cells this many at a time
BINCOUNT_CHUNK = 1 << 16


def _chunked_bincounts(codes, weights, lengths) -> list:
    """Per key, np.bincount(codes[v], weights, minlength=lengths[v]), every key's summed over the
    same slice of cells while it is in the cache (the weights read once, not once a key: 2.5 times
    as fast for 8 keys of 1.6e7 cells). Whole-number weights (counts) give the same sums exactly."""
    size = int(np.shape(weights)[0])
    if size <= BINCOUNT_CHUNK:
        return [np.bincount(c, weights=weights, minlength=k) for c, k in zip(codes, lengths)]
    out = [np.zeros(k) for k in lengths]
    for start in range(0, size, BINCOUNT_CHUNK):
        w = weights[start:start + BINCOUNT_CHUNK]
        for o, c, k in zip(out, codes, lengths):
            o += np.bincount(c[start:start + BINCOUNT_CHUNK], weights=w, minlength=k)
    return out


def forest_model(margins, edges, dispersion: str = "moment"):
    """(μ̂ of the sample uniques, α̂, their margin counts for :func:`loo_prior`) under main effects
    + the forest ``edges`` (α̂ over the sampled cells: a cell seen in the population only adds μ̂²
    alone; by moments, or by the zero-truncated likelihood with ``dispersion="truncated"``)."""
    from gpurisk.models.forest import forest_counts, forest_means
    codes, f, cards = margins.codes, margins.f, margins.cards
    su = np.flatnonzero(f == 1)
    mu, sum_mu2 = forest_means(codes, f, cards, edges, margins)
    alpha = truncated_alpha(f, mu) if dispersion == "truncated" else _moment(f, mu, sum_mu2)
    return mu[su], alpha, forest_counts(codes, f, cards, edges, su, margins)


def forest_misfit(table, edges, pi: float, kind: str, seed: int = 0):
    """The risk criterion (:class:`gpurisk.models.risk_choice.Score`) at main effects + the forest
    ``edges`` for E's term (``kind="inverse"``) or τ1's (``"tau1"``), computed once per table and
    kind (both intervals read it by default; they share one :class:`Draws` of the table)."""
    from gpurisk.models import risk_choice
    key = "_".join(f"{a}-{b}" for a, b in edges)

    margins = sample_margins(table)[4]

    def make_draws():
        # the keys drawn in the order of their names, so a scan's table (keys in its own order)
        # and an assess of the same keys draw the same cells
        order = sorted(range(len(table.keys)), key=lambda v: str(table.keys[v]))
        return risk_choice.Draws(margins, risk_choice.draws_for(margins), seed, order=order)

    def make():
        # one Draws per table and seed: E's criterion and τ1's read the same fitted cells, which
        # it keeps for the last forest asked (the same numbers, made once)
        draws = table.cached(f"_ll_misfit_draws_{int(seed)}", make_draws)
        return risk_choice.score(margins, list(edges), pi, draws, kind)
    return table.cached(f"_ll_misfit_{pi!r}_{key}_{int(seed)}_{kind}", make)


def risk_z() -> float:
    from gpurisk.models.risk_choice import Z_RISK
    return Z_RISK


def risk_means(table, pi: float, kind: str = "inverse", z: float | None = None, seed: int = 0,
               boot: int = 0, start: str = "main"):
    """As :func:`auto_cv_means`, the forest chosen by the risk criterion of
    :mod:`gpurisk.models.risk_choice` (forward selection on |T_h|, h = E's term by default: the
    same model for tau1_ll and matches_ll), and the path of the selection. The alternatives are
    the forests the same selection chooses on ``boot`` bootstrap samples (each cell's count redrawn
    as Poisson(f_j): the sample's records resampled), each weighted by the share of the bootstrap
    samples choosing it, and fitted to the sample itself: their spread around the kept forest's
    estimate is the model choice's own uncertainty. ``start="cv"``: the selection starts from the
    forest the held-out tests keep (:func:`auto_cv_means`' choice, redone on each bootstrap
    sample), and adds pairs while the criterion signals misfit."""
    from gpurisk.models import risk_choice
    from gpurisk.models.forest import Margins
    z = risk_choice.Z_RISK if z is None else float(z)

    def make():
        from gpurisk.models.forest import choose_forest
        codes, f, cards, ranks, margins = sample_margins(table)

        def first(m, fb):
            if start != "cv":
                return ()
            return choose_forest(m.codes, fb, m.cards, 1, 0, Z_CHOICE, ranks, table.keys,
                                 len(m.codes) - 1, m)[0]
        edges, path = risk_choice.choose(margins, pi, kind, z, seed, start=first(margins, f))
        mu, alpha, counts = forest_model(margins, edges)
        draws = risk_choice.Draws(margins, risk_choice.draws_for(margins), seed)
        # the criterion of each measure's own term at the kept forest: (B̂_h, T_h)
        misfit = {h: risk_choice.score(margins, edges, pi, draws, h) for h in ("inverse", "tau1")}
        chosen: dict = {}
        rng = np.random.default_rng(seed + 1)
        for b in range(int(boot)):
            fb = rng.poisson(margins.f)
            keep = fb > 0
            mb = Margins([c[keep] for c in margins.codes], fb[keep], margins.cards)
            eb = tuple(risk_choice.choose(mb, pi, kind, z, seed + 2 + b,
                                          draws=risk_choice.DRAWS_BOOT,
                                          start=first(mb, fb[keep]))[0])
            chosen[eb] = chosen.get(eb, 0) + 1
        alts = [(k / boot, *forest_model(margins, list(e))) for e, k in chosen.items()
                if list(e) != edges]
        return mu, alpha, edges, counts, alts, misfit
    return table.cached(f"_ll_risk_{pi!r}_{kind}_{z!r}_{int(seed)}_{int(boot)}_{start}", make)


def _means(table, model, tol, max_iter, max_cells):
    if model == "independence":
        return _independence_means(table, float(table.n))
    from gpurisk.models.record_model import cached_fit   # the fit r1, ... use: shared
    fit = cached_fit(table, tol, max_iter, max_cells)
    mu_all = np.asarray(to_host(fit.p_hat_codes(table.cell_codes()) * fit.n), dtype=np.float64)
    vals = fit.dense if fit.dense is not None else fit.mu_support
    alpha = dispersion_moment(table, mu_all, float(scalar((vals * vals).sum())))
    return mu_all[np.asarray(to_host(table.f == 1))], fit, alpha, None


def _independence_means(table, n: float):
    """:func:`_means` of main effects, closed form, μ̂_j = n Π_v f_v(x_jv) / n, on the host over the
    sampled cells alone (a table that also holds a population's cells, validate or a sample flag,
    may have many more: they add μ̂² to Σ μ̂² only, which is Π_v Σ p_v² n² in closed form); each
    key's margin of f is the table's where a scan handed it on, else summed over the sampled cells
    (whole numbers: the same sums)."""
    from gpurisk.freq.rollup import codes_at, known_margins
    seen = table.xp.flatnonzero(table.f > 0)
    f = np.asarray(to_host(table.f[seen]), dtype=np.float64)
    codes = codes_at(table, seen)
    known = known_margins(table)
    margins = ([np.asarray(to_host(m), dtype=np.float64) for m in known] if known is not None else
               [np.bincount(c, weights=f, minlength=int(k)) for c, k in zip(codes, table.cards)])
    su = f == 1
    mu = np.full(f.shape[0], n)
    sum_mu2 = n * n
    counts = []
    for c, margin in zip(codes, margins):
        p = margin / n
        mu *= p[c]
        sum_mu2 *= float((p * p).sum())
        counts.append(margin[c[su]])
    return mu[su], None, _moment(f, mu, sum_mu2), counts


class LoglinearPoisson(Measure):
    """Base of tau1_ll and matches_ll: the fit, the terms, the Result."""

    needs = frozenset({"fraction"})
    default = False            # fits a log-linear model: run when named
    reads = "cells"
    shared_options = SHARED
    options = {
        "model": Option(str, "eb", choices=MODELS,
                        help="log-linear model of the sample counts: auto_cv = main effects plus "
                             "the two-way interactions whose held-out log-likelihood gains in "
                             "split halves pass a z test, kept while they form a forest (closed "
                             "form); eb = main effects plus a forest of interactions each kept by "
                             "its evidence (a Bayes factor above the BIC price) and shrunk towards "
                             "independence by an empirical-Bayes Dirichlet prior (closed form); "
                             "risk = main effects plus the forest of interactions a forward "
                             "selection on Skinner & Shlomo's risk-weighted over-dispersion score "
                             "adds; cv_risk = the held-out tests' forest, then pairs added by that "
                             "criterion while it signals misfit; independence = "
                             "main effects only (closed form); two_way = main effects and all "
                             "two-way interactions (IPF; Skinner & Shlomo's usual choice, which "
                             "overfits sparse samples)"),
        "eb_smoothing": Option(str, "rooted", choices=SMOOTHINGS,
                               help="model=eb: rooted = each tree of kept pairs rooted at the key "
                                    "that predicts the records best, a child's categories given "
                                    "its parent's shrunk towards the child's shares by a Dirichlet "
                                    "prior whose strength is fitted leave-one-out; joint = each "
                                    "kept pair's table shrunk towards independence (the default "
                                    "before)"),
        "dispersion": Option(str, "auto", choices=DISPERSIONS,
                             help="auto = truncated with model=eb, moment with the others; "
                                  "moment = a gamma-distributed cell effect around the model, its "
                                  "variance by moments (negative binomial); truncated = that "
                                  "variance by zero-truncated maximum likelihood over the sampled "
                                  "cells (model=auto_cv or eb); none = Poisson"),
        "prior": Option(str, "loo", choices=PRIORS,
                        help="loo = each sample unique's λ from the margins of the other n - 1 "
                             "records with their uncertainty (a gamma prior per cell); plugin = the "
                             "fitted λ-hat itself (Skinner & Shlomo's plug-in; two_way always)"),
        "se_factor": Option(float, SE_FACTOR, min=1.0,
                            help="multiplies the Poisson terms' s.e. (which takes λ̂ as known)"),
        "model_error": Option(float, MODEL_ERROR, min=0.0,
                              help="relative model error added to the s.e.: se² = (se_factor · "
                                   "Poisson s.e.)² + (model_error · estimate)²"),
        "cv_splits": Option(int, 1, min=1,
                            help="model=auto_cv: random two-fold splits of the sample whose held-out "
                                 "log-likelihoods are summed"),
        "cv_seed": Option(int, 0, min=0, help="model=auto_cv: seed of the random splits"),
        "max_interactions": Option(int, None, min=1,
                                   help="model=auto_cv or eb: at most this many two-way interactions "
                                        "(default: no limit but the forest's, one fewer than the "
                                        "keys), kept in order of held-out gain (auto_cv) or "
                                        "Bayes factor (eb) while they pass the test and form no "
                                        "cycle (closed form)"),
        "choice_spread": Option(bool, True,
                                help="model=auto_cv: add to the s.e. the estimate's spread over "
                                     "the models one held-out test away, each weighted by the "
                                     "chance that test goes the other way"),
        "interval": Option(str, "calibrated", choices=INTERVALS,
                           help="calibrated = the Poisson s.e. times se_factor plus a relative "
                                "model_error (constants fitted on real populations); model = the "
                                "Poisson-gamma model's own variance plus the spread of the model "
                                "choice (over bootstrap samples with model=risk or cv_risk; over "
                                "the forests one held-out test away with auto_cv), with eb the "
                                "estimate's spread over α̂'s profile-likelihood interval and the "
                                "covariance the uniques share through the margins "
                                "(shared_margins); where the risk criterion still signals misfit "
                                "(Skinner & Shlomo's score, |T| > 1.96; misfit_widen) the bound "
                                "on the side its bias points to moves by it"),
        "alpha_spread": Option(bool, True,
                               help="model=eb, interval=model: add the estimate's spread over α̂'s "
                                    "profile-likelihood interval (α̂'s own uncertainty)"),
        "misfit_widen": Option(bool, True,
                               help="interval=model (auto_cv, eb, risk, cv_risk): where the risk "
                                    "criterion flags misfit (|T| > 1.96), move the bound on the side "
                                    "its estimate of the bias points to by that bias (estimate low: "
                                    "the upper bound rises), each cell's share at most 1/e (the most "
                                    "a cell's term can be off); the s.e. stays the model's"),
        "skew_bound": Option(bool, True,
                             help="interval=model: the upper bound and the interval's upper end by "
                                  "Cornish-Fisher from the terms' third cumulant (a sum of few "
                                  "skewed terms), never below the normal ones"),
        "shared_margins": Option(bool, True,
                                 help="interval=model, prior=loo: add the covariance the sample "
                                      "uniques' terms share through the margins' shares (the "
                                      "delta method)"),
        "choice_boot": Option(int, 10, min=0,
                              help="model=risk, interval=model: bootstrap samples over which the "
                                   "model choice is repeated"),
        "cv_z": Option(float, Z_CHOICE, min=0.0,
                       help="model=auto_cv: an interaction is kept when its held-out gain exceeds "
                            "cv_z times its standard error (0: any positive gain)"),
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
        if dispersion == "auto":
            dispersion = "truncated" if model == "eb" else "moment"
        extra["dispersion"] = dispersion
        prior = str(self.opt(ctx, "prior"))
        if prior not in PRIORS:
            raise BadInput(f"{self.name}: prior={prior!r} is not one of {', '.join(PRIORS)}")
        span = None         # model=eb, interval=model: α̂'s profile interval
        interval = str(self.opt(ctx, "interval"))
        try:
            if model == "auto_cv":
                fit = None
                choice = (int(self.opt(ctx, "cv_splits")), int(self.opt(ctx, "cv_seed")),
                          float(self.opt(ctx, "cv_z")), self.opt(ctx, "max_interactions"))
                mu, alpha, pair, counts, alts = auto_cv_means(table, *choice, dispersion)
                model_key = f"{model}_{choice}_{dispersion}"
                extra["interaction"] = _pairs_text(table, pair)
                if interval == "model" and bool(self.opt(ctx, "misfit_widen")):
                    misfit = forest_misfit(table, pair, pi, self.kind)
                    extra["misfit_T"] = misfit[1]
            elif model == "eb":
                fit = None
                smoothing = str(self.opt(ctx, "eb_smoothing"))
                mu, alpha, pair, counts, alts, span, arcs = eb_means(
                    table, self.opt(ctx, "max_interactions"), dispersion,
                    profile=interval == "model" and bool(self.opt(ctx, "alpha_spread")),
                    smoothing=smoothing)
                model_key = f"eb_{self.opt(ctx, 'max_interactions')}_{dispersion}_{smoothing}"
                extra["interaction"] = _pairs_text(table, pair)
                extra["smoothing"] = smoothing
                if arcs:      # parent → child, as the rooted form conditions them
                    extra["arcs"] = ", ".join(f"{table.keys[p]} → {table.keys[c]}" for p, c in arcs)
                if interval == "model" and bool(self.opt(ctx, "misfit_widen")):
                    misfit = forest_misfit(table, pair, pi, self.kind)
                    extra["misfit_T"] = misfit[1]
            elif dispersion == "truncated":
                raise BadInput("dispersion=truncated needs a forest model (model=auto_cv or eb)")
            elif model in ("risk", "cv_risk"):
                fit = None
                mu, alpha, pair, counts, alts, misfit = risk_means(
                    table, pi, boot=int(self.opt(ctx, "choice_boot")) if interval == "model" else 0,
                    start="cv" if model == "cv_risk" else "main")
                model_key = model
                extra["interaction"] = _pairs_text(table, pair)
                misfit = misfit[self.kind]
                extra["misfit_T"] = misfit[1]
            else:
                alts, model_key = [], model
                if model != "independence":      # the closed form forms no K-cell array
                    check_cells(sample_levels(table)[1], max_cells, table.keys)
                mu, fit, alpha, counts = sample_unique_means(
                    table, model, float(self.opt(ctx, "tol")), int(self.opt(ctx, "max_iter")),
                    max_cells)
        except BadInput as exc:
            return Result.not_applicable(f"the log-linear fit is not available: {exc}", **extra)
        except MemoryError:
            return Result.not_applicable("the log-linear fit needs more memory than there is "
                                         "(too many support cells)", **extra)
        n = float(table.n)
        if prior == "loo" and (counts is None or n < 2):
            prior = "plugin"          # the two-way fit (or a sample of one record): no such form
        extra["prior"] = prior

        def terms(mu, alpha, counts, i=0, value_only=False, rescale=None, slope=False):
            """Per sample unique, the term and its variance under fitted model i (0: the kept);
            ``value_only``: the variance is not used (not computed). ``rescale``: the kept
            model at another α than its fitted one (α̂'s profile ends): the leave-one-out prior's
            relative variance (1 + α) Π(1 + 1/s) − 1 rescaled from the fitted α̂'s, not rebuilt.
            ``slope``: each term's derivative in ln μ third (:func:`nb_terms`)."""
            alpha = alpha if dispersion != "none" else 0.0
            how = exact and not value_only
            if prior == "loo" and rescale is not None and i == 0:
                mu_prior, fitted = table.cached(f"_ll_loo_{model_key}_0_{rescale!r}",
                                                lambda: loo_prior(n, counts, rescale))
                alpha_cell = (1.0 + alpha) * ((fitted + 1.0) / (1.0 + rescale)) - 1.0
                return unique_terms(mu_prior, alpha_cell, pi, self.kind, how, not value_only)
            if prior == "loo":          # the same for tau1_ll and matches_ll: computed once
                mu_prior, alpha_cell = table.cached(f"_ll_loo_{model_key}_{i}_{alpha!r}",
                                                    lambda: loo_prior(n, counts, alpha))
                return unique_terms(mu_prior, alpha_cell, pi, self.kind, how, not value_only,
                                    slope)
            return unique_terms(mu, alpha, pi, self.kind, how, not value_only, slope)
        exact = interval == "model"
        # interval=model with the leave-one-out prior: the terms' covariance through the margins
        # they share (shared_variance, the delta method), from each term's slope in ln μ
        shared = exact and prior == "loo" and bool(self.opt(ctx, "shared_margins"))
        t, v, *slope = terms(mu, alpha, counts, slope=shared)
        extra["alpha"] = alpha if dispersion != "none" else 0.0
        value = float(t.sum())
        se_p = math.sqrt(float(v.sum()))
        if shared:
            extra["se_shared"] = math.sqrt(shared_variance(n, counts, slope[0]))
        # the model choice's spread: the estimate under each forest one test away, weighted by the
        # chance that test goes the other way (gpurisk.models.forest.doubtful)
        spread = (math.sqrt(sum(w * (float(terms(*alt, i + 1, value_only=True)[0].sum())
                                     - value) ** 2 for i, (w, *alt) in enumerate(alts)))
                  if alts and bool(self.opt(ctx, "choice_spread")) else 0.0)
        k, c = float(self.opt(ctx, "se_factor")), float(self.opt(ctx, "model_error"))
        if exact:         # interval=model: the model's own variance, no fitted factor
            k, c = 1.0, 0.0
            if span is not None:     # model=eb: α̂'s profile interval was asked for
                # α̂'s own uncertainty: the estimate's spread over its profile interval
                fitted = alpha if dispersion != "none" else 0.0
                at = [float(terms(mu, a, counts, value_only=True, rescale=fitted)[0].sum())
                      for a in span]
                extra["alpha_interval"] = list(span)
                extra["se_alpha"] = abs(at[1] - at[0]) / 2.0
            t_misfit = extra.get("misfit_T")
            if t_misfit is not None and abs(t_misfit) > risk_z() and \
                    bool(self.opt(ctx, "misfit_widen")):
                # the criterion still signals misfit: its estimate of the bias moves the bound on
                # the side it points to
                bias = misfit.bounded
                extra["misfit_bias"] = bias
                extra["misfit_bias_first_order"] = misfit.bias
                side = ("the upper bound is raised" if bias < 0 else "the lower end is lowered")
                extra["note"] = (f"the model still misfits where sample uniques are made (risk "
                                 f"score T = {t_misfit:.2f}): the criterion puts the estimate "
                                 f"{'low' if bias < 0 else 'high'} by {abs(bias):.3g} (each "
                                 f"cell's share at most 1/e), so {side} by that much")
        extra["se_choice"] = spread
        extra["interval"] = interval
        # the misfit's bias moves the bound on the side it points to (B̂ < 0: the estimate is low,
        # so the upper bound rises by |B̂|), not the s.e.: the s.e. stays the model's
        bias = extra.get("misfit_bias", 0.0)
        lo_shift, hi_shift = max(bias, 0.0), max(-bias, 0.0)
        se = math.sqrt((k * se_p) ** 2 + extra.get("se_shared", 0.0) ** 2 + (c * value) ** 2
                       + spread ** 2 + extra.get("se_alpha", 0.0) ** 2)
        z = z_upper(ctx.alpha)
        z2 = z_upper(ctx.alpha / 2.0)
        # interval=model: the upper ends by Cornish-Fisher from the terms' third cumulant κ3 (a
        # sum of few skewed terms is not normal), never below the normal ones. The shift is
        # (z² − 1)/6 · Σ κ3/se², and each term lies in [0, 1], so |κ3_j| ≤ Var_j: the uniques of the
        # smallest variances, as many as together can move the upper ends by at most SKEW_TOL of
        # an s.e., are left out of Σ κ3 (:func:`skew_uniques`; all of them where the whole Σ Var can
        # move them no more)
        gamma = 0.0
        if not (exact and bool(self.opt(ctx, "skew_bound")) and se > 0):
            keep = None
        elif self.kind == "tau1":
            # I(F = 1)'s κ3 = t(1 − t)(1 − 2t) from the term itself: summing it over every unique
            # costs less than sorting their variances to leave some out (the sum is exact)
            keep = slice(None) if int(np.size(v)) else None
        else:
            keep = skew_uniques(v, 6.0 * SKEW_TOL * se ** 3 / (z2 * z2 - 1.0))
        if keep is not None and (isinstance(keep, slice) or keep.shape[0]):
            fitted = alpha if dispersion != "none" else 0.0
            if prior == "loo":
                at = table.cached(f"_ll_loo_{model_key}_0_{fitted!r}",
                                  lambda: loo_prior(n, counts, fitted))
            else:
                at = (mu, fitted)
            at = [a[keep] if np.ndim(a) else a for a in at]
            gamma = float(third_cumulants(*at, pi, self.kind, t[keep], v[keep]).sum()) / se ** 3
            extra["skewness"] = gamma

        def up(zz):
            return value + se * max(zz, zz + (zz * zz - 1.0) * gamma / 6.0) + hi_shift
        extra |= {"se_poisson": se_p, "se_factor": k, "model_error": c,
                  "lower": max(value - z * se - lo_shift, 0.0),
                  "interval_lower": max(value - z2 * se - lo_shift, 0.0),
                  "interval_upper": min(up(z2), float(n1)),
                  "mean_lambda": float(mu.mean() / pi)}
        if fit is not None:
            extra |= {"iterations": fit.iterations, "discrepancy": fit.discrepancy,
                      "converged": bool(fit.converged), "K": fit.K, "sparse_fit": fit.sparse}
        if fit is not None and not fit.converged:
            extra["note"] = (f"IPF stopped after {fit.iterations} cycles with a margin "
                             f"discrepancy of {fit.discrepancy:.3g} records (tol {fit.tol:g})")
        return Result(value=value, se=se, upper=min(up(z), float(n1)), extra=extra)


def _pairs_text(table, pair) -> str | None:
    """The kept interactions as key names ("a x b, c x d"), None for main effects alone."""
    return ", ".join(f"{table.keys[a]} x {table.keys[b]}" for a, b in pair) or None


def calibrated_options(kind: str) -> dict:
    """LoglinearPoisson's options with the s.e. calibration of ``kind`` (SE_CALIBRATION) as the
    defaults of se_factor and model_error and ``kind``'s default interval (INTERVAL_DEFAULT) (a
    value set in the shared namespace applies to both measures)."""
    k, c = SE_CALIBRATION[kind]
    out = dict(LoglinearPoisson.options.specs)
    out["se_factor"] = replace(out["se_factor"], default=k)
    out["model_error"] = replace(out["model_error"], default=c)
    out["interval"] = replace(out["interval"], default=INTERVAL_DEFAULT[kind])
    return out
