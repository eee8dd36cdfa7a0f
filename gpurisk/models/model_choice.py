"""Choosing the log-linear model of the sample counts by a split-sample (cross-validated) criterion.

Candidates: the main-effects (independence) model, and for every pair of keys (a, b) the model of
main effects plus the (a, b) interaction, a decomposable model with a closed-form ML fit

    μ̂_x = n · p_ab(x_a, x_b) · Π_{v ∉ {a, b}} p_v(x_v),    p = the sample's margins / n.

Criterion (held-out log-likelihood, two-fold): the sample's records are split at random into halves
A and B (each record to A with probability 1/2: f_A,j ~ Binomial(f_j, 1/2) per cell, seeded, so no
record is needed, only the cell counts). A model fitted on A predicts each record of B with
probability p̂_A(x); the held-out log-likelihood of (a, b) over independence is

    G_ab(A → B) = Σ_j f_B,j log[ p̃_ab,A(x_ja, x_jb) / (p̃_a,A(x_ja) p̃_b,A(x_jb)) ]

(the other keys' factors cancel). An interaction cell unseen in A would give log 0, so A's margins
are smoothed toward independence by a Krichevsky-Trofimov pseudo-count of 1/2 per cell:
p̃_v = (m_v + 1/2) / (n_A + c_v/2), p̃_ab = (m_ab + κ p̃_a p̃_b) / (n_A + κ), κ = c_a c_b / 2.
The score is G_ab(A → B) + G_ab(B → A), summed over ``splits`` random splits. The pair with the
largest positive score is chosen, none (independence) when no score is positive; the chosen model is
then refitted on the whole sample (unsmoothed ML, as above). Work per pair: O(cells) (bincounts),
no K-cell array; Σ_j μ̂_j² over every cell (for the moment dispersion) is n² Σ p_ab² Π Σ p_v².

An exploratory option (``model=auto_cv`` of tau1_ll/matches_ll; docs/validation.md gives its
validation): this is not Skinner & Shlomo's (2008) own criterion.
"""
from __future__ import annotations

import itertools

import numpy as np

#: the Krichevsky-Trofimov pseudo-count per margin cell used to smooth A's margins
PSEUDO = 0.5


def _pair_index(codes, cards, a, b, rows):
    """Dense 0..P−1 index of the (a, b) categories of the cells ``rows`` (np.unique: no c_a·c_b
    array when that product is large) and P."""
    ids = codes[a][rows].astype(np.int64) * int(cards[b]) + codes[b][rows].astype(np.int64)
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.reshape(-1), int(uniq.shape[0])


def pair_gains(codes, f, cards, splits: int = 1, seed: int = 0) -> dict:
    """{(a, b): held-out log-likelihood gain of the (a, b) interaction over independence} summed over
    ``splits`` random two-fold splits (module docstring). ``codes``: per key the host code of each
    cell; ``f``: its sample count; ``cards``: categories per key."""
    f = np.asarray(f, dtype=np.int64)
    rows = np.flatnonzero(f > 0)
    fs = f[rows]
    sub = [np.asarray(c)[rows] for c in codes]
    rng = np.random.default_rng(seed)
    halves = []
    for _ in range(int(splits)):
        fa = rng.binomial(fs, 0.5)
        halves += [(fa, fs - fa), (fs - fa, fa)]
    out = {}
    for a, b in itertools.combinations(range(len(sub)), 2):
        inv, P = _pair_index(sub, cards, a, b, slice(None))
        out[(a, b)] = sum(split_gain(sub, cards, train, test, a, b, (inv, P))
                          for train, test in halves)
    return out


def split_gain(codes, cards, train, test, a: int, b: int, index=None) -> float:
    """G_ab(train → test): the test counts' log-likelihood under main effects + (a, b) fitted on the
    train counts (smoothed, module docstring) minus that under main effects. ``codes``: per key the
    code of each cell; ``train``, ``test``: the two halves' counts of those cells."""
    train = np.asarray(train, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    inv, P = _pair_index(codes, cards, a, b, slice(None)) if index is None else index
    nt = float(train.sum())
    one = []
    for v in (a, b):
        cv = int(cards[v])
        m = np.bincount(codes[v], weights=train, minlength=cv)
        one.append(((m + PSEUDO) / (nt + PSEUDO * cv))[codes[v]])
    ind = one[0] * one[1]
    kappa = PSEUDO * float(cards[a]) * float(cards[b])
    m = np.bincount(inv, weights=train, minlength=P)[inv]
    pab = (m + kappa * ind) / (nt + kappa)
    return float(np.sum(test * (np.log(pab) - np.log(ind))))


def choose_pair(codes, f, cards, splits: int = 1, seed: int = 0):
    """(the chosen pair or None for independence, the gains)."""
    gains = pair_gains(codes, f, cards, splits, seed)
    if not gains:
        return None, gains
    best = max(gains, key=gains.get)
    return (best if gains[best] > 0 else None), gains


def pair_model_means(codes, f, cards, pair):
    """(μ̂ of every cell given, Σ μ̂² over all K cells) of main effects + the ``pair`` interaction
    (None: main effects only), fitted on the counts ``f`` (closed form)."""
    f = np.asarray(f, dtype=np.float64)
    n = float(f.sum())
    codes = [np.asarray(c) for c in codes]
    mu = np.full(f.shape[0], n)
    sum2 = n * n
    skip = set(pair or ())
    for v, c in enumerate(codes):
        if v in skip:
            continue
        p = np.bincount(c, weights=f, minlength=int(cards[v])) / n
        mu *= p[c]
        sum2 *= float(np.sum(p * p))
    if pair is not None:
        a, b = pair
        rows = np.arange(f.shape[0])
        inv, P = _pair_index(codes, cards, a, b, rows)
        p = np.bincount(inv, weights=f, minlength=P) / n
        mu *= p[inv]
        sum2 *= float(np.sum(p * p))
    return mu, sum2
