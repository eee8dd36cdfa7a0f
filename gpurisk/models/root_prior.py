"""An empirical-Bayes prior for a root key's category sizes (the leave-one-out prior of
:mod:`gpurisk.models.prior`, option ``root_prior`` of :mod:`gpurisk.measures._ll_poisson`).

A sample unique's leave-one-out prior takes the share of its category r of a root key from the
other n − 1 records. With Jeffreys' prior for a Poisson mean (``root_prior=jeffreys``) the
category's count is s = c − 1 + ½ (c its sample count, the unique's own record included): a
category the sample holds twice is put at 1.5 records, whatever the key's other categories say.

``root_prior=eb`` reads the key's other categories. Their sample counts c_1 … c_K (every category
the sample holds) are taken as zero-truncated negative binomial: each category's rate is
Gamma(shape a, rate b) (on the sample's count scale, mean m = a/b), its count Poisson, and a
category the sample lacks is not seen. (a, m) maximise

    Σ_k [ln Γ(c_k + a) − ln Γ(a) − ln c_k! + a ln p + c_k ln(1 − p) − ln(1 − p^a)],  p = a/(a + m)

(:func:`fit`). The unique's category then has, from the others, the posterior Gamma(c − 1 + a, b + 1):

    s = c − 1 + a,   share s/((b + 1)(n − 1)),   relative variance 1/s,

in place of Jeffreys' c − 1 + ½ and 1/s. It is used where a > ½, that is where the key's categories
are more even in size than Jeffreys' prior (the gamma of shape ½ and rate 0) assumes, and where
it describes the key's rarest categories (the number seen once within Z_RISK Poisson s.e. of its
expectation: :func:`describes_singletons`). Where the fit gives a ≤ ½ (a few large categories and
many small ones), misses the singletons, or the key has fewer than MIN_CATEGORIES categories in
the sample, Jeffreys' prior is kept (:func:`fitted_prior`).

The shape is estimated: its one-s.e. profile interval (the likelihood, m maximised at each a,
within ½ of its maximum: :func:`profile_ends`) gives two more priors, and half the estimate's
difference between them enters the s.e. (``se_root`` of the estimate's extras), as α̂'s does (each
end's estimate summed whole, or, where neither end moves a unique's prior by more than 5 %, by
Taylor's expansion to second order from per-category sums:
:data:`gpurisk.models.loglinear_risk.ROOT_LINEAR`). So does the choice of the gamma over
Jeffreys' prior, taken as a coin flip between the two: the root mean square distance to them,
|Ê − Ê_jeffreys|/√2 (``estimate_jeffreys`` in the extras; the terms' sum at the fitted prior
with every root moved to Jeffreys' shape ½ and rate 0, :class:`gpurisk.models.prior.Moved`, read in
the pass over the uniques). The test that chooses the gamma can go either way, so
the upper ends (the bound, the interval's) are taken from the larger of the two estimates and the
lower ends from the smaller, at the gamma's spread (:func:`gpurisk.models.loglinear_risk.estimate`).
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from gpurisk.core.kept import kept

#: a key with fewer categories in the sample than this keeps Jeffreys' prior (no fit of two
#: parameters from fewer counts)
MIN_CATEGORIES = 3
#: the shape's search range (ln a), and where a fit is taken as Poisson (equal rates)
LOG_SHAPE_RANGE = (math.log(1e-4), math.log(1e6))
#: Jeffreys' prior's shape, below which the fit is not used
JEFFREYS = 0.5


class Root(NamedTuple):
    """A root key's factor in a sample unique's leave-one-out prior under :class:`RootPrior`
    (:func:`gpurisk.models.prior.loo_prior`): the sample count of the unique's category (its own
    record included; an :class:`gpurisk.models.forest.AtRows`), and the gamma's shape and rate."""
    counts: object
    shape: float
    rate: float
    #: the (shape, rate) ends of the shape's one-s.e. profile interval
    ends: tuple = ()
    #: the key's position in the table
    key: int = -1


class RootPrior(NamedTuple):
    """A root key's fitted gamma: ``shape`` a, ``rate`` b (per sample count), and the two ends
    (shape, rate) of the shape's one-s.e. profile interval."""
    shape: float
    rate: float
    ends: tuple


def _grouped(counts):
    """(distinct positive counts, how many categories hold each, the categories, their mean)."""
    c = np.asarray(counts, dtype=np.float64)
    c = c[c > 0]
    u, w = np.unique(c, return_counts=True)
    k = int(c.shape[0])
    return u, w.astype(np.float64), k, float(np.sum(u * w)) / max(k, 1)


def _log_p(a: float, m: float) -> tuple[float, float]:
    """(ln p, ln(1 − p)), p = a/(a + m), exact where m/a is tiny (ln p^a, the chance of a count of
    0, stays below 0)."""
    r = math.log1p(m / a)
    return -r, math.log(m / a) - r


def _nll(a: float, m: float, u, w) -> float:
    """The zero-truncated negative binomial's negative log-likelihood of counts ``u`` (each ``w``
    times), shape a, mean m (the terms that depend on a and m only)."""
    from scipy.special import gammaln
    lp, l1p = _log_p(a, m)
    return -float(np.sum(w * (gammaln(u + a) - gammaln(a) + a * lp + u * l1p))) \
        + float(np.sum(w)) * math.log(-math.expm1(a * lp))


def _profile(a: float, u, w, mean: float) -> tuple[float, float]:
    """(m̂(a), the negative log-likelihood there): m maximised at shape a (bounded Brent on ln m)."""
    from scipy.optimize import minimize_scalar
    lo, hi = math.log(mean) - 30.0, math.log(mean) + 5.0
    r = minimize_scalar(lambda t: _nll(a, math.exp(t), u, w), bounds=(lo, hi), method="bounded",
                        options={"xatol": 1e-9})
    return math.exp(r.x), float(r.fun)


def fit(counts) -> tuple[float, float, float] | None:
    """(a, m, the negative log-likelihood) of the zero-truncated negative binomial of ``counts``
    (module docstring), or None for fewer than MIN_CATEGORIES positive counts or counts all
    equal to one (the mean is not identified)."""
    from scipy.optimize import minimize_scalar
    u, w, k, mean = _grouped(counts)
    if k < MIN_CATEGORIES or (u.shape[0] < 2 and float(u[0]) <= 1.0):
        return None
    r = minimize_scalar(lambda t: _profile(math.exp(t), u, w, mean)[1], bounds=LOG_SHAPE_RANGE,
                        method="bounded", options={"xatol": 1e-7})
    a = math.exp(r.x)
    m, value = _profile(a, u, w, mean)
    return a, m, value


def profile_ends(counts, a: float, value: float) -> tuple:
    """The ends ((a, b), (a, b)) of the shape's one-s.e. profile interval: where the profile
    likelihood is ½ below its maximum (a range end where it never is)."""
    from scipy.optimize import brentq
    u, w, _, mean = _grouped(counts)
    t0 = math.log(a)

    def drop(t):
        return _profile(math.exp(t), u, w, mean)[1] - (value + 0.5)
    out = []
    for end in LOG_SHAPE_RANGE:
        t = end
        if end != t0 and drop(end) > 0.0:
            t = brentq(drop, min(t0, end), max(t0, end), xtol=1e-7)
        s = math.exp(t)
        out.append((s, s / _profile(s, u, w, mean)[0]))
    return tuple(out)


def describes_singletons(counts, a: float, m: float) -> bool:
    """Whether the fitted gamma describes the key's rarest categories: the number of categories the
    sample holds once, K1, within Z_RISK Poisson s.e. of the fit's expectation
    E1 = K a p^a (1 − p)/(1 − p^a), p = a/(a + m) (K the categories seen). The sample uniques'
    categories are the rare ones; a gamma fitted to the bulk can put them too large (a key whose
    tail of small categories is longer than the gamma's: KDD Cup's ages in a 1 % sample, K1 = 11 where
    the fit expects 4.5)."""
    from gpurisk.models.risk_choice import Z_RISK
    u, w, k, _ = _grouped(counts)
    lp, l1p = _log_p(a, m)
    e1 = k * a * math.exp(a * lp + l1p) / -math.expm1(a * lp)
    k1 = float(w[u == 1].sum())
    return abs(k1 - e1) <= Z_RISK * math.sqrt(max(e1, 1e-300))


def fitted_prior(counts) -> RootPrior | None:
    """The key's :class:`RootPrior` where its fitted shape is above Jeffreys' ½ and it describes the
    categories seen once (:func:`describes_singletons`), else None (Jeffreys' prior is kept). A scan's combinations share their root keys' counts: each key's fit is kept
    (by a digest of its counts) and made once."""
    from gpurisk.models.forest import array_digest
    c = np.asarray(counts, dtype=np.float64)

    def make():
        got = fit(c)
        if got is None or got[0] <= JEFFREYS or not describes_singletons(c, got[0], got[1]):
            return None
        a, m, value = got
        return RootPrior(a, a / m, profile_ends(c, a, value))
    return kept(_FITTED, _FITTED_LOCK, array_digest(c), make, REMEMBERED)


#: :func:`fitted_prior` keeps this many keys' fits
REMEMBERED = 1024
_FITTED: OrderedDict = OrderedDict()
_FITTED_LOCK = threading.Lock()
