"""Log-linear fit of the sample counts by iterative proportional fitting (IPF). SPEC §5.

p̂_x = μ̂_x / n, where μ̂ is the maximum-likelihood fit of the Poisson (equivalently multinomial)
log-linear model with all main effects and all two-way interactions to the sample counts f_x over the
full table of K = Π_v c_v cells (c_v = number of categories of key v; empty cells included). The MLE
reproduces every observed two-way margin; IPF (Deming-Stephan) converges to it from a uniform start:
cycle over the pairs (a, b) and rescale μ so that its (a, b) margin equals the observed one,

    μ_x ← μ_x · m^obs_ab(x_a, x_b) / m^fit_ab(x_a, x_b),      0/0 = 0,

until the largest |m^fit − m^obs| over every pair and margin entry is below ``tol`` (in records).
Cells in a zero observed margin get μ̂ = 0 (the extended MLE, which a Poisson GLM only approaches).
With one key variable the model is the one-way margin itself (μ̂ = f). :func:`fit_table` forms the
table over the categories that the sample has (a category no sample record has only adds cells with
μ̂ = 0 and changes no other cell's fit), so K = Π_v (categories of v in the sample).

Only cells whose every observed two-way margin is positive (the *support*) can have μ̂ > 0: IPF zeroes
the rest in its first cycle. μ starts uniform on the support. When the support is dense, μ is a tensor
of shape (c_1, ..., c_d) in the table's array namespace (numpy or cupy): a margin is a reduction over
the other axes, a rescaling one broadcast multiply. Sample tables are usually sparse (n ≪ K) and the
support then is a small fraction of K; IPF runs on the support cells alone (margins by ``bincount``,
rescaling by a gather), which costs O(|support|) instead of O(K) per step. The Python loop runs over
iterations and pairs only; the observed margins come from the sample cells, so f is never dense.
When K exceeds MAX_CELLS (and the caller's ``max_cells`` allows it) the support itself is found
without a K-cell mask, by :func:`support_by_join` (key by key, O(|support| · c_v)), so key spaces far
beyond a dense table fit (issue 27: 30⁸ ≈ 6.6·10¹¹ cells in the tests).

Convergence: from sparse data the MLE often lies on the boundary (some empty cells in the support
have μ̂ = 0 without a zero margin forcing it); IPF then converges sublinearly (the discrepancy falls
like 1/iterations) and a tight ``tol`` may need thousands of cycles. The fit reports its iterations
and final discrepancy, and ``converged`` says whether the tolerance was reached.
Skinner (2007) section 6; Agresti (2002) section 8.7; Bishop, Fienberg & Holland (1975) ch. 3.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import namespace, scalar
from gpurisk.freq.cellid import mixed_radix_ids

#: default largest K = Π c_v fitted densely (μ alone takes 8 K bytes)
MAX_CELLS = 50_000_000
TOL = 0.01          # largest |fitted − observed| margin entry, in records (see above)
MAX_ITER = 5000
_MIN_INNER = 4096   # numpy: multiply over contiguous tails of at least this many cells
SPARSE_FRACTION = 3  # IPF on the support cells alone when they are at most K / 3 ...
SPARSE_INDEX_BYTES = 1 << 30  # ... and their per-margin int32 indices take at most 1 GiB


@dataclass
class LoglinearFit:
    """μ̂, the margins fitted, and how IPF converged.

    μ̂ is held densely (``dense``, shape ``cards``) or, after a sparse fit, as its values
    ``mu_support`` on the sorted flat ids ``support`` (every other cell has μ̂ = 0).
    """

    dense: object               # xp array of shape cards, or None after a sparse fit
    cards: tuple
    margins: list               # axis tuples, e.g. [(0, 1), (0, 2), ...]
    n: float
    iterations: int
    discrepancy: float          # final max |fitted − observed| over every margin entry
    converged: bool
    tol: float
    support: object = None      # sparse fit: flat ids of the cells that can be positive
    mu_support: object = None   # sparse fit: μ̂ there
    level_maps: list | None = None  # fit_table: table code -> fit code per key (−1: not in sample)

    @property
    def K(self) -> int:
        return math.prod(self.cards)

    @property
    def sparse(self) -> bool:
        return self.dense is None

    @property
    def mu(self):
        """μ̂ as a dense tensor of shape ``cards`` (built on demand after a sparse fit)."""
        if self.dense is not None:
            return self.dense
        xp = namespace(self.mu_support)
        out = xp.zeros(self.K, dtype=xp.float64)
        out[self.support] = self.mu_support
        return out.reshape(self.cards)

    def p_hat(self, flat_ids):
        """p̂ = μ̂ / n of the cells with these C-order flat indices (= mixed-radix cell ids)."""
        if self.dense is not None:
            return self.dense.reshape(-1)[flat_ids] / self.n
        from gpurisk.freq.partial import values_at
        return values_at(self.support, self.mu_support, flat_ids) / self.n


    def p_hat_codes(self, codes):
        """p̂ of cells given by their table codes (one array per key); 0 where a category is not in
        the fit (``level_maps``), i.e. no sample record has it."""
        maps = self.level_maps or [None] * len(self.cards)
        xp = namespace(codes[0])
        valid = xp.ones(codes[0].shape[0], dtype=bool)
        fit_codes = []
        for m, c in zip(maps, codes):
            cc = c.astype(xp.int64) if m is None else m[c]
            valid &= cc >= 0
            fit_codes.append(xp.maximum(cc, 0))
        flat = mixed_radix_ids(fit_codes, self.cards, xp, dtype=xp.int64)
        return xp.where(valid, self.p_hat(flat), 0.0)


def two_way_margins(d: int) -> list[tuple[int, ...]]:
    """All pairs of axes; the one-way margin when there is a single key."""
    return [(0,)] if d == 1 else list(itertools.combinations(range(d), 2))


def check_cells(cards, max_cells: float = MAX_CELLS, keys=None) -> int:
    """K = Π cards, or BadInput naming K and the limit (``max_cells=None``: no limit)."""
    K = math.prod(int(c) for c in cards)
    if max_cells is not None and K > float(max_cells):
        shape = " × ".join(str(int(c)) + (f" ({k})" if keys else "") for c, k in
                           zip(cards, keys if keys else cards))
        raise BadInput(f"the log-linear fit needs a dense table of K = {shape} = {K:,} cells, above the "
                       f"limit max_cells = {int(float(max_cells)):,} ({8 * K / 2**20:,.0f} MiB for μ̂); "
                       "use fewer or coarser key variables, or raise max_cells")
    return K


def observed_margins(xp, codes, f, cards, margins) -> list:
    """Each margin of the counts f over the cells whose per-key codes are ``codes``."""
    out = []
    w = f.astype(xp.float64)
    for axes in margins:
        flat = mixed_radix_ids([codes[a] for a in axes], [cards[a] for a in axes], xp, dtype=xp.int64)
        size = math.prod(int(cards[a]) for a in axes)
        m = xp.bincount(flat, weights=w, minlength=size)
        out.append(m.reshape(tuple(int(cards[a]) for a in axes)))
    return out


def _margin(xp, mu, axes):
    d = mu.ndim
    if xp is np:
        return np.einsum(mu, list(range(d)), list(axes))  # one pass, no temporaries
    return mu.sum(axis=tuple(i for i in range(d) if i not in axes))


def _tail_split(cards) -> tuple[int, int]:
    """(s, inner): the axes s.. are merged into one contiguous tail of at least _MIN_INNER cells."""
    s, inner = len(cards), 1
    while s > 0 and inner < _MIN_INNER:
        s -= 1
        inner *= int(cards[s])
    return s, inner


def _rescale(xp, mu, ratio, axes, split):
    """μ ← μ · ratio broadcast over the other axes (in place)."""
    cards = mu.shape
    d = len(cards)
    fshape = [1] * d
    for a in axes:
        fshape[a] = cards[a]
    factor = ratio.reshape(fshape)
    s, inner = split
    if xp is not np or s == 0 or inner == 1:
        xp.multiply(mu, factor, out=mu)
        return
    # numpy's broadcast multiply is slow when the broadcast axis is short and innermost: expand the
    # factor over the contiguous tail (a tile of at most c_a·c_b·inner cells) so the inner loop is long.
    head = fshape[:s]
    tile = np.broadcast_to(factor, head + list(cards[s:])).reshape(head + [inner])
    view = mu.reshape(list(cards[:s]) + [inner])
    np.multiply(view, tile, out=view)


def support_of(xp, obs, cards, margins):
    """Flat ids (sorted) of the cells whose every observed margin is positive: μ̂ = 0 elsewhere."""
    d = len(cards)
    mask = xp.ones(cards, dtype=bool)
    for axes, m in zip(margins, obs):
        shape = [1] * d
        for a in axes:
            shape[a] = cards[a]
        mask &= (m > 0).reshape(shape)
    return xp.flatnonzero(mask.reshape(-1))


#: the most support cells :func:`support_by_join` forms (each costs about 8 bytes per margin)
MAX_SUPPORT = 50_000_000


def support_by_join(xp, obs, cards, margins, limit: int = MAX_SUPPORT):
    """As :func:`support_of` without a K-cell array: the cells whose every observed two-way margin
    is positive, built key by key. The cells over keys 0..v−1 whose margins among those keys are
    positive are extended by each category of key v and kept where every margin (a, v), a < v, is
    positive; so the work is O(|support| · c_v) per key, whatever K is. Needs every margin to be a
    pair or a single key; BadInput when more than ``limit`` cells would be formed."""
    d = len(cards)
    if math.prod(cards) >= 2**63:
        raise BadInput(f"the log-linear table has K = {math.prod(cards):.3g} cells, beyond 64-bit "
                       "cell ids; use fewer or coarser key variables")
    pos = {tuple(a): (m > 0) for a, m in zip(margins, obs)}
    first = pos.get((0,))
    part = [xp.flatnonzero(first) if first is not None else xp.arange(cards[0])]
    for v in range(1, d):
        rows = int(part[0].shape[0])
        if rows * cards[v] > limit:
            raise BadInput(f"the log-linear fit's support would exceed {limit:,} cells at key {v + 1} "
                           f"of {d}; use fewer or coarser key variables")
        idx = xp.repeat(xp.arange(rows), cards[v])
        new = xp.tile(xp.arange(cards[v]), rows)
        keep = xp.ones(new.shape[0], dtype=bool)
        if (v,) in pos:
            keep &= pos[(v,)][new]
        for a in range(v):
            if (a, v) in pos:
                keep &= pos[(a, v)][part[a][idx], new]
        idx, new = idx[keep], new[keep]
        part = [c[idx] for c in part] + [new]
    if not part[0].shape[0]:
        return xp.zeros(0, dtype=xp.int64)
    return xp.sort(mixed_radix_ids(part, cards, xp, dtype=xp.int64))


def fit_two_way(codes, f, cards, xp=np, tol: float = TOL, max_iter: int = MAX_ITER,
                max_cells: float = MAX_CELLS, margins=None, sparse: bool | None = None,
                trace: list | None = None) -> LoglinearFit:
    """IPF fit of the all-two-way-interaction model to counts ``f`` of cells with codes ``codes``.

    ``codes[v][j]`` is the category code of key v in cell j (cells with f_j = 0 may be included or
    not); ``cards[v]`` the number of categories of key v. ``margins`` overrides the fitted margins
    (a list of axis tuples; default: every pair). IPF runs on the dense tensor, or, when the cells
    with every observed margin positive (the only cells where μ̂ can be positive) are at most
    1/3 of K (``sparse=None``; force with True/False), on those cells alone. ``trace``, a list,
    receives the largest margin discrepancy seen in each cycle.
    """
    cards = tuple(int(c) for c in cards)
    check_cells(cards, max_cells)
    K = math.prod(cards)
    if not tol > 0:
        raise BadInput(f"IPF tolerance must be > 0, got {tol!r}")
    if int(max_iter) < 1:
        raise BadInput(f"IPF max_iter must be >= 1, got {max_iter!r}")
    d = len(cards)
    margins = two_way_margins(d) if margins is None else [tuple(m) for m in margins]
    obs = observed_margins(xp, codes, f, cards, margins)
    n = float(scalar(f.sum()))
    if K > MAX_CELLS and all(len(a) <= 2 for a in margins):   # beyond a dense table: no K-cell mask
        support = support_by_join(xp, obs, cards, margins)
        sparse = True
    else:
        support = support_of(xp, obs, cards, margins)
    if sparse is None:
        sparse = (support.size * SPARSE_FRACTION <= K
                  and support.size * len(margins) * 4 <= SPARSE_INDEX_BYTES)
    if sparse:
        mu_s, it, worst = _ipf_sparse(xp, support, obs, cards, margins, n, tol, max_iter, trace)
        fit = LoglinearFit(None, cards, margins, n, it, worst, False, float(tol), support, mu_s)
    else:
        mu = xp.zeros(K, dtype=xp.float64)
        mu[support] = n / max(int(support.size), 1)
        mu = mu.reshape(cards)
        it, worst = _ipf_dense(xp, mu, obs, margins, tol, max_iter, trace)
        fit = LoglinearFit(mu, cards, margins, n, it, worst, False, float(tol))
    fit.converged = fit.discrepancy < tol
    return fit


_TINY = float(np.finfo(np.float64).tiny)


def _ratio(xp, m_obs, m_fit):
    """m_obs / m_fit with 0/0 = 0. From a start positive exactly on the support, m_fit = 0 only
    where no support cell lies, and there m_obs = 0 too."""
    return m_obs / xp.maximum(m_fit, _TINY)


def _ipf_dense(xp, mu, obs, margins, tol, max_iter, trace):
    """Cycles of IPF on the dense tensor ``mu`` (in place): (iterations, final discrepancy)."""
    split = _tail_split(mu.shape)
    it = 0
    for it in range(1, int(max_iter) + 1):
        worst = 0.0
        for axes, m_obs in zip(margins, obs):
            m_fit = _margin(xp, mu, axes)
            worst = max(worst, float(scalar(xp.abs(m_fit - m_obs).max())))
            _rescale(xp, mu, _ratio(xp, m_obs, m_fit), axes, split)
        if trace is not None:
            trace.append(worst)
        if worst < tol:
            break
    disc = max(float(scalar(xp.abs(_margin(xp, mu, axes) - m_obs).max())) for axes, m_obs in zip(margins, obs))
    return it, disc


def _ipf_sparse(xp, support, obs, cards, margins, n, tol, max_iter, trace):
    """IPF on the support cells only: margins by ``bincount``, rescaling by a gather."""
    from gpurisk.freq.cellid import decode_radix
    codes = decode_radix(support, cards)
    idx = []
    for axes in margins:
        flat = xp.zeros(support.size, dtype=xp.int64)
        for a in axes:
            flat = flat * cards[a] + codes[a]
        idx.append(flat.astype(xp.int32) if math.prod(cards[a] for a in axes) < 2**31 else flat)
    del codes
    obs_flat = [m.reshape(-1) for m in obs]
    mu = xp.full(support.size, n / max(int(support.size), 1), dtype=xp.float64)

    sizes = [m.size for m in obs_flat]

    def margin(j):
        return xp.bincount(idx[j], weights=mu, minlength=sizes[j])

    it = 0
    for it in range(1, int(max_iter) + 1):
        worst = 0.0
        for j, m_obs in enumerate(obs_flat):
            m_fit = margin(j)
            worst = max(worst, float(scalar(xp.abs(m_fit - m_obs).max())))
            mu *= (m_obs / xp.maximum(m_fit, _TINY))[idx[j]]
        if trace is not None:
            trace.append(worst)
        if worst < tol:
            break
    disc = max(float(scalar(xp.abs(margin(j) - m_obs).max())) for j, m_obs in enumerate(obs_flat))
    return mu, it, disc


def sample_levels(table):
    """Per key, the categories that some sample record has: (code maps, their numbers).

    ``maps[v][c]`` is the position of category c of key v among the sample's categories, or −1. The
    log-linear table is formed over these: a category no sample record has gets μ̂ = 0 in every cell
    (its margins are zero) and changes no other cell's fit, so leaving it out changes no p̂ and keeps
    K free of empty categories (population-only ones, or gaps in an integer range).
    """
    xp = table.xp
    sampled = table.f > 0
    maps, cards = [], []
    for v, codes in enumerate(table.cell_codes()):
        present = xp.zeros(int(table.cards[v]), dtype=bool)
        present[codes[sampled]] = True
        maps.append(xp.where(present, xp.cumsum(present) - 1, -1).astype(xp.int64))
        cards.append(int(scalar(present.sum())))
    return maps, tuple(cards)


def fit_table(table, tol: float = TOL, max_iter: int = MAX_ITER, max_cells: float = MAX_CELLS,
              margins=None) -> LoglinearFit:
    """:func:`fit_two_way` on a :class:`~gpurisk.freq.table.FreqTable`'s sample counts, over the
    categories the sample has (:func:`sample_levels`). ``fit.level_maps`` maps the table's codes to
    the fit's; :meth:`LoglinearFit.p_hat_codes` gives p̂ from the table's codes. ``margins``: as
    in :func:`fit_two_way` (default every pair; ``[(0,), (1,), ...]`` the independence model)."""
    maps, cards = sample_levels(table)
    check_cells(cards, max_cells, table.keys)
    sampled = table.f > 0
    codes = [m[c[sampled]] for m, c in zip(maps, table.cell_codes())]
    fit = fit_two_way(codes, table.f[sampled], cards, xp=table.xp, tol=tol, max_iter=max_iter,
                      max_cells=max_cells, margins=margins)
    fit.level_maps = maps
    return fit
