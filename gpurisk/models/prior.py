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
    from gpurisk.models.eb_forest import Arc
    from gpurisk.models.root_prior import Root
    margins = [c if isinstance(c, tuple) else (c, 1, True) for c in counts]

    def parts(m):
        if isinstance(m, Arc):     # its three counts, and the neighbours' two where it has them
            return m[:3] if m.near_pair is None else (*m[:3], m.near_pair, m.near_parent)
        return m[:3] if len(m) == 4 else m[:1]
    # arrays, or forest_counts' counts gathered when sliced (gpurisk.models.forest.AtRows)
    arrays = [c if hasattr(c, "shape") else np.asarray(c) for m in margins for c in parts(m)]
    n1 = float(n - 1)

    def part(*cs):
        mu = np.full(np.shape(cs[0]), n1)
        rv = np.full(np.shape(cs[0]), 1.0 + float(alpha))
        i = 0
        for m in margins:
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
    return by_chunks(part, 2, *arrays)


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
    gammas = [(float(r.shape), float(r.rate), float(a), float(b)) for r, a, b in moves]

    def part(mu, alpha, *cs):
        mu, rv = np.asarray(mu, dtype=np.float64), 1.0 + np.asarray(alpha, dtype=np.float64)
        for (a0, b0, a1, b1), c in zip(gammas, cs):
            c = np.asarray(c, dtype=np.float64) - 1.0
            s0, s1 = c + a0, c + a1
            mu = mu * (s1 / s0) * ((b0 + 1.0) / (b1 + 1.0))
            rv = rv * ((1.0 + 1.0 / s1) / (1.0 + 1.0 / s0))
        return (mu, rv - 1.0) if then is None else then(mu, rv - 1.0)
    how = sums_by_chunks if sums and then is not None else by_chunks
    return how(part, n_then, prior[0], prior[1], *(r.counts for r, _, _ in moves))


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
        for r, (root, cs) in enumerate(zip(roots, coefs)):
            ids = root.counts.at(root.counts.rows[start:stop])
            at = [c[ids] for c in cs]
            for k, w in enumerate(got):
                # numpy's own sum, not a BLAS dot: OpenBLAS threads long dots (a scan run with
                # one thread would use more) and its kernels' order varies by machine
                out[start // terms.CHUNK, r, k] = float(np.sum(w * at[k % len(at)]))
    terms.each_slice(one, starts)
    return out.sum(axis=0)


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
    :func:`by_chunks`); rv_g is computed per category, not per unique."""
    from gpurisk.models.eb_forest import Arc
    from gpurisk.models.root_prior import Root
    n1 = float(n - 1)
    d = np.asarray(slope, dtype=np.float64)
    margins = []
    for m in counts:
        if isinstance(m, Arc):
            margins.append((m.pair, m))
        elif isinstance(m, Root):
            margins.append((m.counts, m))
        elif isinstance(m, tuple) and len(m) == 3 and m[2] and hasattr(m[0], "at"):
            margins.append((m[0], None))

    def one(margin) -> float:
        at, arc = margin
        table = np.asarray(at.counts, dtype=np.float64)
        size, groups = int(at.rows.shape[0]), int(table.shape[0])
        first, second = np.zeros(groups), np.zeros(groups)
        rep = np.full(groups, -1, dtype=np.int64) if isinstance(arc, Arc) else None
        # slices long enough that each slice's two bincounts of the categories cost little
        step = max(SHARED_CHUNK, 4 * groups)
        for start in range(0, size, step):
            rows = at.rows[start:start + step]
            ids = at.at(rows)
            ds = d[start:start + step]          # d² a slice at a time: no per-unique d² array
            first += np.bincount(ids, weights=ds, minlength=groups)
            second += np.bincount(ids, weights=ds * ds, minlength=groups)
            if rep is not None:
                rep[ids] = rows           # a cell of each category (all of one give the same)
        if arc is None or isinstance(arc, Root):
            # the category's share: 1/s, s = c − 1 + ½ (Jeffreys') or c − 1 + a (its gamma)
            rv = (1.0 / np.maximum(table - 1.0 + a0, a0) if arc is None else
                  1.0 / np.maximum(table - 1.0 + arc.shape, arc.shape))
            return float(np.sum(rv * (first * first - second)))
        held = np.flatnonzero(rep >= 0)
        cells = rep[held]
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
    from gpurisk.freq.schedule import usable_cpus
    threads = min(terms.TERMS_THREADS, usable_cpus(), len(margins))
    # the margins side by side
    if threads > 1 and d.shape[0] >= terms.THREADED_CHUNKS * terms.CHUNK:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(threads, thread_name_prefix="gpurisk-shared") as pool:
            parts = list(pool.map(one, margins))
    else:
        parts = [one(m) for m in margins]
    return max(sum(parts), 0.0)


#: :func:`shared_variance` looks the uniques' categories up this many at a time (at least)
SHARED_CHUNK = 1 << 16
