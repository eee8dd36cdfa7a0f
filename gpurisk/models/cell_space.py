"""Sums over every cell of the key space under main effects + a forest, without listing the K cells.

Under main effects plus a forest of two-way interactions (the closed-form fit of
:mod:`gpurisk.models.forest`), μ̂_x = n Π_t P_t(x_t): one factor per component t of the forest, a
lone key's share p_v(x_v) = n_v/n or a tree's probability of its keys' combination, written from a
root r as P_t = p_r(x_r) Π_arcs n_pc/n_p (the decomposable fit: a combination holding a pair of
categories the sample lacks has P_t = 0). The factors of a cell are independent across components,
so for any g with g(μ)/μ bounded,

    Σ_x g(μ̂_x) = Σ_x μ̂_x · [g(μ̂_x)/μ̂_x] = n Σ_s M(s) · g(n e^s)/(n e^s),

where M is the distribution of s = ln Π_t P_t weighted by Π_t P_t (its total is 1: each factor's
probabilities sum to 1), the convolution of the components' own P-weighted distributions of ln P.
Those are binned linearly on a grid of width h in ln P (each value's weight split between its two
neighbouring bins: the weight and its mean ln P kept) and convolved by FFT; the weights' total is 1,
so the transform's round-off is of order 10⁻¹⁶ per bin, whatever the number of cells K. A cell with
μ̂ below ``mu_min`` is left out (a partial product only falls as factors are added, so it is cut as
soon as it is below), which changes the sum by at most n · mu_min · sup |g(μ)/μ| near 0.

A tree's combinations of positive probability are listed by joining its pairs' observed categories
along the tree (never the product of its keys' categories), at most ``combos_max`` rows joined in
all (each arc's counted): a forest that needs more gives None, and the caller samples instead
(:mod:`gpurisk.models.risk_choice`).

What the risk criterion of :mod:`gpurisk.models.risk_choice` reads: Σ over the cells the sample
does not hold of functions of μ̂, the sum over every cell less the sample's own cells' terms.
"""
from __future__ import annotations

import math

import numpy as np

from gpurisk.models.forest import Margins, tree_order

#: bin width in ln μ: linear binning errs by about h²/8 times g's second derivative in ln μ
BIN_WIDTH = 0.01
#: listing one forest's trees joins at most this many rows, each arc's counted (else: None)
COMBOS_MAX = 1 << 21


def combinations(m: Margins, edges) -> float:
    """How many combinations of positive probability the trees of the forest ``edges`` hold, all
    trees together, counted by passing messages from the leaves up (nothing listed)."""
    joined = {v for e in edges for v in e}
    total, seen = 0.0, set()
    for r in sorted(joined):
        if r in seen:
            continue
        order = tree_order(r, edges)
        seen.update({r} | {c for _, c in order})
        count = {r: (m.one(r) > 0).astype(np.float64)}
        for _, c in order:
            count[c] = np.ones(int(m.cards[c]))
        for p, c in reversed(order):
            key, counts = m.sorted_pair(p, c)
            key = key[counts > 0]
            cc = int(m.cards[c])
            count[p] = count[p] * np.bincount(key // cc, weights=count[c][key % cc],
                                              minlength=int(m.cards[p]))
        total += float(count[r].sum())
    return total


def _components(m: Margins, edges, combos_max: int) -> list | None:
    """Per component of main effects + the forest ``edges`` (a lone key, or a tree), ln P of each
    value its factor takes with positive probability; None where listing them would join more than
    ``combos_max`` rows, each arc's rows counted (the listing's work: at least the trees'
    :func:`combinations`, counted first, so a forest far too large costs a count, not a partial
    listing)."""
    if combinations(m, edges) > combos_max:
        return None
    d = len(m.codes)
    n = m.n
    joined = {v for e in edges for v in e}
    out, seen, listed = [], set(), 0
    for r in range(d):
        if r in seen:
            continue
        one = m.one(r)
        held = np.flatnonzero(one > 0)
        logp = np.log(one[held] / n)
        if r not in joined:
            seen.add(r)
            out.append(logp)
            continue
        rows = {r: held}
        seen.add(r)
        for p, c in tree_order(r, edges):
            seen.add(c)
            key, counts = m.sorted_pair(p, c)
            pos = counts > 0
            key, counts = key[pos], counts[pos]
            cc = int(m.cards[c])
            xp, xc = key // cc, key % cc
            start = np.searchsorted(xp, np.arange(int(m.cards[p]) + 1))
            per = np.diff(start)[rows[p]]              # the child categories each row joins
            total = int(per.sum())
            listed += total                 # the rows joined so far, every arc's counted
            if listed > combos_max:
                return None
            at = (np.arange(total) - np.repeat(np.cumsum(per) - per, per)
                  + np.repeat(start[rows[p]], per))
            keep = np.repeat(np.arange(per.shape[0]), per)
            rows = {v: x[keep] for v, x in rows.items()}
            rows[c] = xc[at]
            logp = logp[keep] + np.log(counts[at] / m.one(p)[rows[p]])
        out.append(logp)
    return out


def _binned(logp, h: float, top: int) -> np.ndarray:
    """The P-weighted histogram of −ln P on bins 0, h, 2h, … (linear binning), bins past ``top``
    dropped."""
    x = -logp / h
    k = np.floor(x).astype(np.int64)
    frac = x - k
    p = np.exp(logp)
    keep = k <= top
    k, frac, p = k[keep], frac[keep], p[keep]
    size = int(k.max()) + 2 if k.shape[0] else 1
    return (np.bincount(k, weights=p * (1.0 - frac), minlength=size)
            + np.bincount(k + 1, weights=p * frac, minlength=size))


def _fft_convolve(a, b) -> np.ndarray:
    """``np.convolve(a, b)`` by real FFTs of a length with small prime factors (round-off about
    10⁻¹⁶ of the inputs' totals)."""
    size = a.shape[0] + b.shape[0] - 1
    fast = 1 << max(size - 1, 1).bit_length()
    for f in (3 * (fast >> 2), 5 * (fast >> 3)):        # 2^k, 3·2^k, 5·2^k: the smallest ≥ size
        if f >= size and f < fast:
            fast = f
    return np.fft.irfft(np.fft.rfft(a, fast) * np.fft.rfft(b, fast), fast)[:size]


def forest_mass(m: Margins, edges, mu_min: float, h: float = BIN_WIDTH,
                combos_max: int = COMBOS_MAX):
    """(μ values, the μ̂-mass Σ μ̂_x of the cells at each) over every cell of the key space under
    main effects + the forest ``edges`` (module docstring), so that Σ_x g(μ̂_x) = Σ mass · g(μ)/μ;
    None where listing the forest's trees would join more than ``combos_max`` rows (each arc's
    counted: :func:`_components`) or the sample is empty."""
    n = float(m.n)
    comps = _components(m, list(edges), combos_max) if n > 0 else None
    if comps is None:
        return None
    top = max(int(math.ceil(math.log(n / mu_min) / h)), 1)     # −ln P past this: μ̂ < mu_min
    hist = np.ones(1)
    for logp in comps:
        part = _binned(logp, h, top)
        hist = (_fft_convolve(hist, part) if hist.shape[0] * part.shape[0] > 1 << 14
                else np.convolve(hist, part))[: top + 1]
        np.maximum(hist, 0.0, out=hist)              # the transform's round-off (weights ≥ 0)
    at = np.flatnonzero(hist > 0)
    return n * np.exp(-h * at), n * hist[at]
