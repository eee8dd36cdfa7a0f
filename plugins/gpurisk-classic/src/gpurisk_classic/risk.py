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

METHODS = ("approx", "exact")
#: below this f_k (and with p < 1/2) the exact risk uses the recurrence, else the series
SERIES_FROM_F = 20
_TINY = 1e-17


def cell_risk(f, Fk, method: str = "approx", qual: float = 1.0) -> np.ndarray:
    """r_k for every cell (0 where f_k = 0). ``f`` are sample counts, ``Fk`` estimated population
    counts (sum of weights) with F̂_k >= f_k; ``qual`` multiplies the result (sdcMicro's ``qual``)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not one of {METHODS}")
    f = np.asarray(f, dtype=np.int64)
    Fk = np.asarray(Fk, dtype=np.float64)
    r = np.zeros(f.shape, np.float64)
    pos = np.flatnonzero(f > 0)
    fp = f[pos]
    c = np.maximum(Fk[pos] - fp, 0.0) / fp
    r[pos] = (_approx if method == "approx" else _exact)(fp, c)
    return r * qual


def _f1(c):
    out = np.ones_like(c)
    nz = c > 0
    out[nz] = np.log1p(c[nz]) / c[nz]
    return out


def _f2_closed(c):
    return 1.0 / c - np.log1p(c) / (c * c)


def _approx(f, c):
    out = 1.0 / (f + c * (f - 1))            # f > 2, and 1/f where c = 0
    one, two = f == 1, f == 2
    out[one] = _f1(c[one])
    big = two & (c > 1.0)
    out[big] = _f2_closed(c[big])
    small = two & (c <= 1.0)
    out[small] = _series(f[small], c[small])   # the closed form cancels as c -> 0
    return out


def _exact(f, c):
    out = np.empty_like(c)
    one = f == 1
    out[one] = _f1(c[one])
    ser = ~one & ((c <= 1.0) | (f >= SERIES_FROM_F))
    out[ser] = _series(f[ser], c[ser])
    rec = ~one & ~ser
    out[rec] = _recurrence(f[rec], c[rec])
    return out


def _series(f, c):
    """(p/f) Σ_k T_k, T_0 = 1, T_{k+1} = T_k q (k+1)/(f+1+k): positive terms, no cancellation."""
    p = 1.0 / (1.0 + c)
    q = c / (1.0 + c)
    total = np.ones_like(c)
    term = np.ones_like(c)
    idx = np.arange(c.size)
    fi = f.astype(np.float64)
    k = 0
    while idx.size:
        term = term * q[idx] * (k + 1) / (fi[idx] + 1 + k)
        total[idx] += term
        keep = term > _TINY * total[idx]
        idx, term = idx[keep], term[keep]
        k += 1
    return p / fi * total


def _recurrence(f, c):
    """K_f from K_2 = 1/c - log(1+c)/c^2 by K_{j+1} = (1/j - K_j)/c; for c > 1 and f < SERIES_FROM_F."""
    out = _f2_closed(c)
    for j in range(2, int(f.max(initial=2))):
        act = f > j
        out[act] = (1.0 / j - out[act]) / c[act]
    return out
