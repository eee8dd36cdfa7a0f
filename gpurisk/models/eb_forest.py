"""Main effects plus a forest of smoothed two-way interactions, each chosen by its evidence (issue 43).

The held-out tests of :mod:`gpurisk.models.forest` keep a pair or drop it whole; a pair with many
categories and a strong association can fail them in a sparse sample, and the estimate then misses
(issue 43: a pair with Cramér's V 0.50 kept in 3 of 100 samples). Here every pair's table is instead
shrunk towards independence by as much as the sample supports.

Prior (empirical Bayes): the (a, b) table's shares p_ab ~ Dirichlet(α_ab q_a q_b), centred on
independence, q_v = n_v/n the sample's one-way shares. The Dirichlet-multinomial likelihood of the
sample's (a, b) counts n_ab (Good 1965) is

    ln L(α) = ln Γ(α) − ln Γ(n + α) + Σ_{n_ab > 0} [ln Γ(n_ab + α q_a q_b) − ln Γ(α q_a q_b)],

whose limit α → ∞ is independence, Σ n_ab ln(q_a q_b). The pair's evidence is the log Bayes factor
B_ab = max_α ln L(α) − Σ n_ab ln(q_a q_b) ≥ 0 (α at its type-II maximum likelihood).

Choice (Kruskal's algorithm, as :mod:`gpurisk.models.forest`): pairs by decreasing B_ab, kept while
B_ab > ½ ln n (the BIC price of the one parameter α_ab; fixed in advance, not tuned) and joining keys
not yet connected.

Shrinkage of a kept pair: the α_ab that predicts each record's (a, b) categories best from the
other n − 1 records (the leave-one-out log-likelihood; the prior below is the same leave-one-out),

    α_ab = argmax_α Σ_{n_ab > 0} n_ab ln[(n_ab − 1 + α q̃_a q̃_b)/(n − 1 + α)],   q̃_v = (n_v − ½)/(n − 1).

Of the two ways tried to set the shrinkage, this one did better than ln L's own maximum on the 14
populations of docs/validation.md (Ê within ±10 % of E in 94 against 92 of 126 cells, in a harness
of the study's design); neither has a constant fitted to them.

Fit: the decomposable product with each kept pair's posterior mean,

    μ̂_x = n Π_{(a,b)} p̃_ab(x_a, x_b) Π_v p_v(x_v)^{1 − deg(v)},   p̃_ab = (n_ab + α_ab q_a q_b)/(n + α_ab).

A sample unique's leave-one-out prior (option ``prior=loo`` of :mod:`gpurisk.measures._ll_poisson`): the
other n − 1 records give s_ab = c_ab − 1 + α_ab q̃_a q̃_b, q̃_v = s_v/(n − 1), s_v = c_v − 1 + ½, and

    μ̃ = (n − 1) Π_pairs s_ab/(n − 1 + α_ab) Π_v (s_v/(n − 1))^{1 − deg(v)},
    α̃ = (1 + α̂) Π_{pairs, lone keys} (1 + 1/s) − 1

(c the sample counts of the unique's categories, its own record included). Σ μ̂² over all K cells
(for the moment α̂) passes messages over each tree as :mod:`gpurisk.models.forest` does, with
p̃² = (n_ab² + 2 α q n_ab + α² q²)/(n + α)²: the observed pairs' part, plus α² q_a² Σ_b q_b² (·), so no
c_a × c_b table is formed.

The rooted form (``eb_smoothing=rooted``, the default since issue 43's fifth stop). The joint prior
above gives the conditional shares p(b | a) a Dirichlet of total weight α q_a: a rare category of a
gives its row of the table almost no prior weight, so a sample unique in a rare age has a pair
share drawn from a very wide gamma, and E[1/F] (convex) comes out high (Viet Nam's age with 98
categories: Ê 12-60 % above E). The rooted form writes each tree of the same kept pairs from a root
key r, each kept pair an arc from parent p to child c,

    p(x) = p_r(x_r) Π_arcs p(x_c | x_p),      p(· | x_p) ~ Dirichlet(β_pc q_c)  for every category x_p,

one strength β_pc for every parent category, whatever its size. β_pc predicts each record's child
category best from the other records of its parent category (:func:`loo_beta`); the root of each
tree is the key for which the records' leave-one-out likelihood, the root's one-way shares' plus
the arcs', is largest (:func:`orient`). Fit: μ̂_x = n p_r(x_r) Π (n_pc + β q_c)/(n_p + β),
q_c = n_c/n. A sample unique's leave-one-out prior: the root's share s_r/(n − 1), s_r = c_r − 1 + ½,
times per arc the Beta(s, S − s) share of the others, s = c_pc − 1 + β q̃_c, S = c_p − 1 + β,
q̃_c = (c_c − 1 + ½)/(n − 1) (mean s/S, relative variance (S − s)/(s (S + 1))). Which pairs are kept
is the same rule for both forms. On the 14 populations of docs/validation.md (100 samples a cell)
it moved Ê within ±10 % of E in more cells than the joint form; nothing in it is fitted to them.
"""
from __future__ import annotations

import heapq
import math
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from gpurisk.core.kept import kept
from gpurisk.models.forest import (CHUNK, AtRows, Margins, _degrees, array_digest, joins, pair_ids,
                                   tree_squares)
from gpurisk.models.neighbours import shrunk
from gpurisk.models.slice_memo import take

#: ln α_ab is searched in this range (above it the pair is independence for any sample)
LOG_ALPHA_RANGE = (math.log(1e-3), math.log(1e9))
#: how closely ln α is found (a relative 10⁻⁴ in α: far below what a sample can tell)
XATOL = 1e-4


def _observed(m: Margins, a: int, b: int):
    """(count n_ab, code of a, code of b, each cell's slot or None when dense) of the observed (a, b)
    categories. The sums over them (:func:`pair_evidence`, :func:`loo_alpha`) are taken in the
    order of (n_ab, the shares' product) (:func:`_canonical`), not the table's, so a pair gives the
    same α and evidence whichever order its keys and cells are listed in."""
    dense, counts = m.pair_counts(a, b)
    obs = np.flatnonzero(counts > 0)
    if dense:
        xa, xb = np.divmod(obs, m.cards[b])
        return counts[obs], xa, xb, None
    inv = m.pair(a, b)[0]
    first = np.zeros(counts.shape[0], dtype=np.int64)
    first[inv] = np.arange(inv.shape[0])
    cell = first[obs]
    return counts[obs], m.codes[a][cell], m.codes[b][cell], inv


#: :func:`_remembered` keeps this many searches' results (a few dozen bytes each)
REMEMBERED = 4096
_SEARCHED: OrderedDict = OrderedDict()
_SEARCHED_LOCK = threading.Lock()


def _remembered(kind: str, n: float, arrays, search):
    """``search()``, or what it returned for the same ``kind``, n and arrays (compared by a digest
    of their bytes) in this process. A scan's combinations share their pairs: the pair (a, b) has
    the same counts in every combination that holds both keys, and its search (a bounded
    one-dimensional optimisation, the costly part) gives the same numbers, so it is run once per
    pair, not once per combination (the FARS scan of 255 combinations: 84 searches, where it ran
    1 162 evidence and 1 528 β searches). The least recently used of more than REMEMBERED results
    are forgotten."""
    return kept(_SEARCHED, _SEARCHED_LOCK, (kind, float(n), array_digest(*arrays)), search,
                REMEMBERED)


def _canonical(nab, q):
    """(n_ab, q) sorted by n_ab then q: an order that does not depend on the table's."""
    order = np.lexsort((q, nab))
    return nab[order], q[order]


def pair_evidence(m: Margins, a: int, b: int, floor: float = -math.inf) -> tuple[float, float]:
    """(α_ab, B_ab): the Dirichlet prior's type-II ML concentration and the pair's log Bayes factor
    over independence (module docstring). B_ab is at most half the likelihood-ratio statistic,
    Σ n_ab ln(n_ab/(n q_a q_b)) (no prior beats the table's own shares): where that bound is at most
    ``floor``, (∞, the bound) is returned without the search (the pair cannot pass ``floor``)."""
    from scipy.optimize import minimize_scalar
    from scipy.special import gammaln
    n = m.n
    nab, xa, xb, _ = _observed(m, a, b)
    nab, q = _canonical(nab, (m.one(a)[xa] / n) * (m.one(b)[xb] / n))
    limit = float(np.sum(nab * np.log(q)))
    bound = float(np.sum(nab * np.log(nab / n))) - limit
    if bound <= floor:
        return math.inf, max(bound, 0.0)

    def search():
        # categories seen once (a prefix: sorted by n_ab) add ln Γ(1 + x) − ln Γ(x) = ln α + ln q
        ones = int(np.searchsorted(nab, 1.0, side="right"))
        log_q1 = float(np.sum(np.log(q[:ones])))
        many, qm = nab[ones:], q[ones:]

        def neg(t):
            al = math.exp(t)
            return -(math.lgamma(al) - math.lgamma(n + al) + ones * t + log_q1
                     + float(np.sum(gammaln(many + al * qm) - gammaln(al * qm))))
        res = minimize_scalar(neg, bounds=LOG_ALPHA_RANGE, method="bounded",
                              options={"xatol": XATOL})
        bf = -float(res.fun) - limit
        if bf <= 0.0:
            return math.inf, 0.0
        return float(math.exp(res.x)), bf
    return _remembered("evidence", n, (nab, q), search)


def loo_alpha(m: Margins, a: int, b: int) -> float:
    """α_ab that predicts each record's (a, b) categories best from the other n − 1 records: the
    maximum over α of the leave-one-out log-likelihood (module docstring)
    Σ_{observed (x_a, x_b)} n_ab ln[(n_ab − 1 + α q̃_a q̃_b)/(n − 1 + α)], q̃_v = (n_v − ½)/(n − 1)."""
    from scipy.optimize import minimize_scalar
    n1 = m.n - 1.0
    nab, xa, xb, _ = _observed(m, a, b)
    nab, q = _canonical(nab, ((m.one(a)[xa] - 0.5) / n1) * ((m.one(b)[xb] - 0.5) / n1))
    rest = nab - 1.0

    def search():
        def neg(t):
            al = math.exp(t)
            return -float(np.sum(nab * np.log((rest + al * q) / (n1 + al))))
        res = minimize_scalar(neg, bounds=LOG_ALPHA_RANGE, method="bounded",
                              options={"xatol": XATOL})
        return float(math.exp(res.x))
    return _remembered("loo_alpha", n1, (nab, q), search)


def choose(m: Margins, max_pairs: int | None = None, shrinkage: bool = True):
    """(kept pairs, sorted; {pair: α_ab} of the kept pairs (:func:`loo_alpha`; empty without
    ``shrinkage``, which the rooted form does not read); {pair: B_ab, or its
    bound G_ab/2 where B_ab was not needed}), by the module's rule. Kruskal's order by B_ab is taken
    lazily: the pairs wait in a heap under their bound G_ab/2 ≥ B_ab, and B_ab is searched for only
    when a pair reaches the top while its keys are still apart, so a pair whose keys are already
    joined costs no search. The kept pairs are those the full sort by B_ab keeps."""
    from gpurisk.models.model_choice import pair_counts
    d = len(m.codes)
    pairs = [(a, b) for a in range(d) for b in range(a + 1, d)]
    # every pair's counts from the joint counts of groups of keys (a few passes over the cells)
    for (a, b), (layout, sums) in pair_counts(m.codes, m.cards, [m.f], pairs).items():
        m.put_pair(a, b, layout, sums[0])
    threshold = 0.5 * math.log(max(m.n, 1.0))
    scores = {p: pair_evidence(m, *p, math.inf)[1] for p in pairs}      # the bounds G/2
    heap = [(-g, True, p) for p, g in scores.items()]
    heapq.heapify(heap)
    limit = d - 1 if max_pairs is None else int(max_pairs)
    parent = list(range(d))
    kept = []
    while heap and len(kept) < limit:
        value, bound, (a, b) = heapq.heappop(heap)
        if -value <= threshold:
            break
        if not joins(parent, a, b, join=False):
            continue                   # its keys are joined already: the sort would pass it over
        if bound:                      # its B_ab now, back into the heap
            scores[(a, b)] = pair_evidence(m, a, b, threshold)[1]
            heapq.heappush(heap, (-scores[(a, b)], False, (a, b)))
            continue
        joins(parent, a, b)
        kept.append((a, b))
    return sorted(kept), ({e: loo_alpha(m, *e) for e in kept} if shrinkage else {}), scores


def means(m: Margins, edges, alphas):
    """(μ̂ of every sampled cell, Σ μ̂² over all K cells) of the smoothed forest (module docstring)."""
    n, codes, d = m.n, m.codes, len(m.codes)
    deg = _degrees(d, edges)
    one = [m.one(v) / n for v in range(d)]
    with np.errstate(divide="ignore"):
        keys = [(c, one[v] ** (1 - deg[v])) for v, c in enumerate(codes) if deg[v] != 1]
    size = m.f.shape[0]
    mu = np.empty(size)
    tables = []
    for a, b in edges:
        dense, counts = m.pair_counts(a, b)
        tables.append((a, b, None if dense else m.pair(a, b)[0], counts, alphas[(a, b)]))
    for start in range(0, size, CHUNK):
        rows = slice(start, start + CHUNK)
        x = np.full(min(size, start + CHUNK) - start, n)
        for c, t in keys:
            x *= t[c[rows]]
        for a, b, inv, counts, al in tables:
            at = pair_ids(codes, m.cards, a, b, rows) if inv is None else inv[rows]
            x *= ((counts[at] + al * one[a][codes[a][rows]] * one[b][codes[b][rows]])
                  / (n + al))
        mu[rows] = x
    return mu, n * n * _sum_squares(m, one, edges, alphas, deg)


def _sum_squares(m: Margins, one, edges, alphas, deg) -> float:
    """Σ over every cell of the key space of (μ̂/n)²
    (:func:`gpurisk.models.forest.tree_squares`), each pair's message with p̃² = (n_ab² + 2 α q n_ab
    + α² q²)/(n + α)²: the observed cells' first two terms, and α² q_p² Σ_v q_v² own."""
    def message(p, v, own):
        a, b = min(p, v), max(p, v)
        al, n = alphas[(a, b)], m.n
        nab, xa, xb, _ = _observed(m, a, b)
        q = one[a][xa] * one[b][xb]
        xp, xv = (xa, xb) if p == a else (xb, xa)
        part = np.bincount(xp, weights=(nab * nab + 2.0 * al * q * nab) * own[xv],
                           minlength=one[p].shape[0])
        part = part + al * al * one[p] ** 2 * float(np.sum(one[v] ** 2 * own))
        return part / (n + al) ** 2
    return tree_squares(one, edges, deg, message)


def loo_counts(m: Margins, edges, alphas, rows) -> list:
    """What a sample unique's leave-one-out prior reads under the smoothed forest, as
    :func:`gpurisk.models.prior.loo_prior` takes it: per lone or shared key (counts of the
    unique's category, exponent 1 − deg, counted when alone), then per kept pair (counts of the
    unique's pair of categories, of its a and of its b, α_ab). The counts are :class:`AtRows`:
    gathered slice by slice, never kept per unique."""
    deg = _degrees(len(m.codes), edges)
    rows = np.asarray(rows)

    def key(v):
        return AtRows(m.one(v), lambda r, c=m.codes[v]: take(c, r), rows)
    out = [(key(v), 1 - deg[v], deg[v] == 0) for v in range(len(m.codes)) if deg[v] != 1]
    for a, b in edges:
        dense, counts = m.pair_counts(a, b)
        at = ((lambda r, a=a, b=b: pair_ids(m.codes, m.cards, a, b, r)) if dense else
              (lambda r, inv=m.pair(a, b)[0]: inv[r]))
        out.append((AtRows(counts, at, rows), key(a), key(b), alphas[(a, b)]))
    return out


# --- the rooted form: each kept pair as a child key's distribution given its parent's ---------------
#: Jeffreys' pseudo-count of a key's category in the leave-one-out shares (as the prior's, option
#: ``prior=loo`` of :mod:`gpurisk.measures._ll_poisson`)
JEFFREYS = 0.5


def _arc(m: Margins, parent: int, child: int):
    """(n_pc, parent's code, child's code) of the observed (parent, child) categories, in the order
    of :func:`_canonical` over (n_pc, child share) within each parent's slice."""
    a, b = min(parent, child), max(parent, child)
    nab, xa, xb, _ = _observed(m, a, b)
    xp, xc = (xa, xb) if parent == a else (xb, xa)
    order = np.lexsort((m.one(child)[xc], nab, xp))
    return nab[order], xp[order], xc[order]


def loo_beta(m: Margins, parent: int, child: int, window: int = 0) -> tuple[float, float]:
    """(β, the leave-one-out log-likelihood at β) of the child's categories given the parent's
    under p(· | x_p) ~ Dirichlet(β q_c): β predicts each record's child category best from the
    other n − 1 records of its parent category (module docstring of the rooted form),

        ℓ(β) = Σ_{observed (x_p, x_c)} n_pc ln[(n_pc − 1 + β q̃_c)/(n_p − 1 + β)],
        q̃_c = (n_c − 1 + ½)/(n − 1).

    ``window`` k > 0: the target q̃_c is the child's shares among the parent's k nearest
    categories on each side instead (:mod:`gpurisk.models.neighbours`); (−∞, −∞) where the parent
    has no such neighbours."""
    from scipy.optimize import minimize_scalar
    n1 = m.n - 1.0
    npc, xp, xc = _arc(m, parent, child)
    q = (m.one(child)[xc] - 1.0 + JEFFREYS) / n1
    if window:
        near = arc_near(m, parent, child, window)
        if near is None:
            return -math.inf, -math.inf
        q = near.target(xp, xc, q)
    rest, others = npc - 1.0, m.one(parent)[xp] - 1.0

    def ll(t):
        beta = math.exp(t)
        return float(np.sum(npc * np.log((rest + beta * q) / (others + beta))))

    def search():
        res = minimize_scalar(lambda t: -ll(t), bounds=LOG_ALPHA_RANGE, method="bounded",
                              options={"xatol": XATOL})
        return float(math.exp(res.x)), ll(float(res.x))
    return _remembered("loo_beta", n1, (npc, q, others), search)


def arc_near(m: Margins, parent: int, child: int, window: int):
    """The arc's :class:`gpurisk.models.neighbours.Near` at ``window`` (kept on the margins), or None
    where the parent is not numeric or the table too large."""
    from gpurisk.models import neighbours
    key = ("near", parent, child, window)
    if key not in m._counts:
        got = None
        if m.cards[parent] * m.cards[child] <= neighbours.DENSE_MAX:
            pos = m.positions(parent)
            if pos is not None:
                npc, xp, xc = _arc(m, parent, child)
                got = neighbours.near(pos, m.one(parent), npc, xp, xc, m.cards[child], window)
        m._counts[key] = got
    return m._counts[key]


def fit_arc(m: Margins, parent: int, child: int, target: str = "global") -> tuple[float, float, int]:
    """(β, its leave-one-out log-likelihood, the window k) of an arc: the global target (k = 0),
    or with ``target="neighbours"`` the window of {0} ∪ WINDOWS whose likelihood is largest (the
    smaller on a tie)."""
    beta, best = loo_beta(m, parent, child)
    k = 0
    if target == "neighbours":
        from gpurisk.models.neighbours import WINDOWS
        for w in WINDOWS:
            b, ll = loo_beta(m, parent, child, w)
            if ll > best:
                beta, best, k = b, ll, w
    return beta, best, k


def _arc4(arc) -> tuple[int, int, float, int]:
    """(parent, child, β, window) of an arc of :func:`orient` (window 0 where it has three parts)."""
    return (arc[0], arc[1], arc[2], arc[3] if len(arc) > 3 else 0)


def _loo_one(m: Margins, v: int) -> float:
    """The leave-one-out log-likelihood of key v's categories alone: Σ_x n_x ln[(n_x − 1 + ½)/(n − 1)]."""
    c = m.one(v)
    return float(np.sum(c * np.log((c - 1.0 + JEFFREYS) / (m.n - 1.0))))


def orient(m: Margins, edges, target: str = "global") -> tuple[list[int], list[tuple]]:
    """(roots, arcs): each tree of the forest (a lone key is a tree) rooted at the key whose rooted
    form predicts the records best from the others, Σ (the root's :func:`_loo_one` + each arc's
    :func:`loo_beta` likelihood); arcs (parent, child, β) run away from the roots, parents first
    (with ``target="neighbours"``: (parent, child, β, window), each arc's target chosen by
    :func:`fit_arc`)."""
    d = len(m.codes)
    adj: dict[int, list[int]] = {v: [] for v in range(d)}
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    fitted: dict[tuple[int, int], tuple[float, float, int]] = {}

    def arc(p, c):
        if (p, c) not in fitted:
            fitted[(p, c)] = fit_arc(m, p, c, target)
        return fitted[(p, c)]

    def away(r):
        out, stack = [], [(r, None)]
        while stack:
            v, p = stack.pop()
            if p is not None:
                out.append((p, v))
            stack.extend((w, v) for w in sorted(adj[v], reverse=True) if w != p)
        return out
    roots, arcs, seen = [], [], set()
    for s in range(d):
        if s in seen:
            continue
        tree = sorted({s} | {c for _, c in away(s)})
        seen.update(tree)
        if len(tree) == 1:
            roots.append(s)
            continue
        best = max(tree, key=lambda r: (_loo_one(m, r) + sum(arc(p, c)[1] for p, c in away(r)), -r))
        roots.append(best)
        arcs += [(p, c, arc(p, c)[0]) if target == "global" else (p, c, *arc(p, c)[::2])
                 for p, c in away(best)]
    return roots, arcs


class Arc(NamedTuple):
    """A child key's factor in a sample unique's leave-one-out prior (:func:`rooted_counts`): the
    sample counts of the unique's (parent, child) categories, of its parent category and of its
    child category (its own record included), and the arc's β; with a neighbours' target
    (``arc_target=neighbours``), the neighbour counts N^k_pc − n_pc and N^k_p − n_p at the unique
    (:mod:`gpurisk.models.neighbours`), else None."""
    pair: object
    parent: object
    child: object
    beta: float
    near_pair: object = None
    near_parent: object = None


def _target(m: Margins, p: int, c: int, window: int, xp, xc, q):
    """The arc's shrinkage target at parent codes ``xp``, child codes ``xc``: the child's shares
    ``q`` there (window 0), or the neighbours' (:mod:`gpurisk.models.neighbours`)."""
    return q if not window else arc_near(m, p, c, window).target(xp, xc, q)


def rooted_means(m: Margins, roots, arcs):
    """(μ̂ of every sampled cell, Σ μ̂² over all K cells) of the rooted form,

        μ̂_x = n Π_roots n_r(x_r)/n Π_arcs (n_pc + β t_c)/(n_p + β),

    t_c = q_c = n_c/n (the global target) or the neighbours' shares (:mod:`.neighbours`)."""
    mu, sum_mu2 = rooted_slices(m, roots, arcs)
    return np.asarray(mu), sum_mu2


def rooted_slices(m: Margins, roots, arcs):
    """(:func:`rooted_means`' μ̂ of the sampled cells as :class:`gpurisk.models.forest.CellMeans`,
    made a slice of cells at a time where read, the same numbers however read; Σ μ̂² over all K
    cells): no per-cell array of them all is kept."""
    from gpurisk.models.forest import CellMeans
    n, codes = m.n, m.codes
    one = [m.one(v) / n for v in range(len(codes))]
    tables = []
    for arc in arcs:
        p, c, beta, window = _arc4(arc)
        a, b = min(p, c), max(p, c)
        dense, counts = m.pair_counts(a, b)
        # the neighbours' targets found here, not where the slices are read (side by side)
        near = arc_near(m, p, c, window) if window else None
        tables.append((p, c, a, b, None if dense else m.pair(a, b)[0], counts, beta, near))

    def on(rows, count):
        x = np.full(count, float(n))
        for r in roots:
            x *= one[r][codes[r][rows]]
        for p, c, a, b, inv, counts, beta, near in tables:
            ids = pair_ids(codes, m.cards, a, b, rows) if inv is None else inv[rows]
            xp, xc = codes[p][rows], codes[c][rows]
            q = one[c][xc]
            x *= ((counts[ids] + beta * (q if near is None else near.target(xp, xc, q)))
                  / (m.one(p)[xp] + beta))
        return x
    return CellMeans(on, m.f.shape[0]), n * n * _rooted_squares(m, one, roots, arcs)


def _rooted_squares(m: Margins, one, roots, arcs) -> float:
    """Σ over every cell of the key space of (μ̂/n)²: per tree, messages from the leaves up,
    Σ_{x_c} p̃(x_c | x_p)² own(x_c) = [Σ_observed (n_pc² + 2 β t_c n_pc) own + β² Σ_c t_c² own] /
    (n_p + β)² per parent category, then Σ_r p_r² own at the root (t_c = q_c, or the neighbours'
    shares of x_p's window: the last sum then per parent category, over its dense row)."""
    own = [np.ones_like(o) for o in one]
    for arc in reversed(arcs):                    # children before parents
        p, c, beta, window = _arc4(arc)
        npc, xp, xc = _arc(m, p, c)
        q = one[c]
        t = _target(m, p, c, window, xp, xc, q[xc])
        part = np.bincount(xp, weights=(npc * npc + 2.0 * beta * t * npc) * own[c][xc],
                           minlength=one[p].shape[0])
        if window:
            near = arc_near(m, p, c, window)
            # every (position, child category)'s target, dense
            table = shrunk(near.pair.reshape(-1, near.cards), near.parent[:, None], q[None, :])
            part = part + beta * beta * (table * table * own[c][None, :]).sum(axis=1)[near.pos]
        else:
            part = part + beta * beta * float(np.sum(q * q * own[c]))
        own[p] = own[p] * part / (m.one(p) + beta) ** 2
    total = 1.0
    for r in roots:
        total *= float(np.sum(one[r] ** 2 * own[r]))
    return total


def rooted_counts(m: Margins, roots, arcs, rows, root_prior: str = "jeffreys") -> list:
    """What a sample unique's leave-one-out prior reads under the rooted form, as
    :func:`gpurisk.models.prior.loo_prior` takes it: per root (counts of the unique's
    category, exponent 1, counted; with ``root_prior="eb"`` a
    :class:`gpurisk.models.root_prior.Root` where the key's fitted gamma is used), then per arc an
    :class:`Arc`. The counts are :class:`AtRows`."""
    from gpurisk.models.root_prior import Root, fitted_prior
    rows = np.asarray(rows)

    def key(v):
        return AtRows(m.one(v), lambda r, c=m.codes[v]: take(c, r), rows)

    def root(v):
        got = fitted_prior(m.one(v)) if root_prior == "eb" else None
        return (key(v), 1, True) if got is None else Root(key(v), got.shape, got.rate, got.ends, v)
    out: list = [root(r) for r in roots]
    for arc in arcs:
        p, c, beta, window = _arc4(arc)
        a, b = min(p, c), max(p, c)
        dense, counts = m.pair_counts(a, b)
        at = ((lambda r, a=a, b=b: pair_ids(m.codes, m.cards, a, b, r)) if dense else
              (lambda r, inv=m.pair(a, b)[0]: take(inv, r)))
        near = [None, None]
        if window:
            got = arc_near(m, p, c, window)
            where = (lambda r, pos=got.pos, cp=m.codes[p]: pos[cp[r]])
            near = [AtRows(got.pair, lambda r, w=where, cc=m.codes[c], k=got.cards: w(r) * k + cc[r],
                           rows),
                    AtRows(got.parent, where, rows)]
        out.append(Arc(AtRows(counts, at, rows), key(p), key(c), beta, *near))
    return out
