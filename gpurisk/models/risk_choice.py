"""Choosing the log-linear model by a criterion aimed at the risk (Skinner & Shlomo 2008).

Skinner & Shlomo found that goodness-of-fit tests give little guidance for risk in sparse tables,
and chose interactions by a score for over-dispersion weighted towards the cells that make sample
uniques, in a forward selection. This module implements the principle, derived from a gamma-mixing
alternative (their paper's criteria are of this kind; its exact form is not at hand): under
λ_j ↦ λ_j u_j (E u = 1, Var u = α) E[(f_j − μ_j)² − f_j] = α μ_j², and to first order in α the
model-based τ̂_h = Σ_{f_j=1} h(μ̂_j/π) is off by −½ α Σ_j μ_j² w_h(μ_j), with

    k(m) = m e^{−m},   h̃(m) = h(m/π),   w_h = 2 k' h̃' + k h̃''.

So, over every cell j of the key space,

    B̂_h = −½ Σ_j w_h(μ̂_j) [(f_j − μ̂_j)² − f_j],     T_h = B̂_h / sqrt(½ Σ_j w_h(μ̂_j)² μ̂_j²)

(B̂_h estimates that bias; T_h is about standard normal when the model is adequate). B̂_h is first
order in the dispersion: one cell the forest puts at a tiny μ̂ that holds a few records can carry
all of it (FARS read as a 1 % sample, race × sex × injury: 85.0 of 85.0 from one cell of 2 records
at μ̂ = 0.0015, for 3 sample uniques). A cell's share of the true bias, E[I(f_j = 1)(h̃(μ̂_j) −
h(Λ_j))] with h in [0, 1], is at most P(f_j = 1) ≤ 1/e for any Poisson mixture, so
:class:`Score` also gives B̂_h with each cell's share held within ±1/e, which the interval's
widening reads. h is E's
term, h2(λ) = (1 − e^{−(1−π)λ})/((1 − π)λ) (``kind="inverse"``), or τ1's, h1(λ) = e^{−(1−π)λ}
(``kind="tau1"``).

The sum over every cell. An observed cell contributes its term; an empty one −½ w(μ̂) μ̂² to B̂
and ½ w² μ̂² to the variance: functions of μ̂ alone. Their sum over the empty cells is taken by
importance sampling from the fitted model itself, never from a list of the K cells: M cells are
drawn with probability μ̂_x / n (ancestral sampling along each tree of the forest, from the
sample's margins; a cell with μ̂ = 0 is never drawn and contributes 0), and

    Σ_{x empty} g(μ̂_x) = n E_{x ~ μ̂/n}[ I(x empty) g(μ̂_x) / μ̂_x ],

with g(μ)/μ = w(μ) μ (and w² μ), which is bounded and vanishes at μ = 0 and for large μ (w decays
as e^{−μ}). That sum is taken without draws where it costs no more (:meth:`Draws.fitted`): over
every cell where the key space is small, or by the binned distribution of μ̂ over every cell
(:func:`gpurisk.models.cell_space.forest_mass`, the same identity with the μ̂-weighted distribution
of ln μ̂ in place of the draws: its error is the binning's, 10⁻⁵ of the sum for E's term) less the
sample's own cells, where listing the forest's trees joins no more rows than there are draws. The
draws use the same uniforms
for every candidate model (common random numbers), so
the candidates are compared on the same draws; the seed is fixed, so a sample gives one answer.

Forward selection (:func:`choose`): start from main effects; while |T_h| > ``z``, add the two-way
interaction among those that keep the model a forest (a decomposable model, closed form:
:mod:`gpurisk.models.forest`) that gives the smallest |T_h|, as long as it makes |T_h| smaller; stop
when |T_h| ≤ z or no pair lowers it. ``z`` is the two-sided 5 % normal quantile, fixed in
advance (not tuned on any population). Only the sample's cells and their margins are read.
Skinner, C. and Shlomo, N. (2008) Assessing identification risk in survey microdata using log-linear
models. J. Amer. Statist. Assoc. 103, 989-1001.
"""
from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from gpurisk.core.kept import kept
from gpurisk.models.cell_space import forest_mass
from gpurisk.models.forest import (Margins, _degrees, array_digest, forest_means, tree_order,
                                   weighted_counts)

#: |T_h| above this is misfit (two-sided 5 %: fixed in advance, not tuned)
Z_RISK = 1.959963984540054
#: draws of the importance sample: at least this many, and at least DRAWS_PER_RECORD per record
DRAWS_MIN = 20_000
DRAWS_PER_RECORD = 2
DRAWS_MAX = 400_000
#: :class:`Draws` lists every cell of a key space of at most this many cells (exact, and cheap)
LISTED_CELLS = 1 << 14
#: :class:`Draws` sums over the cells whose μ̂ is at least this over n (by the binned distribution of μ̂:
#: the cells left out change B̂_h by about MU_MIN (1 − π)/π at most, negligible)
MU_MIN = 1e-15
#: draws of each bootstrap sample's selection (the bootstrap's own spread is far larger than the
#: importance sample's error at this size)
DRAWS_BOOT = 5_000


#: :func:`weights` runs on slices of this many cells (their temporaries stay in the cache)
WEIGHTS_CHUNK = 1 << 16


def weights(mu, pi: float, kind: str = "inverse") -> np.ndarray:
    """w_h(μ) = 2 k'(μ) h̃'(μ) + k(μ) h̃''(μ), k(m) = m e^{−m}, h̃(m) = h(m/π) (module docstring),
    element by element, on slices of WEIGHTS_CHUNK cells."""
    if kind not in ("inverse", "tau1"):
        raise ValueError(f"kind {kind!r}")
    m = np.asarray(mu, dtype=np.float64)
    if m.ndim != 1 or m.shape[0] <= WEIGHTS_CHUNK:
        return _weights(m, pi, kind)
    out = np.empty(m.shape[0])
    for start in range(0, m.shape[0], WEIGHTS_CHUNK):
        out[start:start + WEIGHTS_CHUNK] = _weights(m[start:start + WEIGHTS_CHUNK], pi, kind)
    return out


def _weights(m, pi: float, kind: str) -> np.ndarray:
    a = (1.0 - pi) / pi
    x = a * m
    em = np.exp(-m)
    k, k1 = m * em, (1.0 - m) * em
    if kind == "tau1":
        ex = np.exp(-x)
        return 2.0 * k1 * (-a * ex) + k * (a * a * ex)
    # φ(x) = (1 − e^{−x})/x: φ' = (e^{−x}(1 + x) − 1)/x², φ'' = (2 − e^{−x}(x² + 2x + 2))/x³; their
    # series below x = 1e-2 (cancellation), written over the few cells there
    ex = np.exp(-x)
    with np.errstate(divide="ignore", invalid="ignore"):
        d1 = (ex * (1.0 + x) - 1.0) / (x * x)
        d2 = (2.0 - ex * (x * x + 2.0 * x + 2.0)) / x ** 3
    small = np.flatnonzero(x < 1e-2)
    if small.size:
        xs = x[small]
        d1[small] = -0.5 + xs / 3.0 - xs * xs / 8.0 + xs ** 3 / 30.0
        d2[small] = 1.0 / 3.0 - xs / 4.0 + xs * xs / 10.0
    return 2.0 * k1 * a * d1 + k * a * a * d2


def _cell_keys(codes, cards):
    """One int64 per cell (mixed radix over ``cards``:
    :func:`gpurisk.freq.cellid.mixed_radix_ids`), or None when the product overflows."""
    from gpurisk.freq.cellid import mixed_radix_ids
    if math.prod(int(c) for c in cards) >= 2 ** 62:
        return None
    return mixed_radix_ids(list(codes), cards, dtype=np.int64)


class Draws:
    """Cells drawn from a forest model with common uniforms, and which of them the sample holds."""

    def __init__(self, margins: Margins, draws: int, seed: int = 0, exact: bool = True,
                 order=None, histogram: bool = True):
        """``exact``: sum over every cell where the key space has no more cells than ``draws``
        or LISTED_CELLS (:meth:`fitted`); False draws always. ``histogram``: else over every cell
        by the binned distribution of μ̂ (:func:`gpurisk.models.cell_space.forest_mass`) where the
        forest's trees can be listed; False draws instead. ``order``: the keys in the order they take the
        uniforms' rows and root their trees (default: their own), so that a caller can draw the
        same cells whatever order a table lists its keys in."""
        self.m = margins
        self.draws, self.seed, self.exact = int(draws), seed, exact
        self.histogram = bool(histogram) and exact
        self.order = list(range(len(margins.codes))) if order is None else list(order)
        self._row = {v: i for i, v in enumerate(self.order)}
        self._u = None
        self._held = None       # the sample's cells, looked up by :meth:`empty` (made there)
        self._cond: dict = {}
        self._fitted = None
        self._index = None

    @property
    def u(self) -> np.ndarray:
        """The common uniforms, one row per key, drawn when first read (:func:`uniforms`)."""
        if self._u is None:
            self._u = uniforms(self.seed, len(self.m.codes), self.draws)
        return self._u

    def _conditional(self, p: int, v: int):
        """(the :class:`_Inverse` of the cumulative counts of the observed (p, v) pairs sorted by
        (x_p, x_v), giving their x_v; the count of each category of p before it; each category's
        count): for drawing x_v given x_p by inversion."""
        if (p, v) not in self._cond:
            m = self.m
            cv = m.cards[v]
            uniq, counts = m.sorted_pair(p, v)
            one = m.one(p)
            before = np.concatenate([[0.0], np.cumsum(one)[:-1]])
            self._cond[(p, v)] = (_Inverse(np.cumsum(counts), uniq % cv), before, one)
        return self._cond[(p, v)]

    def cells(self, edges) -> list:
        """Per key, the code of each drawn cell under main effects + the forest ``edges``. Each key's
        draws are kept (:func:`_kept_draws`) under what they are made of: its row of uniforms,
        and its category counts (a root) or its parent's draws and their pair's counts (a child),
        so a scan's combinations that draw a key from the same row and the same counts read them
        instead of drawing them again (the same numbers)."""
        m = self.m
        d = len(m.codes)
        out: list = [None] * d
        made: list = [None] * d          # what each key's draws are made of (their cache key)
        for r in self.order:
            if out[r] is not None:
                continue
            made[r] = ("root", self.seed, self.draws, self._row[r], array_digest(m.one(r)))

            def root(r=r):
                if ("root", r) not in self._cond:
                    self._cond[("root", r)] = _Inverse(np.cumsum(m.one(r)))
                return self._cond[("root", r)](self.u[self._row[r]] * m.n)
            out[r] = _kept_draws(made[r], root)
            for p, v in tree_order(r, edges):
                made[v] = ("child", made[p], self._row[v], m.cards[v],
                           array_digest(*m.sorted_pair(p, v), m.one(p)))

                def child(p=p, v=v):
                    inverse, before, onep = self._conditional(p, v)
                    xp = out[p]
                    return inverse(before[xp] + self.u[self._row[v]] * onep[xp])
                out[v] = _kept_draws(made[v], child)
        return out

    def fitted(self, edges):
        """(μ̂ of the sample's cells, μ̂ of the cells summed over, each one's weight in
        Σ_{x empty} g(μ̂_x) = Σ weight · g(μ̂)/μ̂, whether the sample's own cells' g(μ̂) are still to
        be taken off that sum) under main effects + the forest ``edges``, the cheapest of three
        ways:

        - every cell of the key space (the grid of the categories the margins hold, by
          broadcasting: :func:`grid_means`), weight μ̂, the sample's own cells to be taken off,
          where it has at most LISTED_CELLS cells (the importance sample's error was the
          criterion's largest in small spaces: testdata's urbrur, roof, water at π = 5 %, 80
          cells: T from −0.2 to −3.9 over ten seeds of 20 000 draws);
        - else every cell by the binned distribution of μ̂ over the key space
          (:func:`gpurisk.models.cell_space.forest_mass`: values weighted by their μ̂-mass), the
          sample's own cells to be taken off (:func:`score` does, in its pass over them), where
          listing the forest's trees joins no more rows than there are draws or cells (listing
          them costs about what drawing or listing as many cells does);
        - else every cell, as in the first, where the key space has no more cells than there are
          draws; else the empty ones of the drawn cells, weight n / draws.

        Kept for the last forest asked, so the criterion of E's term and of τ1's (:func:`score`)
        read the cells once."""
        key = tuple(edges)
        if self._fitted is None or self._fitted[0] != key:
            m = self.m
            # the categories the margins hold (a bootstrap sample's may lack some): a cell with
            # another has μ̂ = 0 and adds nothing
            held = [np.flatnonzero(m.one(v) > 0) for v in range(len(m.codes))]
            size = math.prod(h.shape[0] for h in held)
            if self.histogram and size > LISTED_CELLS:
                got = forest_mass(m, edges, MU_MIN / max(m.n, 1.0),
                                  combos_max=min(self.draws, size))
                if got is not None:        # every cell, binned; the sample's own taken off
                    mu = forest_means(m.codes, m.f, m.cards, edges, m, sliced=True)[0]
                    self._fitted = (key, (mu, got[0], got[1], True))
                    return self._fitted[1]
            mu = forest_means(m.codes, m.f, m.cards, edges, m, sliced=True)[0]
            if self.exact and size <= max(self.draws, LISTED_CELLS):
                # every cell of the held categories' grid, the sample's own taken off by score
                mux = grid_means(m, edges, held)
                self._fitted = (key, (mu, mux, mux, True))
                return self._fitted[1]
            cells = self.cells(edges)
            e = self.empty(cells)
            at = np.flatnonzero(e)                                # only the empty cells add
            mux = means_at(m, edges, [c[at] for c in cells])
            self._fitted = (key, (mu, mux, np.full(mux.shape[0], m.n / e.shape[0]), False))
        return self._fitted[1]

    def _sample_cells(self):
        """(the sample's cell keys sorted, None) or, where the key space overflows one int64,
        (None, the code rows): made when :meth:`empty` first reads them (a criterion summed without
        listing the empty cells never does)."""
        if self._held is None:
            m = self.m
            keys = _cell_keys(m.codes, m.cards)
            if keys is None:    # too many cells for one int64: compare the code rows themselves
                self._held = (None, np.stack([np.asarray(c, dtype=np.int64) for c in m.codes],
                                             axis=1))
            else:
                # a table's cells come sorted by their mixed-radix id, and the margins' codes are
                # the table's with unseen categories dropped (the same order): sorted again only
                # if not
                ordered = keys.shape[0] < 2 or bool(np.all(keys[1:] >= keys[:-1]))
                self._held = (keys if ordered else np.sort(keys), None)
        return self._held

    def empty(self, cells) -> np.ndarray:
        """Whether each drawn cell is one the sample does not hold."""
        held_keys, rows = self._sample_cells()
        if held_keys is not None:
            key = _cell_keys(cells, self.m.cards)
            if held_keys.shape[0] > key.shape[0]:      # many cells, fewer draws: searched
                # in the draws' sorted order: each search starts where the last ended, in cache
                order = np.argsort(key, kind="stable")
                sk = key[order]
                i = np.minimum(np.searchsorted(held_keys, sk), held_keys.shape[0] - 1)
                out = np.empty(key.shape[0], dtype=bool)
                out[order] = held_keys[i] != sk
                return out
            if self._index is None:        # a hash table of the sample's cells (pandas')
                import pandas as pd
                self._index = pd.Index(held_keys)
            return self._index.get_indexer(key) < 0
        drawn = np.stack([np.asarray(c, dtype=np.int64) for c in cells], axis=1)
        both = np.concatenate([rows, drawn])
        _, inv = np.unique(both, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        held = np.zeros(int(inv.max()) + 1, dtype=bool)
        held[inv[: rows.shape[0]]] = True
        return ~held[inv[rows.shape[0]:]]


#: :func:`_kept_draws` keeps drawn codes up to this many bytes (a key's draws: 4 bytes a draw,
#: at most DRAWS_MAX draws)
KEPT_DRAWS_BYTES = 64 << 20
_KEPT: OrderedDict = OrderedDict()
_KEPT_LOCK = threading.Lock()


def _kept_draws(key, draw):
    """``draw()``, or the read-only codes it gave for the same ``key`` (:meth:`Draws.cells`: a key
    names everything the draws are made of) in this process; the least recently used are
    forgotten beyond KEPT_DRAWS_BYTES."""
    def made():
        got = np.asarray(draw())
        got.flags.writeable = False
        return got
    return kept(_KEPT, _KEPT_LOCK, key, made, KEPT_DRAWS_BYTES, size=lambda a: a.nbytes)


_UNIFORMS: dict = {}


def uniforms(seed: int, rows: int, draws: int) -> np.ndarray:
    """``np.random.default_rng(seed).random((rows, draws))``, read-only: the first rows of the
    largest such block drawn so far for (seed, draws) (the generator fills it row after row, so
    they are the same numbers). A scan's tables share one sample, so one n and one number of draws:
    the uniforms are drawn once per scan, not once per combination. One block is kept."""
    got = _UNIFORMS.get((seed, draws))
    if got is None or got.shape[0] < rows:
        got = np.random.default_rng(seed).random((rows, draws))
        got.flags.writeable = False
        _UNIFORMS.clear()
        _UNIFORMS[(seed, draws)] = got
    return got[:rows]


#: :class:`_Inverse` reads a table of this many entries at most (int32: 16 MB; one per key of a
#: combination, while its criterion is drawn) instead of searching; a larger sample is searched
LOOKUP_MAX = 1 << 22


class _Inverse:
    """``searchsorted(cum, t, side="right")`` clipped to the last index, for cumulative counts
    ``cum``: where they are whole numbers up to LOOKUP_MAX, read from a table of the index for each
    whole number below the total (for whole-number cum, cum_i > t exactly when cum_i > ⌊t⌋: the
    same index, without a binary search per draw), else searched."""

    def __init__(self, cum, values=None):
        """``values``: what each index stands for (a child's code), returned in its place (default:
        the index itself)."""
        self.cum = cum
        self.last = cum.shape[0] - 1
        self.values = np.arange(cum.shape[0]) if values is None else np.asarray(values)
        total = float(cum[-1]) if cum.shape[0] else 0.0
        self.table = None
        if 0 < total <= LOOKUP_MAX and bool(np.all(cum == np.floor(cum))):
            widths = np.diff(cum, prepend=0.0).astype(np.int64)
            # one entry per whole number below the total, and the last index's for the total
            at = np.append(np.repeat(np.arange(cum.shape[0]), widths), self.last)
            self.table = self.values[at].astype(np.int32)
            self.top = self.table.shape[0] - 1

    def __call__(self, t):
        """The value of the index of each target t ≥ 0 (int32 where tabled)."""
        if self.table is None:
            return self.values[np.minimum(np.searchsorted(self.cum, t, side="right"), self.last)]
        k = t.astype(np.int64)                 # ⌊t⌋ for t ≥ 0
        np.minimum(k, self.top, out=k)         # at or past the total: the last index
        return self.table[k]


def grid_means(margins: Margins, edges, held) -> np.ndarray:
    """μ̂ of main effects + the forest ``edges`` at every cell of the grid of the categories
    ``held`` (per key, its codes), flattened in C order (the last key's category varying fastest),
    by broadcasting each factor over the grid: each cell's product is :func:`means_at`'s, factor by
    factor in the same order, without listing the cells' codes."""
    m = margins
    d = len(held)
    deg = _degrees(d, edges)

    def along(values, *axes):        # ``values`` laid on the grid's ``axes`` (in that order)
        shape = [1] * d
        for ax, size in zip(axes, np.shape(values)):
            shape[ax] = size
        order = sorted(range(len(axes)), key=lambda i: axes[i])
        return np.transpose(values, order).reshape(shape)
    mu = np.full(tuple(h.shape[0] for h in held), float(m.n))
    for v in range(d):
        if deg[v] != 1:
            with np.errstate(divide="ignore"):
                mu *= along(((m.one(v) / m.n) ** (1 - deg[v]))[held[v]], v)
    for a, b in edges:
        want = held[a].astype(np.int64)[:, None] * m.cards[b] + held[b][None, :]
        mu *= along(_pair_counts_at(m, a, b, want) / m.n, a, b)
    return mu.reshape(-1)


def _pair_counts_at(m: Margins, a: int, b: int, want) -> np.ndarray:
    """The sample count of each (a, b) pair of categories x_a·c_b + x_b in ``want`` (0 for a pair
    the sample lacks): read from the dense table, or looked up in the sorted observed pairs."""
    dense, counts = m.pair_counts(a, b)
    if dense:                    # an unobserved pair's count is 0 there too
        return counts[want]
    uniq, counts = m.sorted_pair(a, b)
    i = np.minimum(np.searchsorted(uniq, want), uniq.shape[0] - 1)
    return np.where(uniq[i] == want, counts[i], 0.0)


def means_at(margins: Margins, edges, cells) -> np.ndarray:
    """μ̂ of main effects + the forest ``edges`` at arbitrary cells (codes per key), each drawn
    from that forest (so its pairs of categories are observed ones)."""
    m = margins
    deg = _degrees(len(m.codes), edges)
    mu = np.full(np.shape(cells[0])[0], m.n)
    for v, c in enumerate(cells):
        if deg[v] != 1:          # the power per category, then gathered: the same numbers
            with np.errstate(divide="ignore"):
                mu *= ((m.one(v) / m.n) ** (1 - deg[v]))[c]
    for a, b in edges:
        want = cells[a].astype(np.int64) * m.cards[b] + cells[b]
        mu *= _pair_counts_at(m, a, b, want) / m.n
    return mu


#: a cell's share of the bias of τ̂_h is E[I(f_j = 1)(h̃(μ̂_j) − h(Λ_j))] with h in [0, 1], so at
#: most P(f_j = 1) ≤ max_m m e^{−m} = 1/e in size, whatever the cell's mixing (:class:`Score`)
CELL_BIAS_MAX = 1.0 / math.e


class Score(NamedTuple):
    """The risk criterion of a forest (module docstring): B̂_h, T_h, and B̂_h with each cell's share
    −½ w_h(μ̂_j)[(f_j − μ̂_j)² − f_j] held within ±CELL_BIAS_MAX, the most a cell's term can be off
    by (its first-order share can be far more: one cell of 2 records where the forest expects
    μ̂ = 0.0015 gives 85 at π = 1 %)."""
    bias: float
    t: float
    bounded: float


def _observed_kinds(mu, f, pi: float, kinds, cap: float, less: bool = False) -> list:
    """Per kind of ``kinds``: (Σ share_j, Σ (w_h(μ̂_j) μ̂_j)², Σ share_j clipped to ±``cap``) over
    the sample's cells, share_j = w_h(μ̂_j)[(f_j − μ̂_j)² − f_j], every kind in one pass over the
    cells, on slices of WEIGHTS_CHUNK cells: each slice's temporaries stay in the cache (a sample of
    1.6·10⁷ cells passes over them once, not once per sum), and each slice of μ̂ is read once. The
    slices are shared among the CPUs (:func:`gpurisk.models.terms.each_slice`) and their sums
    added in the slices' order: the sums of the whole arrays, added slice by slice. ``less``: each
    cell's term as an empty cell (w μ̂², and w² μ̂² in the variance) taken off in the same pass,
    where the sum over the empty cells is one over every cell (:meth:`Draws.fitted`): the
    variance's two then cancel exactly. ``mu`` may be :class:`gpurisk.models.forest.CellMeans` (made as sliced)."""
    from gpurisk.models.terms import each_slice
    starts = range(0, max(int(mu.shape[0]), 1), WEIGHTS_CHUNK)
    # per slice and kind: Σ share, Σ clipped share, Σ (w μ̂)² or Σ alone, Σ clipped alone
    got = np.zeros((len(starts), len(kinds), 4))

    def one(start):
        m, ff = mu[start:start + WEIGHTS_CHUNK], f[start:start + WEIGHTS_CHUNK]
        row = got[start // WEIGHTS_CHUNK]
        for k, kind in enumerate(kinds):
            w = _weights(m, pi, kind)
            share = w * ((ff - m) ** 2 - ff)
            row[k, 0] = float(np.sum(share))
            row[k, 1] = float(np.sum(np.clip(share, -cap, cap)))
            if less:
                alone = w * m * m
                row[k, 2] = float(np.sum(alone))
                row[k, 3] = float(np.sum(np.clip(alone, -cap, cap)))
            else:
                row[k, 2] = float(np.sum((w * m) ** 2))
    # the slices side by side; their sums added in the slices' order, as one after another
    each_slice(one, starts)
    sums = [[0.0, 0.0, 0.0] for _ in kinds]
    for row in got:
        for acc, (share, clipped, x, x_clipped) in zip(sums, row.tolist()):
            acc[0] += share
            acc[2] += clipped
            if less:
                acc[0] -= x
                acc[2] -= x_clipped
            else:
                acc[1] += x
    return [tuple(acc) for acc in sums]


def score(margins: Margins, edges, pi: float, draws: Draws, kind: str = "inverse") -> Score:
    """:class:`Score` (B̂_h, T_h, bounded B̂_h) of main effects + the forest ``edges`` (module
    docstring)."""
    return scores(margins, edges, pi, draws, (kind,))[kind]


def scores(margins: Margins, edges, pi: float, draws: Draws, kinds) -> dict:
    """{kind: :func:`score`} for each of ``kinds``, the sample's cells read in one pass (the same
    numbers as one :func:`score` each)."""
    mu, mux, per, less = draws.fitted(edges)
    cap = 2.0 * CELL_BIAS_MAX         # on w·(...), whose −½ is the cell's share
    out = {}
    for kind, (b_obs, v_obs, bounded_obs) in zip(
            kinds, _observed_kinds(mu, margins.f, pi, kinds, cap, less)):
        wx = weights(mux, pi, kind) * mux
        b_emp = float(np.sum(per * wx))
        v_emp = float(np.sum(per * wx * (wx / np.where(mux > 0, mux, 1.0))))
        b = -0.5 * (b_obs + b_emp)
        var = 0.5 * (v_obs + v_emp)
        safe = np.where(mux > 0, mux, 1.0)
        bounded = -0.5 * (bounded_obs
                          + float(np.sum(per * np.clip(wx * mux, -cap, cap) / safe)))
        out[kind] = Score(b, (b / math.sqrt(var) if var > 0 else 0.0), bounded)
    return out


def draws_for(margins: Margins) -> int:
    """The size of the importance sample for a sample of n records (module constants)."""
    return int(min(max(DRAWS_MIN, DRAWS_PER_RECORD * margins.n), DRAWS_MAX))


class _Pairs:
    """The (a, b) pair counts of the sample, looked up at any cells: a dense c_a × c_b table where
    it is small, else a sorted list of the observed pairs."""

    DENSE_MAX = 1 << 22

    def __init__(self, margins: Margins):
        self.m = margins
        self._t: dict = {}

    def counts(self, a: int, b: int, ca, cb) -> np.ndarray:
        m = self.m
        if (a, b) not in self._t:
            kb = m.cards[b]
            key = m.codes[a].astype(np.int64) * kb + m.codes[b]
            if m.cards[a] * kb <= self.DENSE_MAX:
                self._t[(a, b)] = (True, weighted_counts(lambda rows: key[rows], m.f,
                                                         m.cards[a] * kb))
            else:
                uniq, inv = np.unique(key, return_inverse=True)
                inv = inv.reshape(-1)
                self._t[(a, b)] = (False, (uniq, weighted_counts(lambda rows: inv[rows], m.f,
                                                                 uniq.shape[0])))
        dense, t = self._t[(a, b)]
        want = np.asarray(ca, dtype=np.int64) * m.cards[b] + cb
        if dense:
            return t[want]
        uniq, counts = t
        i = np.minimum(np.searchsorted(uniq, want), uniq.shape[0] - 1)
        return np.where(uniq[i] == want, counts[i], 0.0)

    def ratio(self, a: int, b: int, ca, cb) -> np.ndarray:
        """n m_ab / (m_a m_b) at the cells: μ̂ with the (a, b) interaction over μ̂ without it, when
        a and b are in different trees of the forest."""
        m = self.m
        return m.n * self.counts(a, b, ca, cb) / (m.one(a)[ca] * m.one(b)[cb])



def choose(margins: Margins, pi: float, kind: str = "inverse", z: float = Z_RISK, seed: int = 0,
           draws: int | None = None, max_pairs: int | None = None, start=()):
    """(the kept pairs, sorted; the path [(pairs, B̂, T)] of the forward selection), starting from
    main effects plus the forest ``start`` (none: main effects).

    Each step draws the importance sample from the current forest and scores every candidate pair
    (a, b) joining two of its trees on those draws, reweighted: μ̂ with the pair is μ̂ without it
    times n m_ab/(m_a m_b), so Σ_{x empty} g(μ̂'_x) = n E_{x ~ μ̂/n}[I(x empty) g(μ̂'_x)/μ̂_x]. The
    best candidate is then scored on draws of its own (:func:`score`) and kept if that |T| is
    smaller."""
    d = len(margins.codes)
    limit = d - 1 if max_pairs is None else min(int(max_pairs), d - 1)
    dr = Draws(margins, draws or draws_for(margins), seed)
    pairs = _Pairs(margins)
    f = margins.f
    edges: list = sorted(tuple(e) for e in start)
    b, t, _ = score(margins, edges, pi, dr, kind)
    path = [(list(edges), b, t)]
    parent = list(range(d))

    def root(v):
        while parent[v] != v:
            v = parent[v]
        return v
    for a, c in edges:
        parent[root(a)] = root(c)
    while abs(t) > z and len(edges) < limit:
        mu, _ = forest_means(margins.codes, f, margins.cards, edges, margins)
        cells = dr.cells(edges)
        e = dr.empty(cells)
        cells = [c[e] for c in cells]
        mux = means_at(margins, edges, cells)
        scale = margins.n / e.shape[0]
        best = None
        for a in range(d):
            for c in range(a + 1, d):
                if root(a) == root(c):
                    continue
                mo = mu * pairs.ratio(a, c, margins.codes[a], margins.codes[c])
                wo = weights(mo, pi, kind)
                mx = mux * pairs.ratio(a, c, cells[a], cells[c])
                ww = weights(mx, pi, kind)
                wx = ww * mx * (mx / mux)
                bb = -0.5 * (float(np.sum(wo * ((f - mo) ** 2 - f))) + scale * float(np.sum(wx)))
                var = 0.5 * (float(np.sum((wo * mo) ** 2)) + scale * float(np.sum(wx * ww)))
                tt = bb / math.sqrt(var) if var > 0 else 0.0
                if best is None or abs(tt) < abs(best[1]):
                    best = ((a, c), tt)
        if best is None:
            break
        (a, c), _ = best
        new = sorted(edges + [(a, c)])
        bn, tn, _ = score(margins, new, pi, dr, kind)
        if abs(tn) >= abs(t):
            break
        parent[root(a)] = root(c)
        edges, b, t = new, bn, tn
        path.append((list(edges), b, t))
    return edges, path
