"""Benedetti-Franconi individual risk of each cell, from f_k and an estimate F̂_k of its population count.

Model (Benedetti & Franconi 1998; Franconi & Polettini 2004, as in mu-Argus and sdcMicro's
``indivRisk``): given the sample count f_k, the population count F_k satisfies
F_k - f_k ~ NegativeBinomial(f_k, p_k) with p_k = f_k / F̂_k, where F̂_k is the sum of the design
weights of the cell. The risk of a record in cell k is

    r_k = E[1 / F_k | f_k] = Σ_{h >= f} (1/h) C(h-1, f-1) p^f q^(h-f),    q = 1 - p.

Closed forms, with c = q/p = (F̂_k - f_k)/f_k (so p/q = 1/c and log(1/p) = log(1 + c)):

- f = 1:  r = (p/q) log(1/p)                        = log(1+c) / c
- f = 2:  r = p/q - (p/q)^2 log(1/p)                = 1/c - log(1+c) / c^2
- f > 2, ``approx`` (sdcMicro's default):  r = p / (f - q) = 1 / (f + c (f - 1))
- f > 2, ``exact``: sdcMicro's alternating sum
  r = (p/q)^f [A (1 + Σ_{m=0}^{f-3} (-1)^{m+1} Π_{i=0}^{m} B_i) + (-1)^f log p]. It equals
  K_f(c) = ∫_0^1 v^(f-1) / (1 + c v) dv = (p/f) 2F1(1, 1; f+1; q), evaluated here without the
  alternating sum's cancellation: the positive series Σ_k k! q^k / (f+1)_k when p >= 1/2 or f >= 20,
  else the forward recurrence K_{j+1} = (1/j - K_j) / c from K_2 (stable for c > 1).
- F̂_k = f_k (p = 1): r = 1 / f_k (sdcMicro sets this case explicitly; the formulas agree in the limit).

Every step is vectorised over cells; the only loops run over series terms or recurrence steps.
"""
from __future__ import annotations

import numpy as np

from gpurisk.xp import namespace, scalar

METHODS = ("approx", "exact")
#: below this f_k (and with p < 1/2) the exact risk uses the recurrence, else the series
SERIES_FROM_F = 20
_TINY = 1e-17


def cell_risk(f, Fk, method: str = "approx", qual: float = 1.0):
    """r_k for every cell (0 where f_k = 0). ``f`` are sample counts, ``Fk`` estimated population
    counts (sum of weights) with F̂_k >= f_k; ``qual`` multiplies the result (sdcMicro's ``qual``).

    Arrays of any namespace (numpy, or CuPy for a GPU table: ``gpurisk.xp.namespace``); the result
    is in the same one. Lists are taken as numpy."""
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not one of {METHODS}")
    if isinstance(f, (list, tuple)) or isinstance(Fk, (list, tuple)):
        f, Fk = np.asarray(f), np.asarray(Fk)
    xp = namespace(f, Fk)
    f = f.astype(xp.int64)
    Fk = Fk.astype(xp.float64)
    r = xp.zeros(f.shape, xp.float64)
    pos = xp.flatnonzero(f > 0)
    fp = f[pos]
    c = xp.maximum(Fk[pos] - fp, 0.0) / fp
    r[pos] = (_approx if method == "approx" else _exact)(xp, fp, c)
    return r * qual


def _f1(xp, c):
    out = xp.ones_like(c)
    nz = c > 0
    out[nz] = xp.log1p(c[nz]) / c[nz]
    return out


def _f2_closed(xp, c):
    return 1.0 / c - xp.log1p(c) / (c * c)


def _approx(xp, f, c):
    out = 1.0 / (f + c * (f - 1))            # f > 2, and 1/f where c = 0
    one, two = f == 1, f == 2
    out[one] = _f1(xp, c[one])
    big = two & (c > 1.0)
    out[big] = _f2_closed(xp, c[big])
    small = two & (c <= 1.0)
    out[small] = _series(xp, f[small], c[small])   # the closed form cancels as c -> 0
    return out


def _exact(xp, f, c):
    out = xp.empty_like(c)
    one = f == 1
    out[one] = _f1(xp, c[one])
    ser = ~one & ((c <= 1.0) | (f >= SERIES_FROM_F))
    out[ser] = _series(xp, f[ser], c[ser])
    rec = ~one & ~ser
    out[rec] = _recurrence(xp, f[rec], c[rec])
    return out


def _series(xp, f, c):
    """(p/f) Σ_k T_k, T_0 = 1, T_{k+1} = T_k q (k+1)/(f+1+k): positive terms, no cancellation.

    A loop over the series' terms (not over cells): each step updates every cell still converging."""
    p = 1.0 / (1.0 + c)
    q = c / (1.0 + c)
    total = xp.ones_like(c)
    term = xp.ones_like(c)
    idx = xp.arange(c.shape[0])
    fi = f.astype(xp.float64)
    k = 0
    while idx.shape[0]:
        term = term * q[idx] * (k + 1) / (fi[idx] + 1 + k)
        total[idx] += term
        keep = term > _TINY * total[idx]
        idx, term = idx[keep], term[keep]
        k += 1
    return p / fi * total


def _recurrence(xp, f, c):
    """K_f from K_2 = 1/c - log(1+c)/c^2 by K_{j+1} = (1/j - K_j)/c; for c > 1 and f < SERIES_FROM_F."""
    out = _f2_closed(xp, c)
    top = int(scalar(f.max())) if f.shape[0] else 2
    for j in range(2, top):
        act = f > j
        out[act] = (1.0 / j - out[act]) / c[act]
    return out
