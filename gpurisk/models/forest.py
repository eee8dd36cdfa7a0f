"""Main effects plus a forest of two-way interactions, chosen by held-out tests (issue 27).

A generalisation of :mod:`gpurisk.models.model_choice`'s one pair: a set E of pairs of keys that
forms a forest (no cycle) gives a decomposable log-linear model with a closed-form ML fit,

    μ̂_x = n Π_{(a,b) ∈ E} p_ab(x_a, x_b) Π_v p_v(x_v)^{1 − deg(v)},

p the sample's margins over n, deg(v) the number of pairs of E holding key v (Lauritzen 1996,
decomposable models: the cliques are the pairs and the lone keys, the separators the shared keys).

Choice (Kruskal's algorithm on the held-out gains of :func:`pair_scores`): the pairs are taken by
decreasing held-out gain G; a pair is kept when it passes the same test as the one pair,
G > z √V, and joins two keys not yet connected by kept pairs, until ``max_pairs`` are kept. In a
forest the held-out log-likelihood of the ML fit over main effects is the sum of its pairs' gains
(log μ̂ is additive in the pairs' log p_ab/(p_a p_b)), which is why each pair is scored against main
effects alone; the smoothing of the scores (module model_choice) makes that additivity approximate.

Σ_x μ̂_x² over all K cells (the moment dispersion needs it) is n² times, per tree of the forest,
Σ over that tree's keys of Π_e p_ab² Π_v p_v^{2(1 − deg)}, summed by passing messages from the leaves
to a root over the observed pairs only (an unobserved pair has p_ab = 0), and Σ p_v² per lone key.

:func:`doubtful` lists the forests one test away from the kept one, with the chance that the test
goes the other way: the measures add the estimate's spread over them to its s.e. (the model
choice's own uncertainty, which the Poisson terms do not see).
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

from gpurisk.models.model_choice import DENSE_PAIR_FACTOR, Z_CHOICE, _pair_index, pair_scores
from gpurisk.models.slice_memo import pair_take, rows_at, take

#: per-cell products (:func:`forest_means`) run on slices of this many cells (temporaries in cache)
CHUNK = 1 << 16


def choose_forest(codes, f, cards, splits: int = 1, seed: int = 0, z: float = Z_CHOICE,
                  ranks=None, names=None, max_pairs: int = 2, margins: Margins | None = None):
    """(the kept pairs, sorted, as tuples of key indices; every pair's held-out (gain, variance)).
    ``margins``: the cells' :class:`Margins`, when the caller keeps them (their counts are shared
    with the scores)."""
    scores = pair_scores(codes, f, cards, splits, seed, ranks, names, margins)
    parent = list(range(len(codes)))
    kept = []
    for (a, b), (g, v) in sorted(scores.items(), key=lambda kv: -kv[1][0]):
        if len(kept) >= max_pairs or g <= 0:
            break
        if g <= z * np.sqrt(v) or not joins(parent, a, b):
            continue
        kept.append((a, b))
    return sorted(kept), scores


def joins(parent: list, a: int, b: int, join: bool = True) -> bool:
    """Kruskal's union-find step: whether keys a and b were in different trees of ``parent`` (one
    entry per key, each its tree's link), joining the two trees when they were (``join=False``:
    only whether they are apart)."""
    def root(v):
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v
    ra, rb = root(a), root(b)
    if ra == rb:
        return False
    if join:
        parent[ra] = rb
    return True


def choose_pair(codes, f, cards, splits: int = 1, seed: int = 0, z: float = Z_CHOICE, ranks=None,
                names=None):
    """(the chosen pair or None for independence, every pair's gain): :func:`choose_forest` with
    at most one pair, i.e. the pair of largest held-out gain G among those with G > max(z √V, 0)."""
    kept, scores = choose_forest(codes, f, cards, splits, seed, z, ranks, names, max_pairs=1)
    return (kept[0] if kept else None), {k: g for k, (g, _) in scores.items()}


def tree_order(root: int, edges) -> list:
    """The edges reachable from key ``root`` as (parent, child), each parent reached before its
    children (a depth-first walk of the forest ``edges``)."""
    out, seen, todo = [], {root}, [root]
    while todo:
        v = todo.pop()
        for x, y in edges:
            for u, w in ((x, y), (y, x)):
                if u == v and w not in seen:
                    seen.add(w)
                    todo.append(w)
                    out.append((u, w))
    return out


def _connected(edges, a: int, b: int) -> bool:
    """Whether keys a and b are joined by a path of ``edges``."""
    return a == b or any(w == b for _, w in tree_order(a, edges))


def doubtful(kept, scores, z: float = Z_CHOICE, max_pairs: int | None = None, most: int = 3,
             least: float = 0.01) -> list:
    """The forests one test away from ``kept``, with the chance that test goes the other way:
    [(weight, edges)]. For a kept pair, the forest without it, weighted by Φ(−(G − z√V)/√V); for a
    pair left out that could join the forest, the forest with it, weighted by Φ(−(z√V − G)/√V) (at
    most ``most`` of these, the likeliest). Weights below ``least`` are dropped. The estimate's
    spread over them measures how much the choice of the model moves it."""
    out = []
    for e in kept:
        g, v = scores[e]
        if v > 0:
            w = 0.5 * math.erfc((g - z * math.sqrt(v)) / math.sqrt(2.0 * v))
            out.append((w, [x for x in kept if x != e]))
    added = []
    if max_pairs is None or len(kept) < max_pairs:
        for (a, b), (g, v) in scores.items():
            if (a, b) in kept or g <= 0 or v <= 0 or _connected(kept, a, b):
                continue
            w = 0.5 * math.erfc((z * math.sqrt(v) - g) / math.sqrt(2.0 * v))
            added.append((w, sorted(kept + [(a, b)])))
    added.sort(key=lambda x: -x[0])
    return [(w, e) for w, e in out + added[:most] if w >= least]


def _degrees(d: int, edges) -> list[int]:
    deg = [0] * d
    for a, b in edges:
        deg[a] += 1
        deg[b] += 1
    return deg


def array_digest(*arrays) -> bytes:
    """A digest of the arrays' dtypes and bytes: what a result computed from them is kept under
    (:mod:`gpurisk.models.eb_forest`'s searches, :mod:`gpurisk.models.risk_choice`'s draws)."""
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode())
        h.update(a.tobytes())
    return h.digest()


class Margins:
    """The sample counts of each key's and each pair's categories, each computed once and shared by
    every forest fitted on the same cells (the kept one and those :func:`doubtful` lists). A pair's
    counts are small (one per pair of categories) and kept; its per-cell index only for the pairs a
    forest fits (:meth:`pair`), never for every pair the choice scores (:meth:`put_pair`)."""

    def __init__(self, codes, f, cards, one=None):
        """``one``: per key, the count of each category when the caller knows them already."""
        self.codes = [np.asarray(c) for c in codes]
        f = np.asarray(f)
        # whole-number counts as given (a table's own array: no float copy of every cell's),
        # else as floats; every sum over them is taken a slice of cells at a time (weighted_counts)
        self.f = f if f.dtype.kind in "iu" else np.asarray(f, dtype=np.float64)
        self.cards = [int(c) for c in cards]
        self.n = float(self.f.sum())
        self._one: dict = {} if one is None else dict(enumerate(one))
        self._pair: dict = {}
        self._counts: dict = {}
        #: per key, its seen categories' values by code (:meth:`positions`), where the caller
        #: knows them: a callable v -> list, or None
        self.values = None

    def positions(self, v: int):
        """Each code of key v's position in the numeric order of its categories
        (:func:`gpurisk.models.neighbours.positions`), or None where they are not numbers or not
        known."""
        if ("positions", v) not in self._counts:
            from gpurisk.models.neighbours import positions
            self._counts[("positions", v)] = (None if self.values is None else
                                             positions(self.values(v)))
        return self._counts[("positions", v)]

    def one(self, v: int) -> np.ndarray:
        """Count per category of key v."""
        if v not in self._one:
            self._one[v] = weighted_counts(lambda rows: self.codes[v][rows], self.f,
                                           self.cards[v])
        return self._one[v]

    def put_pair(self, a: int, b: int, layout, counts) -> None:
        """The counts of the (a, b) categories, in the slots of :func:`_pair_index` (``layout``:
        None where they are the dense x_a·c_b + x_b, else that index), summed by the caller."""
        if layout is None:
            self._counts[(a, b)] = counts

    def pair(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(each cell's index of its (a, b) categories, count per index)."""
        if (a, b) not in self._pair:
            inv, P = _pair_index(self.codes, self.cards, a, b, slice(None))
            counts = self._counts.get((a, b))
            if counts is None or counts.shape[0] != P:
                counts = weighted_counts(lambda rows: inv[rows], self.f, P)
            self._pair[(a, b)] = (inv, counts)
        return self._pair[(a, b)]

    def sorted_pair(self, p: int, v: int) -> tuple[np.ndarray, np.ndarray]:
        """(x_p·c_v + x_v of the (p, v) categories the cells hold, sorted; the count of each): what
        the risk criterion's draws look cells up in (:mod:`gpurisk.models.risk_choice`), taken from
        the pair's counts (:meth:`pair_counts`) where every cell is sampled, else from the cells."""
        if (p, v, "sorted") not in self._counts:
            cv = self.cards[v]
            if bool((self.f > 0).all()):
                a, b = min(p, v), max(p, v)
                dense, counts = self.pair_counts(a, b)
                if dense:
                    table = counts.reshape(self.cards[a], self.cards[b])
                    flat = (table if p == a else table.T).reshape(-1)
                    key = np.flatnonzero(flat > 0)
                    got = (key, flat[key])
                else:
                    inv = self.pair(a, b)[0]
                    ids = np.empty(counts.shape[0], dtype=np.int64)
                    ids[inv] = pair_ids(self.codes, self.cards, a, b)
                    xa, xb = np.divmod(ids, self.cards[b])
                    key = xa * cv + xb if p == a else xb * cv + xa
                    order = np.argsort(key, kind="stable")
                    got = (key[order], counts[order])
            else:       # cells with f = 0 (a bootstrap sample's): their pairs are listed too
                key = self.codes[p].astype(np.int64) * cv + self.codes[v]
                uniq, inv = np.unique(key, return_inverse=True)
                inv = inv.reshape(-1)
                got = (uniq, weighted_counts(lambda rows: inv[rows], self.f, uniq.shape[0]))
            self._counts[(p, v, "sorted")] = got
        return self._counts[(p, v, "sorted")]

    def pair_counts(self, a: int, b: int) -> tuple[bool, np.ndarray]:
        """(whether the (a, b) index of :func:`_pair_index` is the dense x_a·c_b + x_b, the count
        per index): no per-cell index is kept where it is dense (:func:`pair_ids` forms it)."""
        dense = dense_pair(self.cards, a, b, self.f.shape[0])
        if dense and (a, b) not in self._pair:
            if (a, b) not in self._counts:
                self._counts[(a, b)] = weighted_counts(
                    lambda rows: pair_ids(self.codes, self.cards, a, b, rows), self.f,
                    self.cards[a] * self.cards[b])
            return True, self._counts[(a, b)]
        return dense, self.pair(a, b)[1]


#: :func:`weighted_counts` reads the cells this many at a time (at least)
COUNTS_CHUNK = 1 << 16


def weighted_counts(index, f, length: int) -> np.ndarray:
    """np.bincount(index(all cells), weights=f, minlength=length) as floats, the index formed and
    the weights read a slice of cells at a time (slices of at least as many cells as there are
    slots): no index of every cell is formed and no float copy of whole-number weights is made.
    Whole-number weights give the same sums in any order. ``index(rows)``: the slots of the cells
    ``rows`` (a slice)."""
    size = int(np.shape(f)[0])
    step = max(COUNTS_CHUNK, int(length))
    if size <= step:
        return np.bincount(index(slice(None)), weights=f, minlength=length).astype(
            np.float64, copy=False)
    out = np.zeros(int(length))
    for start in range(0, size, step):
        rows = slice(start, start + step)
        out += np.bincount(index(rows), weights=f[rows], minlength=length)
    return out


def dense_pair(cards, a: int, b: int, cells: int) -> bool:
    """Whether :func:`_pair_index` indexes the (a, b) categories of ``cells`` cells densely."""
    return int(cards[a]) * int(cards[b]) <= max(DENSE_PAIR_FACTOR * cells, 1 << 16)


def pair_ids(codes, cards, a: int, b: int, rows=slice(None)):
    """x_a·c_b + x_b of the cells ``rows`` (the dense index of :func:`_pair_index`; formed once
    per slice of a pass over the uniques: :mod:`gpurisk.models.slice_memo`)."""
    return pair_take(codes, cards, a, b, rows)


def forest_means(codes, f, cards, edges, margins: Margins | None = None, sliced: bool = False):
    """(μ̂ of every cell given, Σ μ̂² over all K cells) of main effects + the forest ``edges``.
    The per-cell products run on slices of CHUNK cells, each key's factor p_v^{1 − deg(v)} raised
    to its power once per category: the same products, in the same order, as cell by cell.
    ``sliced``: μ̂ as :class:`CellMeans`, made a slice of cells at a time where it is read (no
    array of every cell's)."""
    m = Margins(codes, f, cards) if margins is None else margins
    n, codes = m.n, m.codes
    deg = _degrees(len(codes), edges)
    one = [m.one(v) / n for v in range(len(codes))]
    with np.errstate(divide="ignore"):        # a category no cell has: never looked up
        keys = [(c, one[v] if deg[v] == 0 else one[v] ** (1 - deg[v]))  # p ** 1 is p itself
                for v, c in enumerate(codes) if deg[v] != 1]
    pairs, factors = {}, []
    for a, b in edges:
        dense, counts = m.pair_counts(a, b)
        inv = None if dense else m.pair(a, b)[0]
        p = counts / n
        pairs[(a, b)] = (inv, p)
        factors.append((a, b, inv, p))
    size = m.f.shape[0]

    def on(rows, count):
        x = np.full(count, n)
        for c, table in keys:
            x *= table[c[rows]]
        for a, b, inv, p in factors:
            x *= p[pair_ids(codes, m.cards, a, b, rows) if inv is None else inv[rows]]
        return x
    sum_mu2 = n * n * _sum_squares(codes, one, pairs, deg, m.cards)
    mu = CellMeans(on, size)
    return (mu if sliced else np.asarray(mu)), sum_mu2


class CellMeans:
    """Per-cell means made a slice (or a set) of cells at a time where read (``mu[i:j]``,
    ``mu[positions]``), each element the same number however it is read: what a pass over the
    cells reads instead of an array of them all (:func:`forest_means` with ``sliced``,
    :func:`gpurisk.models.eb_forest.rooted_slices`). ``on(rows, count)`` makes the means of
    ``rows`` (a slice or positions, ``count`` of them); ``np.asarray`` makes the whole array
    (CHUNK cells at a time); ``mean`` is the mean given, if one was, else the array's."""

    ndim = 1

    def __init__(self, on, size: int, mean: float | None = None):
        self.on, self.shape, self._mean = on, (int(size),), mean

    def __len__(self) -> int:
        return self.shape[0]

    def at(self, start: int, stop: int) -> np.ndarray:
        """The means of cells start..stop."""
        return self.on(slice(start, stop), stop - start)

    def __getitem__(self, part):
        if isinstance(part, slice):
            start, stop, step = part.indices(self.shape[0])
            if step == 1:
                return self.at(start, max(start, stop))
            part = np.arange(start, stop, step)
        part = np.asarray(part)
        if part.dtype == bool:
            part = np.flatnonzero(part)
        return self.on(part, int(part.shape[0]))

    def mean(self) -> float:
        return float(np.asarray(self).mean()) if self._mean is None else self._mean

    def __array__(self, dtype=None, copy=None):
        out = np.empty(self.shape[0])
        for start in range(0, self.shape[0], CHUNK):
            out[start:start + CHUNK] = self.at(start, min(self.shape[0], start + CHUNK))
        return out if dtype is None else out.astype(dtype, copy=False)


def tree_squares(one, edges, deg, message) -> float:
    """Σ over every cell of the key space of Π_e p_e² Π_v p_v^{2(1 − deg v)}, a product over the
    forest's trees, each summed by passing messages from its leaves to a root: ``message(p, v, own)``
    is Σ_{x_v} p_pv(x_p, x_v)² own(x_v) per category of the parent p (``own``: what key v and its
    children give per category of v). A lone key gives Σ p_v²."""
    d = len(one)
    adj = {v: [] for v in range(d)}
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    total, seen = 1.0, set()
    for r in range(d):
        if r in seen:
            continue
        order, stack, up = [], [(r, None)], {}
        while stack:                                   # the tree's keys, parents before children
            v, p = stack.pop()
            seen.add(v)
            up[v] = p
            order.append(v)
            stack.extend((w, v) for w in adj[v] if w != p)
        msg = {}
        for v in reversed(order):                      # children before parents
            # at key v: p_v^{2(1 − deg)} times the messages from its children, per category of v
            with np.errstate(divide="ignore", invalid="ignore"):    # a category with no record
                own = one[v] ** (2 * (1 - deg[v])) if deg[v] != 1 else np.ones_like(one[v])
                own = np.where(one[v] > 0, own, 0.0)
            for w in adj[v]:
                if w != up[v]:
                    own = own * msg[w]
            p = up[v]
            if p is None:
                total *= float(np.sum(own))
            else:
                msg[v] = message(p, v, own)
    return total


def _sum_squares(codes, one, pairs, deg, cards) -> float:
    """Σ over every cell of the key space of (μ̂/n)² (:func:`tree_squares`), each pair's message
    over its observed pairs of categories only (an unobserved pair has p_ab = 0)."""
    def message(p, v, own):
        # Σ_{x_v} p_{pv}(x_p, x_v)² own(x_v), over the observed pairs
        key = (min(p, v), max(p, v))
        inv, pp = pairs[key]
        obs = np.flatnonzero(pp > 0)
        if inv is None:                             # the dense index x_a·c_b + x_b
            hi, lo = np.divmod(obs, cards[key[1]])
            xp, xv = (hi, lo) if p < v else (lo, hi)
        else:
            first = np.zeros(pp.shape[0], dtype=np.int64)
            first[inv] = np.arange(inv.shape[0])    # one cell holding each observed pair
            cell = first[obs]
            xp, xv = codes[p][cell], codes[v][cell]
        return np.bincount(xp, weights=pp[obs] ** 2 * own[xv], minlength=one[p].shape[0])
    return tree_squares(one, list(pairs), deg, message)


class AtRows:
    """One factor's counts at some cells, gathered from its small table when sliced (``x[i:j]``)
    or read as an array (``np.asarray``, slice by slice): what :func:`forest_counts` hands the
    leave-one-out prior, which reads it slice by slice, so no per-cell array of it is kept."""

    ndim = 1

    def __init__(self, counts, at, rows):
        self.counts, self.at, self.rows = counts, at, rows
        self.shape = (int(rows.shape[0]),)
        self.dtype = counts.dtype

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, part):
        return self.counts[self.at(rows_at(self.rows, part))]

    def __array__(self, dtype=None, copy=None):
        out = np.empty(self.shape[0], dtype=self.dtype)
        for start in range(0, self.shape[0], CHUNK):
            out[start:start + CHUNK] = self[start:start + CHUNK]
        return out if dtype is None else out.astype(dtype, copy=False)


def forest_counts(codes, f, cards, edges, rows, margins: Margins | None = None) -> list:
    """Per factor of the fitted model, at the cells ``rows``: (the sample count of the cell's
    category of that margin, its own record included; the factor's exponent; whether its
    uncertainty enters the prior's variance). The pairs' (exponent 1, counted), the lone keys'
    (1, counted), and the shared keys' (1 − deg, not counted: their counts are larger than their
    pairs' and their error shares records with them). The counts are :class:`AtRows`: gathered
    when sliced or read as an array, never kept per cell."""
    m = Margins(codes, f, cards) if margins is None else margins
    deg = _degrees(len(m.codes), edges)
    rows = np.arange(m.f.shape[0])[rows] if isinstance(rows, slice) else np.asarray(rows)
    factors = [((lambda r, c=m.codes[v]: take(c, r)), m.one(v), 1 - deg[v], deg[v] == 0)
               for v in range(len(m.codes)) if deg[v] != 1]
    for a, b in edges:
        dense, counts = m.pair_counts(a, b)
        at = ((lambda r, a=a, b=b: pair_ids(m.codes, m.cards, a, b, r)) if dense else
              (lambda r, inv=m.pair(a, b)[0]: take(inv, r)))
        factors.append((at, counts, 1, True))
    return [(AtRows(counts, at, rows), power, counted) for at, counts, power, counted in factors]
