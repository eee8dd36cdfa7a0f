"""Population uniques from a log-linear Poisson–gamma model of the sample's cells (issue 27).

Model (Skinner & Shlomo 2008, section 2, with the gamma cell effect of Rinott & Shlomo 2006 that
``gpurisk.measures._ll_poisson`` uses): over the K = Π_v k_v cells of the key space, F_j ~ Poisson(Λ_j),
Λ_j = λ_j γ_j with γ_j ~ Gamma(mean 1, variance α), and log λ_j a log-linear model. A Bernoulli
sample at π keeps f_j ~ Poisson(πΛ_j) and, independently, F_j − f_j ~ Poisson((1 − π)Λ_j). Given f_j
the cell's Λ_j is Gamma(shape 1/α + f_j, rate b_j = 1/(αλ_j) + π), so with q = 1 − π

    P(F_j = 1 | f_j = 1) = (b_j / (b_j + q))^{1/α + 1}
    P(F_j = 1 | f_j = 0) = q (1/α) / (b_j + q) · (b_j / (b_j + q))^{1/α}

(α → 0: e^{−qλ_j} and qλ_j e^{−qλ_j}), and

    E[N1 | sample] = Σ_{f_j = 1} P(F_j = 1 | f_j = 1) + Σ_{f_j = 0} P(F_j = 1 | f_j = 0).

The second sum runs over every unobserved cell of the key space, which can be astronomically many.
The cells' means are log-linear in the sample's one-way margins, λ_j = c · exp(β s_j) with
s_j = Σ_v log p̂_v(x_jv), p̂_v the sample's share of category x of key v, and c such that Σ_all λ_j = N:
β = 1 is the main-effects (independence) model, λ̂_j = (n/π) Π_v p̂_v; β = 0 one λ = N/K for every cell,
Bethlehem, Keller & Pannekoek (1990)'s Poisson–gamma model. Because s_j is a sum of per-key terms,
its distribution over all K cells (a count of cells per value) is the convolution of the per-key
histograms of log p̂_v, so every sum over the K cells is Σ_bins count · g(λ) on that convolution
(linear binning in s on a grid of width ``h``; exact enumeration when K ≤ ``EXACT_MAX``); the
unobserved cells' sum is the all-cell sum minus the observed cells' own terms.

Fitting (α, β) to what the sample shows of its small cells (``dispersion="calibrated"``): α such
that the model's expected number of sample uniques Σ_all P(f_j = 1) equals the observed n1 (f_j is
negative binomial, mean πλ_j, shape 1/α); with ``margins="tempered"`` (model ``loglinear``, the
measure's default until the forest below replaced it) also β ∈ [0, 1] such that the model expects the observed n2 sample cells of size
2 (``target="n2"``; ``target="half"`` matches instead the expected uniques of a half subsample,
Σ_k J_k k 2^{−k}). β < 1 tempers the main effects towards a flatter table: on real populations the
main effects put too little mass on the combinations a population does hold and too much on the
(often impossible) rest, and the sample's n1 and n2 measure how much. ``dispersion="moment"`` is
α̂ = max(0, [Σ(f − μ̂)² − Σ f] / Σ μ̂²) over all K cells (``gpurisk.measures._ll_poisson``'s estimator).

Main effects plus a forest of two-way interactions (``margins="forest"``, the measure's default,
model ``loglinear_forest``; ``"forest_tempered"`` adds the β above): s_j = log p̂(x_j) of the
decomposable model p̂(x) = Π_{(a,b) ∈ E} p̂_ab(x_a, x_b) Π_v p̂_v(x_v)^{1 − deg(v)} (the closed-form ML
fit, p̂ the sample's margins), E the pairs of keys that :func:`gpurisk.models.choose_forest`
keeps by a split-sample held-out likelihood-ratio test, forming a forest (no cycle), as Ê's default
(``gpurisk.measures._ll_poisson``, ``model=auto_cv``); β = 1 and α calibrated to n1. log p̂ is a sum of
one term per tree of the forest and per lone key, so the distribution of s over all K cells is again a
convolution: of the binned log-probabilities of each tree's combinations of positive probability
(listed by joining the pair tables along the tree, never the product of its keys' categories; a pair
is kept only while its tree has at most ``TREE_MAX`` of them) and each lone key's log p̂_v
(:func:`forest_space`). The pair tables are smoothed towards independence,
p̃_ab = (m_ab + κ p̂_a p̂_b)/(n + κ), κ = kappa · c_a c_b (``FOREST_KAPPA`` = ¼ in :func:`fit`): with
the maximum-likelihood tables (kappa = 0) a combination holding a pair of categories of E that the
sample lacks has p̂ = 0 and leaves the key space, which missed the population uniques such pairs
hold (UCI Adult age, sex, race, marital status at π = 5 %: −32 %, docs/arx.md). The forest is chosen once, at the sample's own counts (the delta method below does
not refit it); its choice's own uncertainty enters the s.e. as below.

Ê's model (``margins="eb"``, model ``loglinear_eb``, the measure's default since issue 43's ninth stop):
the same sums under :mod:`gpurisk.models.eb_forest`'s forest, the pairs kept by their evidence (a Bayes
factor over independence above the BIC price), each tree rooted, and a kept pair's table the rooted
form's p̃(x_p, x_c) = p̂_p(x_p) (m_pc + β p̂_c(x_c))/(m_p + β) (:func:`_rooted_table`), β fitted by the
records' leave-one-out likelihood: no κ, and no alternative forests (the shrinkage, not a test,
handles a pair the sample cannot tell). Its parent margin is p̂_p, so the decomposable product above
is the rooted form exactly.

Key space (the assumption): the cells are the combinations of the categories some sample record has,
and every combination of sampled categories is taken to be possible: a structural zero (a
combination no population can hold) still gets λ̂ > 0 and adds its P(F = 1 | f = 0) to the sum
(under the forest, unless one of its pairs of categories of E is absent from the sample).

Categories no sample record has (:func:`unseen_part`, ``unseen=True`` in :func:`fit`, the default):
the model's cells cannot hold them, yet rare categories hold many population uniques (MACH 2019 age,
gender, race at π = 5 %: 16 % of N1, 44 of 271). Under Bernoulli sampling a category with m
population records is missing from the sample with probability (1 − π)^m and held by exactly one
given record of it with probability π (1 − π)^{m−1}, so for any set S of keys and any population
record i, E[I(i sampled and alone in the sample among the records sharing its categories of S)] ·
(1 − π)/π = P(all its categories of S missing from the sample). By inclusion–exclusion over S, and
because a record alone in each of its categories of S is alone in their union,

    N1_unseen = Σ_i I(F_i = 1) P(some category of i missing)   is estimated without bias by
    N̂1_unseen = (1 − π)/π · Σ_{j: alone in at least one of its categories} P(F_j = 1 | f_j = 1),

a Horvitz–Thompson sum over the sample records alone in some category (all of them sample uniques),
each weighted by the model's chance that it is a population unique (the chance itself is the
model's: the sum is unbiased only as far as that chance is). Its variance is taken as
((1 − π)/π)² Σ_j P(F_j = 1 | f_j = 1)² over the same records (each a rare event of its category).

Structural zeros (``support=True`` in :func:`fit`, the default; forest models): the key space
takes every combination of sampled categories as possible, but a population can hold few of them
(sdcMicro's testdata: its housing keys urbrur, roof, walls, water, constant within a household,
take 47 of their 240 combinations; on its six keys at π = 5 % the empty cells' part was 899 where
the population holds 687 such uniques, and 211 of the 899 sat in housing combinations no household
has). Let v be the lone key (in no kept pair) of most categories, so that λ_(c,x) = Λ_c p̂_v(x) for
each combination c of the other keys, and e_c = Π_x P(f = 0 | λ_(c,x)) the model's chance that no
sample record has c. Each c is taken as possible with probability ρ, ρ = min(1, s / Σ_c (1 − e_c))
matching the model's expected count of combinations seen to the sample's s (a moment estimator); a
combination no sample record has is then possible with probability post_c = ρ e_c / (ρ e_c + 1 − ρ)
and its cells' P(F = 1 | f = 0) count only that much (:func:`_support_cut`). ρ = 1, no change, when
the sample shows at least as many combinations as the model expects. The model's λ is not
renormalised over the possible combinations, so ρ̂ leans towards 1 and the cut is smaller than
the structural zeros' share (testdata's six keys at 5 %: 899 → 799). The sums over all c are on
the binned convolution of the other components; v's values are its distinct log p̂_v.

Variance (what ``se`` holds, :func:`fit`): the process variance Σ_j p_j (1 − p_j) over all K cells
(given the fitted model, the cells' I(F_j = 1) are independent Bernoulli variables); plus the
delta-method variance of the fit, which reads the sample through n1 and n2 (their covariance under
the fitted model, the cells independent; the numerical gradient of the estimate in them; the margins
p̂_v are taken as known); plus a relative model error (``model_error`` · estimate)², which neither
sees; under the forest plus the spread of its choice, Σ w (N̂1(E′) − N̂1)² over the forests E′ one
held-out test away (:func:`gpurisk.models.doubtful`, w the chance the test goes the other way),
as Ê's s.e. takes it (``gpurisk.measures._ll_poisson``; ``choice_spread=False`` leaves it out).
``MODEL_ERROR`` is chosen and scored leave-one-population-out (bench/n1_interval_loo.py; docs/arx.md).

Unseen pairs (the interval's lower end, :func:`fit`): the forest's smoothed pair tables give every
pair of categories of a kept interaction positive probability, so the combinations holding a pair
that no sample record has are in the key space, and their empty cells' part (``open_part``, the
extra ``unseen_pairs_part``) rests on that alone. The sample cannot tell those combinations from
impossible ones: a structural zero leaves no trace beyond its absence, which the model expects
anyway (World Values Survey country, wave and immigration answer at π = 5 %: all of N̂1 ≈ 17.6
there, one true unique). The interval's lower end is the smaller of the model's and that of the
estimate without them, N̂1 − open_part at the same relative width; the estimate, its s.e. and the
upper end stay the model's. Where the part is at least half of N̂1 a note says so. It is summed as
the empty cells' part is, over the cells holding no such pair (each tree's combinations flagged as
they are listed, :func:`_tree_cells`), and subtracted from the whole.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: at most this many cells: the sum over all K cells by enumeration (else the binned convolution)
EXACT_MAX = 20_000
#: bin width of the convolution in log λ
BIN_WIDTH = 0.002
MARGINS = ("main", "none", "tempered", "forest", "forest_tempered", "eb")
#: at most this many combinations of positive probability in one tree of the forest (each is listed)
TREE_MAX = 8_000_000


@dataclass
class LLN1:
    value: float
    process_var: float
    alpha: float
    K: float
    observed: float        # the sample-unique cells' part of the sum
    unobserved: float      # the empty cells' part
    expected_n1: float     # the model's expected number of sample uniques (to compare with n1)
    beta: float = 1.0      # λ_j ∝ e^{β Σ_v log p̂_v}: 1 main effects, 0 one λ for every cell
    param_var: float = 0.0  # the delta method's variance of the fit through n1 and n2
    edges: tuple = ()       # the forest's pairs of keys (margins="forest*")
    alts: list = ()         # the forests one held-out test away: [(weight, pairs)]
    p1: np.ndarray | None = None   # P(F_j = 1 | f_j = 1) of each sample unique, in the cells' order
    support_cut: float = 0.0    # what the structural zeros took from the empty cells' part
    support_rho: float = 1.0    # the share of the other keys' combinations taken as possible
    se_support: float = 0.0     # the cut's s.e. (included in process_var)
    open_part: float = 0.0      # the empty cells' part in cells holding a pair of categories of a
    #                             kept interaction that no sample record has


def prob_one(lam, f, alpha: float, pi: float):
    """P(F_j = 1 | f_j) for f_j ∈ {0, 1} (arrays), λ_j = model mean of F_j (module docstring)."""
    lam = np.asarray(lam, dtype=float)
    q = 1.0 - pi
    if alpha <= 1e-12:
        m = q * lam
        return np.where(f == 1, np.exp(-m), m * np.exp(-m))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        b = 1.0 / (alpha * np.maximum(lam, 1e-300)) + pi
        logr = np.log(b) - np.log(b + q)            # log(b/(b+q)) ≤ 0
        shape = 1.0 / alpha
        p1 = np.exp((shape + 1.0) * logr)
        p0 = q * shape / (b + q) * np.exp(shape * logr)
    return np.where(f == 1, p1, p0)


def _category_index(c):
    """(the distinct values of ``c``, sorted; each row's index among them): ``np.unique``'s answer,
    by one bincount when the values are small non-negative integers (a table's category codes), so
    a register's millions of cells cost O(cells), not a sort, per key."""
    c = np.asarray(c)
    if c.dtype.kind in "iu" and c.size and int(c.min()) >= 0 and int(c.max()) < 4 * c.size + 1024:
        c = c.astype(np.intp, copy=False)
        present = np.bincount(c) > 0
        return np.flatnonzero(present), (np.cumsum(present) - 1)[c]
    cats, inv = np.unique(c, return_inverse=True)
    return cats, inv.reshape(-1)


def _log_probs(codes, f, n):
    """Per key, log p̂_v of the categories the sample has, and each sampled cell's per-key index."""
    logs, idx = [], []
    for c in codes:
        cats, inv = _category_index(c)
        p = np.bincount(inv, weights=f, minlength=cats.size) / n
        logs.append(np.log(p))
        idx.append(inv)
    return logs, idx


def _all_cells(logs, base: float, exact_max: float, h: float = BIN_WIDTH):
    """The λ of all K cells, λ = exp(base + Σ_v log p_v), as (values, counts): every cell once when
    K ≤ exact_max, else the convolution of the per-key histograms of log p_v (linear binning on a
    grid of width h: each value's unit count is split between its two neighbouring bins, which keeps
    the count and the mean of log λ), so that Σ_cells g(λ) = Σ counts · g(values)."""
    K = float(np.prod([float(lp.size) for lp in logs]))
    if K <= exact_max:
        tot = np.zeros(1)
        for lp in logs:
            tot = np.add.outer(tot, lp).ravel()
        return np.exp(base + tot), np.ones(tot.size)
    from scipy.signal import fftconvolve
    hist, lo = np.ones(1), 0.0
    for lp in logs:
        a = float(lp.min())
        x = (lp - a) / h
        k = np.floor(x).astype(np.int64)
        w = x - k
        hv = np.zeros(int(k.max()) + 2)
        np.add.at(hv, k, 1.0 - w)
        np.add.at(hv, k + 1, w)
        hist = fftconvolve(hist, hv) if hist.size * hv.size > 50_000 else np.convolve(hist, hv)
        hist[hist < 1e-9 * hist.max()] = 0.0   # FFT round-off (true counts are ≥ 0)
        lo += a
    keep = hist > 0
    return np.exp(base + lo + h * np.flatnonzero(keep)), hist[keep]


def _pair_table(logs, idx, f, n: float, a: int, b: int, kappa: float):
    """The (a, b) pairs of categories of positive probability and log p̃_ab of each, as
    (x_a, x_b, log p̃): κ = 0 the pairs some sample cell has (p̂_ab = m_ab/n), else every pair."""
    ca, cb = logs[a].size, logs[b].size
    if kappa <= 0:
        ids, inv = np.unique(idx[a].astype(np.int64) * cb + idx[b], return_inverse=True)
        m = np.bincount(inv.reshape(-1), weights=f)
        return ids // cb, ids % cb, np.log(m / n)
    k = kappa * ca * cb
    xa, xb = np.divmod(np.arange(ca * cb, dtype=np.int64), cb)
    m = np.bincount(idx[a].astype(np.int64) * cb + idx[b], weights=f, minlength=ca * cb)
    return xa, xb, np.log((m + k * np.exp(logs[a][xa] + logs[b][xb])) / (n + k))


def _rooted_table(logs, idx, f, n: float, parent: int, child: int, beta: float):
    """As :func:`_pair_table` (every pair of categories), the joint table of Ê's rooted form
    (:mod:`gpurisk.models.eb_forest`): p̃(x_p, x_c) = p̂_p(x_p) (m_pc + β p̂_c(x_c))/(m_p + β), the
    child's shares given its parent's shrunk towards its own by β. Its parent margin is p̂_p, so the
    decomposable product Π p̃ Π p̂_v^{1 − deg} of :func:`forest_space` is the rooted form's
    p̂_r Π p(x_c | x_p) exactly."""
    a, b = min(parent, child), max(parent, child)
    ca, cb = logs[a].size, logs[b].size
    xa, xb = np.divmod(np.arange(ca * cb, dtype=np.int64), cb)
    m = np.bincount(idx[a].astype(np.int64) * cb + idx[b], weights=f, minlength=ca * cb)
    xp, xc = (xa, xb) if parent == a else (xb, xa)
    mp = n * np.exp(logs[parent])
    cond = (m + beta * np.exp(logs[child][xc])) / (mp[xp] + beta)
    return xa, xb, logs[parent][xp] + np.log(cond)


def _tree_order(keys, edges):
    """The tree's edges as (parent, child), each parent reached before its child (root keys[0])."""
    from gpurisk.models import tree_order
    return tree_order(keys[0], edges)


def _tree_size(keys, edges, pairs, cards) -> float:
    """The number of the tree's combinations of positive probability (every pair of E among them
    of positive probability), by counting messages from the leaves to the root."""
    order = _tree_order(keys, edges)
    count = {v: np.ones(cards[v]) for v in keys}
    for p, c in reversed(order):
        xa, xb, _ = pairs[(min(p, c), max(p, c))]
        xp, xc = (xa, xb) if p < c else (xb, xa)
        count[p] = count[p] * np.bincount(xp, weights=count[c][xc], minlength=cards[p])
    return float(count[keys[0]].sum())


def _tree_cells(keys, edges, pairs, logs, deg, seen=None):
    """log p̂_tree of each of the tree's combinations of positive probability: the combinations
    grown key by key along the tree, each row of the parent joined to the child categories its
    pair table holds (no product of the keys' categories). With ``seen`` (per pair of keys, whether
    some sample record holds each row of its pair table), also whether each combination holds a
    pair of categories that no sample record has: (log p̂_tree, that flag)."""
    r = keys[0]
    rows = {r: np.arange(logs[r].size)}
    val = (1 - deg[r]) * logs[r]
    flag = np.zeros(val.shape[0], dtype=bool)
    for p, c in _tree_order(keys, edges):
        xa, xb, lp = pairs[(min(p, c), max(p, c))]
        xp, xc = (xa, xb) if p < c else (xb, xa)
        o = np.argsort(xp, kind="stable")
        xp, xc, lp = xp[o], xc[o], lp[o]
        unseen = None if seen is None else ~seen[(min(p, c), max(p, c))][o]
        start = np.searchsorted(xp, np.arange(logs[p].size))
        cnt = np.bincount(xp, minlength=logs[p].size)
        rep = cnt[rows[p]]
        first = np.repeat(np.cumsum(rep) - rep, rep)
        at = np.arange(int(rep.sum())) - first + np.repeat(start[rows[p]], rep)
        keep = np.repeat(np.arange(rep.size), rep)
        rows = {v: x[keep] for v, x in rows.items()}
        rows[c] = xc[at]
        val = val[keep] + lp[at] + (1 - deg[c]) * logs[c][xc[at]]
        flag = flag[keep] if unseen is None else flag[keep] | unseen[at]
    return val if seen is None else (val, flag)


def forest_space(logs, idx, f, kappa: float = 0.0, seed: int = 0, tree_max: int = TREE_MAX,
                 ranks=None, names=None, edges=None, smoothing: str = "kappa"):
    """The key space under main effects + a forest of two-way interactions
    (:func:`gpurisk.models.choose_forest`), as components for :func:`_all_cells`: per lone key
    its log p̂_v, per tree of the forest the log-probability of each of its keys' combinations of
    positive probability, log p̂_tree = Σ_pairs log p̃_ab + Σ_keys (1 − deg_v) log p̂_v; and the
    sampled cells' log p̂. p̃_ab = (m_ab + κ p̂_a p̂_b)/(n + κ) with κ = kappa · c_a c_b (0: the ML
    fit, p̂_ab = m_ab/n: a combination holding an unseen pair has probability 0 and leaves the key
    space). The kept pairs are taken by decreasing held-out gain, each only while its tree has at
    most ``tree_max`` combinations of positive probability. ``ranks``, ``names``: as choose_forest
    takes them (per key each sampled category's rank, here indexed like ``logs``; the keys' names),
    so that the held-out split does not depend on how a table coded the categories. ``edges``: these
    pairs instead of the chosen ones. (components, s_obs, edges, the forests one held-out test
    away: [(weight, pairs)], :func:`gpurisk.models.doubtful`). ``smoothing="eb"``: Ê's model
    instead (:mod:`gpurisk.models.eb_forest`): the pairs kept by their evidence, each tree rooted
    and its tables :func:`_rooted_table` (no κ; no alternatives: the shrinkage, not a test, handles a
    pair the sample cannot tell)."""
    from gpurisk.models import choose_forest, doubtful
    d = len(logs)
    cards = [lp.size for lp in logs]
    f = np.asarray(f, dtype=float)
    n = float(f.sum())
    eb = smoothing == "eb"
    if eb:                   # Ê's forest: each pair kept by its evidence (gpurisk.models.eb_forest)
        from gpurisk.models import Margins, choose_eb_forest, orient_eb_forest
        margins = Margins([np.asarray(i) for i in idx], f, cards)
        if edges is None:
            kept, _, evidence = choose_eb_forest(margins, d - 1, shrinkage=False)
            scores = {e: (evidence[e], 0.0) for e in kept}
        else:
            kept, scores = list(edges), {e: (1.0, 0.0) for e in edges}
    elif edges is None:
        kept, scores = choose_forest(idx, f, cards, seed=seed, max_pairs=d - 1, ranks=ranks,
                                     names=names)
    else:
        kept, scores = list(edges), {e: (1.0, 0.0) for e in edges}
    if not eb:
        pairs = {e: _pair_table(logs, idx, f, n, e[0], e[1], kappa) for e in kept}
    edges, comp = [], list(range(d))
    for a, b in sorted(kept, key=lambda e: -scores[e][0]):
        ra, rb = comp[a], comp[b]
        keys = [v for v in range(d) if comp[v] in (ra, rb)]
        # eb: every pair of categories has positive probability, so a tree holds Π c_v of them
        size = (math.prod(cards[v] for v in keys) if eb else
                _tree_size(keys, edges + [(a, b)], pairs, cards))
        if size > tree_max:
            continue
        comp = [ra if x == rb else x for x in comp]
        edges.append((a, b))
    edges.sort()
    if eb:                   # each tree rooted as Ê's rooted form roots it, its tables smoothed so
        pairs = {(min(p, c), max(p, c)): _rooted_table(logs, idx, f, n, p, c, beta)
                 for p, c, beta in orient_eb_forest(margins, edges)[1]}
    deg = [0] * d
    for a, b in edges:
        deg[a] += 1
        deg[b] += 1
    s_obs = sum((1 - deg[v]) * logs[v][idx[v]] for v in range(d))
    for a, b in edges:                       # every sampled cell's pairs have positive probability
        xa, xb, lp = pairs[(a, b)]
        s_obs = s_obs + lp[np.searchsorted(xa * cards[b] + xb,
                                           idx[a].astype(np.int64) * cards[b] + idx[b])]
    # per kept pair, whether some sample record holds each row of its table
    seen = {}
    for a, b in edges:        # (looked up among the observed pairs: no c_a × c_b array)
        xa, xb, _ = pairs[(a, b)]
        held = np.unique(idx[a].astype(np.int64) * cards[b] + idx[b])
        seen[(a, b)] = np.isin(xa.astype(np.int64) * cards[b] + xb, held)
    comps, opened = [], []
    for r in sorted(set(comp)):
        keys = [v for v in range(d) if comp[v] == r]
        if len(keys) == 1:
            comps.append(logs[r])
            opened.append(np.zeros(logs[r].size, dtype=bool))
            continue
        val, flag = _tree_cells(keys, [e for e in edges if e[0] in keys], pairs, logs, deg, seen)
        comps.append(val)
        opened.append(flag)
    alts = doubtful(edges, scores, max_pairs=d - 1) if len(scores) > len(kept) and not eb else []
    return comps, s_obs, tuple(edges), alts, opened


def prob_sample_one(lam, alpha: float, pi: float):
    """P(f_j = 1) under the model: f_j is negative binomial with mean πλ_j and shape 1/α."""
    m = pi * np.asarray(lam, dtype=float)
    if alpha <= 1e-12:
        return m * np.exp(-m)
    return m * np.exp(-(1.0 / alpha + 1.0) * np.log1p(alpha * m))


def _log_lambda(beta: float, s_grid, counts, N: float):
    """log c with Σ_all cells c e^{β s} = N (λ_j = c e^{β s_j}, s_j = Σ_v log p̂_v(x_jv))."""
    from scipy.special import logsumexp
    return math.log(N) - float(logsumexp(beta * s_grid, b=counts))


def estimate(codes, f, N: float, margins: str = "main", dispersion: str = "moment",
             exact_max: int = EXACT_MAX, h: float = BIN_WIDTH, target: str = "n2",
             space=None, kappa: float = 0.0, seed: int = 0, ranks=None, names=None,
             edges=None, support: bool = False) -> LLN1:
    """E[N1 | sample] under the log-linear Poisson–gamma model (module docstring).

    ``codes``: per key, the category (any integers) of each sampled cell (cells with f > 0 only, one
    row per cell); ``f``: their counts; ``N``: the population size (π = n/N). ``space``: a key
    space other than all K combinations (a diagnostic: bench/diagnose_pop_uniqueness.py), a callable
    (per-key log p̂_v, per-key index of each sampled cell's category) → (s of its cells, their counts),
    which must hold the sampled cells. ``kappa``, ``seed``, ``ranks`` (per key, each code's rank
    among the key's categories: ``gpurisk.models.category_ranks``), ``names``: the
    forest's (:func:`forest_space`)."""
    f = np.asarray(f, dtype=float)
    logs, idx = _log_probs(codes, f, float(f.sum()))
    if margins not in MARGINS:
        raise ValueError(f"margins={margins!r} is not one of {MARGINS}")
    s_obs = sum(lp[i] for lp, i in zip(logs, idx))          # observed cells' Σ_v log p̂_v
    K = float(np.prod([float(lp.size) for lp in logs]))
    if margins.startswith("forest") or margins == "eb":
        if ranks is not None:             # each sampled category's rank, indexed like logs
            ranks = [np.asarray(r)[_category_index(c)[0]] for r, c in zip(ranks, codes)]
        comps, s_obs, edges, alts, opened = forest_space(
            logs, idx, f, kappa=kappa, seed=seed, ranks=ranks, names=names, edges=edges,
            smoothing="eb" if margins == "eb" else "kappa")
        s_grid, counts = _all_cells(comps, 0.0, exact_max, h)
        s_grid = np.log(s_grid)
        sup = _support_space(logs, idx, f, edges, comps, s_obs, exact_max, h) if support else None
        closed = None
        if any(o.any() for o in opened):   # the cells holding no unseen pair of a kept interaction
            closed = _all_cells([c[~o] for c, o in zip(comps, opened)], 0.0, exact_max, h)
            closed = (np.log(closed[0]), closed[1])
        r = _fit_space(f, s_obs, s_grid, counts, N, "tempered" if margins == "forest_tempered"
                       else "main", dispersion, target, float(np.prod([float(c.size) for c in comps])),
                       sup, closed)
        r.edges, r.alts = edges, alts
        return r
    if space is None:
        s_grid, counts = _all_cells(logs, 0.0, exact_max, h)
        s_grid = np.log(s_grid)
    else:
        s_grid, counts = space(logs, idx)
        K = float(np.sum(counts))
    return _fit_space(f, s_obs, s_grid, counts, N, margins, dispersion, target, K)


def _fit_space(f, s_obs, s_grid, counts, N: float, margins: str, dispersion: str,
               target: str, K: float, sup=None, closed=None) -> LLN1:
    """:func:`estimate` on a given key space: its cells' s = Σ_v log p̂_v as (s_grid, counts).
    ``closed``: (s, counts) of the cells holding no pair of categories of a kept interaction that
    no sample record has; the empty cells' part outside them is ``open_part``."""
    n = float(f.sum())
    pi = n / float(N)
    n1, n2 = int((f == 1).sum()), float((f == 2).sum())
    if target == "half":
        n2 = -float((f * SUB * (1.0 - SUB) ** (f - 1.0)).sum())   # see n2_gap
    ones = f == 1

    def solve(n1_, n2_):
        """(β, α, λ of the observed cells, λ on the grid) fitted to the sample (n1_, n2_)."""
        if margins == "main":
            beta = 1.0
        elif margins == "none":
            beta = 0.0
        else:
            beta = tempered_beta(s_grid, counts, N, pi, n1_, n2_)
        logc = _log_lambda(beta, s_grid, counts, N)
        lam, grid = np.exp(logc + beta * s_obs), np.exp(logc + beta * s_grid)
        if dispersion == "moment":
            mu = pi * lam
            sum_mu2 = float((counts * (pi * grid) ** 2).sum())
            num = float((f * f).sum() - 2.0 * (f * mu).sum() + sum_mu2 - f.sum())
            alpha = max(num / sum_mu2, 0.0) if sum_mu2 > 0 else 0.0
        elif dispersion == "none":
            alpha = 0.0
        elif dispersion == "calibrated":
            alpha = calibrated_alpha(grid, counts, pi, n1_)
        else:
            raise ValueError(f"dispersion={dispersion!r}")
        return beta, alpha, lam, grid

    def value(beta, alpha, lam, grid):
        g0 = prob_one(grid, 0, alpha, pi)
        obs0 = prob_one(lam, 0, alpha, pi)
        p1 = prob_one(lam[ones], 1, alpha, pi)
        unobs = max(float((counts * g0).sum()) - float(obs0.sum()), 0.0)
        var = max(float((counts * g0 * (1.0 - g0)).sum()) - float((obs0 * (1 - obs0)).sum()), 0.0) \
            + float((p1 * (1 - p1)).sum())
        cut = (0.0, 0.0, 1.0)
        if sup is not None:
            cut = _support_cut(sup, beta, _log_lambda(beta, s_grid, counts, N), alpha, pi)
            unobs = max(unobs - cut[0], 0.0)
            var += cut[1]
        return float(p1.sum()) + unobs, var, float(p1.sum()), unobs, p1, cut

    beta, alpha, lam, grid = solve(n1, n2)
    est, var, obs, unobs, p1_each, cut = value(beta, alpha, lam, grid)
    opened = 0.0
    if closed is not None:   # the empty cells' part outside the closed cells, before the cut (the
        #                      sampled cells are all closed: their terms cancel as in value)
        at = np.exp(_log_lambda(beta, s_grid, counts, N) + beta * closed[0])
        obs0 = float(prob_one(lam, 0, alpha, pi).sum())
        whole = max(float((counts * prob_one(grid, 0, alpha, pi)).sum()) - obs0, 0.0)
        shut = max(float((closed[1] * prob_one(at, 0, alpha, pi)).sum()) - obs0, 0.0)
        opened = min(max(whole - shut, 0.0), unobs)
    # delta method: the fit reads the sample through n1 (α calibrated) and n2 (β); their variances
    # and covariance under the fitted model (independent cells: n_k = Σ_j I(f_j = k))
    cov = _stat_cov(grid, counts, alpha, pi, target)
    P1 = prob_sample_one(grid, alpha, pi)
    if target == "half":
        cov[0, 1] = cov[1, 0] = -cov[0, 1]       # the statistic enters n2_gap as −U
    uses = [dispersion == "calibrated", margins == "tempered"]
    grad = np.zeros(2)
    for k in range(2):
        if not uses[k]:
            continue
        d = max(1.0, 0.5 * math.sqrt(cov[k, k]))
        hi = (n1 + d, n2) if k == 0 else (n1, n2 + d)
        lo = (max(n1 - d, 0.0), n2) if k == 0 else (n1, n2 - d if n2 < 0 else max(n2 - d, 0.0))
        grad[k] = (value(*solve(*hi))[0] - value(*solve(*lo))[0]) / (hi[k] - lo[k])
    param_var = float(grad @ cov @ grad)
    return LLN1(est, var, alpha, K, obs, unobs, float((counts * P1).sum()), beta, param_var,
                p1=p1_each, support_cut=cut[0], support_rho=cut[2], se_support=math.sqrt(cut[1]),
                open_part=opened)


#: the structural-zeros sums take at most this many (combination, value of v) pairs at a time
SUPPORT_CHUNK = 1 << 20


def _support_space(logs, idx, f, edges, comps, s_obs, exact_max, h):
    """The inputs of :func:`_support_cut`, or None: v = the key of most categories that no kept
    pair holds (a lone key, so λ_j = Λ_c p̂_v(x) for the combination c of the other keys), the
    distinct values of log p̂_v with their counts, the binned log-probabilities of all combinations
    of the other keys (values, counts) and those of the combinations some sample cell has."""
    held = {k for e in edges for k in e}
    lone = [v for v in range(len(logs)) if v not in held and logs[v].size > 1]
    if not lone:
        return None
    v = max(lone, key=lambda k: logs[k].size)
    rest = [c for c in comps if c is not logs[v]]      # a lone key's component is its logs[v]
    if not rest:
        return None
    lv, cv = np.unique(np.round(logs[v] / h) * h, return_counts=True)
    S, Sc = _all_cells(rest, 0.0, exact_max, h)
    s_seen = s_obs - logs[v][idx[v]]                 # each sampled cell's other keys' log p̂
    key = np.zeros(len(s_seen), dtype=np.int64)
    for k in range(len(logs)):
        if k != v:   # kept dense (< the number of cells) after each key: the product cannot overflow
            key = _category_index(key * logs[k].size + np.asarray(idx[k], dtype=np.int64))[1]
    _, first = np.unique(key, return_index=True)      # one row per distinct combination seen
    seen, sc = np.unique(np.round(s_seen[first] / h) * h, return_counts=True)
    return lv, cv.astype(float), np.log(S), Sc, seen, sc.astype(float)


def _support_cut(sup, beta, logc, alpha, pi) -> tuple[float, float, float]:
    """(what the empty cells' sum loses to the combinations of the other keys taken as structural
    zeros, its variance, ρ) (module docstring, "Structural zeros"): each combination c of the
    other keys is possible with probability ρ, ρ = min(1, s / Σ_c (1 − e_c)) with s the number of
    combinations the sample has and e_c = Π_x P(f = 0 | λ_(c,x)) the model's chance that c is empty
    in the sample; a combination no sample record has is possible with probability
    post_c = ρ e_c / (ρ e_c + 1 − ρ), and its cells' P(F = 1 | f = 0) count only that much. The
    variance reads s as the only estimated input: (cut(s − sd) − cut(s + sd))² / 4, sd² =
    Σ_c ρ(1 − e_c)(1 − ρ(1 − e_c)), the combinations independent."""
    lv, cv, S, Sc, seen, sc = sup

    def parts(vals):
        g0, e = np.empty(vals.size), np.empty(vals.size)
        step = max(1, SUPPORT_CHUNK // max(lv.size, 1))     # bounded memory: rows × v's values
        for a in range(0, vals.size, step):
            lam = np.exp(logc + beta * (vals[a:a + step, None] + lv[None, :]))
            g0[a:a + step] = (prob_one(lam, 0, alpha, pi) * cv).sum(axis=1)
            m = pi * lam
            le = -m if alpha <= 1e-12 else -np.log1p(alpha * m) / alpha
            e[a:a + step] = np.exp((le * cv).sum(axis=1))
        return g0, e
    g_all, e_all = parts(S)
    g_seen, e_seen = parts(seen)
    expect = float((Sc * (1.0 - e_all)).sum())
    n_seen = float(sc.sum())

    def cut(k):
        rho = min(1.0, k / expect) if expect > 0 else 1.0
        if rho >= 1.0:
            return 0.0, 1.0

        def lost(e, g):
            return (1.0 - rho * e / (rho * e + 1.0 - rho)) * g
        return float((Sc * lost(e_all, g_all)).sum() - (sc * lost(e_seen, g_seen)).sum()), rho
    c, rho = cut(n_seen)
    o = rho * (1.0 - e_all)
    sd = math.sqrt(float((Sc * o * (1.0 - o)).sum()))
    var = 0.25 * (cut(max(n_seen - sd, 0.0))[0] - cut(n_seen + sd)[0]) ** 2
    return max(c, 0.0), var, rho


def unseen_part(codes, f, p1, pi: float) -> tuple[float, float]:
    """(N̂1_unseen, its variance): the population uniques in categories no sample record has
    (module docstring), (1 − π)/π Σ_j P(F_j = 1 | f_j = 1) over the sampled cells whose record is
    alone in the sample in at least one of its categories. ``codes``: per key, each sampled cell's
    category; ``f``: the cells' counts (f > 0); ``p1``: P(F_j = 1 | f_j = 1) of the cells with f = 1,
    in their order."""
    f = np.asarray(f, dtype=np.float64)
    if pi >= 1.0 or f.size == 0:
        return 0.0, 0.0
    alone = np.zeros(f.shape[0], dtype=bool)
    for c in codes:
        inv = _category_index(c)[1]
        alone |= np.bincount(inv, weights=f)[inv] == 1      # the category's only sample record
    y = np.zeros(f.shape[0])
    y[f == 1] = p1
    y = y[alone]                                           # (alone in a category: f = 1)
    w = (1.0 - pi) / pi
    return w * float(y.sum()), w * w * float((y * y).sum())


def _stat_cov(grid, counts, alpha: float, pi: float, target: str, kmax: int = 40) -> np.ndarray:
    """Covariance of (n1, T) under the fitted model, the cells independent: T = n2 (target "n2") or
    U = Σ_j f_j r (1 − r)^{f_j − 1} (target "half", r = SUB), from the pmf of f_j for f_j ≤ kmax."""
    from scipy import stats
    kmax = 3 if target == "n2" else kmax
    m = pi * grid
    k = np.arange(kmax + 1)[:, None]
    if alpha <= 1e-12:
        pmf = stats.poisson.pmf(k, m[None, :])
    else:
        pmf = stats.nbinom.pmf(k, 1.0 / alpha, 1.0 / (1.0 + alpha * m[None, :]))
    i1 = (k == 1).astype(float)
    t = (k == 2).astype(float) if target == "n2" else k * SUB * (1.0 - SUB) ** np.maximum(k - 1, 0)
    e1, et = (pmf * i1).sum(0), (pmf * t).sum(0)
    v11 = e1 * (1 - e1)
    vtt = (pmf * t * t).sum(0) - et * et
    v1t = (pmf * i1 * t).sum(0) - e1 * et
    return np.array([[float((counts * v11).sum()), float((counts * v1t).sum())],
                     [float((counts * v1t).sum()), float((counts * vtt).sum())]])


def prob_sample_two(lam, alpha: float, pi: float):
    """P(f_j = 2) under the model (negative binomial, mean πλ_j, shape 1/α)."""
    m = pi * np.asarray(lam, dtype=float)
    if alpha <= 1e-12:
        return m * m / 2.0 * np.exp(-m)
    r = 1.0 / alpha
    return r * (r + 1.0) / 2.0 * (alpha * m) ** 2 * np.exp(-(r + 2.0) * np.log1p(alpha * m))


#: the coarse grid of β searched for a sign change of the n2 gap (then Brent's method within)
BETAS = np.linspace(0.0, 1.0, 6)


#: the fraction r of the sample whose expected number of uniques the tempered model must match
#: (target="half"): the sample's own, exactly, Σ_k J_k k r (1 − r)^{k−1}
SUB = 0.5


def n2_gap(beta: float, s_grid, counts, N: float, pi: float, n1: int, n2: float) -> float:
    """E[n2] − n2 under λ ∝ e^{β s}, its α calibrated to n1 (n2 < 0: −n2 is the expected number of
    uniques of a subsample at r = SUB, which the model must match at π·r)."""
    grid = np.exp(_log_lambda(beta, s_grid, counts, N) + beta * s_grid)
    alpha = calibrated_alpha(grid, counts, pi, n1)
    if n2 < 0:
        return float((counts * prob_sample_one(grid, alpha, pi * SUB)).sum()) + n2
    return float((counts * prob_sample_two(grid, alpha, pi)).sum()) - n2


def tempered_beta(s_grid, counts, N: float, pi: float, n1: int, n2: int) -> float:
    """β of λ_j ∝ e^{β s_j} at which the model, its α calibrated to n1, expects n2 sample cells of
    size 2: the first sign change on BETAS, then Brent's method; the β with the smallest gap when
    there is none."""
    from scipy.optimize import brentq
    g = np.array([n2_gap(b, s_grid, counts, N, pi, n1, n2) for b in BETAS])
    ch = np.flatnonzero(np.sign(g[:-1]) != np.sign(g[1:]))
    if ch.size:
        k = int(ch[0])
        return float(brentq(n2_gap, BETAS[k], BETAS[k + 1], args=(s_grid, counts, N, pi, n1, n2),
                            xtol=1e-4))
    return float(BETAS[int(np.argmin(np.abs(g)))])


def calibrated_alpha(grid, counts, pi: float, n1: int) -> float:
    """The α at which the model's expected number of sample uniques, Σ_all P(f_j = 1), equals the
    observed n1 (0 when even the Poisson model expects fewer; the largest α tried, 1e4, when every α
    expects more)."""
    from scipy.optimize import brentq

    def gap(la):
        return float((counts * prob_sample_one(grid, math.exp(la), pi)).sum()) - n1
    lo, hi = math.log(1e-8), math.log(1e4)
    glo, ghi = gap(lo), gap(hi)
    if glo <= 0:
        return 0.0
    if ghi >= 0:
        return 1e4
    return math.exp(brentq(gap, lo, hi, xtol=1e-10))


#: the measure's models (option ``model``) and how each is fitted: (margins, dispersion)
LL_MODELS = {"loglinear": ("tempered", "calibrated"),
             "loglinear_forest": ("forest", "calibrated"),
             # the forest chosen by Ê's risk criterion (gpurisk.models.risk_choice, issue 43)
             "loglinear_risk": ("forest", "calibrated"),
             "loglinear_main": ("main", "calibrated"),
             # Ê's model (issue 43): the pairs kept by their evidence, rooted and smoothed by β
             "loglinear_eb": ("eb", "calibrated"),
             "bethlehem": ("none", "calibrated")}
#: what the key space of each model holds (the measure's extra ``key_space``)
KEY_SPACE = {None: "the combinations of the categories the sample has; a combination no population "
                   "can hold (a structural zero) is still counted as possible; the uniques in "
                   "categories the sample lacks are estimated apart (unseen_categories)",
             "loglinear_forest": "the combinations of the categories the sample has, those with "
                                 "a pair of categories of a kept interaction that the sample lacks "
                                 "made rarer (the pair tables smoothed towards independence), and "
                                 "the combinations of the other keys than the largest lone one "
                                 "that the sample lacks each taken as possible only with the "
                                 "chance the sample's count of combinations implies "
                                 "(structural_zeros); the uniques in categories the sample lacks "
                                 "are estimated apart (unseen_categories)",
             "loglinear_eb": "the combinations of the categories the sample has, a kept pair's "
                             "child categories given its parent's shrunk towards the child's "
                             "shares by as much as the sample supports (Ê's model), and the "
                             "combinations of the other keys than the largest lone one that the "
                             "sample lacks each taken as possible only with the chance the "
                             "sample's count of combinations implies (structural_zeros); the "
                             "uniques in categories the sample lacks are estimated apart "
                             "(unseen_categories)"}
#: the forest's pair tables' smoothing towards independence, in records per pair of categories
#: (``kappa`` of :func:`forest_space`): chosen among 0, 0.1, 0.25 and 0.5 on the cells at π = 5 and
#: 10 % of bench/validate_pop_uniqueness.py and of bench/validate_trust.py --n1-replicates (in-sample;
#: 0.5, the held-out test's own smoothing, put FARS at +24 %; 0 left Adult's four keys at −32 %)
FOREST_KAPPA = 0.25
#: relative model error added to the s.e. (module docstring): the smallest on a grid of steps of
#: 0.025 at which the 95 % interval (its lower end with the unseen pairs') held N1 in ≥ 95 % of the
#: samples, pooled over every cell with N1 > 0 of bench/validate_trust.py's 14 populations, three key
#: sets each, π = 5 and 10 % (bench/n1_interval_loo.py, 80 samples a cell, seeds 43 and 44: 0.955).
#: Leave one population out the same rule took 0.125 in 12 folds and 0.1 in two, and the held-out
#: intervals held N1 in ≥ 90 % of the samples of 69 of the 76 cells (pooled 0.955). 0.15 (set
#: in-sample on bench/validate_pop_uniqueness.py before issue 43) held it in 70, pooled 0.961
MODEL_ERROR = 0.125


def risk_edges(codes, f, pi: float) -> list:
    """The pairs of keys the risk criterion keeps (``gpurisk.models.choose_risk_forest``, Ê's
    ``model=risk``) for the sampled cells ``codes`` (any integers per key) with counts ``f``."""
    from gpurisk.models import Margins, choose_risk_forest
    idx = [_category_index(c)[1] for c in codes]
    cards = [int(i.max()) + 1 if i.size else 0 for i in idx]
    return choose_risk_forest(Margins(idx, np.asarray(f, dtype=float), cards), min(pi, 1.0))[0]


def fit(codes, f, N: float, model: str = "loglinear", level: float = 0.95,
        model_error: float = MODEL_ERROR, ranks=None, names=None, choice_spread: bool = True,
        unseen: bool = True, support: bool = True):
    """A :class:`~gpurisk_arx.uniqueness.Fit` of N1 under ``model`` (LL_MODELS): the model's sum
    plus, with ``unseen``, the uniques in categories no sample record has (:func:`unseen_part`), the
    estimate within [n1 − (N − n), N − (n − n1)], s.e. = √(process variance (the unseen part's
    included) + delta-method variance through n1, n2 +
    (model_error · estimate)² + the forest's choice spread (forest models, ``choice_spread``)), the
    interval at ``level`` on the log scale, N̂1 · exp(± z s.e./N̂1), its lower end also that of the
    estimate without the unseen pairs' part, its ends rounded outward to whole people within those
    bounds (:func:`interval_ends`); no value (a reason) when
    every sample record is unique; 0 with the model-free interval of
    :func:`.fitted.none_unique_fit` when no sample record is. ``support``: the structural zeros' cut
    of the empty cells' part (forest models; module docstring)."""
    from scipy.stats import norm

    from .fitted import none_unique_fit
    from .pitman_mle import bounds
    from .uniqueness import Fit, sample
    f = np.asarray(f, dtype=np.int64)
    sm = sample(np.bincount(f[f > 0], minlength=2), N)
    if sm.n1 == sm.n and sm.n > 0 and sm.N > sm.n:
        return Fit(model, None, "not estimable: every sample record is unique (n1 = n), so the sample "
                   "cannot tell how many population records are unique", converged=False)
    if sm.n1 == 0:
        return none_unique_fit(model, sm, level)
    margins, dispersion = LL_MODELS[model]
    keep = f > 0
    kept = [np.asarray(c)[keep] for c in codes]
    kappa = FOREST_KAPPA if margins.startswith("forest") else 0.0
    edges = risk_edges(kept, f[keep], float(f.sum()) / float(N)) if model == "loglinear_risk" else None
    r = estimate(kept, f[keep], N, margins, dispersion, ranks=ranks, names=names, kappa=kappa,
                 support=support, edges=edges)
    lo_cap, hi_cap = bounds(sm)
    add, add_var = (unseen_part(kept, f[keep], r.p1, float(f.sum()) / float(N)) if unseen
                    else (0.0, 0.0))
    total = r.value + add
    v = min(max(total, lo_cap), hi_cap)
    # the forest's choice: the estimate under each forest one held-out test away, weighted by the
    # chance that test goes the other way (gpurisk.models.doubtful, as Ê's s.e. takes it)
    choice_var = sum(w * (estimate(kept, f[keep], N, margins, dispersion, edges=es,
                                   kappa=kappa, support=support).value
                          - r.value) ** 2 for w, es in r.alts) if choice_spread else 0.0
    se = math.sqrt(r.process_var + add_var + r.param_var + (model_error * v) ** 2 + choice_var)
    z = float(norm.ppf(0.5 + level / 2.0))
    params = {"beta": r.beta, "alpha": r.alpha, "K": r.K, "sample_unique_part": r.observed,
              "unobserved_part": r.unobserved, "unseen_categories_part": add,
              "structural_zeros_cut": r.support_cut, "structural_zeros_rho": r.support_rho,
              "se_structural_zeros": r.se_support,
              "se_unseen": math.sqrt(add_var), "expected_n1": r.expected_n1,
              "se_process": math.sqrt(r.process_var), "se_fit": math.sqrt(r.param_var),
              "se_choice": math.sqrt(choice_var),
              "model_error": model_error}
    if margins.startswith("forest") or margins == "eb":
        params["interactions"] = tuple(r.edges)
    if v != total:
        params["capped_from"] = total
    params["unseen_pairs_part"] = r.open_part
    if r.open_part > 0 and v > 0:
        shut = max(v - r.open_part, lo_cap)
        params["without_unseen_pairs"] = shut
        if r.open_part >= 0.5 * v:            # most of the estimate: said
            params["note"] = (
                f"{r.open_part:.3g} of N̂1's {v:.3g} sit in combinations holding a pair of "
                "categories of a kept interaction that no sample record has: the sample cannot "
                "tell whether the population holds such combinations, so the interval's lower end "
                f"is also that of the estimate without them ({shut:.3g})")
    lo, hi = interval_ends(v, se, z, r.open_part, sm)
    return Fit(model, v, params=params, se=se, lower=lo, upper=hi)


def interval_ends(v: float, se: float, z: float, open_part: float, sm) -> tuple[float, float]:
    """:func:`fit`'s interval of N̂1 = ``v``: on the log scale, N̂1 · exp(± z s.e./N̂1) (the error is
    relative, as the model-error term is, and a symmetric interval shrank where the estimate was
    low, which is where it missed; a tiny N̂1's upper end is the cap). Its lower end is the smaller
    of that and the same relative width below N̂1 − ``open_part``: the combinations holding a pair
    of categories of a kept interaction that no sample record has, which the model takes as
    possible and the sample cannot tell from impossible ones (a structural zero leaves no trace).
    The ends are whole people, rounded outward, within what the sample ``sm`` allows."""
    from .pitman_mle import bounds, count_interval
    w = min(z * se / v, 700.0) if v > 0 else math.nan
    lo, hi = (v * math.exp(-w), v * math.exp(w)) if v > 0 else (v - z * se, v + z * se)
    if open_part > 0 and v > 0:
        lo = min(lo, max(v - open_part, bounds(sm)[0]) * math.exp(-w))
    return count_interval(lo, hi, sm)
