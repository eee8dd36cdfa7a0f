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
The score is G_ab(A → B) + G_ab(B → A), summed over ``splits`` random splits. Each G is a sum over
the held-out records of their log-ratios l_j; its variance, treating those records as independent
draws, is V = Σ_j f_B,j l_j² − G²/n_B, summed over the halves like G. The pair with the largest
score G is chosen when G > z √V (``z`` = 2 by default: a held-out likelihood-ratio test), none
(independence) otherwise; the chosen model is then refitted on the whole sample (unsmoothed ML, as
above). Only the sample's cells and categories enter (a table that also holds a population's cells
gives what the sample alone gives). The test guards against a pair kept on noise: with one pair
it changes little on the validation of docs/validation.md (Ê within ±10 % in 37 of 38 cells with
it, 36 without), with a forest of pairs more (37 against 35, worst −10.5 against −22.7 %). Work per pair: O(cells) (bincounts),
no K-cell array; Σ_j μ̂_j² over every cell (for the moment dispersion) is n² Σ p_ab² Π Σ p_v².

Its scores choose the interactions of the default model of tau1_ll/matches_ll (``model=auto_cv``:
as many pairs as pass the test and form a forest, fitted in closed form by :mod:`gpurisk.models.forest`;
``max_interactions=1`` keeps one pair, :func:`gpurisk.models.forest.choose_pair`; docs/validation.md gives the
validation). This is not Skinner
& Shlomo's (2008) own criterion (their paper is not at hand).
"""
from __future__ import annotations

import itertools

import numpy as np

#: the Krichevsky-Trofimov pseudo-count per margin cell used to smooth A's margins
PSEUDO = 0.5


#: a pair's index is c_a·x_b + x_b itself (a bincount of that length) up to this many slots per cell
DENSE_PAIR_FACTOR = 4


def _pair_index(codes, cards, a, b, rows):
    """An index of the (a, b) categories of the cells ``rows`` and its length P: x_a·c_b + x_b where
    c_a·c_b is at most DENSE_PAIR_FACTOR slots per cell (or 65 536), else np.unique's dense
    0..P−1 (no c_a·c_b array when that product is large). Equal pairs get equal indices either way,
    which is all the scores need."""
    ids = codes[a][rows].astype(np.int64) * int(cards[b]) + codes[b][rows].astype(np.int64)
    size = int(cards[a]) * int(cards[b])
    if size <= max(DENSE_PAIR_FACTOR * ids.shape[0], 1 << 16):
        return ids, size
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.reshape(-1), int(uniq.shape[0])


def pair_scores(codes, f, cards, splits: int = 1, seed: int = 0, ranks=None, names=None) -> dict:
    """{(a, b): (G, V)}: the held-out log-likelihood gain of the (a, b) interaction over independence
    and its variance (module docstring), each summed over the halves of ``splits`` random two-fold
    splits. ``codes``: per key the host code of each cell; ``f``: its sample count; ``cards``:
    categories per key. The random halves are drawn cell by cell in the order
    of the cells' categories: ``ranks`` (per key, each code's rank among its categories: see
    :func:`category_ranks`) or the codes themselves, the keys taken in the order of their ``names``
    when given, so that the split of a cell does not depend on where the table keeps it or in which
    order it lists the keys (a scan lists them sorted)."""
    sub, prepared = _split(codes, f, cards, splits, seed, ranks, names)
    out = {}
    for a, b in itertools.combinations(range(len(sub)), 2):
        inv, P = _pair_index(sub, cards, a, b, slice(None))
        kappa = PSEUDO * float(cards[a]) * float(cards[b])
        scores = [_score(inv, P, kappa, train, nt, test, one[a], one[b], logs[a] + logs[b])
                  for train, test, nt, one, logs in prepared]
        out[(a, b)] = (sum(g for g, _ in scores), sum(v for _, v in scores))
    return out


def _split(codes, f, cards, splits, seed, ranks, names):
    """(the observed cells' codes, per half (train, test, n_train, one-way p̃ at each cell, their
    logs)) for :func:`pair_scores`."""
    f = np.asarray(f, dtype=np.int64)
    rows = np.flatnonzero(f > 0)
    fs = f[rows]
    sub = [np.asarray(c)[rows] for c in codes]
    rng = np.random.default_rng(seed)
    # the draws follow the cells' order by their codes, not their order in the table, so that a
    # table rolled up from a finer one (a scan) splits its cells as one counted directly does
    by = sub if ranks is None else [np.asarray(r)[c] for r, c in zip(ranks, sub)]
    if names is not None:           # the keys' order too: by name, whatever order the table has
        by = [by[v] for v in sorted(range(len(by)), key=lambda v: str(names[v]))]
    order = np.lexsort(by[::-1]) if by else np.arange(fs.shape[0])
    halves = []
    for _ in range(int(splits)):
        fa = np.empty_like(fs)
        fa[order] = rng.binomial(fs[order], 0.5)
        halves += [(fa, fs - fa), (fs - fa, fa)]
    # per half: the train counts' smoothed one-way margins at each cell, and their logs, once
    prepared = []
    for train, test in halves:
        train = train.astype(np.float64)
        one = _one_way(sub, cards, train)
        prepared.append((train, test.astype(np.float64), float(train.sum()), one,
                         [np.log(p) for p in one]))
    return sub, prepared


def _one_way(codes, cards, train) -> list:
    """Per key, the train counts' smoothed margin p̃_v (module docstring) at each cell."""
    nt = float(train.sum())
    return [((np.bincount(c, weights=train, minlength=int(k)) + PSEUDO) / (nt + PSEUDO * int(k)))[c]
            for c, k in zip(codes, cards)]


def _score(inv, P, kappa, train, nt, test, pa, pb, log_ind) -> tuple[float, float]:
    """(G, V) of one pair on one half (:func:`split_score`), the one-way margins given."""
    m = np.bincount(inv, weights=train, minlength=P)[inv]
    lr = np.log((m + kappa * (pa * pb)) / (nt + kappa)) - log_ind
    tl = test * lr                  # no BLAS call (np.dot): one thread, as the scan asks
    g = float(tl.sum())
    nb = float(test.sum())
    var = float((tl * lr).sum()) - (g * g / nb if nb > 0 else 0.0)
    return g, max(var, 0.0)


def split_gain(codes, cards, train, test, a: int, b: int, index=None) -> float:
    """G_ab(train → test): the test counts' log-likelihood under main effects + (a, b) fitted on the
    train counts (smoothed, module docstring) minus that under main effects. ``codes``: per key the
    code of each cell; ``train``, ``test``: the two halves' counts of those cells."""
    return split_score(codes, cards, train, test, a, b, index)[0]


def split_score(codes, cards, train, test, a: int, b: int, index=None) -> tuple[float, float]:
    """(G_ab(train → test), its variance V = Σ_j test_j l_j² − G²/Σ test over the test records)."""
    train = np.asarray(train, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    inv, P = _pair_index(codes, cards, a, b, slice(None)) if index is None else index
    pa, pb = _one_way([codes[a], codes[b]], [cards[a], cards[b]], train)
    kappa = PSEUDO * float(cards[a]) * float(cards[b])
    return _score(inv, P, kappa, train, float(train.sum()), test, pa, pb, np.log(pa) + np.log(pb))


#: the held-out likelihood-ratio test's z (module docstring)
Z_CHOICE = 2.0


def category_ranks(categories) -> list:
    """Per key, each code's rank among the key's categories ordered by (type name, str(value)): the
    same order whichever codes a table gave its categories (a scan's roll-up keeps its parent's)."""
    out = []
    for cats in categories:
        cats = list(cats)
        order = sorted(range(len(cats)), key=lambda i: (type(cats[i]).__name__, str(cats[i])))
        r = np.empty(len(cats), dtype=np.int64)
        r[order] = np.arange(len(cats))
        out.append(r)
    return out
