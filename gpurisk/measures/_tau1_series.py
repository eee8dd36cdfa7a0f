"""The τ̂1 series of Camerlenghi, Favaro, Naulet & Panero, computed stably. SPEC §4, §4.1.

    τ̂1^L = Σ_{i≥0} (−λ)^i (i+1) P(L ≥ i) Z_{i+1}        (Z_r = n_r, the number of cells with f_j = r)

With P(L ≥ i) = 1 for every i this is the unbiased series (λ ≤ 1). The coefficients
c_i = (−λ)^i (i+1) P(L ≥ i) are formed in log space: log|c_i| = i log λ + log(i+1) + log P(L ≥ i),
with the tail probabilities from scipy.special (Poisson: the regularised incomplete gamma function,
P(L ≥ i) = P(i, r); Binomial: a reverse log-sum-exp of the probability mass function over the finite
support 0..k). Where the Poisson tail underflows, log P(L ≥ i) = log pmf(i) + log ₁F₁(1; i+1; r).
The series stops where the Binomial support ends (i > k) or, for Poisson smoothing, past the peak of
the coefficients once n·|c_i| < 1e-15 (every later term is smaller still).

Everything is vectorised over i and over replicates (rows of a Z matrix); nothing loops over cells.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: a term n·|c_i| below this, past the coefficients' peak, ends the Poisson-smoothed series
NEGLIGIBLE = 1e-15
#: log of the largest double; a coefficient beyond it is scaled before the sum
LOG_MAX = math.log(np.finfo(np.float64).max)
SMOOTHERS = ("binomial", "poisson", "none")


def poisson_log_tail(i, r: float) -> np.ndarray:
    """log P(L ≥ i) for L ~ Poisson(r), elementwise over the integer array ``i``."""
    from scipy import special

    i = np.asarray(i, dtype=np.int64)
    out = np.zeros(i.shape, dtype=np.float64)          # i ≤ 0: P = 1
    pos = i > 0
    if not pos.any():
        return out
    ip = i[pos].astype(np.float64)
    p = special.gammainc(ip, r)                         # P(L ≥ i) = P(i, r), regularised lower
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    deep = p < 1e-280                                   # underflow region: closed form in logs
    if deep.any():
        idp = ip[deep]
        logpmf = special.xlogy(idp, r) - r - special.gammaln(idp + 1.0)
        lp[deep] = logpmf + np.log(special.hyp1f1(1.0, idp + 1.0, r))
    out[pos] = lp
    return out


def binomial_log_tail(i, k: int, q: float) -> np.ndarray:
    """log P(L ≥ i) for L ~ Binomial(k, q), elementwise over the integer array ``i`` (−inf for i > k)."""
    from scipy import special

    i = np.asarray(i, dtype=np.int64)
    m = np.arange(k + 1, dtype=np.float64)
    logpmf = (special.gammaln(k + 1.0) - special.gammaln(m + 1.0) - special.gammaln(k - m + 1.0)
              + special.xlogy(m, q) + special.xlog1py(k - m, -q))
    tail = np.logaddexp.accumulate(logpmf[::-1])[::-1]  # tail[m] = log Σ_{l ≥ m} pmf(l)
    tail = np.minimum(tail, 0.0)
    out = np.full(i.shape, -np.inf)
    out[i <= 0] = 0.0
    mid = (i > 0) & (i <= k)
    out[mid] = tail[i[mid]]
    return out


def default_poisson_r(lam: float, n: int) -> float:
    """r = ln( n (λ+1)² / (λ−1) ) / (2λ)  (SPEC §4.1; Orlitsky, Suresh & Wu 2016); needs λ > 1."""
    return math.log(n * (lam + 1.0) ** 2 / (lam - 1.0)) / (2.0 * lam)


def default_binomial_kq(lam: float, n: int) -> tuple[int, float]:
    """k = ⌈ ½ log₃( n λ² / (λ−1) ) ⌉, q = 2/(λ+2)  (SPEC §4.1); k needs λ > 1."""
    k = math.ceil(0.5 * math.log(n * lam * lam / (lam - 1.0), 3))
    return max(int(k), 1), 2.0 / (lam + 2.0)


@dataclass
class Series:
    """The coefficients of one τ̂1 estimator: c_i = sign_i · exp(log_coef_i), i = 0..len−1."""

    method: str                      # "unbiased", "binomial" or "poisson"
    lam: float
    params: dict = field(default_factory=dict)
    log_coef: np.ndarray = field(default_factory=lambda: np.zeros(1))
    sign: np.ndarray = field(default_factory=lambda: np.ones(1))

    @property
    def terms(self) -> int:
        return int(np.isfinite(self.log_coef).sum())


def _log_coef(lam: float, i: np.ndarray, log_tail: np.ndarray) -> np.ndarray:
    """i log λ + log(i+1) + log P(L ≥ i), with the i = 0 term exactly 0 (λ^0 = 1, also for λ = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lpow = i * math.log(lam) if lam > 0 else np.where(i == 0, 0.0, -np.inf)
        out = lpow + np.log1p(i.astype(np.float64)) + log_tail
    out = np.where(i == 0, 0.0, out)
    return np.where(np.isnan(out), -np.inf, out)


def coefficients(lam: float, n: int, imax: int, method: str, r: float | None = None,
                 k: int | None = None, q: float | None = None) -> Series:
    """The coefficients c_0..c_{imax−1} (fewer where the series stops) of one estimator.

    ``method`` is "unbiased", "binomial" (needs k, q) or "poisson" (needs r).
    """
    imax = max(int(imax), 1)
    if method == "unbiased":
        i = np.arange(imax)
        lt = np.zeros(imax)
        params: dict = {}
    elif method == "binomial":
        imax = min(imax, int(k) + 1)                     # P(L ≥ i) = 0 beyond the support
        i = np.arange(imax)
        lt = binomial_log_tail(i, int(k), float(q))
        params = {"k": int(k), "q": float(q)}
    elif method == "poisson":
        i, lt = _poisson_until_negligible(lam, n, imax, float(r))
        params = {"r": float(r)}
    else:  # pragma: no cover - callers check
        raise ValueError(method)
    lc = _log_coef(lam, i, lt)
    sign = np.where(i % 2 == 0, 1.0, -1.0)
    return Series(method, lam, params, lc, sign)


def _poisson_until_negligible(lam, n, imax, r, chunk=256):
    """(i, log P(L ≥ i)) in chunks, stopping past the peak once n·|c_i| < NEGLIGIBLE."""
    peak = lam * r                                       # c_{i+1}/c_i ≈ λ r / i: decreasing past i ≈ λ r
    lim = math.log(NEGLIGIBLE) - math.log(max(n, 1))
    parts_i, parts_t = [], []
    start = 0
    while start < imax:
        i = np.arange(start, min(imax, start + chunk))
        lt = poisson_log_tail(i, r)
        parts_i.append(i)
        parts_t.append(lt)
        lc = _log_coef(lam, i, lt)
        past = i > peak + 1
        small = lc < lim
        if (past & small).any():
            stop = int(np.flatnonzero(past & small)[0])
            parts_i[-1], parts_t[-1] = i[:stop], lt[:stop]
            break
        start += chunk
    return np.concatenate(parts_i), np.concatenate(parts_t)


def evaluate(series: Series, Z) -> tuple[np.ndarray, np.ndarray]:
    """(τ̂1, rounding bound) for Z[..., r] = Z_r (column 0 unused), one value per row.

    The sum is taken in float64 on coefficients scaled by exp(−S), S = the largest log-coefficient
    in use when it exceeds 600, then multiplied back; a value beyond the double range comes back as
    ±inf, which the caller reports as not representable. The bound is 8 ε Σ_i |c_i| Z_{i+1}: the sum's
    rounding error in cells.
    """
    Z = np.asarray(Z, dtype=np.float64)
    m = min(Z.shape[-1] - 1, series.log_coef.size)
    Zr = Z[..., 1:1 + m]
    lc = series.log_coef[:m]
    used = (Zr > 0).any(axis=tuple(range(Zr.ndim - 1))) if Zr.ndim > 1 else Zr > 0
    S = float(lc[used & np.isfinite(lc)].max()) if (used & np.isfinite(lc)).any() else 0.0
    S = S if S > 600.0 else 0.0
    with np.errstate(over="ignore"):
        c = np.where(used, series.sign[:m] * np.exp(np.where(used, lc, -np.inf) - S), 0.0)
    cabs = np.abs(c)
    total = Zr @ c
    mag = Zr @ cabs
    if not S:
        return total, 8.0 * np.finfo(np.float64).eps * mag
    with np.errstate(over="ignore", divide="ignore"):
        value = np.sign(total) * np.exp(np.log(np.abs(total)) + S)
        bound = np.exp(np.log(8.0 * np.finfo(np.float64).eps * mag) + S)
    return np.where(total == 0, 0.0, value), bound


def second_moment(series: Series, Z) -> np.ndarray:
    """Σ_i c_i² Z_{i+1} for Z[..., r] = Z_r, one value per row (+inf beyond the double range).

    Under Bernoulli sampling the cells' sample counts are independent, and τ̂1 − τ1 is a sum over
    cells of g(f_j) − I(f_j = 1, F_j = 1) with g(r) = c_{r−1}; since g(1) = c_0 = 1, each cell's
    E[(g − h)²] = E[g²] − E[h], so Σ_j g(f_j)² − τ1 estimates E(τ̂1 − τ1)² without bias where the
    series is unbiased (λ ≤ 1), and the variance plus the cells' squared biases where it is smoothed.
    """
    Z = np.asarray(Z, dtype=np.float64)
    m = min(Z.shape[-1] - 1, series.log_coef.size)
    Zr = Z[..., 1:1 + m]
    lc2 = 2.0 * series.log_coef[:m]
    used = (Zr > 0).any(axis=tuple(range(Zr.ndim - 1))) if Zr.ndim > 1 else Zr > 0
    fin = used & np.isfinite(lc2)
    S = float(lc2[fin].max()) if fin.any() else 0.0
    S = S if S > 600.0 else 0.0
    c2 = np.where(fin, np.exp(np.where(fin, lc2, -np.inf) - S), 0.0)
    total = Zr @ c2
    if not S:
        return total
    with np.errstate(over="ignore", divide="ignore"):
        return np.where(total == 0, 0.0, np.exp(np.log(np.where(total > 0, total, 1.0)) + S))
