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
GROUP_CHUNK = 1 << 18


def groups(f, mu):
    """(f, μ, ln μ, cells) per group of cells with one f and one bin of ln μ (module docstring), in
    the order of (f, bin): the same groups in the same order for the same cells in any order. The
    bins are found and counted GROUP_CHUNK cells at a time (:class:`Groups`: their temporaries a
    slice's size, not the table's). μ is floored at 1e-300."""
    size = int(mu.shape[0])
    got = Groups()
    for start in range(0, size, GROUP_CHUNK):
        got.add(f[start:start + GROUP_CHUNK], mu[start:start + GROUP_CHUNK])
    return got.groups()


#: the bin of ln 1e-300, the smallest μ is floored at: the cells of f = 1 are counted by their
#: bin's offset from it
LOWEST_BIN = int(np.rint(math.log(1e-300) * (1.0 / LOG_BIN)))


class Groups:
    """:func:`groups` of cells added a slice at a time (:meth:`add`: their f and μ; no per-cell
    array kept: the cells of f = 1 counted per bin, the others per (f, bin) in each slice), the
    same groups in the same order whatever the slices (:meth:`groups`)."""

    #: the cells of f > 1 are counted by (f − 2)·2^SHIFT + (bin − LOWEST_BIN) (every bin of a
    #: finite ln μ is within 2^21 of LOWEST_BIN)
    SHIFT = 32

    def __init__(self):
        # f = 1, most cells: counted by bin alone, c1[i] the cells of bin lo + i
        self.c1, self.lo = np.zeros(0, dtype=np.int64), 0
        self.keys, self.counts = [], []

    def add(self, f, mu) -> None:
        """Adds the cells of counts ``f`` (those of f ≤ 0 are not counted) and means ``mu``."""
        self.put(self.part(f, mu))

    @classmethod
    def part(cls, f, mu) -> tuple:
        """What :meth:`add` adds for the cells ``f``, ``mu``, found without touching any
        :class:`Groups` (so slices may be found side by side and put in order): (the f = 1 cells'
        counts per bin from the lowest, that bin; the f > 1 cells' (f, bin) keys, their counts)."""
        b = np.rint(np.log(np.maximum(mu, 1e-300)) * (1.0 / LOG_BIN)).astype(np.int64)
        b -= LOWEST_BIN
        one = f == 1
        b1 = b[one]
        ones = (np.bincount(b1 - int(b1.min())), int(b1.min())) if b1.shape[0] else None
        more = f > 1
        key = ((np.asarray(f[more]).astype(np.int64) - 2) << cls.SHIFT) + b[more]
        return ones, (np.unique(key, return_counts=True) if key.shape[0] else None)

    def put(self, part) -> None:
        """Adds a :meth:`part` (whole numbers: the same groups in any order of the parts)."""
        ones, more = part
        if ones is not None:
            c, lo = ones
            if not self.c1.shape[0]:
                self.c1, self.lo = c.astype(np.int64), lo
            else:           # the bins held so far and this slice's, one range
                start, stop = min(self.lo, lo), max(self.lo + self.c1.shape[0], lo + c.shape[0])
                if (start, stop) != (self.lo, self.lo + self.c1.shape[0]):
                    wider = np.zeros(stop - start, dtype=np.int64)
                    wider[self.lo - start:self.lo - start + self.c1.shape[0]] = self.c1
                    self.c1, self.lo = wider, start
                self.c1[lo - self.lo:lo - self.lo + c.shape[0]] += c
        if more is not None:
            self.keys.append(more[0])
            self.counts.append(more[1])

    def groups(self):
        """(f, μ, ln μ, cells) per group, in the order of (f, bin)."""
        bins1 = np.flatnonzero(self.c1)
        if self.keys:
            ku, inv = np.unique(np.concatenate(self.keys), return_inverse=True)
            kc = np.bincount(inv.reshape(-1), weights=np.concatenate(self.counts)).astype(np.int64)
        else:
            ku = kc = np.zeros(0, dtype=np.int64)
        fk = (ku >> self.SHIFT) + 2
        bk = (ku & ((1 << self.SHIFT) - 1)) + LOWEST_BIN
        fs = np.concatenate([np.ones(bins1.shape[0]), fk.astype(np.float64)])
        bins = np.concatenate([bins1 + (self.lo + LOWEST_BIN), bk])
        w = np.concatenate([self.c1[bins1], kc]).astype(np.float64)
        log_mu = bins * LOG_BIN
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
    return grouped(groups(f, mu))


def grouped(got):
    """ℓ(α) of :func:`groups`' (or :meth:`Groups.groups`') groups; None where there is none."""
    f, mu, log_mu, w = got
    if f.shape[0] == 0:
        return None
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
