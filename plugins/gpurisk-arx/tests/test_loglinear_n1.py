"""The log-linear Poisson–gamma estimate of the population uniques (gpurisk_arx.loglinear_n1).

References not derived from the module: the sum over all K cells written out cell by cell (brute
force over the full key space, each term by Bayes' rule from the negative binomial laws of F and
of its binomial thinning f), and a
simulation of the model's own procedure (cells drawn from the fitted model, the population's N1
counted) that the estimate must recover.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from gpurisk_arx import loglinear_n1 as LL


def _sample(rng, cards=(7, 5, 9, 4), n_pop=3000, pi=0.2):
    """A population of records with skewed categories, and a Bernoulli sample of it."""
    cols = [rng.choice(k, size=n_pop, p=rng.dirichlet(np.full(k, 0.7))) for k in cards]
    tied = rng.random(n_pop) < 0.6            # key 1 follows key 0 for most records: an interaction
    cols[1] = np.where(tied, cols[0] % cards[1], cols[1])
    pop = np.column_stack(cols)
    keep = rng.random(n_pop) < pi
    cells, f = np.unique(pop[keep], axis=0, return_counts=True)
    return pop, cells, f


def _brute(cells, f, N, alpha_expected=None):
    """E[N1 | sample] summed over every combination of the sampled categories, one cell at a time,
    each P(F = 1 | f) by Bayes' rule from the negative binomial laws of F and f."""
    n = f.sum()
    pi = n / N
    cats = [np.unique(cells[:, v]) for v in range(cells.shape[1])]
    p = [{c: f[cells[:, v] == c].sum() / n for c in cats[v]} for v in range(cells.shape[1])]
    obs = {tuple(r): int(k) for r, k in zip(cells, f)}
    mus = {combo: n * math.prod(p[v][c] for v, c in enumerate(combo))
           for combo in itertools.product(*cats)}
    sum_mu2 = sum(m * m for m in mus.values())
    num = sum((obs.get(c, 0) - m) ** 2 for c, m in mus.items()) - n
    alpha = max(num / sum_mu2, 0.0)
    if alpha_expected is not None:
        assert alpha == pytest.approx(alpha_expected, rel=1e-9)
    q = 1 - pi
    tot = 0.0
    for combo, m in mus.items():
        k = obs.get(combo, 0)
        if k > 1:
            continue
        lam = m / pi
        # Bayes with the negative binomial margins: F ~ NB(1/α, mean λ), and f is its binomial
        # thinning, NB(1/α, mean πλ); P(F = 1, f = k) = P(F = 1) π^k q^(1−k)
        r = 1 / alpha
        pF1 = stats.nbinom.pmf(1, r, 1 / (1 + alpha * lam))
        pf = stats.nbinom.pmf(k, r, 1 / (1 + alpha * pi * lam))
        tot += pF1 * (pi if k == 1 else q) / pf
    return tot, alpha


def test_sum_over_all_cells_equals_brute_force():
    rng = np.random.default_rng(5)
    pop, cells, f = _sample(rng)
    N = pop.shape[0]
    want, alpha = _brute(cells, f, N)
    assert alpha > 0                      # the gamma branch is the one exercised
    codes = [cells[:, v] for v in range(cells.shape[1])]
    exact = LL.estimate(codes, f, N)                       # K ≤ EXACT_MAX: enumeration
    binned = LL.estimate(codes, f, N, exact_max=0)         # forced through the convolution
    assert exact.alpha == pytest.approx(alpha, rel=1e-9)
    assert exact.value == pytest.approx(want, rel=1e-6)
    assert binned.value == pytest.approx(want, rel=1e-4)
    assert binned.process_var == pytest.approx(exact.process_var, rel=1e-4)


def test_poisson_branch_matches_brute_force():
    """dispersion=none: the terms are e^{−qλ} and qλ e^{−qλ}, summed by hand over all cells."""
    rng = np.random.default_rng(9)
    pop, cells, f = _sample(rng, cards=(4, 6, 3), n_pop=800, pi=0.3)
    N, n = pop.shape[0], f.sum()
    pi, q = n / N, 1 - n / N
    cats = [np.unique(cells[:, v]) for v in range(3)]
    obs = {tuple(r): int(k) for r, k in zip(cells, f)}
    want = 0.0
    for combo in itertools.product(*cats):
        lam = n / pi * math.prod(f[cells[:, v] == c].sum() / n for v, c in enumerate(combo))
        k = obs.get(combo, 0)
        want += math.exp(-q * lam) if k == 1 else (q * lam * math.exp(-q * lam) if k == 0 else 0)
    got = LL.estimate([cells[:, v] for v in range(3)], f, N, dispersion="none", exact_max=0)
    assert got.alpha == 0.0
    assert got.value == pytest.approx(want, rel=1e-4)


def _pair_supported(cells, cats):
    """The combinations of the sampled categories whose every pair of categories a sample cell has
    (the key space bench/diagnose_pop_uniqueness.py calls sample-pairs), one at a time."""
    nk = cells.shape[1]
    seen = {(u, v, a, b) for r in cells for u, v in itertools.combinations(range(nk), 2)
            for a, b in [(r[u], r[v])]}
    return [c for c in itertools.product(*cats)
            if all((u, v, c[u], c[v]) in seen for u, v in itertools.combinations(range(nk), 2))]


def _space_of(combos, cats):
    """``space`` for LL.estimate listing ``combos`` (category values) one cell each."""
    def space(logs, idx):
        s = np.array([sum(logs[v][int(np.searchsorted(cats[v], c[v]))] for v in range(len(c)))
                      for c in combos])
        return s, np.ones(len(combos))
    return space


@pytest.mark.parametrize("alpha_branch", [False, True])
def test_restricted_key_space_matches_brute_force(alpha_branch):
    """A key space other than all K combinations (``space``, the structural-zero diagnostic): only the
    pair-supported combinations. β = 1: λ_j = N Π_v p̂_v / Σ_kept Π_v p̂_v over the kept cells; the
    sum written out cell by cell with each term by Bayes' rule (Poisson: F ~ Poisson(λ), f its
    binomial thinning; gamma: the negative binomial laws at the fitted α, which must make the kept
    cells expect exactly n1 sample uniques)."""
    rng = np.random.default_rng(5)          # a sample whose kept cells need α > 0 to expect n1
    pop, cells, f = _sample(rng, cards=(5, 4, 6), n_pop=900, pi=0.15)
    N, n = pop.shape[0], f.sum()
    pi, q = n / N, 1 - n / N
    cats = [np.unique(cells[:, v]) for v in range(3)]
    kept = _pair_supported(cells, cats)
    assert 0 < len(kept) < math.prod(len(c) for c in cats)     # the restriction bites
    obs = {tuple(r): int(k) for r, k in zip(cells, f)}
    assert all(c in set(kept) for c in obs)
    w = {c: math.prod(f[cells[:, v] == x].sum() / n for v, x in enumerate(c)) for c in kept}
    tot = sum(w.values())
    lam = {c: N * w[c] / tot for c in kept}
    got = LL.estimate([cells[:, v] for v in range(3)], f, N, "main",
                      "calibrated" if alpha_branch else "none", space=_space_of(kept, cats))
    assert got.K == len(kept)
    a = got.alpha
    want, n1_model = 0.0, 0.0
    for c, L in lam.items():
        k = obs.get(c, 0)
        if alpha_branch:
            r = 1 / a
            pF1 = stats.nbinom.pmf(1, r, 1 / (1 + a * L))
            pf = stats.nbinom.pmf(k, r, 1 / (1 + a * pi * L))
            n1_model += stats.nbinom.pmf(1, r, 1 / (1 + a * pi * L))
        else:
            pF1, pf = stats.poisson.pmf(1, L), stats.poisson.pmf(k, pi * L)
        if k <= 1:
            want += pF1 * (pi if k == 1 else q) / pf
    if alpha_branch:
        assert a > 0 and n1_model == pytest.approx(int((f == 1).sum()), rel=1e-6)
    assert got.value == pytest.approx(want, rel=1e-9)


def test_convolution_on_a_key_space_beyond_enumeration():
    """K = 40⁶ ≈ 4·10⁹ cells: the convolution runs; with h halved it changes by < 1e-4."""
    rng = np.random.default_rng(2)
    cards = (40,) * 6
    pop, cells, f = _sample(rng, cards=cards, n_pop=20000, pi=0.05)
    codes = [cells[:, v] for v in range(6)]
    a = LL.estimate(codes, f, pop.shape[0])
    b = LL.estimate(codes, f, pop.shape[0], h=LL.BIN_WIDTH / 2)
    assert a.K > 1e9
    assert a.value == pytest.approx(b.value, rel=1e-4)


def test_simulation_of_the_model_recovers_N1():
    """Populations drawn from the model itself (main effects, gamma cell effect, Poisson counts),
    sampled at π: the mean of E[N1 | sample] matches the mean true N1 within 3 % (and within 3
    simulation s.e.)."""
    rng = np.random.default_rng(11)
    cards = (8, 6, 10, 5)
    margins = [rng.dirichlet(np.full(k, 0.8)) for k in cards]
    lam = 4000.0 * np.einsum("a,b,c,d->abcd", *margins).ravel()
    grid = np.array(list(itertools.product(*[range(k) for k in cards])))
    alpha, pi = 0.6, 0.1
    errs, truths = [], []
    for _ in range(60):
        F = rng.poisson(lam * rng.gamma(1 / alpha, alpha, size=lam.size))
        f = rng.binomial(F, pi)
        s = f > 0
        est = LL.estimate([grid[s, v] for v in range(4)], f[s], F.sum())
        truth = (F == 1).sum()
        errs.append(est.value - truth)
        truths.append(truth)
    bias, se = np.mean(errs), np.std(errs, ddof=1) / math.sqrt(len(errs))
    assert abs(bias) < 0.03 * np.mean(truths)
    assert abs(bias) < 3 * se + 1e-9 or abs(bias) < 0.01 * np.mean(truths)


def _main_effects_populations(reps, seed=4):
    rng = np.random.default_rng(seed)
    cards = (9, 7, 12, 5)
    margins = [rng.dirichlet(np.full(k, 0.8)) for k in cards]
    lam = 6000.0 * np.einsum("a,b,c,d->abcd", *margins).ravel()
    grid = np.array(list(itertools.product(*[range(k) for k in cards])))
    for _ in range(reps):
        F = rng.poisson(lam * rng.gamma(1 / 0.5, 0.5, size=lam.size))
        yield F, rng.binomial(F, 0.1), [grid[:, v] for v in range(4)]


def test_main_effects_fit_recovers_N1_and_covers_it_under_its_model():
    """model=loglinear_main (main effects, α fitted to n1) on populations drawn from a main-effects
    Poisson–gamma model (α = 0.5, π = 0.1): the mean estimate is within 4 % of the mean true N1 and
    the 95 % interval covers N1 in at least 85 % of the samples."""
    errs, truths, cover = [], [], 0
    for F, f, codes in _main_effects_populations(30):
        fit = LL.fit(codes, f, F.sum(), "loglinear_main")     # f = 0 cells are dropped
        truth = (F == 1).sum()
        errs.append(fit.value - truth)
        truths.append(truth)
        cover += fit.lower <= truth <= fit.upper
    assert abs(np.mean(errs)) < 0.04 * np.mean(truths)
    assert cover / 30 >= 0.85


def test_default_fit_under_a_main_effects_model():
    """The default (main effects tempered by β ∈ [0, 1], α and β fitted to n1 and n2) on the same
    populations: the sample's n2 pulls β below 1 (the estimated margins spread the cells' means more
    than the true ones do), so it is low here: measured −10 % (interval coverage 80 %) on these 20 samples; the test
    holds the bias within −20 % … +5 % and the coverage at ≥ 60 % (docs/arx.md gives the known bias)."""
    errs, truths, cover = [], [], 0
    for F, f, codes in _main_effects_populations(20, seed=5):
        fit = LL.fit(codes, f, F.sum())
        truth = (F == 1).sum()
        errs.append(fit.value - truth)
        truths.append(truth)
        cover += fit.lower <= truth <= fit.upper
    rel = np.mean(errs) / np.mean(truths)
    assert -0.20 < rel < 0.05
    assert cover / 20 >= 0.6


def test_fit_edges():
    """Every sample record unique: not estimable (no value, the reason); no sample unique: 0; the
    value never leaves [n1 − (N − n), N − (n − n1)]."""
    codes = [np.arange(6), np.arange(6) % 2]
    r = LL.fit(codes, np.ones(6, dtype=int), 100)
    assert r.value is None and "not estimable" in r.reason
    r = LL.fit(codes, np.full(6, 3), 100)
    assert r.value == 0.0
    f = np.array([1, 1, 1, 1, 2, 9])          # N = n + 1: at most n1 + 1 population uniques
    r = LL.fit([np.arange(6), np.arange(6) % 3], f, f.sum() + 1)
    assert 4 - 1 <= r.value <= 4 + 1 and r.lower >= 3 and r.upper <= 5


def _chain_populations(reps, seed=3, alpha=0.4, pi=0.1, total=8000.0):
    """Populations from a Poisson–gamma model with a chain of interactions 0 – 1 – 2 and a lone key 3:
    λ_x = total · p(x0, x1) p(x2 | x1) p(x3), each pair's table a Dirichlet draw concentrated on few
    combinations (many combinations near zero); a Bernoulli sample at π of each."""
    rng = np.random.default_rng(seed)
    cards = (8, 6, 7, 5)
    p01 = rng.dirichlet(np.full(cards[0] * cards[1], 0.3)).reshape(cards[0], cards[1])
    p2g1 = rng.dirichlet(np.full(cards[2], 0.3), size=cards[1])            # rows: x1
    p3 = rng.dirichlet(np.full(cards[3], 1.0))
    lam = total * np.einsum("ab,bc,d->abcd", p01, p2g1, p3).ravel()
    grid = np.array(list(itertools.product(*[range(k) for k in cards])))
    for _ in range(reps):
        F = rng.poisson(lam * rng.gamma(1 / alpha, alpha, size=lam.size))
        yield F, rng.binomial(F, pi), [grid[:, v] for v in range(4)]


def _forest_brute(codes, f, N, edges, alpha):
    """E[N1 | sample] under main effects + the forest ``edges`` at the given α, written out over every
    combination of the sampled categories one at a time: μ_x = n Π_pairs p_ab Π_v p_v^{1 − deg(v)}
    from the sample's margins (a combination with an unseen pair has μ = 0 and adds nothing),
    λ = μ/π, each term by Bayes' rule on the negative binomial laws of F and its thinning f; and the
    model's expected number of sample uniques Σ P(f = 1)."""
    n = f.sum()
    pi, q = n / N, 1 - n / N
    d = len(codes)
    cats = [np.unique(c) for c in codes]
    deg = [sum(v in e for e in edges) for v in range(d)]
    one = [{c: f[codes[v] == c].sum() / n for c in cats[v]} for v in range(d)]
    two = {e: {} for e in edges}
    for (a, b) in edges:
        for x, y, k in zip(codes[a], codes[b], f):
            two[(a, b)][(x, y)] = two[(a, b)].get((x, y), 0.0) + k / n
    obs = {tuple(int(c[i]) for c in codes): int(f[i]) for i in range(f.size)}
    def law(k, m):            # P(X = k), X negative binomial with mean m and shape 1/α (α = 0: Poisson)
        if alpha == 0:
            return stats.poisson.pmf(k, m)
        return stats.nbinom.pmf(k, 1 / alpha, 1 / (1 + alpha * m))
    want = n1_model = 0.0
    for combo in itertools.product(*cats):
        p = math.prod(one[v][combo[v]] ** (1 - deg[v]) for v in range(d))
        p *= math.prod(two[(a, b)].get((combo[a], combo[b]), 0.0) for a, b in edges)
        if p == 0:
            continue
        lam = N * p
        k = obs.get(tuple(int(x) for x in combo), 0)
        n1_model += law(1, pi * lam)
        if k <= 1:
            want += law(1, lam) * (pi if k == 1 else q) / law(k, pi * lam)
    return want, n1_model


@pytest.mark.parametrize("seed,gamma_branch", [(8, True), (9, False)])
def test_forest_sum_matches_brute_force(seed, gamma_branch):
    """margins="forest": the sum over every cell of the key space, by enumeration of the trees' and
    lone keys' product and by the convolution of their binned log-probabilities, against the same
    sum written out combination by combination (:func:`_forest_brute`); the fitted α makes the model
    expect exactly the sample's n1 (a sample where α > 0, and one where the Poisson model already
    expects fewer, α = 0); the chosen forest holds the chain's pairs."""
    F, f, codes = next(_chain_populations(1, seed=seed, alpha=1.0))
    s = f > 0
    codes, f, N = [c[s] for c in codes], f[s], F.sum()
    exact = LL.estimate(codes, f, N, "forest", "calibrated")
    binned = LL.estimate(codes, f, N, "forest", "calibrated", exact_max=0)
    assert (0, 1) in exact.edges and (1, 2) in exact.edges          # the chain is found
    want, n1_model = _forest_brute(codes, f, N, exact.edges, exact.alpha)
    assert (exact.alpha > 0) == gamma_branch
    if gamma_branch:
        assert n1_model == pytest.approx(int((f == 1).sum()), rel=1e-6)
    assert exact.value == pytest.approx(want, rel=1e-6)
    assert binned.edges == exact.edges
    assert binned.value == pytest.approx(want, rel=1e-3)
    # the same sum without the pairs (main effects at the same α) differs: the forest is what counts
    assert abs(_forest_brute(codes, f, N, (), exact.alpha)[0] - want) > 0.05 * want


def _rooted_brute(codes, f, N, roots, arcs, alpha):
    """E[N1 | sample] under Ê's rooted form written out combination by combination: p(x) =
    Π_roots n_r(x_r)/n Π_arcs (n_pc + β n_c/n)/(n_p + β) from the sample's counts, λ = N p(x), each
    term by Bayes' rule on the negative binomial laws of F and f (as :func:`_forest_brute`)."""
    n = f.sum()
    pi, q = n / N, 1 - n / N
    cats = [np.unique(c) for c in codes]
    one = [{c: f[codes[v] == c].sum() for c in cats[v]} for v in range(len(codes))]
    two = {}
    for p, c, _ in arcs:
        t = two.setdefault((p, c), {})
        for x, y, k in zip(codes[p], codes[c], f):
            t[(x, y)] = t.get((x, y), 0.0) + k
    obs = {tuple(int(c[i]) for c in codes): int(f[i]) for i in range(f.size)}

    def law(k, m):
        if alpha == 0:
            return stats.poisson.pmf(k, m)
        return stats.nbinom.pmf(k, 1 / alpha, 1 / (1 + alpha * m))
    want = total = opened = 0.0
    for combo in itertools.product(*cats):
        p = math.prod(one[r][combo[r]] / n for r in roots)
        for a, c, beta in arcs:
            p *= ((two[(a, c)].get((combo[a], combo[c]), 0.0) + beta * one[c][combo[c]] / n)
                  / (one[a][combo[a]] + beta))
        total += p
        k = obs.get(tuple(int(x) for x in combo), 0)
        if k <= 1:
            term = law(1, N * p) * (pi if k == 1 else q) / law(k, pi * N * p)
            want += term
            if any((combo[a], combo[c]) not in two[(a, c)] for a, c, _ in arcs):
                opened += term           # a pair of categories of an arc no sample record has
    return want, total, opened


@pytest.mark.parametrize("seed", [8, 11])
def test_eb_forest_is_the_rooted_form_written_out(seed):
    """margins="eb" (model loglinear_eb: Ê's forest, each tree rooted, a child's shares given its
    parent's shrunk by β) by the trees' joint tables and the convolution, against the rooted form
    written out combination by combination at the same α, roots and β (:func:`_rooted_brute`); the
    probabilities sum to 1 over the key space and the chain's pairs are kept."""
    from gpurisk.models import eb_forest
    from gpurisk.models.forest import Margins
    F, f, codes = next(_chain_populations(1, seed=seed, alpha=1.0))
    s = f > 0
    codes, f, N = [c[s] for c in codes], f[s], F.sum()
    exact = LL.estimate(codes, f, N, "eb", "calibrated")
    binned = LL.estimate(codes, f, N, "eb", "calibrated", exact_max=0)
    assert (0, 1) in exact.edges and (1, 2) in exact.edges
    assert not exact.alts
    idx = [LL._category_index(c)[1] for c in codes]
    cards = [int(i.max()) + 1 for i in idx]
    roots, arcs = eb_forest.orient(Margins(idx, f, cards), list(exact.edges))
    want, total, opened = _rooted_brute(idx, f.astype(float), N, roots, arcs, exact.alpha)
    assert total == pytest.approx(1.0, rel=1e-12)
    assert exact.value == pytest.approx(want, rel=1e-6)
    assert binned.value == pytest.approx(want, rel=1e-3)
    # the empty cells' part in combinations holding a pair of an arc that no sample record has
    assert 0 < opened < exact.unobserved
    assert exact.open_part == pytest.approx(opened, rel=1e-6)
    assert binned.open_part == pytest.approx(opened, rel=1e-3)
    # the sampled cells' log p̂ are Ê's own fit (eb_forest.rooted_means)
    logs, ix = LL._log_probs(codes, f.astype(float), float(f.sum()))
    _, s_obs, _, _, _ = LL.forest_space(logs, ix, f, smoothing="eb")
    mu = eb_forest.rooted_means(Margins(ix, f, cards), roots, arcs)[0]
    np.testing.assert_allclose(s_obs, np.log(mu / f.sum()), rtol=0, atol=1e-12)


def test_forest_fit_recovers_N1_under_a_chain_model():
    """model=loglinear_forest on populations drawn from a chain-interaction Poisson–gamma model
    (:func:`_chain_populations`, α = 0.1, 30 000 records, π = 0.1): the mean estimate is within 10 %
    of the mean true N1 (measured +3.8 % on 15 samples with the pair tables smoothed by
    FOREST_KAPPA; −6.7 % with the ML tables, which give probability 0 to the pairs of categories the
    sample lacks) and closer to it than main effects alone (+10 %); the interval covers N1 in at
    least 85 % of the samples (15 of 15 measured)."""
    errs, main_errs, truths, cover = [], [], [], 0
    reps = 15
    for F, f, codes in _chain_populations(reps, alpha=0.1, total=30000.0):
        fit = LL.fit(codes, f, F.sum(), "loglinear_forest")
        main = LL.fit(codes, f, F.sum(), "loglinear_main")
        truth = (F == 1).sum()
        errs.append(fit.value - truth)
        main_errs.append(main.value - truth)
        truths.append(truth)
        cover += fit.lower <= truth <= fit.upper
    t = np.mean(truths)
    assert abs(np.mean(errs)) < 0.10 * t
    assert abs(np.mean(errs)) < abs(np.mean(main_errs))
    assert cover / reps >= 0.85


def test_tree_cells_against_the_dense_table():
    """A tree of four keys (pairs 0–1, 1–2, 1–3): the combinations that the sparse join lists, and
    their log p̂ = Σ log p̂_ab + Σ (1 − deg) log p̂_v, equal the finite entries of the dense
    c0·c1·c2·c3 table built by broadcasting (κ = 0, where unseen pairs give −∞), and with κ > 0 all
    the combinations; the counting messages give the same number."""
    rng = np.random.default_rng(1)
    cards = (6, 5, 7, 4)
    n_cells = 60
    codes = [rng.integers(0, k, n_cells) for k in cards]
    codes = [np.concatenate([c, np.arange(7) % k]) for c, k in zip(codes, cards)]  # every category seen
    f = rng.integers(1, 4, codes[0].size).astype(float)
    n = f.sum()
    logs = [np.log(np.bincount(c, weights=f, minlength=k) / n) for c, k in zip(codes, cards)]
    edges = [(0, 1), (1, 2), (1, 3)]
    deg = [1, 3, 1, 1]
    for kappa in (0.0, 0.5):
        pairs = {e: LL._pair_table(logs, codes, f, n, *e, kappa) for e in edges}
        got = np.sort(LL._tree_cells([0, 1, 2, 3], edges, pairs, logs, deg))
        dense = sum((1 - deg[v]) * logs[v].reshape([-1 if u == v else 1 for u in range(4)])
                    for v in range(4))
        for a, b in edges:
            t = np.full((cards[a], cards[b]), -np.inf)
            xa, xb, lp = pairs[(a, b)]
            t[xa, xb] = lp
            dense = dense + t.reshape([cards[u] if u in (a, b) else 1 for u in range(4)])
        want = np.sort(dense[np.isfinite(dense)].ravel())
        assert (kappa > 0) == (want.size == math.prod(cards))
        assert got.shape == want.shape and np.allclose(got, want, rtol=0, atol=1e-12)
        assert LL._tree_size([0, 1, 2, 3], edges, pairs, list(cards)) == want.size
        # the tables are probabilities: Σ over the tree's combinations of p̂ is 1
        assert np.exp(got).sum() == pytest.approx(1.0, rel=1e-12)


def test_tree_max_drops_the_pair_that_would_overgrow_a_tree():
    """With ``tree_max`` below the chain's size the pair of smaller held-out gain is left out, and
    the estimate is the one of the forest without it."""
    F, f, codes = next(_chain_populations(1, seed=8, alpha=1.0))
    s = f > 0
    codes, f = [c[s] for c in codes], f[s]
    logs, idx = LL._log_probs(codes, f.astype(float), float(f.sum()))
    _, _, full, _, _ = LL.forest_space(logs, idx, f)
    assert (0, 1) in full and (1, 2) in full
    pair_sizes = [len(LL._pair_table(logs, idx, f, f.sum(), *e, 0.0)[0]) for e in [(0, 1), (1, 2)]]
    _, _, cut, _, _ = LL.forest_space(logs, idx, f, tree_max=max(pair_sizes) * 2)
    assert len(cut) < len(full)


def test_forest_choice_spread_in_the_se():
    """The s.e.'s choice term: the fit with it and without it differ by exactly
    Σ w (N̂1(E′) − N̂1)² in se², E′ the doubtful forests (gpurisk.models.forest.doubtful, recomputed
    here from the pair scores) each estimated with its pairs fixed; the value is the same."""
    from gpurisk.models.forest import choose_forest, doubtful
    F, f, codes = next(_chain_populations(1, seed=12, alpha=1.0, pi=0.05))
    s = f > 0
    codes, f, N = [c[s] for c in codes], f[s], F.sum()
    on = LL.fit(codes, f, N, "loglinear_forest")
    off = LL.fit(codes, f, N, "loglinear_forest", choice_spread=False)
    assert on.value == off.value
    idx = [np.unique(c, return_inverse=True)[1] for c in codes]
    kept, scores = choose_forest(idx, f, [i.max() + 1 for i in idx], max_pairs=3)
    alts = doubtful(kept, scores, max_pairs=3)
    assert alts                                    # some test is close enough to count
    k = LL.FOREST_KAPPA
    base = LL.estimate(codes, f, N, "forest", "calibrated", kappa=k).value
    want = sum(w * (LL.estimate(codes, f, N, "forest", "calibrated", edges=e, kappa=k).value
                    - base) ** 2 for w, e in alts)
    assert want > 0
    assert on.se ** 2 - off.se ** 2 == pytest.approx(want, rel=1e-9)
    assert on.params["se_choice"] == pytest.approx(math.sqrt(want), rel=1e-9)


def test_interval_on_the_log_scale_and_a_tiny_estimate():
    """The interval is N̂1 · exp(± z s.e./N̂1), its lower end the smaller of that and the estimate
    without the combinations holding an unseen pair of a kept interaction at the same relative
    width, its ends rounded outward to whole people and clipped to what the sample allows, and an
    estimate near 0 with a large relative s.e. gives the cap as its upper end instead of
    overflowing (a first version did, on FARS's race key alone)."""
    from scipy.stats import norm
    F, f, codes = next(_chain_populations(1, seed=12, alpha=1.0, pi=0.05))
    fit = LL.fit(codes, f, F.sum(), "loglinear_forest")
    z = norm.ppf(0.975)
    w = z * fit.se / fit.value
    lo, hi = fit.value * math.exp(-w), fit.value * math.exp(w)
    shut = fit.params["without_unseen_pairs"]
    assert 0 < fit.params["unseen_pairs_part"] and shut == fit.value - fit.params["unseen_pairs_part"]
    assert lo % 1 and hi % 1                      # the smooth ends are not whole: rounding shows
    assert (fit.lower, fit.upper) == (math.floor(min(lo, shut * math.exp(-w))), math.ceil(hi))
    # one key, one sample unique among 3 501 records at π = 0.05: N̂1 is about 6e-9, its s.e. 0.012
    n, N = 3501, 70000.0
    tiny = LL.fit([np.arange(4)], np.array([2000, 1000, 500, 1]), N, "loglinear_forest")
    assert 0 < tiny.value < 1e-6 and tiny.se > 1e-3
    assert 0 <= tiny.lower <= tiny.value and tiny.upper == N - (n - 1)   # the cap, no overflow


@pytest.mark.parametrize("model", ["loglinear_forest", "pitman"])
def test_no_sample_unique_gives_zero_with_a_model_free_upper_end(model):
    """With n1 = 0 no model of the uniques can be fitted: N̂1 = 0 with the interval [0, U], U the
    largest N1 with (1 − π)^N1 ≥ 1 − level (by hand: π = 0.1, level 0.95: log 0.05 / log 0.9 =
    28.43, so 28); and by simulation, the chance that Bernoulli(π) sampling takes none of U + 1
    population uniques is below 5 %, of U at least 5 %."""
    from gpurisk_arx import fitted, uniqueness as U
    f = np.array([2, 3, 5, 10])                   # 20 records, none unique
    N = 200.0
    fit = (LL.fit([np.arange(4)], f, N, model) if model.startswith("loglinear")
           else fitted.pitman_mle_fit(U.sample(np.bincount(f, minlength=2), N)))
    assert fit.value == 0.0 and fit.lower == 0.0 and fit.upper == 28.0 and fit.se is None
    assert "n1 = 0" in fit.params["note"]
    rng = np.random.default_rng(3)
    none = lambda k: np.mean(~(rng.random((200_000, k)) < 0.1).any(axis=1))   # noqa: E731
    assert none(29) < 0.05 <= none(28)


def _rare_population(rng, N=1500):
    """Three keys with long tails of rare categories (many held by one to a few records)."""
    a = rng.zipf(1.6, N) % 60
    b = rng.choice(6, size=N, p=[0.4, 0.25, 0.15, 0.1, 0.06, 0.04])
    c = np.where(rng.random(N) < 0.85, rng.choice(5, size=N), 5 + rng.integers(0, 300, N))
    return np.column_stack([a, b, c])


def _cell_counts(rows):
    """Each row's count among ``rows`` of its combination of the columns."""
    _, inv, cnt = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    return cnt[inv.reshape(-1)]


def test_unseen_part_is_unbiased_by_simulation():
    """N̂1_unseen with the true P(F = 1 | f = 1) (1 for a population unique, 0 otherwise) against
    its target Σ_i I(F_i = 1) P(some category of i is missing from the sample), the probability
    written out by inclusion–exclusion over the keys, P(all of S missing) = (1 − π)^|∪_S C_v(i)|
    with |∪| from the population's counts of each combination of keys; the mean over 3 000
    Bernoulli samples is within 4 Monte Carlo s.e. of it (measured: 282.4 ± 0.8 against 282.0), and
    the reported variance is not below the estimates' own (2 541 against 1 942). Counting a record
    once per key it is alone in, instead of once, gives 305."""
    rng = np.random.default_rng(31)
    pop = _rare_population(rng)
    pi = 0.1
    unique = _cell_counts(pop) == 1
    miss_all = np.zeros(pop.shape[0])
    for size in (1, 2, 3):
        for S in itertools.combinations(range(3), size):
            union = sum((-1) ** (len(T) + 1) * _cell_counts(pop[:, list(T)])
                        for t in range(1, len(S) + 1) for T in itertools.combinations(S, t))
            miss_all += (-1) ** (size + 1) * (1 - pi) ** union
    target = float(miss_all[unique].sum())
    assert target > 20                                   # rare categories hold many uniques here
    est, var, naive = [], [], []
    for _ in range(3000):
        s = rng.random(pop.shape[0]) < pi
        cells, first, f = np.unique(pop[s], axis=0, return_index=True, return_counts=True)
        p1 = unique[np.flatnonzero(s)[first]][f == 1].astype(float)
        e, v = LL.unseen_part([cells[:, k] for k in range(3)], f, p1, pi)
        est.append(e)
        var.append(v)
        # a record counted once per key whose category it is alone in (no union)
        y = np.zeros(f.size)
        y[f == 1] = p1
        alone_in = [np.array([f[cells[:, k] == x].sum() == 1 for x in cells[:, k]])
                    for k in range(3)]
        naive.append((1 - pi) / pi * sum(y[a].sum() for a in alone_in))
    est, naive = np.asarray(est), np.asarray(naive)
    mc = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - target) < 4 * mc
    assert np.mean(var) >= est.var(ddof=1)
    # the union matters here: the per-key count overshoots the target by far more than its noise
    assert naive.mean() - target > 8 * naive.std(ddof=1) / math.sqrt(naive.size)


def test_fit_adds_the_unseen_part_by_hand():
    """fit(unseen=True) − fit(unseen=False) is (1 − π)/π Σ P(F = 1 | f = 1) over the sampled cells
    alone in one of their categories, counted here with pandas-free loops over the cells; the
    variance adds ((1 − π)/π)² Σ P²; the default is on."""
    rng = np.random.default_rng(8)
    pop = _rare_population(rng, 4000)
    s = rng.random(pop.shape[0]) < 0.05
    cells, f = np.unique(pop[s], axis=0, return_counts=True)
    codes = [cells[:, k] for k in range(3)]
    N = float(pop.shape[0])
    off = LL.fit(codes, f, N, "loglinear_forest", unseen=False)
    on = LL.fit(codes, f, N, "loglinear_forest")
    r = LL.estimate(codes, f, N, "forest", "calibrated", kappa=LL.FOREST_KAPPA)
    pi = f.sum() / N
    p1 = dict(zip(np.flatnonzero(f == 1), r.p1))
    alone = [j for j in range(len(f))
             if any(f[codes[k] == codes[k][j]].sum() == 1 for k in range(3))]
    assert alone and all(f[j] == 1 for j in alone)
    want = (1 - pi) / pi * sum(p1[j] for j in alone)
    assert on.params["unseen_categories_part"] == pytest.approx(want, rel=1e-12)
    assert on.value == pytest.approx(off.value + want, rel=1e-12)
    add_var = ((1 - pi) / pi) ** 2 * sum(p1[j] ** 2 for j in alone)
    assert on.params["se_unseen"] == pytest.approx(math.sqrt(add_var), rel=1e-12)
    assert off.params["unseen_categories_part"] == 0.0


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.uint64])
def test_category_index_is_numpy_unique(dtype):
    """The bincount route gives np.unique's sorted values and inverse, value for value; negative or
    far-spread values take np.unique itself."""
    rng = np.random.default_rng(3)
    for c in (rng.integers(0, 200, 5000), rng.integers(0, 7, 13), np.array([5, 5, 5]),
              rng.integers(0, 10**9, 300)):
        c = c.astype(dtype)
        cats, inv = LL._category_index(c)
        want_cats, want_inv = np.unique(c, return_inverse=True)
        np.testing.assert_array_equal(cats, want_cats)
        np.testing.assert_array_equal(inv, want_inv.reshape(-1))
    neg = np.array([-3, 4, -3, 0])
    cats, inv = LL._category_index(neg)
    np.testing.assert_array_equal(cats, [-3, 0, 4])
    np.testing.assert_array_equal(inv, [0, 2, 0, 1])


def _zeros_population(rng, N: int, zeros: bool):
    """Keys a, b (5 categories each) and v (40, long-tailed): with ``zeros`` (a, b) takes only 7 of
    its 25 combinations (a household's housing keys), else a and b independent."""
    if zeros:
        allowed = np.array([(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (0, 3), (1, 4)])
        ab = allowed[rng.choice(len(allowed), N, p=[.3, .2, .15, .1, .1, .1, .05])]
    else:
        ab = np.column_stack([rng.choice(5, N, p=[.35, .25, .2, .1, .1]),
                              rng.choice(5, N, p=[.3, .3, .2, .1, .1])])
    v = rng.choice(40, N, p=np.arange(40, 0, -1) / np.arange(40, 0, -1).sum())
    return np.column_stack([ab, v])


def test_structural_zeros_cut_by_hand(monkeypatch):
    """estimate(support=True) takes from the empty cells' part what loops over every cell give:
    ρ = min(1, s / Σ_c (1 − e_c)) over the (a, b) combinations c, e_c = Π_x P(f = 0 | λ_cx), and
    (1 − post_c) Σ_x P(F = 1 | f = 0 | λ_cx) for each c no sample record has; the fit is otherwise
    the same (main effects: no pair given)."""
    rng = np.random.default_rng(4)
    pop = _zeros_population(rng, 6000, zeros=True)
    s = rng.random(pop.shape[0]) < 0.05
    cells, f = np.unique(pop[s], axis=0, return_counts=True)
    codes = [cells[:, k] for k in range(3)]
    N, pi = float(pop.shape[0]), f.sum() / float(pop.shape[0])
    off = LL.estimate(codes, f, N, "forest", "calibrated", edges=())
    on = LL.estimate(codes, f, N, "forest", "calibrated", edges=(), support=True)
    a = off.alpha
    assert on.alpha == a and on.observed == off.observed
    p = [{c: f[codes[k] == c].sum() / f.sum() for c in np.unique(codes[k])} for k in range(3)]
    seen = {(x, y) for x, y in zip(codes[0], codes[1])}
    e, g0 = {}, {}
    for ca in p[0]:
        for cb in p[1]:
            lam = [N * p[0][ca] * p[1][cb] * p[2][x] for x in p[2]]
            e[ca, cb] = math.prod((1 + a * pi * m) ** (-1 / a) for m in lam)
            g0[ca, cb] = sum(float(LL.prob_one(m, 0, a, pi)) for m in lam)
    rho = min(1.0, len(seen) / sum(1 - x for x in e.values()))
    assert rho < 0.9                                   # the sample shows the zeros
    want = sum((1 - rho * e[c] / (rho * e[c] + 1 - rho)) * g0[c] for c in e if c not in seen)
    assert on.support_rho == pytest.approx(rho, rel=1e-3)
    assert off.unobserved - on.unobserved == pytest.approx(want, rel=5e-3)
    assert on.se_support > 0 and on.process_var > off.process_var
    monkeypatch.setattr(LL, "SUPPORT_CHUNK", 7)       # the sums in small blocks: the same cut
    small = LL.estimate(codes, f, N, "forest", "calibrated", edges=(), support=True)
    assert small.unobserved == pytest.approx(on.unobserved, rel=1e-12)


def test_structural_zeros_move_the_empty_cells_part_towards_the_truth_by_simulation():
    """Bernoulli samples at π = 5 % of a population whose keys a, b take 7 of their 25 combinations:
    the population uniques in the cells the sample lacks (its categories seen) are what the empty
    cells' part estimates; without the cut the part overshoots them (impossible combinations hold
    model mass), with it the mean moves towards the truth by at least a third of the excess and not
    past it. Of a population with a and b independent (no structural zero) the cut is about nothing."""
    for zeros in (True, False):
        rng = np.random.default_rng(12)
        pop = _zeros_population(rng, 20000, zeros)
        u, inv, F = np.unique(pop, axis=0, return_inverse=True, return_counts=True)
        inv = inv.reshape(-1)
        on, off, truth = [], [], []
        for _ in range(30):
            s = rng.random(pop.shape[0]) < 0.05
            cells, f = np.unique(pop[s], axis=0, return_counts=True)
            codes = [cells[:, k] for k in range(3)]
            for out, sup in ((on, True), (off, False)):
                out.append(LL.estimate(codes, f, float(pop.shape[0]), "forest", "calibrated",
                                       kappa=LL.FOREST_KAPPA, support=sup).unobserved)
            fs = np.bincount(inv[s], minlength=u.shape[0])
            seen = np.all([np.isin(u[:, k], codes[k]) for k in range(3)], axis=0)
            truth.append(int(((F == 1) & (fs == 0) & seen).sum()))
        on, off, truth = np.mean(on), np.mean(off), np.mean(truth)
        if zeros:
            assert off - truth > 20                        # the excess the zeros cause
            assert truth <= on <= off - (off - truth) / 3
        else:
            assert abs(on - off) < 0.02 * off


def test_uniques_alone_in_a_category_are_counted_and_said_by_hand():
    """Uniques (0,0), (1,0), (2,1) of eight records; a = 2 is held by (2,1) alone: one unique of
    three is alone in a category, above the note's 10 %. With a second (2,1) record none is."""
    import pandas as pd

    import gpurisk
    from gpurisk_arx.population import LONE_NOTE_SHARE
    rows = [(0, 0)] + [(0, 1)] * 2 + [(1, 0)] + [(1, 1)] * 3 + [(2, 1)]
    frame = pd.DataFrame(rows, columns=["a", "b"])
    r = gpurisk.assess(frame, ["a", "b"], fraction=0.2, measures=["pop_uniqueness"])
    extra = r.measures["pop_uniqueness"].extra
    assert extra["lone_uniques"] == 1 and extra["n1"] == 3 and 1 > LONE_NOTE_SHARE * 3
    assert "1 of the 3 sample uniques (33 %) are alone in a category of some key" in extra["note"]
    frame = pd.concat([frame, pd.DataFrame([(2, 1)], columns=["a", "b"])], ignore_index=True)
    extra = gpurisk.assess(frame, ["a", "b"], fraction=0.2,
                           measures=["pop_uniqueness"]).measures["pop_uniqueness"].extra
    assert extra["lone_uniques"] == 0 and "alone in a category" not in (extra.get("note") or "")


def test_unseen_pairs_lower_the_lower_end_on_a_real_sample():
    """World Values Survey country, wave year and immigration-policy answer (310 388 people, one
    population unique): the answer codes differ by wave and countries were surveyed in few waves,
    so most combinations are impossible. At π = 5 % every person the model expects in the empty
    cells sits in combinations holding a pair of categories of a kept interaction that no sample
    record has; the sample cannot tell those from impossible ones. The interval's lower end is that
    of the estimate without them (0 here) and holds the one true unique, where the model's own
    lower end does not; the note says why."""
    import pandas as pd
    from scipy.stats import norm

    import gpurisk
    from arx_data import data_path
    keys = ["country", "s020", "e143"]
    frame = pd.read_csv(data_path("populations/wvs_immig.csv.gz"), usecols=keys)
    N1 = int((frame.groupby(keys, dropna=False).size() == 1).sum())
    sample = frame[np.random.default_rng(0).random(len(frame)) < 0.05]
    m = gpurisk.assess(sample, keys, fraction=0.05, measures=["pop_uniqueness"]).measures
    r = m["pop_uniqueness"]
    extra = r.extra
    part = extra["loglinear_eb_unseen_pairs_part"]
    assert N1 == 1 and r.value > 10
    assert part == pytest.approx(extra["loglinear_eb_unobserved_part"], rel=1e-6)
    assert extra["loglinear_eb_without_unseen_pairs"] == pytest.approx(r.value - part, abs=1e-9)
    z = norm.ppf(0.5 + extra["interval_level"] / 2)
    assert math.floor(r.value * math.exp(-z * r.se / r.value)) > N1    # the model's own lower end
    assert extra["interval_lower"] == 0 <= N1 <= extra["interval_upper"]
    assert f"{part:.3g} of N̂1's {r.value:.3g} sit in combinations holding a pair" in extra["note"]
