"""Pitman's model fitted properly: the maximum of its likelihood over the whole parameter space, the
exact finite-N expectation of the population uniques, and an interval (issue 27). SPEC §10.

Likelihood of the sample partition (Pitman 1995's sampling formula; Hoshino 2001, eq. 3), up to a
constant,

    ℓ(θ, α) = Σ_{i=1}^{J−1} log(θ + iα) − Σ_{i=1}^{n−1} log(θ + i) + Σ_s J_s Σ_{l=1}^{s−1} log(l − α)

on the parameter space of the two-parameter Poisson–Dirichlet family: α ∈ [0, 1) with θ > −α, or the
finite-K branch α < 0 with θ = −Kα, K ≥ J an integer (a symmetric Dirichlet-multinomial with K
categories; ARX's Newton iteration admits α < 0 too). Each sum is O(1): log-gamma differences,
(J−1) log|α| + lnΓ(θ/α + J) − lnΓ(θ/α + 1) (or lnΓ(K) − lnΓ(K − J + 1) on the finite-K branch), or,
where θ/α exceeds 4(J − 1), (J − 1) log θ + Σ_k (−1)^{k+1}/k (m/x)^k m Ŝ_k (x = θ/α, m = J − 1,
Ŝ_k = Σ_{i≤m} i^k/m^{k+1}), which keeps the digits the log-gamma difference would cancel.

The search does not depend on any start: ℓ on a grid of 42 α (30 in [0, 1), 12 down to α = −50) ×
60 θ over both branches (α = 1 − e^v, θ = θ_min(α) + e^w with θ_min = −α for α ≥ 0 and −Jα, i.e.
K ≥ J, for α < 0), Nelder–Mead from the
three best grid points in (v, w), the best polished by Newton on the score equations when it is
interior (kept only if ℓ did not fall); on the finite-K branch K is then rounded to the integers on
either side and |α| refitted. Points outside the space are never evaluated (the parametrisation
cannot reach them). If every sample record is unique (n1 = n) the score in θ is positive for every
θ: the likelihood increases without bound towards θ → ∞ and there is no estimate.

Population uniques, given (θ, α) and the sample (the population is the sample's Chinese-restaurant
process continued for N − n more records, since a simple random sample of a Pitman partition is a
Pitman partition of the first n): a sample unique stays unique with probability
(θ+α+n−1)_{N−n}/(θ+n)_{N−n}; the later record m + 1 opens a table with expected probability
E[θ + αK_m]/(θ + m) = (θ+αJ)(θ+α+n)_{m−n}/((θ+n)_{m−n}(θ+m)), which then stays a singleton to N,
and the product does not depend on m, so

    E[N1 | sample] = Γ(θ+n)Γ(θ+α+N−1) / (Γ(θ+α+n)Γ(θ+N)) · [n1 (θ+α+n−1) + (θ+αJ)(N − n)]

("conditional", the default), which lies in [0, N − (n − n1)] by construction; with no sample
(n = 0) it is the unconditional N (θ+α)_{N−1}/(θ+1)_{N−1} ("finite"); as N → ∞ that tends to
Hoshino's Γ(θ+1)/Γ(θ+α) N^α ("limit", ARX's).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from .uniqueness import SERIES_FROM, Sample, _newton, _pitman_system, _power_sum_scaled

EXPECTATIONS = ("conditional", "finite", "limit")
#: α ≥ 1 − e^V_MAX ≈ −1e8: beyond, the finite-K model is the uniform multinomial on K categories
V_MAX = math.log(1e8)
_NS = 40                                   # terms of the log series (|m/x| < 1/4: 4^-40 ≈ 1e-24)


@functools.lru_cache(maxsize=256)
def _log_series_coef(m: int) -> np.ndarray:
    k = np.arange(1, _NS + 1)
    S = np.array([_power_sum_scaled(int(r), m) for r in k])
    return ((-1.0) ** (k + 1) / k) * S * m


def _sum_log(theta, alpha: float, m: int):
    """Σ_{i=1}^{m} log(θ + iα) for an array of θ (every θ + iα > 0), O(1) per θ."""
    theta = np.asarray(theta, dtype=float)
    if m <= 0:
        return np.zeros_like(theta)
    out = np.empty_like(theta)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = theta / alpha if alpha != 0 else np.full_like(theta, np.inf)
    far = np.abs(x) > SERIES_FROM * m
    if far.any():
        rho = m / x[far]                                       # (1 + i/x): Σ log = Σ_k (−1)^{k+1}/k ...
        k = np.arange(1, _NS + 1)
        terms = _log_series_coef(m)[None, :] * rho[:, None] ** k[None, :]
        out[far] = m * np.log(theta[far]) + terms.sum(axis=1)
    near = ~far
    if near.any():
        xn = x[near]
        if alpha > 0:
            out[near] = m * math.log(alpha) + special.gammaln(xn + m + 1) - special.gammaln(xn + 1)
        else:                                                  # K = −x ≥ m + 1
            K = -xn
            out[near] = m * math.log(-alpha) + special.gammaln(K) - special.gammaln(K - m)
    return out


def loglik(theta, alpha: float, sm: Sample):
    """ℓ(θ, α) (module docstring) for an array of θ at one α; −inf outside the parameter space."""
    theta = np.atleast_1d(np.asarray(theta, dtype=float))
    ok = (alpha < 1.0) & (theta + alpha > 0) & (theta + (sm.J - 1) * alpha > 0)
    out = np.full(theta.shape, -np.inf)
    if not ok.any():
        return out
    s, Js = sm.s.astype(float), sm.Js
    c = float((Js * _lgamma_diff(1.0 - alpha, s - 1.0)).sum())     # Σ J_s log (1−α)_{s−1}
    t = theta[ok]
    out[ok] = _sum_log(t, alpha, sm.J - 1) - _sum_log(t, 1.0, sm.n - 1) + c
    return out


def _theta_min(alpha: float, J: int) -> float:
    return -alpha if alpha >= 0 else -J * alpha


def _unpack(v: float, w: float, J: int) -> tuple[float, float]:
    alpha = 1.0 - math.exp(min(v, V_MAX))
    return _theta_min(alpha, J) + math.exp(min(w, 700.0)), alpha


def _negll(x, sm: Sample) -> float:
    theta, alpha = _unpack(x[0], x[1], sm.J)
    if not (math.isfinite(theta) and math.isfinite(alpha)) or theta + alpha <= 0:
        return math.inf
    val = float(loglik(theta, alpha, sm)[0])
    return -val if math.isfinite(val) else math.inf


@dataclass
class PitmanMLE:
    theta: float
    alpha: float
    loglik: float
    K: int | None             # the finite-K branch's number of categories, else None
    evaluations: int
    info: np.ndarray | None   # observed information (−Hessian of ℓ in (θ, α)), None on the boundary


def fit(sm: Sample) -> PitmanMLE | str:
    """The maximum-likelihood (θ, α) over the parameter space, or why there is none."""
    if sm.J < 2:
        return "the sample has one class, the likelihood has no maximum in (θ, α)"
    if sm.n1 == sm.n:
        return ("every sample record is unique (n1 = n): the likelihood grows without bound as θ → ∞, "
                "so the sample cannot tell how many population records are unique")
    J = sm.J
    # grid: α = 1 − e^v from 1 − 1e-6 down to about −50 (finite-K), θ above its floor by e^w
    vs = np.concatenate([np.log(np.geomspace(1e-6, 1.0, 30, endpoint=False)),
                         np.log(np.linspace(1.0, 51.0, 12))])
    ws = np.linspace(math.log(1e-6), math.log(1e4 * max(sm.n, 10)), 60)
    best = []
    evals = 0
    for v in vs:
        alpha = 1.0 - math.exp(v)
        ll = loglik(_theta_min(alpha, J) + np.exp(ws), alpha, sm)
        evals += ws.size
        k = int(np.argmax(ll))
        best.append((float(ll[k]), v, float(ws[k])))
    best.sort(reverse=True)
    cands = []
    for ll0, v0, w0 in best[:3]:
        if not math.isfinite(ll0):
            continue
        r = optimize.minimize(_negll, [v0, w0], args=(sm,), method="Nelder-Mead",
                              options={"xatol": 1e-9, "fatol": 1e-10 * max(1.0, abs(ll0)),
                                       "maxiter": 1500})
        evals += r.nfev
        cands.append((-float(r.fun), *_unpack(r.x[0], r.x[1], J)))
    if not cands:
        return "the likelihood is not finite anywhere on the search grid"
    ll, theta, alpha = max(cands)
    info = None
    if alpha > -1e-12:        # interior of the α ≥ 0 branch: polish on the score equations
        s, Js = sm.s[sm.s >= 2].astype(float), sm.Js[sm.s >= 2]
        i = np.arange(1, J, dtype=float) if J < 4096 else None
        x, it, ok, _ = _newton(lambda x: _pitman_system(x[0], x[1], i, sm, s, Js), (theta, alpha),
                               tol=1e-12, max_iter=50)
        evals += it
        if ok and 0.0 <= x[1] < 1.0 and x[0] + x[1] > 0:
            llx = float(loglik(x[0], x[1], sm)[0])
            if llx >= ll - 1e-9 * max(1.0, abs(ll)):
                ll, theta, alpha = llx, float(x[0]), float(x[1])
        with np.errstate(all="ignore"):
            _, H = _pitman_system(theta, alpha, i, sm, s, Js)
        info = -np.asarray(H, dtype=float) if np.all(np.isfinite(H)) else None
        return PitmanMLE(theta, alpha, ll, None, evals, info)
    # finite-K branch: K an integer ≥ J, |α| refitted for each neighbour of θ/|α|
    Kc = theta / -alpha
    out = []
    for K in sorted({max(J, math.floor(Kc)), max(J, math.ceil(Kc))}):
        f = lambda la: -float(loglik(K * math.exp(la), -math.exp(la), sm)[0])   # noqa: E731
        la0 = math.log(-alpha)
        r = optimize.minimize_scalar(f, bounds=(la0 - 3.0, min(la0 + 3.0, V_MAX)), method="bounded",
                                     options={"xatol": 1e-10})
        evals += r.nfev
        out.append((-float(r.fun), K, -math.exp(r.x)))
    ll, K, alpha = max(out)
    return PitmanMLE(K * -alpha, alpha, ll, int(K), evals, None)


def _stirling_c(z):
    """lnΓ(z) − [(z − ½) ln z − z + ½ ln 2π] for z ≥ 20 (below 1e-16 of the omitted term)."""
    z2 = 1.0 / (z * z)
    return (1.0 / z) * (1 / 12 - z2 * (1 / 360 - z2 * (1 / 1260 - z2 / 1680)))


def _lgamma_diff(a: float, m):
    """lnΓ(a+m) − lnΓ(a) for an array m ≥ 0; by Stirling's series when a ≥ 20 (a up to 1e8 occurs on
    the finite-K branch, where the log-gamma difference would lose 1e-7)."""
    m = np.asarray(m, dtype=float)
    if a < 20.0:
        return special.gammaln(a + m) - special.gammaln(a)
    return ((a - 0.5) * np.log1p(m / a) + m * np.log(a + m) - m
            + _stirling_c(a + m) - _stirling_c(a))


def _lgamma_minus(A: float, B: float, d: float | None = None) -> float:
    """lnΓ(A) − lnΓ(B) for A − B small against A and B: by Stirling's series when both are ≥ 20,
    (A − ½) log1p((A − B)/B) + (A − B)(ln B − 1) + c(A) − c(B), where nothing large cancels (A and
    B up to 1e17 occur; lnΓ(1e12) alone has 6e-3 of rounding). ``d``: A − B as the caller knows it
    exactly (A − B of two rounded sums near 1e12 is off by 1e-4)."""
    if min(A, B) < 20.0:
        return float(special.gammaln(A) - special.gammaln(B))
    d = A - B if d is None else d
    return (A - 0.5) * math.log1p(d / B) + d * (math.log(B) - 1.0) + _stirling_c(A) - _stirling_c(B)


def _log_ratio(a, b, m):
    """log (a)_m / (b)_m = [lnΓ(a+m) − lnΓ(b+m)] − [lnΓ(a) − lnΓ(b)], m ≥ 0 real."""
    return _lgamma_minus(a + m, b + m, a - b) - _lgamma_minus(a, b)


def uniques(theta: float, alpha: float, sm: Sample, expectation: str = "conditional") -> float:
    """The expected number of population uniques under Pitman(θ, α) (module docstring)."""
    N, n = sm.N, float(sm.n)
    if expectation == "limit":
        return math.exp(_lgamma_minus(theta + 1.0, theta + alpha) + alpha * math.log(N))
    if expectation == "finite":
        return N * math.exp(_log_ratio(theta + alpha, theta + 1.0, N - 1.0))
    if N <= n:
        return float(sm.n1)
    # Γ(θ+n)Γ(θ+α+N−1)/(Γ(θ+α+n)Γ(θ+N)) = (θ+α+n)_{N−n−1}/(θ+n)_{N−n−1} / (θ+N−1)
    lr = _log_ratio(theta + alpha + n, theta + n, N - n - 1.0) - math.log(theta + N - 1.0)
    return math.exp(lr) * (sm.n1 * (theta + alpha + n - 1.0) + (theta + alpha * sm.J) * (N - n))


def process_variance(theta: float, alpha: float, sm: Sample) -> float:
    """Var(N1 | sample, θ, α), approximately: the sample uniques that stay unique as independent
    Bernoulli(p), p = (θ+α+n−1)_{N−n}/(θ+n)_{N−n}, plus the new singletons as Poisson."""
    N, n = sm.N, float(sm.n)
    if N <= n:
        return 0.0
    p = math.exp(_log_ratio(theta + alpha + n - 1.0, theta + n, N - n))
    new = uniques(theta, alpha, sm) - sm.n1 * p
    return sm.n1 * p * (1.0 - p) + max(new, 0.0)


def interval(m: PitmanMLE, sm: Sample, expectation: str, level: float) -> tuple[float, float, float]:
    """(se, lower, upper) of N1: the delta method on the observed information of (θ, α) for the
    parameter part, plus :func:`process_variance`; normal, on [N1 the sample proves, N − (n − n1)]."""
    var = process_variance(m.theta, m.alpha, sm) if expectation == "conditional" else 0.0
    if m.info is not None:
        try:
            cov = np.linalg.inv(m.info)
        except np.linalg.LinAlgError:
            cov = None
        if cov is not None and np.all(np.isfinite(cov)) and cov[0, 0] >= 0 and cov[1, 1] >= 0:
            ht, ha = 1e-6 * max(1.0, abs(m.theta)), 1e-6
            g = np.array([
                (uniques(m.theta + ht, m.alpha, sm, expectation)
                 - uniques(m.theta - ht, m.alpha, sm, expectation)) / (2 * ht),
                (uniques(m.theta, min(m.alpha + ha, 1 - 1e-12), sm, expectation)
                 - uniques(m.theta, m.alpha - ha, sm, expectation)) / (2 * ha)])
            var += max(float(g @ cov @ g), 0.0)
    elif m.K is not None:
        var += _finite_k_variance(m, sm, expectation)
    se = math.sqrt(var)
    z = float(special.ndtri(0.5 + level / 2.0))
    est = uniques(m.theta, m.alpha, sm, expectation)
    lo, hi = bounds(sm)
    return se, min(max(est - z * se, lo), hi), max(min(est + z * se, hi), lo)


def _finite_k_variance(m: PitmanMLE, sm: Sample, expectation: str, h: float = 1e-3) -> float:
    """The delta method on the finite-K branch, K taken as continuous: in x = (log |α|, log(K − J + 1))
    the information is minus the Hessian of ℓ by central differences (step h), and the gradient of
    the expectation likewise; 0 where the information is not positive definite (ℓ flat as |α| → ∞,
    the uniform multinomial on K categories)."""
    J = sm.J

    def par(x):
        a = math.exp(x[0])
        return (J - 1 + math.exp(x[1])) * a, -a
    x0 = np.array([math.log(-m.alpha), math.log(m.K - J + 1)])
    f = lambda x: float(loglik(*par(x), sm)[0])      # noqa: E731
    E = np.eye(2) * h
    H = np.empty((2, 2))
    for i in range(2):
        for j in range(2):
            H[i, j] = (f(x0 + E[i] + E[j]) - f(x0 + E[i] - E[j]) - f(x0 - E[i] + E[j])
                       + f(x0 - E[i] - E[j])) / (4 * h * h)
    g = np.array([(uniques(*par(x0 + E[i]), sm, expectation)
                   - uniques(*par(x0 - E[i]), sm, expectation)) / (2 * h) for i in range(2)])
    info = -H
    if not (np.all(np.isfinite(info)) and np.all(np.isfinite(g)) and info[0, 0] > 0
            and np.linalg.det(info) > 0):
        return 0.0
    return max(float(g @ np.linalg.solve(info, g)), 0.0)


def bounds(sm: Sample) -> tuple[float, float]:
    """What the sample allows N1 to be: at least n1 − (N − n) (each unsampled record can join at
    most one sample unique), at most N − (n − n1) (the records of sample classes of size ≥ 2 are
    never unique)."""
    return max(0.0, sm.n1 - (sm.N - sm.n)), sm.N - (sm.n - sm.n1)


def count_interval(lo: float, hi: float, sm: Sample) -> tuple[float, float]:
    """An interval for N1, a count of people, with whole-person ends rounded outward and kept within
    :func:`bounds`: [⌊lo⌋, ⌈hi⌉]. A continuity correction of less than one person on each side,
    nothing where N1 is large; where it is a handful, the smooth (log-scale) interval of an estimate
    whose sampling distribution is lumpy misses whole values (sdcMicro's testdata, three keys, N1 = 1,
    π = 5 %: the default's 95 % intervals held N1 in 0.85 of 40 samples, rounded outward in all;
    ``bench/validate_trust.py --n1-replicates 40``, seeds 23 and 24)."""
    cap_lo, cap_hi = bounds(sm)
    return max(math.floor(lo + 1e-9), cap_lo), min(math.ceil(hi - 1e-9), cap_hi)


def none_sampled_upper(sm: Sample, level: float) -> float:
    """With no sample unique (n1 = 0), the largest N1 the sample leaves possible at ``level``, by no
    model: each population unique is in the sample with probability π (independently, under
    Bernoulli sampling) and is then a sample unique, so P(n1 = 0 | N1) ≤ (1 − π)^N1, and N1 is at
    most log(1 − level) / log(1 − π) (rounded down; within :func:`bounds`). Under simple random
    sampling of n the chance is smaller, so the bound holds there too."""
    pi = min(max(sm.pi, 0.0), 1.0)
    cap = bounds(sm)[1]
    if pi >= 1.0:
        return 0.0
    if pi <= 0.0:
        return cap
    return min(float(math.floor(math.log(1.0 - level) / math.log1p(-pi) + 1e-9)), cap)
