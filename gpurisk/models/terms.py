"""What each sample unique adds to τ̂1 and Ê, with its variance and third cumulant, under the
Poisson-gamma form of a log-linear fit (Skinner & Shlomo 2008: τ̂1 = Σ_{f=1} h1(λ̂_j) and
Ê = τ̂2 = Σ_{f=1} h2(λ̂_j), ../shared/SPEC.md §12), element by element over the uniques.

Given f_j = 1, with the cell's Λ_j gamma of mean λ̂_j = μ̂_j/π and relative variance α_j, F_j − 1 is
negative binomial, pgf (1 + c(1 − s))^{−a}, a = 1/α + 1, c = (1 − π)/(1/(α λ̂) + π), and

    E[I(F = 1) | f = 1] = (1 + c)^{−a},      E[1/F | f = 1] = α [1 − (1 + c)^{−1/α}] / c

(:func:`nb_terms`; both at one prior: :func:`nb_both`), the Poisson terms e^{−m} and
(1 − e^{−m})/m, m = (1 − π) λ̂, as α → 0 (:func:`tau1_terms`, :func:`inverse_terms`: Var(1/F)
from Ei). E[1/F²] and E[1/F³] given f = 1 by one-dimensional integrals (:func:`inverse_square`,
:func:`inverse_cube`), the third cumulants from them (:func:`third_cumulants`). The formulas run
on slices of CHUNK uniques shared among threads (:func:`by_chunks`: the same numbers). The
measures that sum them, and the whole method: :mod:`gpurisk.measures._ll_poisson`."""
from __future__ import annotations

import functools
import math

import numpy as np

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
    :func:`gpurisk.models.prior.loo_prior` gives): given f_j = 1 the cell's Λ_j is
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
    g = _Gamma(lam_m, alpha, pi)
    if kind == "tau1":
        t, d = g.tau1(slope)
        return (t, t * (1.0 - t), d) if slope else (t, t * (1.0 - t))
    t, d, _ = g.inverse(slope)
    if not variance:
        return (t, None, d) if slope else (t, None)
    if exact:
        v = np.maximum(inverse_square(g.cs, 1.0 / g.alpha + 1.0, g.zero) - t * t, 0.0)
    else:
        post = g.q * (1.0 / g.alpha + 1.0) / g.b           # E[(1 − π)Λ | f = 1]
        v = inverse_terms(post)[1]
    return (t, v, d) if slope else (t, v)


def nb_both(m, alpha, pi, slope: bool = False) -> tuple:
    """Both measures' terms at one prior, (τ1's, E's), each (term, slope in ln λ̂ or None): the
    numbers :func:`nb_terms` gives each (``variance=False``), with c and ln(1 + c) formed once
    for the two."""
    lam_m = np.asarray(m, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim == 0 and float(alpha) <= 1e-12:
        return tuple((lambda got: (got[0], got[2] if slope else None))(
            nb_terms(lam_m, alpha, pi, kind, variance=False, slope=slope))
            for kind in ("tau1", "inverse"))
    g = _Gamma(lam_m, alpha, pi)
    return g.tau1(slope), g.inverse(slope)[:2]


class _Gamma:
    """What :func:`nb_terms` forms of the gamma prior given f = 1 at (1 − π) λ̂ = ``lam_m`` and α
    (both measures' terms read it): α (floored at 1e-300), λ̂, b = 1/(α λ̂) + π, c = (1 − π)/b,
    L = ln(1 + c), and where F = 1 surely (c ≤ 0: π = 1 or λ̂ = 0; there c is read as 1)."""

    def __init__(self, lam_m, alpha, pi):
        self.alpha = alpha = np.maximum(alpha, 1e-300)
        q = 1.0 - pi
        self.pi, self.q = pi, q
        self.lam = lam = lam_m / q if q > 0 else np.zeros_like(lam_m)
        with np.errstate(divide="ignore", over="ignore"):
            self.b = 1.0 / (alpha * np.maximum(lam, 1e-300)) + pi
            self.c = c = q / self.b
        self.log_c = np.log1p(c)        # ln(1 + c); where c ≤ 0 E's terms are set apart
        self.zero = self.cs = None

    def _zero(self):
        if self.zero is None:
            self.zero = self.c <= 0.0
            self.cs = np.where(self.zero, 1.0, self.c)

    def tau1(self, slope: bool):
        """(E[I(F = 1) | f = 1] = (1 + c)^{−a}, its slope in ln λ̂ or None)."""
        a1 = 1.0 / self.alpha + 1.0
        t = np.exp(-a1 * self.log_c)
        if not slope:
            return t, None
        return t, -a1 * self.c / (1.0 + self.c) * t / (1.0 + self.pi * self.alpha * self.lam)

    def inverse(self, slope: bool):
        """(E[1/F | f = 1] = α [1 − (1 + c)^{−1/α}]/c, its slope in ln λ̂ or None,
        (1 + c)^{−1/α} − 1)."""
        self._zero()
        alpha, cs, zero = self.alpha, self.cs, self.zero
        em = np.expm1(-self.log_c / alpha)                # (1 + c)^{−1/α} − 1
        t = np.where(zero, 1.0, alpha * -em / cs)
        d = None
        if slope:        # (1 + c)^{−a} = (1 + c)^{−1/α} / (1 + c)
            d = np.where(zero, 0.0, ((1.0 + em) / (1.0 + cs) - t)
                         / (1.0 + self.pi * alpha * self.lam))
        return t, d, em


#: Gauss-Legendre nodes of :func:`inverse_cube`'s integral (and of :func:`inverse_square`'s where
#: no rule of SQUARE_RULES applies), and how many e-folds of its exponential factor it covers
#: (beyond, the integrand is below e^{−50} of its start). 20 nodes are within 2e-11 (relative) of 64
#: nodes' sum over c in [1e-9, 1e12] and a − 1 in [1e-9, 1e13] (400 000 random points), and the
#: variance E[1/F²] − E[1/F]² within 1.5e-7 of 64 nodes' (the subtraction's own cancellation: 24
#: nodes give the same), at under a third of the cost
LEGENDRE_NODES = 20
EFOLDS = 50.0
#: :func:`inverse_square`'s fewer nodes where its integrand is easier, each rule (K, L, nodes):
#: where the exponential factor falls by fewer than K e-folds over the window (K = (a − 1) W) and
#: L = ln(1 + c) is below L, that many Gauss-Legendre nodes. On the 400 000 random points above,
#: grouped by K and L, each rule's largest error against 64 nodes was 2.2e-13 (8 nodes), 1.7e-12
#: (10) and 8.7e-15 (16), below the 20 nodes' 1.8e-11 (issue 43's stop 66; tests/test_skew_bound.py)
SQUARE_RULES = ((5.0, 4.0, 8), (10.0, 4.0, 10), (20.0, 8.0, 16))
#: ... and where the factor falls by at least V e-folds over [0, L] (V = (a − 1) L) and a − 1 is at
#: least A, for a pair (V, A) of LAGUERRE_WHERE: the integral in v = (a − 1) w is
#: ∫_0^V e^{−v} g(v) dv, g(v) = −expm1(v − V)/((a − 1)² c expm1(L − v/(a − 1))) smooth, taken as
#: ∫_0^∞ by LAGUERRE_NODES Gauss-Laguerre nodes (the largest at 22.9, the weight e^{−v} beyond V
#: below e^{−35}). On 600 000 random points as above it was within 2.1e-13 of 64 Gauss-Legendre
#: nodes at (35, 20) and 1.6e-12 at (40, 5) (10 nodes: 2.4e-12 at (35, 5); 8 at (30, 5): 3.5e-11,
#: so V below 35 keeps Gauss-Legendre's). At a − 1 from 2 to 5 and V ≥ 60 (c near 10¹², E[1/F²]
#: near 10⁻²⁴) 10 nodes were 6.6e-11 off, so those keep 20 Gauss-Legendre nodes
LAGUERRE_WHERE = ((35.0, 20.0), (40.0, 5.0))
LAGUERRE_NODES = 8


#: a − 1 = 1/α̃ is floored at this in :func:`inverse_square`'s and :func:`inverse_cube`'s
#: integrands, which divide by it: a prior of relative variance α̃ above 2⁵³ (a unique alone in two
#: or more arcs' pairs of β near its floor: α̃ of 10²⁰ and more) makes a = 1/α̃ + 1 round to 1,
#: where 0/0 gave NaN (Ê's s.e. on MACH 2019's questionnaire items at π = 10-70 %). At the floor
#: the integrand's −expm1(−(a − 1) x)/(a − 1) is its limit x, the geometric case a = 1
#: (tests/test_skew_bound.py); an a − 1 above 0 is at least 2.2·10⁻¹⁶, so no other unique moves
SHAPE_FLOOR = 1e-100


@functools.lru_cache(maxsize=8)
def _legendre(nodes: int = LEGENDRE_NODES):
    x, w = np.polynomial.legendre.leggauss(nodes)
    return (x + 1.0) / 2.0, w / 2.0                    # on [0, 1]


@functools.lru_cache(maxsize=1)
def _laguerre():
    return np.polynomial.laguerre.laggauss(LAGUERRE_NODES)


def _slices(c, a, chunk: int):
    """(start, c, a − 1, L = ln(1 + c), W = min(L, EFOLDS/(a − 1))) of ``chunk`` uniques at a time,
    as columns: what :func:`inverse_cube` integrates over."""
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), c.shape)
    for i in range(0, c.shape[0], chunk):
        cc, aa = c[i:i + chunk, None], np.maximum(a[i:i + chunk, None] - 1.0, SHAPE_FLOOR)
        L = np.log1p(cc)
        yield i, cc, aa, L, np.minimum(L, EFOLDS / aa)


def square_rules(c, a, chunk: int = 1 << 15):
    """Per unique, the rule :func:`inverse_square` takes: i < len(SQUARE_RULES) that rule's
    Gauss-Legendre nodes, len(SQUARE_RULES) Gauss-Laguerre's, one more LEGENDRE_NODES (also where
    a value is not a number). ``chunk`` uniques at a time (their temporaries in the cache)."""
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), c.shape)
    rule = np.full(c.shape, len(SQUARE_RULES) + 1, dtype=np.int8)
    with np.errstate(invalid="ignore", over="ignore"):
        for i in range(0, c.shape[0], chunk):
            am1, L, out = a[i:i + chunk] - 1.0, np.log1p(c[i:i + chunk]), rule[i:i + chunk]
            v = am1 * L                                # the e-folds over [0, L] (over the window:
            for j in range(len(SQUARE_RULES) - 1, -1, -1):       # min(v, EFOLDS) < K ⇔ v < K)
                most_k, most_l, _ = SQUARE_RULES[j]
                out[(v < min(most_k, EFOLDS)) & (L < most_l)] = j
            for most_v, most_a in LAGUERRE_WHERE:
                out[(v >= most_v) & (am1 >= most_a)] = len(SQUARE_RULES)
    return rule


def inverse_square(c, a, zero=None, chunk: int = 1 << 11):
    """E[1/F² | f = 1] under the Poisson-gamma model (:func:`nb_terms`: F − 1 negative binomial with
    pgf E s^X = (1 + c(1 − s))^{−a}). From 1/(1 + X)² = ∫_0^1 (1/t) ∫_0^t s^X ds dt,
    E[1/F²] = ∫_0^1 H(t)/t dt with H(t) = [(1 + c(1 − t))^{1−a} − (1 + c)^{1−a}] / (c (a − 1)); with
    w = ln(1 + c(1 − t)), L = ln(1 + c),

        E[1/F²] = ∫_0^L e^{(1−a)w} [−expm1((1 − a)(L − w))] / ((a − 1) c expm1(L − w)) dw,

    a smooth integrand (finite at w = L), taken by Gauss-Legendre on [0, min(L, EFOLDS/(a − 1))],
    with fewer nodes where the integrand is easier (SQUARE_RULES), or where the exponential factor
    falls by 35-40 e-folds or more over [0, L] by Gauss-Laguerre in v = (a − 1) w (LAGUERRE_WHERE;
    :func:`square_rules`).
    ``c``, ``a`` per sample unique (``a`` may be a number); ``zero``: where F = 1 surely (1).
    Each rule's uniques are taken ``chunk`` at a time: their chunk × nodes temporaries stay in the
    processor's cache (2 048: 1.75 times as fast as 32 768, the same numbers). Each row's nodes are
    summed by ``einsum``, in one order whatever the rows around it (a BLAS product may round a row
    by its place in the block), so every unique's value is the same on any slice of the uniques."""
    c = np.asarray(c, dtype=np.float64)
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), c.shape)
    out = np.empty(c.shape)
    rule = square_rules(c, a)
    lag = len(SQUARE_RULES)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for r in range(lag + 2):
            at = np.flatnonzero(rule == r)
            if r == lag:
                xg, wg = _laguerre()
            else:
                xg, wg = _legendre(SQUARE_RULES[r][2] if r < lag else LEGENDRE_NODES)
            for i in range(0, at.shape[0], chunk):
                j = at[i:i + chunk]
                cc, aa = c[j, None], np.maximum(a[j, None] - 1.0, SHAPE_FLOOR)
                L = np.log1p(cc)
                if r == lag:      # ∫_0^∞ e^{−v} g(v) dv (LAGUERRE_WHERE), g's denominator as
                    # (a − 1)c · (a − 1)expm1(·): each factor near X's mean, so no overflow where
                    # a is huge and c tiny
                    f = -np.expm1(xg - aa * L) / ((aa * cc) * (aa * np.expm1(L - xg / aa)))
                    out[j] = np.einsum("ij,j->i", f, wg)
                    continue
                W = np.minimum(L, EFOLDS / aa)
                w = W * xg
                f = (np.exp(-aa * w) * -np.expm1(-aa * (L - w))) / (aa * cc * np.expm1(L - w))
                out[j] = np.einsum("ij,j->i", f, wg) * W[:, 0]
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


def third_cumulants(mu, alpha, pi: float, kind: str, terms=None, variances=None,
                    total: bool = False):
    """Per sample unique, the third cumulant of its term's variable (1/F or I(F = 1)) under the
    Poisson-gamma model at (1 − π) μ/π (:func:`nb_terms`): E X³ − 3 E X² E X + 2 (E X)³, from
    :func:`inverse_square` and :func:`inverse_cube` for 1/F, t(1 − t)(1 − 2t) for I(F = 1).
    ``terms``, ``variances``: the terms and their variances already computed (:func:`nb_terms`
    with ``exact``), so E X² = Var + t² is not computed again. On slices (:func:`by_chunks`); with
    ``total``, only their sum (:func:`sums_by_chunks`: no per-unique array is made)."""
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
    return (sums_by_chunks if total else by_chunks)(part, 1, mu, alpha, *known)[0]


#: per-unique formulas (:func:`gpurisk.models.prior.loo_prior`, :func:`unique_terms`) run on
#: slices of this many sample uniques: their temporaries stay in the processor's cache and take a
#: few slices' memory, not the uniques' (each element's value is the same: every formula works
#: element by element)
CHUNK = 1 << 16


def by_chunks(fn, n_out: int, *arrays, chunk: int | None = None):
    """The ``n_out`` arrays ``fn(*arrays)`` returns, computed on slices of ``chunk`` elements and
    written into arrays of the whole length: element by element what ``fn`` gives on the whole
    arrays, for an ``fn`` that works element by element. An argument that is not an array of the
    first one's length (a number) is passed whole. ``chunk``: default CHUNK. Where there are at least
    THREADED_CHUNKS slices they are shared among the CPUs this process may use (at most
    TERMS_THREADS; numpy releases the GIL): each slice is written by one thread, so the numbers are
    the same."""
    chunk, size, at = _slicer(fn, arrays, chunk)
    if size <= chunk:
        return fn(*arrays)
    out = [np.empty(size) for _ in range(n_out)]

    def one(start):
        for o, p in zip(out, at(start)):
            o[start:start + chunk] = p
    each_slice(one, range(0, size, chunk))
    return tuple(out)


def sums_by_chunks(fn, n_out: int, *arrays, chunk: int | None = None) -> tuple:
    """The sums of the ``n_out`` arrays ``fn(*arrays)`` returns, taken slice by slice as
    :func:`by_chunks` takes them (shared among threads alike), without keeping any of the arrays:
    each slice's sums are kept apart and added in the slices' order, so the numbers do not depend on
    how many threads there are (they may differ from one ``np.sum`` of the whole array in the last
    digits: another order of the same additions)."""
    chunk, size, at = _slicer(fn, arrays, chunk)
    starts = range(0, max(size, 1), chunk)
    out = np.zeros((len(starts), n_out))

    def one(start):
        for k, p in enumerate(at(start)):
            out[start // chunk, k] = float(np.sum(p))
    each_slice(one, starts)
    return tuple(float(x) for x in out.sum(axis=0))


def _slicer(fn, arrays, chunk):
    """(chunk, the first array's length, start ↦ ``fn`` on the slice of ``chunk`` elements from
    start): each argument that is an array of the first one's length is sliced, any other (a
    number) passed whole. What :func:`by_chunks` and :func:`sums_by_chunks` share."""
    chunk = CHUNK if chunk is None else int(chunk)
    size = int(np.shape(arrays[0])[0]) if np.ndim(arrays[0]) else 0
    sliced = [np.ndim(a) == 1 and np.shape(a)[0] == size for a in arrays]

    def at(start):
        return fn(*(a[start:start + chunk] if cut else a for a, cut in zip(arrays, sliced)))
    return chunk, size, at


def each_slice(one, starts) -> None:
    """``one(start)`` for each of ``starts`` (the slices' starts), shared among the CPUs this process
    may use (at most TERMS_THREADS) where there are at least THREADED_CHUNKS of them, else in
    turn: each slice's work is done by one thread, so what ``one`` writes is the same either way."""
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


#: the skewed bound leaves out the uniques that together can move the upper ends by at most this
#: share of an s.e. (a numerical tolerance: the largest shift the terms' range allows,
#: :func:`gpurisk.models.unique_sums.skew_sum`)
SKEW_TOL = 0.01
