"""Each sample unique's prior from the other n − 1 records (option ``prior=loo`` of tau1_ll and
matches_ll), and the covariance the uniques' terms share through the margins.

Per fitted margin v, s_v = c_v − 1 + ½ (c_v the sample count of the unique's category, its own
record included), μ̃ = (n − 1) Π_v (s_v/(n − 1))^{e_v} and α̃ = (1 + α̂) Π_v (1 + 1/s_v) − 1; a
smoothed pair, or an arc of the rooted form, enters as its Beta share of the others
(:func:`loo_prior`). The uniques of one category of a margin share its unknown share, so their sum
has, besides each term's own variance, Σ_margins Σ_categories rv_g [(Σ_g d_j)² − Σ_g d_j²], d_j
each term's slope in ln μ and rv_g the share's relative variance (:func:`shared_variance`, the
delta method). The method as a whole: :mod:`gpurisk.measures._ll_poisson`."""
from __future__ import annotations

import math

import numpy as np

from gpurisk.models import terms
from gpurisk.models.neighbours import shrunk
from gpurisk.models.slice_memo import rows_at
from gpurisk.models.terms import by_chunks, sums_by_chunks

#: the leave-one-out prior's pseudo-count per fitted margin (Jeffreys' prior for a Poisson mean)
LOO_PSEUDO = 0.5


def loo_prior(n: float, counts, alpha, a0: float = LOO_PSEUDO):
    """(μ̃, α̃): each sample unique's prior mean (sample scale) and relative variance, from the other
    n − 1 records (option ``prior=loo``, module docstring). ``counts``: per fitted margin, the sample
    count of each unique's category of it (its own record included); ``alpha``: the cell effect's
    variance α̂. μ̃ = (n − 1) Π_v s_v/(n − 1), α̃ = (1 + α̂) Π_v (1 + 1/s_v) − 1, s_v = c_v − 1 + a0.
    A margin is an array (exponent 1, counted), a tuple (counts, exponent, counted), or a smoothed
    pair (c_ab, c_a, c_b, α_ab) of :mod:`gpurisk.models.eb_forest`, whose s_ab = c_ab − 1 +
    α_ab q̃_a q̃_b (q̃_v = (c_v − 1 + a0)/(n − 1)) enters as s_ab/(n − 1 + α_ab), counted, or a
    child given its parent (:class:`gpurisk.models.eb_forest.Arc`: c_pc, c_p, c_c, β), whose share
    is Beta(s, S − s), s = c_pc − 1 + β q̃_c, S = c_p − 1 + β: it enters as s/S with relative
    variance (S − s)/(s (S + 1)) (q̃_c the neighbours' target where the arc has one:
    :func:`gpurisk.models.neighbours.shrunk`), or a root key under its fitted gamma
    (:class:`gpurisk.models.root_prior.Root`: shape a, rate b), s = c − 1 + a entering as
    s/((b + 1)(n − 1)), counted. Computed on slices of CHUNK uniques (:func:`by_chunks`)."""
    p = LooPrior(n, counts, alpha, a0)
    return by_chunks(p.part, 2, *p.arrays)


class LooPrior:
    """:func:`loo_prior`'s (μ̃, α̃) at any part of the sample uniques, made when asked: ``at(where)``
    (a slice, or positions) gives them for those uniques, each element the number
    :func:`loo_prior` gives it (its formula element by element, on those uniques' counts); ``size``
    the number of uniques. What a pass over the uniques reads instead of a kept prior
    (:mod:`gpurisk.models.unique_sums`)."""

    def __init__(self, n: float, counts, alpha, a0: float = LOO_PSEUDO):
        self.margins = [c if isinstance(c, tuple) else (c, 1, True) for c in counts]
        # arrays, or forest_counts' counts gathered when sliced (gpurisk.models.forest.AtRows)
        self.arrays = [c if hasattr(c, "shape") else np.asarray(c)
                       for m in self.margins for c in _parts(m)]
        self.n1, self.alpha, self.a0 = float(n - 1), float(alpha), a0
        self.size = int(np.shape(self.arrays[0])[0]) if self.arrays else 0

    def at(self, where):
        """(μ̃, α̃) of the uniques ``where`` (a slice or positions)."""
        return self.part(*(a[where] for a in self.arrays))

    def part(self, *cs):
        """(μ̃, α̃) from the uniques' counts ``cs`` (:attr:`arrays`, at the same uniques)."""
        from gpurisk.models.eb_forest import Arc
        from gpurisk.models.root_prior import Root
        n1, a0 = self.n1, self.a0
        mu = np.full(np.shape(cs[0]), n1)
        rv = np.full(np.shape(cs[0]), 1.0 + self.alpha)
        i = 0
        for m in self.margins:
            if isinstance(m, Root):  # a root key's category under its fitted gamma (root_prior)
                s = np.asarray(cs[i], dtype=np.float64) - 1.0 + m.shape
                i += 1
                mu *= s / ((m.rate + 1.0) * n1)
                rv *= 1.0 + 1.0 / s
                continue
            if isinstance(m, Arc):   # a child given its parent: Beta(s, S − s) of the others
                cpc, cp, cc = (np.asarray(c, dtype=np.float64) for c in cs[i:i + 3])
                i += 3
                if m.near_pair is None:
                    s = cpc - 1.0 + m.beta * (cc - 1.0 + a0) / n1
                else:                           # the parent's neighbours' shares (arc_target)
                    s = cpc - 1.0 + m.beta * shrunk(cs[i], cs[i + 1], (cc - 1.0 + a0) / n1)
                    i += 2
                big = cp - 1.0 + m.beta
                mu *= s / big
                rv *= 1.0 + (big - s) / (s * (big + 1.0))
                continue
            if len(m) == 4:          # a smoothed pair: its counts, its keys' counts, α_ab
                cab, ca, cb = (np.asarray(c, dtype=np.float64) for c in cs[i:i + 3])
                i += 3
                al = m[3]
                s = cab - 1.0 + al * ((ca - 1.0 + a0) / n1) * ((cb - 1.0 + a0) / n1)
                mu *= s / (n1 + al)
                rv *= 1.0 + 1.0 / s
                continue
            s = np.asarray(cs[i], dtype=np.float64) - 1.0 + a0
            i += 1
            mu *= (s / n1) ** m[1]
            if m[2]:
                rv *= 1.0 + 1.0 / s
        return mu, rv - 1.0


def _parts(m):
    """A margin's per-unique arrays as :func:`loo_prior` reads them: an arc's three counts and the
    neighbours' two where it has them, a smoothed pair's three, else its counts."""
    from gpurisk.models.eb_forest import Arc
    if isinstance(m, Arc):
        return m[:3] if m.near_pair is None else (*m[:3], m.near_pair, m.near_parent)
    return m[:3] if len(m) == 4 else m[:1]


def roots_moved(prior, moves, then=None, n_then: int = 2, sums: bool = False) -> tuple:
    """:func:`loo_prior`'s (μ̃, α̃) with root keys' gammas (:class:`gpurisk.models.root_prior.Root`
    of ``prior``'s counts) at others: ``moves`` a sequence of (root, shape, rate), each root's factor
    s/((b + 1)(n − 1)), s = c − 1 + a, and its 1 + 1/s taken out and put back at its new gamma, the
    other factors as they are, in one pass (equal to rebuilding the prior up to rounding): a
    shape's profile ends, or every root at (½, 0), the prior ``root_prior=jeffreys`` builds
    (s = c − 1 + ½, the share s/(n − 1)). ``then``: a function of (μ̃, α̃) returning a tuple of
    ``n_then`` arrays, applied slice by slice (the terms at that prior), whose arrays are returned
    in place of the prior: no per-unique prior is kept; with ``sums``, only their sums
    (:func:`gpurisk.models.terms.sums_by_chunks`): no per-unique array is kept at all."""
    move = Moved(moves)

    def part(mu, alpha, *cs):
        got = move(mu, alpha, cs)
        return got if then is None else then(*got)
    how = sums_by_chunks if sums and then is not None else by_chunks
    return how(part, n_then, prior[0], prior[1], *(r.counts for r, _, _ in moves))


class Moved:
    """:func:`roots_moved`'s move of some uniques' (μ̃, α̃): ``Moved(moves)(μ̃, α̃, cs)``, ``cs`` the
    moved roots' counts at those uniques (each ``moves`` root's ``counts``, sliced alike)."""

    def __init__(self, moves):
        self.roots = [r for r, _, _ in moves]
        self.gammas = [(float(r.shape), float(r.rate), float(a), float(b)) for r, a, b in moves]
        self._made = None

    def __call__(self, mu, alpha, cs):
        mu, rv = np.asarray(mu, dtype=np.float64), 1.0 + np.asarray(alpha, dtype=np.float64)
        for (a0, b0, a1, b1), c in zip(self.gammas, cs):
            c = np.asarray(c, dtype=np.float64) - 1.0
            s0, s1 = c + a0, c + a1
            mu = mu * (s1 / s0) * ((b0 + 1.0) / (b1 + 1.0))
            rv = rv * ((1.0 + 1.0 / s1) / (1.0 + 1.0 / s0))
        return mu, rv - 1.0

    def at(self, mu, alpha, start: int, stop: int):
        """The move of the uniques start..stop (``mu``, ``alpha`` their prior), each root's two
        factors s1/s0 and (1 + 1/s1)/(1 + 1/s0) formed once per category of its key and looked
        up at the uniques' categories (each element the number :meth:`__call__` gives it)."""
        mu, rv = np.asarray(mu, dtype=np.float64), 1.0 + np.asarray(alpha, dtype=np.float64)
        for (ratio, spread, scale), r in zip(self._factors(), self.roots):
            ids = r.counts.at(rows_at(r.counts.rows, slice(start, stop)))
            mu = mu * ratio[ids] * scale
            rv = rv * spread[ids]
        return mu, rv - 1.0

    def _factors(self) -> list:
        """Per root: (s1/s0, (1 + 1/s1)/(1 + 1/s0) per category of its key, (b0 + 1)/(b1 + 1))."""
        if self._made is None:
            made = []
            for (a0, b0, a1, b1), r in zip(self.gammas, self.roots):
                c = np.asarray(r.counts.counts, dtype=np.float64) - 1.0
                s0, s1 = c + a0, c + a1
                with np.errstate(divide="ignore", invalid="ignore"):   # unseen categories
                    made.append((s1 / s0, (1.0 + 1.0 / s1) / (1.0 + 1.0 / s0),
                                 (b0 + 1.0) / (b1 + 1.0)))
            self._made = made
        return self._made


def root_moves(root, ends) -> list:
    """Per profile end (a1, b1) of ``root``'s gamma, per category of its key: how far the end moves a
    unique's prior (:func:`roots_moved`), as (Δ ln μ̃, Δ ln(1 + α̃)): ln(s1/s0) + ln((b0 + 1)/(b1 + 1))
    and ln((1 + 1/s1)/(1 + 1/s0)), s = c − 1 + a (c the category's sample count; 0 for a category
    the sample lacks, which holds no unique)."""
    c = np.asarray(root.counts.counts, dtype=np.float64)
    c = np.where(c >= 1.0, c - 1.0, 0.0)
    a0, b0 = float(root.shape), float(root.rate)
    s0 = c + a0
    return [(np.log((c + a1) / s0) + math.log((b0 + 1.0) / (b1 + 1.0)),
             np.log((1.0 + 1.0 / (c + a1)) / (1.0 + 1.0 / s0))) for a1, b1 in ends]


def category_dots(prior, roots, coefs, fn, n_out: int):
    """Per root key of ``roots`` (:class:`gpurisk.models.root_prior.Root`), the ``n_out`` sums over
    the sample uniques j of w_k(j) · coefs[r][k mod m][g_r(j)]: w_k the k-th per-unique array
    ``fn(μ̃, α̃)`` gives at ``prior``, coefs[r] m per-category arrays of root r, g_r(j) the unique's
    category of it; an array (len(roots), n_out). That is Σ_g coef_g Σ_{j in g} w_k(j), each
    category's coefficient read at its uniques (a gather, cheaper than summing per category). One
    pass over the uniques a slice at a time, the slices shared among threads as :func:`by_chunks`
    shares them; each slice's sums are kept apart and added in the slices' order, so the numbers do
    not depend on how many threads there are. No per-unique array is kept."""
    size = int(np.shape(prior[0])[0])
    starts = range(0, size, terms.CHUNK)
    out = np.zeros((len(starts), len(roots), n_out))

    def one(start):
        stop = min(start + terms.CHUNK, size)
        got = fn(prior[0][start:stop], prior[1][start:stop])
        out[start // terms.CHUNK] = np.reshape(category_row(roots, coefs, got, start, stop),
                                               (len(roots), n_out))
    terms.each_slice(one, starts)
    return out.sum(axis=0)


def category_row(roots, coefs, got, start: int, stop: int) -> list:
    """:func:`category_dots`' sums over the uniques start..stop, root by root: Σ_j w_k(j) ·
    coefs[r][k mod m][g_r(j)] for each array w_k of ``got`` (those uniques' values)."""
    row = []
    for root, cs in zip(roots, coefs):
        ids = root.counts.at(rows_at(root.counts.rows, slice(start, stop)))
        at = [c[ids] for c in cs]
        # numpy's own sum, not a BLAS dot: OpenBLAS threads long dots (a scan run with one
        # thread would use more) and its kernels' order varies by machine
        row += [float(np.sum(w * at[k % len(at)])) for k, w in enumerate(got)]
    return row


def shared_variance(n: float, counts, slope, a0: float = LOO_PSEUDO) -> float:
    """The covariance the sample uniques' terms share through the fitted margins: uniques in one
    category of a margin share its unknown share, whose relative variance the leave-one-out prior
    gives each unique alone (:func:`loo_prior`: 1/s, or the arc's (S − s)/(s (S + 1))), so the
    variance of their sum has, besides each term's own, the cross terms

        Σ_margins Σ_categories rv_g [(Σ_{j in g} d_j)² − Σ_{j in g} d_j²],   d_j = ∂t_j/∂ln μ_j

    (the delta method over the margins' shares, one margin at a time). ``slope``: d_j per unique;
    ``counts``: :func:`loo_prior`'s. Margins whose uncertainty the prior leaves out add nothing.
    Each margin's two sums per category are taken in one pass over the uniques (their categories
    looked up a slice at a time; the margins side by side on the CPUs this process may use, as
    :func:`by_chunks`); rv_g is computed per category, not per unique (:class:`SharedSums`, which
    also takes them a slice at a time from slopes never kept whole)."""
    d = np.asarray(slope, dtype=np.float64)
    sums = SharedSums(n, counts, a0)

    def one(k) -> None:
        # slices long enough that each slice's two bincounts of the categories cost little
        step = max(SHARED_CHUNK, 4 * sums.groups(k))
        for start in range(0, d.shape[0], step):
            sums.add(k, *sums.ids(k, start, start + step), d[start:start + step])
    from gpurisk.freq.schedule import usable_cpus
    threads = min(terms.TERMS_THREADS, usable_cpus(), len(sums))
    # the margins side by side
    if threads > 1 and d.shape[0] >= terms.THREADED_CHUNKS * terms.CHUNK:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads, thread_name_prefix="gpurisk-shared") as pool:
            list(pool.map(one, range(len(sums))))
    else:
        for k in range(len(sums)):
            one(k)
    return sums.total()


class SharedSums:
    """:func:`shared_variance`'s sums, added a slice of uniques at a time: per margin whose share's
    uncertainty the prior carries (an arc's pair, a root key's categories, a lone key's counted
    categories), Σ_{j in g} d_j and Σ_{j in g} d_j² per category g (and, for an arc, a cell of each
    pair, where its share's relative variance is read). :meth:`ids` looks a slice's categories up
    (what two measures' sums over the same margins share), :meth:`add` adds a slice's slopes,
    :meth:`total` gives the cross terms. Each margin's sums may be added from one thread at a
    time; different margins from different threads."""

    def __init__(self, n: float, counts, a0: float = LOO_PSEUDO):
        from gpurisk.models.eb_forest import Arc
        from gpurisk.models.root_prior import Root
        self.n1, self.a0 = float(n - 1), a0
        self.margins = []
        for m in counts:
            if isinstance(m, Arc):
                self.margins.append((m.pair, m))
            elif isinstance(m, Root):
                self.margins.append((m.counts, m))
            elif isinstance(m, tuple) and len(m) == 3 and m[2] and hasattr(m[0], "at"):
                self.margins.append((m[0], None))
        sizes = [int(np.shape(at.counts)[0]) for at, _ in self.margins]
        self.first = [np.zeros(g) for g in sizes]
        self.second = [np.zeros(g) for g in sizes]
        self.rep = [np.full(g, -1, dtype=np.int64) if isinstance(arc, Arc) else None
                    for g, (_, arc) in zip(sizes, self.margins)]

    def __len__(self) -> int:
        return len(self.margins)

    def groups(self, k: int) -> int:
        """How many categories margin k has."""
        return int(self.first[k].shape[0])

    def ids(self, k: int, start: int, stop: int):
        """(the categories of margin k of the uniques start..stop, those uniques' cells)."""
        at = self.margins[k][0]
        rows = at.rows[start:stop]
        return at.at(rows), rows

    def add(self, k: int, ids, rows, d) -> None:
        """Adds the slopes ``d`` of the uniques whose categories of margin k are ``ids`` (at cells
        ``rows``: :meth:`ids`)."""
        groups = self.groups(k)
        self.first[k] += np.bincount(ids, weights=d, minlength=groups)
        self.second[k] += np.bincount(ids, weights=d * d, minlength=groups)
        if self.rep[k] is not None:
            self.rep[k][ids] = rows       # a cell of each category (all of one give the same)

    def total(self) -> float:
        """The cross terms over every margin (at least 0: the module docstring's sum)."""
        return max(sum(self._one(k) for k in range(len(self))), 0.0)

    def _one(self, k: int) -> float:
        from gpurisk.models.root_prior import Root
        at, arc = self.margins[k]
        first, second, a0, n1 = self.first[k], self.second[k], self.a0, self.n1
        table = np.asarray(at.counts, dtype=np.float64)
        if arc is None or isinstance(arc, Root):
            # the category's share: 1/s, s = c − 1 + ½ (Jeffreys') or c − 1 + a (its gamma)
            rv = (1.0 / np.maximum(table - 1.0 + a0, a0) if arc is None else
                  1.0 / np.maximum(table - 1.0 + arc.shape, arc.shape))
            return float(np.sum(rv * (first * first - second)))
        held = np.flatnonzero(self.rep[k] >= 0)
        cells = self.rep[k][held]
        cp = np.asarray(arc.parent.counts, dtype=np.float64)[arc.parent.at(cells)]
        cc = np.asarray(arc.child.counts, dtype=np.float64)[arc.child.at(cells)]
        if arc.near_pair is None:
            sh = table[held] - 1.0 + arc.beta * (cc - 1.0 + a0) / n1
        else:                           # the parent's neighbours' shares (arc_target)
            sh = table[held] - 1.0 + arc.beta * shrunk(
                arc.near_pair.counts[arc.near_pair.at(cells)],
                arc.near_parent.counts[arc.near_parent.at(cells)], (cc - 1.0 + a0) / n1)
        big = cp - 1.0 + arc.beta
        rv = (big - sh) / (sh * (big + 1.0))
        return float(np.sum(rv * (first[held] ** 2 - second[held])))


#: :func:`shared_variance` looks the uniques' categories up this many at a time (at least)
SHARED_CHUNK = 1 << 16
