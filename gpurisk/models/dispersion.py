"""How far the cells vary around a log-linear model: the gamma variance α of the cell effect.

Under the Poisson-gamma model f_j ~ NegBin(mean μ_j, variance μ_j + α μ_j²) (Rinott & Shlomo 2006).
Two estimators of α:

- moments over every cell (:func:`gpurisk.models.table_fits.dispersion_moment`): dominated by the
  large cells, which make no sample uniques;
- ``truncated`` (:func:`truncated_alpha`): maximum likelihood over the cells the sample holds, each
  count given that it is positive (the zero-truncated negative binomial), so no empty cell is listed:

      ℓ(α) = Σ_{f_j > 0} [ln Γ(f_j + r) − ln Γ(r) − ln f_j! + r ln r + f_j ln μ_j − (r + f_j) ln(r + μ_j)
                          − ln(1 − (r/(r + μ_j))^r)],      r = 1/α,

  and the Poisson limit α = 0: Σ [f_j ln μ_j − μ_j − ln f_j! − ln(1 − e^{−μ_j})]. It reads the small
  counts (f = 1, 2, 3 …), where the sample uniques are made. ln Γ(f + r) − ln Γ(r) is computed once
  per distinct f, not per cell. The cells are first grouped by (f_j, ln μ_j rounded to LOG_BIN = 10⁻³),
  each group counted once at its bin's μ (a relative error below 5·10⁻⁴ in μ): the sum then runs
  over a few thousand groups in a fixed order, so α̂ is the same whichever order a table keeps its
  cells in (an assess and a scan's roll-up give the same figure), and costs one pass over the cells.
"""
from __future__ import annotations

import math

import numpy as np

#: α is searched on ln α in this range (beyond: the Poisson limit, or a cell effect larger than any
#: sample can show)
LOG_ALPHA_RANGE = (math.log(1e-4), math.log(1e4))
#: the width of the bins of ln μ the cells are grouped in
LOG_BIN = 1e-3


def _loglik(f, mu, log_mu, w, uniq, inv, alpha: float) -> float:
    """ℓ(α) of the module docstring over groups of ``w`` cells, without the terms that do not
    depend on α (−ln f!)."""
    if alpha <= 0.0:
        return float(np.sum(w * (f * log_mu - mu - np.log(-np.expm1(-mu)))))
    r = 1.0 / alpha
    from scipy.special import gammaln
    per_f = gammaln(uniq + r) - gammaln(r)
    log_r_mu = np.log(r + mu)
    log_p0 = r * (math.log(r) - log_r_mu)
    return float(np.sum(w * (per_f[inv] + r * math.log(r) + f * log_mu - (r + f) * log_r_mu
                             - np.log(-np.expm1(log_p0)))))


#: :func:`groups` reads the cells this many at a time
GROUP_CHUNK = 1 << 20


def groups(f, mu):
    """(f, μ, ln μ, cells) per group of cells with one f and one bin of ln μ (module docstring), in
    the order of (f, bin): the same groups in the same order for the same cells in any order. The
    bins are found and counted GROUP_CHUNK cells at a time (their temporaries a slice's size, not
    the table's). μ is floored at 1e-300."""
    size = int(mu.shape[0])
    b = np.empty(size, dtype=np.int32)        # ln μ ≥ ln 1e-300: |bin| < 7·10⁵
    for start in range(0, size, GROUP_CHUNK):
        part = slice(start, start + GROUP_CHUNK)
        b[part] = np.rint(np.log(np.maximum(mu[part], 1e-300)) * (1.0 / LOG_BIN))
    lo = int(b.min())
    width = int(b.max()) - lo + 1
    c1 = np.zeros(width, dtype=np.int64)      # f = 1, most cells: counted by bin alone
    rest_f, rest_b = [], []
    for start in range(0, size, GROUP_CHUNK):
        part = slice(start, start + GROUP_CHUNK)
        bc, fc = b[part], f[part]
        one = fc == 1
        c1 += np.bincount(bc[one] - lo, minlength=width)
        rest_f.append(fc[~one])
        rest_b.append(bc[~one])
    bins1 = np.flatnonzero(c1)
    key = ((np.concatenate(rest_f).astype(np.int64) - 2) * width
           + (np.concatenate(rest_b).astype(np.int64) - lo))
    top = int(key.max()) + 1 if key.shape[0] else 0
    if top <= max(4 * key.shape[0], 1 << 16):     # a small key range: counted, not sorted
        kc = np.bincount(key, minlength=top)
        ku = np.flatnonzero(kc)
        kc = kc[ku]
    else:
        ku, kc = np.unique(key, return_counts=True)
    fk, bk = ku // width + 2, ku % width
    fs = np.concatenate([np.ones(bins1.shape[0]), fk.astype(np.float64)])
    bins = np.concatenate([bins1, bk])
    w = np.concatenate([c1[bins1], kc]).astype(np.float64)
    log_mu = (bins + lo) * LOG_BIN
    return fs, np.exp(log_mu), log_mu, w


#: ℓ drops by this much from its maximum at the ends of α's profile interval (one s.e. each side:
#: the likelihood-ratio statistic 2 Δℓ = 1)
PROFILE_DROP = 0.5


def _prepared(f, mu):
    """ℓ(α) over the cells with f > 0 (module docstring), their groups formed once; None where
    there is no such cell."""
    f = np.asarray(f, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)       # floored at 1e-300 in groups
    keep = f > 0
    if not keep.all():
        f, mu = f[keep], mu[keep]
    if f.shape[0] == 0:
        return None
    f, mu, log_mu, w = groups(f, mu)
    uniq, inv = np.unique(f, return_inverse=True)
    return lambda alpha: _loglik(f, mu, log_mu, w, uniq, inv, alpha)


def alpha_profile(f, mu, alpha_hat: float, drop: float = PROFILE_DROP) -> tuple[float, float]:
    """(α_lo, α_hi): where the zero-truncated log-likelihood ℓ(α) (module docstring, μ held at the
    model's) has fallen ``drop`` below its value at α̂ on each side, searched on ln α within
    LOG_ALPHA_RANGE: α̂'s one-s.e. profile interval (the likelihood-ratio statistic 2 Δℓ = 1). α_lo
    is 0 where the Poisson limit lies within it; α_hi is the range's end where ℓ never falls that
    far. The spread of an estimate over [α_lo, α_hi] is α̂'s part of its s.e., which the per-cell
    variance (α taken as known) leaves out."""
    return profile_of(_prepared(f, mu), alpha_hat, drop)


def truncated_alpha(f, mu) -> float:
    """α̂ by zero-truncated negative-binomial maximum likelihood over the cells with f_j > 0
    (module docstring); 0 where the Poisson limit is as likely. ``f``: the sampled cells' counts;
    ``mu``: the model's means there (sample scale)."""
    return alpha_of(_prepared(f, mu))


def loglik(f, mu):
    """ℓ(α) over the cells with f > 0, their groups formed once (None where there is none): what
    :func:`alpha_of` and :func:`profile_of` read, so α̂ and its profile can be asked for apart."""
    return _prepared(f, mu)


def alpha_of(ll) -> float:
    """:func:`truncated_alpha` from :func:`loglik`'s ℓ (the same number)."""
    return 0.0 if ll is None else _alpha_hat(ll)


def profile_of(ll, alpha_hat: float, drop: float = PROFILE_DROP) -> tuple[float, float]:
    """:func:`alpha_profile` from :func:`loglik`'s ℓ at α̂ (the same numbers)."""
    return (0.0, 0.0) if ll is None else _profile(ll, alpha_hat, drop)


def _alpha_hat(ll) -> float:
    from scipy.optimize import minimize_scalar
    res = minimize_scalar(lambda t: -ll(math.exp(t)), bounds=LOG_ALPHA_RANGE, method="bounded",
                          options={"xatol": 1e-5})
    return float(math.exp(res.x)) if -res.fun > ll(0.0) else 0.0


def _profile(ll, alpha_hat: float, drop: float) -> tuple[float, float]:
    from scipy.optimize import brentq
    lo_t, hi_t = LOG_ALPHA_RANGE
    at = max(float(alpha_hat), math.exp(lo_t))
    target = (ll(float(alpha_hat)) if alpha_hat > 0 else ll(0.0)) - drop

    def gap(t):
        return ll(math.exp(t)) - target
    low = 0.0
    if alpha_hat > 0 and ll(0.0) < target and gap(lo_t) < 0 < gap(math.log(at)):
        low = math.exp(brentq(gap, lo_t, math.log(at), xtol=1e-6))
    high = math.exp(hi_t)
    if gap(math.log(at)) > 0:
        step = math.log(at)
        while step < hi_t and gap(step) > 0:      # bracket: ℓ falls off beyond α̂ (unimodal)
            step = min(step + 1.0, hi_t)
        if gap(step) <= 0:
            high = math.exp(brentq(gap, max(step - 1.0, math.log(at)), step, xtol=1e-6))
    else:                                         # ℓ already below the target at the range's start
        high = at
    return float(low), float(high)
