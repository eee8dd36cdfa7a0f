"""Population-uniqueness models of ARX from the sample's frequencies of frequencies. SPEC §10.

Input: ``J_s`` = number of sample classes of size s (``Z[s]``, ``Z[0]`` unused), the population size
N and the sampling fraction π = n/N. Output: the estimated number of population uniques (classes of
size 1 in the population); ARX's "population uniqueness" is that number divided by N.

- Zayatz (1991): h(s) = P(X = 1), X hypergeometric (N items, s successes, n draws);
  u = (n1/J) h(1) / Σ_s (J_s/J) h(s); uniques = n1 u / (n/N).
- Pitman (Hoshino 2001): maximum-likelihood (θ, α) of the Pitman sampling formula,

      Σ_{i=1}^{J−1} 1/(θ + iα) − Σ_{i=1}^{n−1} 1/(θ + i) = 0
      Σ_{i=1}^{J−1} i/(θ + iα) − Σ_{s≥2} J_s Σ_{l=1}^{s−1} 1/(l − α) = 0,

  by Newton-Raphson from ARX's start (c = n1(n1−1)/max(n2, 1),
  θ0 = (nJc − n1(n−1)(2J+c)) / (2 n1 J + n1 c − n c), α0 = (θ0(n1−n) + (n−1)n1)/(nJ)), tolerance
  1e-6, at most 1000 iterations; uniques = Γ(θ+1)/Γ(θ+α) N^α (log-gamma), invalid (as in ARX) when
  α = 0 or the estimate leaves [0, N]; gpurisk also rejects α ≥ 1 and θ ≤ −α (outside the
  Pitman family: on tiny tables the likelihood can run off to θ → ∞, α > 1 with an estimate near 0,
  which ARX would report); α < 0 (Pitman's finite-K branch) is accepted, as in ARX. The sums over i run as
  digamma/trigamma differences (Σ_{i=1}^{n−1} 1/(θ+i) = ψ(θ+n) − ψ(θ+1)) or one vectorised pass.
- SNB (Chen & Keller-McNulty 1998): population class sizes 1 + G, G ~ NegBin(α, β)
  (P(G = k) = C(k+α−1, k) β^α (1−β)^k), so P(F = 1) = β^α and uniques = K β^α. A class of size F
  keeps Binomial(F, π) records; thinning G gives NegBin(α, β/(1−d)), d = (1−π)(1−β), hence

      P(f = 1) = b [π + (1−π) α q]                       b = (β/(1−d))^α,  q = π(1−β)/(1−d)
      P(f = 2) = b [π α q + (1−π) α(α+1)/2 q²]

  and (α, β) solve K P(f=1) = n1, K P(f=2) = n2 (Newton-Raphson in (log α, logit β), tolerance 1e-6,
  at most 1000 iterations per try). K, the number of non-empty population classes, is Haas et al.'s
  (1995) Shlosser-type estimator Sh3 as published,

      K = J + n1 · [Σ s π²(1−π²)^{s−1} J_s / Σ (1−π)^s((1+π)^s − 1) J_s] · [Σ (1−π)^s J_s / Σ s π(1−π)^{s−1} J_s]²

  or Shlosser's (1981) original, K = J + n1 Σ (1−π)^s J_s / Σ s π (1−π)^{s−1} J_s
  (``k_estimator="shlosser"``), or Sh3 as ARX computes it (``"arx"``: the denominator
  Σ_s [J_s (1−π)^s (1+π)^s − 1], a misplaced parenthesis; only to compare with ARX). On ARX's adult
  test at π = 0.2 the published Sh3 gives K = 65 150 and SNB fits (0.3195 of N), while ARX's K = 29 246
  leaves K P(f=1) = n1 without a solution (P(f=1) ≤ 0.377 < n1/K = 0.530), so ARX's Dankar rule
  falls back to Zayatz (0.3577).
- Dankar et al. (2012): π ≤ 0.1: Pitman, Zayatz if Pitman is invalid; else the smaller of Zayatz and
  SNB, Zayatz if SNB is invalid.

If n1 = 0 every model gives 0. A model that cannot be fitted returns a :class:`Fit` with
``value = None`` and a ``reason``.

All of the above is ``rule="arx"`` (ARX's fits and numbers, SPEC §10's test values).
``rule="gpurisk"`` (:mod:`.fitted`, the measure's default; issue 27) fits Pitman at the maximum of
its likelihood over the whole parameter space, whatever ARX's start (:mod:`.pitman_mle`), with the
expected N1 given the sample at the finite N and an interval; SNB with a scan for a bracketed root
besides the seven starts; every value within [n1 − (N − n), N − (n − n1)]; and no value ("not
estimable") where every sample record is unique.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
from scipy import special   # scipy.stats (slow to import) only where Zayatz needs it

TOL = 1e-6
MAX_ITER = 1000
MODELS = ("dankar", "pitman", "zayatz", "snb")
#: gpurisk's log-linear models of the cells (:mod:`.loglinear_n1`; rule gpurisk only; they read the
#: cells, not only the frequencies of frequencies)
LL_MODELS = ("loglinear", "loglinear_forest", "loglinear_risk", "loglinear_eb", "loglinear_main",
             "bethlehem")
#: "gpurisk": Pitman by its maximum likelihood over the whole space, the expectation given the sample,
#: SNB with a scan, every estimate within what the sample allows, an interval; "arx": ARX's fits
RULES = ("gpurisk", "arx")
#: the model gpurisk's rule takes by default (model=auto), chosen by bench/validate_pop_uniqueness.py
#: (docs/arx.md, "Against the truth"; seed 27, 40 samples a cell): the log-linear Poisson–gamma model
#: with main effects plus a forest of two-way interactions, each kept by a held-out test
#: (:mod:`.loglinear_n1`, ``loglinear_forest``) was within ±25 % of N1 (mean bias) in all 12 cells at
#: π = 5 and 10 % (−12.7 to +13.9 %; interval coverage 1.00 in each), the tempered main effects
#: (``loglinear``, the default before) in 11 (adult-b at 5 %: −25.6 %, coverage 0.68), Dankar's rule
#: over the Pitman fit in 5 (+27 to +62 % on FARS, FARS-b and mach2019). Since issue 27's stop 35
#: it adds the uniques in categories the sample lacks (``unseen_categories``; −9.5 to +19.7 %,
#: coverage 1.00 in the same 12 cells; docs/arx.md gives both studies)
#: Since issue 43's ninth stop the default is Ê's model, ``loglinear_eb`` (the pairs kept by their
#: evidence, each tree rooted and a child's shares given its parent's shrunk by the β the records'
#: leave-one-out likelihood fits; no κ): on the 14 populations of docs/validation.md at π = 5 and
#: 10 % (40 samples a cell, seed 43) its mean bias was within ±25 % (±1 person where N1 ≤ 4) in 62
#: of the 76 cells with N1 > 0, against 58 for ``loglinear_forest``, and the leave-one-population-out
#: choice between the two picked it for all 14 populations
GPURISK_DEFAULT_MODEL = "loglinear_eb"
K_ESTIMATORS = ("sh3", "shlosser", "arx")


@dataclass
class Fit:
    """One model's answer: the number of population uniques, or None and why."""

    model: str
    value: float | None
    reason: str | None = None
    iterations: int = 0
    converged: bool = True
    params: dict = field(default_factory=dict)
    se: float | None = None          # an interval for N1 (gpurisk's rule, Pitman): se, lower, upper
    lower: float | None = None
    upper: float | None = None


@dataclass(frozen=True)
class Sample:
    """What every model reads: J_s (``Z[s]``), n, J, n1, n2, N, π."""

    Z: np.ndarray
    N: float

    @property
    def s(self) -> np.ndarray:
        return np.flatnonzero(self.Z)

    @property
    def Js(self) -> np.ndarray:
        return self.Z[self.s].astype(float)

    @property
    def n(self) -> int:
        return int((np.arange(self.Z.size) * self.Z).sum())

    @property
    def J(self) -> int:
        return int(self.Z[1:].sum())

    @property
    def n1(self) -> int:
        return int(self.Z[1]) if self.Z.size > 1 else 0

    @property
    def n2(self) -> int:
        return int(self.Z[2]) if self.Z.size > 2 else 0

    @property
    def pi(self) -> float:
        return self.n / self.N


def sample(Z, N) -> Sample:
    """A :class:`Sample` from frequencies of frequencies ``Z`` (Z[s] = J_s) and population size N."""
    Z = np.asarray(Z, dtype=np.int64).copy()
    Z[0] = 0
    return Sample(Z, float(N))


# --- Zayatz -----------------------------------------------------------------------------------
def zayatz(sm: Sample) -> Fit:
    if sm.n1 == 0:
        return Fit("zayatz", 0.0, params={"note": "n1 = 0"})
    N, n = int(round(sm.N)), sm.n
    s, Js = sm.s, sm.Js
    # log h(s) = log P(X = 1), X ~ Hypergeometric(N, s, n)
    from scipy import stats
    logh = stats.hypergeom.logpmf(1, N, s, n)
    with np.errstate(over="ignore"):
        den = np.exp(special.logsumexp(logh, b=Js / sm.J))
    num = (sm.n1 / sm.J) * math.exp(logh[0]) if s[0] == 1 else 0.0
    if not (den > 0 and math.isfinite(den)):
        return Fit("zayatz", None, "Zayatz: every hypergeometric term h(s) underflows (n/N too small "
                   "for the class sizes)", converged=False)
    u = num / den
    return Fit("zayatz", sm.n1 * u / (n / sm.N), params={"u": u})


# --- Pitman -----------------------------------------------------------------------------------
def _pitman_start(sm: Sample) -> tuple[float, float]:
    n, J, n1, n2 = float(sm.n), float(sm.J), float(sm.n1), float(sm.n2)
    c = n1 * (n1 - 1.0) / max(n2, 1.0)
    den = 2.0 * n1 * J + n1 * c - n * c
    theta = (n * J * c - n1 * (n - 1.0) * (2.0 * J + c)) / den if den != 0 else math.nan
    alpha = (theta * (n1 - n) + (n - 1.0) * n1) / (n * J)
    return theta, alpha


#: below this many classes the sums over i = 1 .. J-1 are added up term by term (as ARX does)
CLOSED_FORM_MIN_J = 4096
#: beyond |θ/α| = SERIES_FROM · (J−1) the sums run as a power series in i/(θ/α): there ψ(x+J) − ψ(x+1)
#: cancels (1e-12 of the sum lost at x = 10 J, 1e-7 at 300 J; measured against math.fsum)
SERIES_FROM = 4.0


@functools.lru_cache(maxsize=None)
def _bernoulli(k: int) -> Fraction:
    """B_k (B_1 = −1/2), from Σ_{j<=k} C(k+1, j) B_j = 0."""
    if k == 0:
        return Fraction(1)
    return -sum(math.comb(k + 1, j) * _bernoulli(j) for j in range(k)) / (k + 1)


@functools.lru_cache(maxsize=4096)
def _power_sum_scaled(r: int, m: int) -> float:
    """Σ_{i=1}^{m} i^r / m^(r+1), from the exact sum (Faulhaber: (1/(r+1)) Σ_j C(r+1, j) B_j⁺
    m^{r+1−j}, B_1⁺ = +1/2), so that it stays a float for any r (it lies in [1/(r+1), 1])."""
    tot = sum(math.comb(r + 1, j) * (Fraction(1, 2) if j == 1 else _bernoulli(j)) * m ** (r + 1 - j)
              for j in range(r + 1))
    return float(tot / ((r + 1) * m ** (r + 1)))


def _series_sums(theta: float, alpha: float, m: int):
    """The five sums by Σ_i i^p (θ+iα)^−q = θ^−q m^(p+1) Σ_k c_q(k) (−m/x)^k Ŝ_{p+k}, x = θ/α,
    c_1 = 1, c_2 = k+1, Ŝ_r = Σ_{i<=m} i^r / m^(r+1); |m/x| < 1/SERIES_FROM, terms up to a remainder
    below 1e-18 of the sum."""
    rho = -m / (theta / alpha)
    K = int(math.ceil(-19.0 / math.log10(abs(rho)))) + 2 if rho != 0 else 1
    S = [_power_sum_scaled(r, m) for r in range(K + 3)]
    def series(p, q):
        tot = math.fsum((k + 1 if q == 2 else 1) * rho ** k * S[p + k] for k in range(K))
        return tot * float(m) ** (p + 1) / theta ** q
    return series(0, 1), series(1, 1), series(0, 2), series(1, 2), series(2, 2)


def _trigamma(z):
    """ψ'(z); below 0 by reflection, ψ'(z) = π²/sin²(πz) − ψ'(1 − z) (SciPy's polygamma walks
    up from a negative z one step at a time: 0.14 s at z = −1e7, and an iterate of θ = −2e11
    stalled a fit)."""
    z = np.asarray(z, dtype=float)
    neg = z < 0
    if not neg.any():
        return special.polygamma(1, z)
    zz = np.where(neg, 1.0 - z, z)
    out = special.polygamma(1, zz)
    with np.errstate(divide="ignore"):
        refl = (math.pi / np.sin(math.pi * z)) ** 2 - out
    return np.where(neg, refl, out)


def _term_sums(theta: float, alpha: float, i: np.ndarray):
    d = theta + i * alpha
    inv, inv2 = 1.0 / d, 1.0 / (d * d)
    return (float(inv.sum()), float((i * inv).sum()), float(inv2.sum()), float((i * inv2).sum()),
            float((i * i * inv2).sum()))


def _i_sums(theta: float, alpha: float, J: int, i: np.ndarray | None = None):
    """(Σ 1/d, Σ i/d, Σ 1/d², Σ i/d², Σ i²/d²) over i = 1 .. J-1, d = θ + iα.

    With few classes (J < CLOSED_FORM_MIN_J) term by term, as ARX adds them. With many, O(1) per
    Newton step whatever (θ, α) the iteration visits (a register's 29 M classes, whose ARX start
    lies outside the model, kept one assess in term-by-term Newton steps for many minutes):
    with x = θ/α and m = J − 1,
    - α = 0: d = θ for every i, so the sums are m/θ, m(m+1)/(2θ), m/θ², m(m+1)/(2θ²),
      m(m+1)(2m+1)/(6θ²);
    - |x| > SERIES_FROM · m: 1/(θ+iα)^q = θ^−q (1 + i/x)^−q expanded in i/x (|i/x| < 1/4), see
      :func:`_series_sums`;
    - otherwise Σ 1/(x+i) = ψ(x+m+1) − ψ(x+1) and Σ 1/(x+i)² = ψ'(x+1) − ψ'(x+m+1): with all
      arguments positive when x > −1, mirrored to −[ψ(−x) − ψ(−x−m)] and ψ'(−x−m) − ψ'(−x) when
      x < −m (every d of one sign: Pitman's finite-K branch K = −x), and by the reflected ψ when
      d changes sign between i = 1 and m (a pole of the likelihood, where ARX's terms are no better);
      the sums with i and i² follow from i = (d − θ)/α.
    """
    m = J - 1
    if m < CLOSED_FORM_MIN_J - 1:
        return _term_sums(theta, alpha, np.arange(1, J, dtype=float) if i is None else i)
    if alpha == 0.0:
        a, b = float(m), m * (m + 1) / 2.0
        c = m * (m + 1) * (2 * m + 1) / 6.0
        return a / theta, b / theta, a / theta ** 2, b / theta ** 2, c / theta ** 2
    x = theta / alpha
    if abs(x) > SERIES_FROM * m:
        return _series_sums(theta, alpha, m)
    if x < -m:
        y = -x
        s0 = -(special.digamma(y) - special.digamma(y - m)) / alpha
        t0 = (_trigamma(y - m) - _trigamma(y)) / (alpha * alpha)
    else:
        s0 = (special.digamma(x + m + 1.0) - special.digamma(x + 1.0)) / alpha
        t0 = (_trigamma(x + 1.0) - _trigamma(x + m + 1.0)) / (alpha * alpha)
    s1 = (m - theta * s0) / alpha
    t1 = (s0 - theta * t0) / alpha
    t2 = (m - 2.0 * theta * s0 + theta * theta * t0) / (alpha * alpha)
    return float(s0), float(s1), float(t0), float(t1), float(t2)


def _pitman_system(theta: float, alpha: float, i: np.ndarray | None, sm: Sample, s: np.ndarray,
                   Js: np.ndarray):
    """(F, Jacobian) of the two likelihood equations at (θ, α)."""
    n = sm.n
    s0, s1, t0, t1, t2 = _i_sums(theta, alpha, int(sm.J), i)    # i = 1 .. J-1
    # Σ_{i=1}^{n-1} 1/(θ+i) and its derivative, by digamma/trigamma
    a1 = special.digamma(theta + n) - special.digamma(theta + 1.0)
    a1d = _trigamma(theta + 1.0) - _trigamma(theta + n)   # Σ 1/(θ+i)²
    # Σ_s J_s Σ_{l=1}^{s-1} 1/(l-α) = Σ_s J_s [ψ(s-α) - ψ(1-α)]; d/dα of the inner sum is
    # Σ_l 1/(l-α)² = ψ'(1-α) - ψ'(s-α)
    b = float((Js * (special.digamma(s - alpha) - special.digamma(1.0 - alpha))).sum())
    bd = float((Js * (_trigamma(1.0 - alpha) - _trigamma(s - alpha))).sum())
    f1 = s0 - a1
    f2 = s1 - b
    j11 = -t0 + a1d
    j12 = -t1
    j22 = -t2 - bd
    return np.array([f1, f2]), np.array([[j11, j12], [j12, j22]])


def _newton(system, x0, tol=TOL, max_iter=MAX_ITER):
    """Newton-Raphson on ``system(x) -> (F, Jacobian)``: (x, iterations, converged, why)."""
    x = np.asarray(x0, dtype=float)
    for it in range(1, max_iter + 1):
        with np.errstate(all="ignore"):
            F, Jm = system(x)
            if not np.all(np.isfinite(F)) or not np.all(np.isfinite(Jm)):
                return x, it, False, "the equations are not finite at the current point"
            try:
                step = np.linalg.solve(Jm, F)
            except np.linalg.LinAlgError:
                return x, it, False, "the Jacobian is singular"
        x = x - step
        if not np.all(np.isfinite(x)):
            return x, it, False, "the iterate left the real numbers"
        if np.max(np.abs(step)) < tol * max(1.0, float(np.max(np.abs(x)))) or np.max(np.abs(F)) < tol * 1e-3:
            return x, it, True, None
    return x, max_iter, False, f"no convergence in {max_iter} iterations"


def pitman(sm: Sample) -> Fit:
    if sm.n1 == 0:
        return Fit("pitman", 0.0, params={"note": "n1 = 0"})
    if sm.J < 2:
        return Fit("pitman", None, "Pitman: the sample has one class, the likelihood has no maximum "
                   "in (θ, α)", converged=False)
    theta0, alpha0 = _pitman_start(sm)
    if not (math.isfinite(theta0) and math.isfinite(alpha0)):
        return Fit("pitman", None, "Pitman: ARX's starting values are undefined for these "
                   "frequencies of frequencies", converged=False)
    i = np.arange(1, sm.J, dtype=float) if sm.J < CLOSED_FORM_MIN_J else None
    s, Js = sm.s[sm.s >= 2].astype(float), sm.Js[sm.s >= 2]
    x, it, ok, why = _newton(lambda x: _pitman_system(x[0], x[1], i, sm, s, Js), (theta0, alpha0))
    theta, alpha = float(x[0]), float(x[1])
    params = {"theta": theta, "alpha": alpha, "theta0": theta0, "alpha0": alpha0}
    if not ok:
        start = "" if theta0 > -alpha0 and 0.0 <= alpha0 < 1.0 else \
            f"; the start θ0 = {theta0:.4g}, α0 = {alpha0:.4g} lies outside the model"
        return Fit("pitman", None, f"Pitman: Newton-Raphson from ARX's start failed ({why}{start})",
                   iterations=it, converged=False, params=params)
    if alpha == 0.0 or alpha >= 1.0 or theta + alpha <= 0.0 or theta + 1.0 <= 0.0:
        return Fit("pitman", None, f"Pitman: the fit (α = {alpha:.4g}, θ = {theta:.4g}) is outside "
                   "the model (α < 1, α ≠ 0, θ > −α)", iterations=it, params=params)
    log_u = special.gammaln(theta + 1.0) - special.gammaln(theta + alpha) + alpha * math.log(sm.N)
    u = math.exp(log_u) if log_u < 709 else math.inf
    if not (0.0 <= u <= sm.N):
        return Fit("pitman", None, f"Pitman: the estimate {u:.4g} is outside [0, N] "
                   f"(α = {alpha:.4g}, θ = {theta:.4g})", iterations=it, params=params)
    return Fit("pitman", u, iterations=it, params=params)


# --- SNB ----------------------------------------------------------------------------------------
def classes_estimate(sm: Sample, estimator: str = "sh3") -> float:
    """K, the number of non-empty population classes (Sh3 of Haas et al. 1995, or Shlosser 1981)."""
    p, s, Js, J, n1 = sm.pi, sm.s.astype(float), sm.Js, float(sm.J), float(sm.n1)
    if p >= 1.0:
        return J
    q = 1.0 - p
    a = (q ** s * Js).sum()                                   # Σ (1-π)^s J_s
    b = (s * p * q ** (s - 1.0) * Js).sum()                   # Σ s π (1-π)^{s-1} J_s
    if estimator == "shlosser":
        return J + n1 * a / b
    c = (s * p * p * (1.0 - p * p) ** (s - 1.0) * Js).sum()   # Σ s π²(1-π²)^{s-1} J_s
    # (1-π)^s (1+π)^s = (1-π²)^s: no overflow of (1+π)^s for large classes
    if estimator == "arx":
        d = (Js * (1.0 - p * p) ** s - 1.0).sum()               # ARX: Σ [J_s (1-π)^s (1+π)^s - 1]
    else:
        d = (((1.0 - p * p) ** s - q ** s) * Js).sum()          # Σ (1-π)^s((1+π)^s - 1) J_s
    return J + n1 * (c / d) * (a / b) ** 2


def _snb_logp(la: float, lb: float, p: float) -> tuple[float, float]:
    """(log P(f=1), log P(f=2)) at α = e^la, β = expit(lb) (see the module docstring)."""
    alpha = math.exp(la) if la < 700 else math.inf
    log_beta = -np.logaddexp(0.0, -lb)                       # log β
    one_b = special.expit(-lb)                                # 1 - β
    onemd = 1.0 - (1.0 - p) * one_b                           # 1 - d
    q = p * one_b / onemd
    logb = alpha * (log_beta - np.log(onemd))
    g1 = p + (1.0 - p) * alpha * q
    g2 = p * alpha * q + (1.0 - p) * alpha * (alpha + 1.0) / 2.0 * q * q
    with np.errstate(divide="ignore"):
        return logb + np.log(g1), logb + np.log(g2)


def _snb_system(x, sm: Sample, K: float):
    """Residuals log(K P(f=1)/n1), log(K P(f=2)/n2) and their Jacobian (central differences)."""
    la, lb = float(x[0]), float(x[1])
    p, c1, c2 = sm.pi, math.log(K / sm.n1), math.log(K / sm.n2)

    def resid(la, lb):
        l1, l2 = _snb_logp(la, lb, p)
        return np.array([c1 + l1, c2 + l2])
    F = resid(la, lb)
    h = 1e-6
    Jm = np.column_stack([(resid(la + h, lb) - resid(la - h, lb)) / (2 * h),
                          (resid(la, lb + h) - resid(la, lb - h)) / (2 * h)])
    return F, Jm


SNB_STARTS = ((0.0, 0.0), (math.log(0.5), 0.0), (math.log(2.0), 0.0), (0.0, -2.0), (0.0, 2.0),
              (math.log(0.1), -2.0), (math.log(10.0), 2.0))


def _snb_scan(sm: Sample, K: float, la_grid=np.linspace(math.log(1e-4), math.log(1e8), 61),
              lb_grid=np.linspace(-40.0, 40.0, 321)):
    """Every root of the two SNB equations that a scan brackets, without a start: along log α, the
    log β solving the first equation (each sign change of its residual on a grid, then Brent), and
    the sign changes of the second residual there (then Brent in log α). [(log α, log β), ...]."""
    from scipy import optimize
    p, c1, c2 = sm.pi, math.log(K / sm.n1), math.log(K / sm.n2)

    def lb_roots(la):
        with np.errstate(all="ignore"):
            r = c1 + _snb_logp(la, lb_grid, p)[0]
        ok = np.isfinite(r)
        idx = np.flatnonzero(ok[:-1] & ok[1:] & (np.sign(r[:-1]) != np.sign(r[1:])))
        out = []
        for k in idx:
            f = lambda lb: c1 + float(_snb_logp(la, lb, p)[0])     # noqa: E731
            out.append(optimize.brentq(f, lb_grid[k], lb_grid[k + 1], xtol=1e-13))
        return out

    def r2(la, branch):
        lbs = lb_roots(la)
        if len(lbs) <= branch:
            return math.nan, math.nan
        lb = lbs[branch]
        with np.errstate(all="ignore"):
            return c2 + float(_snb_logp(la, lb, p)[1]), lb

    roots = []
    for branch in (0, 1):
        vals = [r2(la, branch)[0] for la in la_grid]
        for k in range(len(la_grid) - 1):
            a, b = vals[k], vals[k + 1]
            if math.isfinite(a) and math.isfinite(b) and np.sign(a) != np.sign(b):
                try:
                    la = optimize.brentq(lambda t: r2(t, branch)[0], la_grid[k], la_grid[k + 1],
                                         xtol=1e-12)
                except ValueError:
                    continue
                roots.append((la, r2(la, branch)[1]))
    return roots


def snb(sm: Sample, estimator: str = "sh3", scan: bool = False) -> Fit:
    """SNB's fit: Newton from SNB_STARTS; with ``scan`` (gpurisk's rule) also the roots that
    :func:`_snb_scan` brackets, each polished by Newton, the one with the smallest α (the first in
    the scan) kept when several exist."""
    if sm.n1 == 0:
        return Fit("snb", 0.0, params={"note": "n1 = 0"})
    if sm.pi >= 1.0:
        return Fit("snb", None, "SNB: the sample is the population (π = 1), no thinning to fit",
                   converged=False)
    if sm.n2 == 0:
        return Fit("snb", None, "SNB: no sample class of size 2 (n2 = 0), the second moment "
                   "equation has no solution", converged=False)
    K = classes_estimate(sm, estimator)
    if not (math.isfinite(K) and K > 0):
        return Fit("snb", None, f"SNB: the {estimator} estimate of the number of population classes "
                   "is undefined", converged=False)
    total, last = 0, None
    starts = list(SNB_STARTS)
    found = None
    for tries, x0 in enumerate(starts, start=1):
        x, it, ok, why = _newton(lambda x: _snb_system(x, sm, K), x0)
        total += it
        last = why
        if ok:
            found = (x, tries)
            break
    if scan and (found is None or math.exp(found[0][0]) > 1e8):
        for la, lb in _snb_scan(sm, K):
            x, it, ok, why = _newton(lambda x: _snb_system(x, sm, K), (la, lb))
            total += it
            if ok and math.exp(x[0]) <= 1e8:
                found = (x, "scan")
                break
    if found is not None:
        x, tries = found
        alpha, beta = math.exp(x[0]), float(special.expit(x[1]))
        params = {"alpha": alpha, "beta": beta, "K": K, "k_estimator": estimator, "tries": tries}
        if alpha > 1e8:
            return Fit("snb", None, f"SNB: the fit runs off to α → ∞ (α = {alpha:.3g}, the "
                       "Poisson limit of the negative binomial): no finite (α, β) matches n1 and n2",
                       iterations=total, converged=False, params=params)
        u = K * math.exp(alpha * math.log(beta)) if beta > 0 else 0.0
        if not (0.0 <= u <= sm.N):
            return Fit("snb", None, f"SNB: the estimate {u:.4g} is outside [0, N]",
                       iterations=total, params=params)
        return Fit("snb", u, iterations=total, params=params)
    how = f"{len(starts)} starting points" + (" and a scan of log α for a bracketed root" if scan else "")
    return Fit("snb", None, f"SNB: Newton-Raphson failed from {how} (last: {last})",
               iterations=total, converged=False, params={"K": K, "k_estimator": estimator})


# --- Dankar -------------------------------------------------------------------------------------
def dankar(sm: Sample, estimator: str = "sh3", pi: float | None = None) -> tuple[Fit, dict[str, Fit]]:
    """(the chosen fit, every fit computed). π ≤ 0.1: Pitman, else Zayatz; π > 0.1: min(Zayatz, SNB).

    ``pi`` is the sampling fraction the rule reads (the design's, when known; default n/N): a
    Bernoulli sample at π = 0.1 has n/N on either side of 0.1, and the rule must not flip with it."""
    fits: dict[str, Fit] = {}
    if (sm.pi if pi is None else pi) <= 0.1 + 1e-12:          # π ≤ 0.1 (n/N of a given π can be off by an ulp)
        fits["pitman"] = pitman(sm)
        if fits["pitman"].value is not None:
            return fits["pitman"], fits
        fits["zayatz"] = zayatz(sm)
        return fits["zayatz"], fits
    fits["zayatz"] = zayatz(sm)
    fits["snb"] = snb(sm, estimator)
    z, b = fits["zayatz"], fits["snb"]
    if b.value is None or (z.value is not None and z.value <= b.value):
        return z, fits
    return b, fits


def estimate(sm: Sample, model: str = "dankar", estimator: str = "sh3",
             pi: float | None = None, rule: str = "arx", expectation: str = "conditional",
             level: float = 0.95) -> tuple[Fit, dict[str, Fit]]:
    """(the fit of ``model``, every fit computed); ``pi``: the fraction Dankar's rule reads;
    ``rule``: "arx" (ARX's fits, SPEC §10) or "gpurisk" (:mod:`.fitted`)."""
    if rule == "gpurisk":
        from .fitted import estimate_gpurisk
        return estimate_gpurisk(sm, model, estimator, pi, expectation, level)
    if model == "dankar":
        return dankar(sm, estimator, pi)
    fit = {"pitman": pitman, "zayatz": zayatz}.get(model)
    fit = fit(sm) if fit else snb(sm, estimator)
    return fit, {model: fit}
