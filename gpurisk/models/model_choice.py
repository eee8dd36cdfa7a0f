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
it, 36 without), with a forest of pairs more (37 against 35, worst −10.5 against −22.7 %). Work: the
pairs' counts in the sample and in each first half summed over the cells a group of keys at a time
(:func:`pair_counts`: one bincount per group and weight, each pair's counts summed from its group's
joint counts), then per pair O(its observed pairs of categories); no K-cell array, no per-cell
array per pair; Σ_j μ̂_j² over every cell (for the moment dispersion) is n² Σ p_ab² Π Σ p_v².

Its scores choose the interactions of the default model of tau1_ll/matches_ll (``model=auto_cv``:
as many pairs as pass the test and form a forest, fitted in closed form by :mod:`gpurisk.models.forest`;
``max_interactions=1`` keeps one pair, :func:`gpurisk.models.forest.choose_pair`; docs/validation.md gives the
validation). Skinner & Shlomo's (2008) kind of criterion, aimed at the risk, is
:mod:`gpurisk.models.risk_choice` (``model=risk``).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from gpurisk.models.terms import each_slice

#: the Krichevsky-Trofimov pseudo-count per margin cell used to smooth A's margins
PSEUDO = 0.5


#: a pair's index is c_a·x_b + x_b itself (a bincount of that length) up to this many slots per cell
DENSE_PAIR_FACTOR = 4


def _pair_index(codes, cards, a, b, rows):
    """An index of the (a, b) categories of the cells ``rows`` and its length P: x_a·c_b + x_b where
    c_a·c_b is at most DENSE_PAIR_FACTOR slots per cell (or 65 536), else np.unique's dense
    0..P−1 (no c_a·c_b array when that product is large). Equal pairs get equal indices either way,
    which is all the scores need."""
    ids = (codes[a][rows].astype(np.int64, copy=False) * int(cards[b])
           + codes[b][rows].astype(np.int64, copy=False))
    size = int(cards[a]) * int(cards[b])
    if size <= max(DENSE_PAIR_FACTOR * ids.shape[0], 1 << 16):
        return ids, size
    uniq, inv = np.unique(ids, return_inverse=True)
    return inv.reshape(-1), int(uniq.shape[0])


def pair_scores(codes, f, cards, splits: int = 1, seed: int = 0, ranks=None, names=None,
                margins=None) -> dict:
    """{(a, b): (G, V)}: the held-out log-likelihood gain of the (a, b) interaction over independence
    and its variance (module docstring), each summed over the halves of ``splits`` random two-fold
    splits. ``codes``: per key the host code of each cell; ``f``: its sample count; ``cards``:
    categories per key. The random halves are drawn cell by cell in the order
    of the cells' categories: ``ranks`` (per key, each code's rank among its categories: see
    :func:`category_ranks`) or the codes themselves, the keys taken in the order of their ``names``
    when given, so that the split of a cell does not depend on where the table keeps it or in which
    order it lists the keys (a scan lists them sorted). ``margins``, when given: the
    :class:`gpurisk.models.forest.Margins` of these cells (every f > 0), whose counts of each
    key's and pair's categories are shared (the pairs' counts summed here are handed to it).

    Each record's log-ratio is a function of its (a, b) categories, so G = Σ_s l_s m_s and
    Σ_j test_j l_j² = Σ_s l_s² m_s are summed over the observed pairs of categories s, m_s their
    test half's count: no per-cell array. Only the counts are summed over the cells, several pairs
    at a time (:func:`pair_counts`). Counts are sums of whole numbers, exact in any order (a half's
    are the sample's less the other half's, a key's are summed from a pair's), and l_s is computed
    element by element as at each cell, so only the order of G's and V's final sums differs from a
    sum cell by cell (:func:`split_score`; tests/test_model_choice.py: equal to 1e-12)."""
    if margins is not None and int(np.count_nonzero(np.asarray(f) > 0)) != len(margins.f):
        margins = None
    sub, fs, splits = _split(codes, f, cards, splits, seed, ranks, names,
                             None if margins is None else margins.f)
    pairs = list(itertools.combinations(range(len(sub)), 2))
    if not pairs:
        return {}
    k = np.asarray([int(c) for c in cards], dtype=np.int64)
    off = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(k)])
    counted = pair_counts(sub, cards, [fs] + [h[0] for h in splits], pairs)
    # each pair's observed pairs of categories, their counts in the sample and in each first half;
    # each key's first-half counts summed from a pair's (whole numbers: the same sums as the cells')
    index, first = {}, [[None] * len(sub) for _ in splits]
    for a, b in pairs:
        layout, got = counted.pop((a, b))
        if margins is not None:
            margins.put_pair(a, b, layout, got[0])
        if layout is None:                   # dense: the slot is x_a·c_b + x_b
            seen = np.flatnonzero(got[0])
            xa, xb = np.divmod(seen, k[b])
        else:                                # np.unique's slots: a cell of each gives its codes
            seen = slice(None)
            xa, xb = _slot_codes(sub, cards, a, b, layout, got[0].shape[0])
        mf, ma = got[0][seen], [m[seen] for m in got[1:]]
        index[(a, b)] = (mf, xa, xb, ma)
        for s, m in enumerate(ma):
            for v, x in ((a, xa), (b, xb)):
                if first[s][v] is None:
                    first[s][v] = np.bincount(x, weights=m, minlength=int(k[v]))
    total = np.concatenate([margins.one(v) for v in range(len(sub))] if margins is not None else
                           _counts(sub, cards, fs))
    card = np.repeat(k, k)
    halves = []                     # per split, its halves' smoothed one-way margins and logs
    for (_, na, nb), c in zip(splits, first):
        ca = np.concatenate(c)
        one = [_smoothed(ca, card, na), _smoothed(total - ca, card, nb)]
        halves.append([(na, nb, one[0], np.log(one[0])), (nb, na, one[1], np.log(one[1]))])
    out = {}
    for a, b in pairs:
        mf, xa, xb, ma = index.pop((a, b))
        kappa = PSEUDO * float(cards[a]) * float(cards[b])
        xa, xb = xa + off[a], xb + off[b]       # in the stacked one-way margins
        scores = []
        for split, m_a in zip(halves, ma):
            m_b = mf - m_a
            for (nt, nb, one, logs), train, test in zip(split, (m_a, m_b), (m_b, m_a)):
                lr = _log_ratio(train, kappa, nt, one[xa], one[xb], logs[xa], logs[xb])
                tl = test * lr
                scores.append(_finish(float(tl.sum()), float((tl * lr).sum()), nb))
        out[(a, b)] = (sum(g for g, _ in scores), sum(v for _, v in scores))
    return out


#: :func:`pair_counts` sums the counts of several keys' joint categories at once when their
#: product is at most max(GROUP_MIN, cells / GROUP_CELLS_PER_SLOT) (and GROUP_MAX)
GROUP_MIN = 64
GROUP_CELLS_PER_SLOT = 4
GROUP_MAX = 1 << 24


def _groups(cards, pairs, limit: int) -> list:
    """Groups of keys, each with at most ``limit`` joint categories, that together hold every pair
    of ``pairs`` whose own c_a·c_b is at most ``limit`` (greedy: a group starts from the pair left
    with the fewest joint categories and takes the key that holds the most pairs left, while it
    fits). Returns [(keys of the group, the pairs it gives)]."""
    left = [p for p in pairs if int(cards[p[0]]) * int(cards[p[1]]) <= limit]
    out = []
    while left:
        a, b = min(left, key=lambda p: int(cards[p[0]]) * int(cards[p[1]]))
        group, size = [a, b], int(cards[a]) * int(cards[b])
        while True:
            best, gain = None, 0
            for v in range(len(cards)):
                if v in group or size * int(cards[v]) > limit:
                    continue
                g = sum(1 for p in left if v in p and (p[0] in group or p[1] in group))
                if g > gain or (g == gain and g and int(cards[v]) < int(cards[best])):
                    best, gain = v, g
            if best is None:
                break
            group.append(best)
            size *= int(cards[best])
        group.sort()
        held = [p for p in left if p[0] in group and p[1] in group]
        left = [p for p in left if p not in held]
        out.append((group, held))
    return out


def pair_counts(codes, cards, weights, pairs) -> dict:
    """{(a, b): (layout, [Σ w over each slot of :func:`_pair_index`, per weight])}: ``layout`` None
    where the slot is x_a·c_b + x_b (the dense index), else the cells' np.unique slots. Pairs whose
    dense index is small are summed from the joint counts of groups of keys (:func:`_groups`), one
    bincount over the cells per group and weight; the others one pair at a time. Whole-number
    weights give the same counts as :func:`_pair_counts` (sums of integers, exact in any order)."""
    cells = int(np.shape(codes[0])[0]) if codes else 0
    dense = max(DENSE_PAIR_FACTOR * cells, 1 << 16)          # _pair_index's rule
    limit = min(max(GROUP_MIN, cells // GROUP_CELLS_PER_SLOT), GROUP_MAX, dense)
    out = {}
    for group, held in _groups(cards, pairs, limit):
        shape = tuple(int(cards[v]) for v in group)
        size = math.prod(shape)
        flat = [np.zeros(size) for _ in weights]
        # the joint index formed KEY_CHUNK cells at a time (in cache) and counted in slices of at
        # least as many cells as there are slots (each slice's count costs its slots once): no
        # index of every cell is kept (whole-number weights: the same sums in any order)
        step = max(KEY_CHUNK, -(-size // KEY_CHUNK) * KEY_CHUNK)
        for begin in range(0, cells, step):
            end = min(cells, begin + step)
            idx = np.empty(end - begin, dtype=np.intp)

            def joint_index(start, begin=begin, end=end, idx=idx, group=group):
                rows = slice(start, min(end, start + KEY_CHUNK))
                x = np.zeros(rows.stop - start, dtype=np.intp)
                for v in group:
                    x *= int(cards[v])
                    x += codes[v][rows].astype(np.intp, copy=False)
                idx[start - begin:rows.stop - begin] = x
            # the slices' indices side by side (each slice's written by one thread: the same)
            each_slice(joint_index, range(begin, end, KEY_CHUNK))
            for acc, w in zip(flat, weights):
                acc += np.bincount(idx, weights=w[begin:end], minlength=size)
        joint = [acc.reshape(shape) for acc in flat]
        for a, b in held:
            other = tuple(i for i, v in enumerate(group) if v not in (a, b))
            out[(a, b)] = (None, [j.sum(axis=other).reshape(-1) for j in joint])
    for a, b in pairs:
        if (a, b) not in out:
            inv, P = _pair_index(codes, cards, a, b, slice(None))
            out[(a, b)] = (None if int(cards[a]) * int(cards[b]) <= dense else inv,
                           [np.bincount(inv, weights=w, minlength=P) for w in weights])
    return out


def _pair_counts(codes, cards, a, b, f):
    """(:func:`_pair_index` of the (a, b) categories, the count ``f`` of each)."""
    inv, P = _pair_index(codes, cards, a, b, slice(None))
    return inv, np.bincount(inv, weights=f, minlength=P)


def _slot_codes(codes, cards, a, b, inv, P):
    """(x_a, x_b) of each index 0..P−1 of :func:`_pair_index` (any codes where no cell has it)."""
    if P == int(cards[a]) * int(cards[b]):          # the index is x_a·c_b + x_b itself
        cb = int(cards[b])
        return np.repeat(np.arange(int(cards[a])), cb), np.tile(np.arange(cb), int(cards[a]))
    rep = np.zeros(P, dtype=np.int64)
    rep[inv] = np.arange(inv.shape[0])              # a cell of each pair of categories
    return codes[a][rep], codes[b][rep]


def _split(codes, f, cards, splits, seed, ranks, names, weights=None):
    """(the observed cells' codes (a list per key, integers as given), their counts f (float64), per
    split the first half's counts A (float64), n_A and n_B) for :func:`pair_scores`. ``weights``:
    f as float64 when the caller has it (every f > 0), so that no copy is made. The halves are
    drawn slice by slice in the cells' order (the same draws: the generator's stream continues from
    one call to the next), each written at its cells as a float."""
    f = np.asarray(f, dtype=np.int64)
    every = bool((f > 0).all())
    rows = slice(None) if every else np.flatnonzero(f > 0)
    fs = f if every else f[rows]
    sub = [np.asarray(c) if every else np.asarray(c)[rows] for c in codes]
    rng = np.random.default_rng(seed)
    # the draws follow the cells' order by their codes, not their order in the table, so that a
    # table rolled up from a finer one (a scan) splits its cells as one counted directly does
    keys = list(range(len(sub)))
    if names is not None:           # the keys' order too: by name, whatever order the table has
        keys = sorted(keys, key=lambda v: str(names[v]))
    size = fs.shape[0]
    order = rank_order([sub[v] for v in keys], None if ranks is None else [ranks[v] for v in keys],
                       size)
    out = []
    n = float(fs.sum())
    for _ in range(int(splits)):
        a = np.empty(size)
        for start in range(0, size, KEY_CHUNK):
            at = order[start:start + KEY_CHUNK]
            a[at] = rng.binomial(fs[at], 0.5)
        na = float(a.sum())
        out.append((a, na, n - na))     # sums of whole numbers: n_B = Σ (f − f_A) exactly
    w = weights if every and weights is not None and weights.shape[0] == size else \
        fs.astype(np.float64)
    return sub, w, out


#: :func:`rank_order` forms the combined key on slices of this many cells
KEY_CHUNK = 1 << 16


def rank_order(codes, ranks, n: int):
    """:func:`lex_order` of the cells by ``ranks[v][codes[v]]`` (or the codes themselves), the
    combined mixed-radix key formed slice by slice from the small rank tables (no per-key array of
    the cells' ranks). Each key's span is that of its whole rank table (at least the span of the
    ranks the cells have): the key is still one-to-one and in the same order, so the order is
    :func:`lex_order`'s."""
    if ranks is None or n == 0 or not codes:
        return lex_order(codes, n)
    tables = [np.asarray(r) for r in ranks]
    if any(t.dtype.kind not in "iu" or c.dtype.kind not in "iu" or t.shape[0] == 0
           for t, c in zip(tables, codes)):
        return lex_order([t[c] for t, c in zip(tables, codes)], n)
    lo = [int(t.min()) for t in tables]
    span = [int(t.max()) - x + 1 for t, x in zip(tables, lo)]
    if math.prod(span) >= 2**62:
        return lex_order([t[c] for t, c in zip(tables, codes)], n)
    # each key's term of the mixed-radix key, (rank − lo) times its place value, once per category
    place = [math.prod(span[v + 1:]) for v in range(len(span))]
    terms = [(t.astype(np.int64) - x) * p for t, x, p in zip(tables, lo, place)]
    key = np.empty(n, dtype=np.int64)
    for start in range(0, n, KEY_CHUNK):
        rows = slice(start, start + KEY_CHUNK)
        k = terms[0][codes[0][rows]]
        for t, c in zip(terms[1:], codes[1:]):
            k += t[c[rows]]
        key[rows] = k
    return _key_order(key)


def lex_order(by, n: int):
    """``np.lexsort(by[::-1])`` (the cells ordered by ``by[0]``, then ``by[1]``, ...; ties kept in
    their order) for integer keys: one sort of a combined mixed-radix key when it fits in int64
    (quicksort where the combined keys are distinct, as a table's cells are: a unique order)."""
    if len(by) == 0 or n == 0:
        return np.arange(n)
    if any(b.dtype.kind not in "iub" for b in by):
        return np.lexsort(by[::-1])
    lo = [int(b.min()) for b in by]
    span = [int(b.max()) - x + 1 for b, x in zip(by, lo)]
    if math.prod(span) >= 2**62:
        return np.lexsort(by[::-1])
    key = np.zeros(n, dtype=np.int64)
    for b, x, s in zip(by, lo, span):
        key *= s
        key += b
        if x:
            key -= x
    return _key_order(key)


def _key_order(key):
    """np.argsort(key, kind="stable"): a quicksort where the keys are distinct (a unique order;
    the sorted keys compared slice by slice, not copied whole)."""
    order = np.argsort(key)
    n = order.shape[0]
    for start in range(0, n - 1, KEY_CHUNK):
        k = key[order[start:start + KEY_CHUNK + 1]]
        if bool((k[1:] == k[:-1]).any()):               # ties: keep their order
            return np.argsort(key, kind="stable")
    return order


def _counts(codes, cards, w) -> list:
    """Per key, the sum of the cells' ``w`` over each category."""
    return [np.bincount(c, weights=w, minlength=int(k)) for c, k in zip(codes, cards)]


def _smoothed(counts, card, nt: float):
    """The smoothed margin p̃ = (count + 1/2) / (n_A + c/2) (module docstring) of categories with
    the train ``counts``, each of a key of ``card`` categories (arrays alike)."""
    return (counts + PSEUDO) / (nt + PSEUDO * card)


def _one_way(codes, cards, train) -> list:
    """Per key, the train counts' smoothed margin p̃_v (module docstring) of each category."""
    nt = float(train.sum())
    return [_smoothed(c, int(k), nt) for c, k in zip(_counts(codes, cards, train), cards)]


def _log_ratio(m, kappa, nt, pa, pb, la, lb):
    """log p̃_ab / (p̃_a p̃_b), element by element: m the train count of the (a, b) categories, pa,
    pb their smoothed one-way margins, la, lb the margins' logs."""
    return np.log((m + kappa * (pa * pb)) / (nt + kappa)) - (la + lb)


def _finish(g: float, gl2: float, nb: float) -> tuple[float, float]:
    """(G, V) of one pair on one half from G = Σ test·l and Σ test·l² (module docstring)."""
    var = gl2 - (g * g / nb if nb > 0 else 0.0)
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
    pa, pb = (p[c] for p, c in zip(_one_way([codes[a], codes[b]], [cards[a], cards[b]], train),
                                   (codes[a], codes[b])))
    kappa = PSEUDO * float(cards[a]) * float(cards[b])
    nt = float(train.sum())
    lr = _log_ratio(np.bincount(inv, weights=train, minlength=P)[inv], kappa, nt, pa, pb,
                    np.log(pa), np.log(pb))
    tl = test * lr
    return _finish(float(tl.sum()), float((tl * lr).sum()), float(test.sum()))


#: the held-out likelihood-ratio test's z (module docstring)
Z_CHOICE = 2.0


def category_ranks(categories) -> list:
    """Per key, each code's rank among the key's categories ordered by (type name, str(value)): the
    same order whichever codes a table gave its categories (a scan's roll-up keeps its parent's).
    A key's ranks are kept for its list of categories (the tables of a scan share their root's
    lists, which a table never changes: :class:`gpurisk.freq.table.FreqTable`)."""
    out = []
    for cats in categories:
        got = _RANKS.get(id(cats))
        if got is None or got[0] is not cats or got[1].shape[0] != len(cats):
            got = (cats, _ranks(list(cats)))
            held = sum(v[1].shape[0] for v in _RANKS.values())
            if len(_RANKS) >= RANKS_MAX_LISTS or held + len(cats) > RANKS_MAX_ITEMS:
                _RANKS.clear()
            _RANKS[id(cats)] = got
        out.append(got[1])
    return out


#: category_ranks' ranks per list of categories (by id, the list kept so that its id stays its own);
#: emptied before it holds more than RANKS_MAX_LISTS lists or RANKS_MAX_ITEMS categories in all, so
#: that a long session (a notebook running scan after scan) keeps no old tables' large lists alive
_RANKS: dict = {}
RANKS_MAX_LISTS = 256
RANKS_MAX_ITEMS = 2_000_000


def _ranks(cats: list) -> np.ndarray:
    keys = [(type(c).__name__, str(c)) for c in cats]
    r = np.empty(len(cats), dtype=np.int64)
    r[sorted(range(len(cats)), key=keys.__getitem__)] = np.arange(len(cats))
    r.flags.writeable = False
    return r
