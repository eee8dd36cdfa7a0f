"""The risk-aimed model choice (gpurisk.models.risk_choice; Skinner & Shlomo 2008).

References not derived from the code: w_h by finite differences of its definition; the sum over the
empty cells against a dense sum over every cell of a small key space; the criterion's expectation
under gamma mixing by simulation; the selection on populations with a known chain of interactions
and with none (tests/test_forest.py's simulation).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from conftest import gamma_poisson_margins
from gpurisk.models import risk_choice
from gpurisk.models.forest import Margins, forest_means


@pytest.mark.parametrize("kind", ["inverse", "tau1"])
@pytest.mark.parametrize("pi", [0.01, 0.1])
def test_weights_are_the_definition_by_finite_differences(kind, pi):
    a = (1 - pi) / pi

    def h(m):
        lam = m / pi
        return (np.exp(-(1 - pi) * lam) if kind == "tau1" else
                -np.expm1(-(1 - pi) * lam) / ((1 - pi) * lam))
    k = lambda m: m * np.exp(-m)                                            # noqa: E731
    for m in (2e-4, 5e-3, 0.03, 0.4, 1.5, 4.0):
        e = 1e-4 * m
        kp = (k(m + e) - k(m - e)) / (2 * e)
        hp = (h(m + e) - h(m - e)) / (2 * e)
        hpp = (h(m + e) - 2 * h(m) + h(m - e)) / e ** 2
        want = 2 * kp * hp + k(m) * hpp
        assert risk_choice.weights(np.array([m]), pi, kind)[0] == pytest.approx(
            want, rel=2e-4, abs=1e-9 * a * a)


def _dense_score(codes, f, cards, edges, pi, kind):
    """B̂ and T over every cell of the key space, listed (the reference)."""
    K = list(itertools.product(*[range(c) for c in cards]))
    allc = [np.array([x[v] for x in K]) for v in range(len(cards))]
    # μ̂ at every cell from the margins, written out
    n = f.sum()
    deg = [sum(v in e for e in edges) for v in range(len(cards))]
    one = [np.bincount(c, weights=f, minlength=k) / n for c, k in zip(codes, cards)]
    mu = np.full(len(K), float(n))
    for v in range(len(cards)):
        with np.errstate(divide="ignore"):
            mu *= np.where(one[v][allc[v]] > 0, one[v][allc[v]] ** (1 - deg[v]), 0.0)
    for a, b in edges:
        pab = np.zeros((cards[a], cards[b]))
        np.add.at(pab, (codes[a], codes[b]), f / n)
        mu *= pab[allc[a], allc[b]]
    full = np.zeros(len(K))
    idx = np.ravel_multi_index(codes, cards)
    full[idx] = f
    w = risk_choice.weights(mu, pi, kind)
    share = -0.5 * w * ((full - mu) ** 2 - full)          # each cell's first-order share
    b = np.sum(share)
    bounded = np.sum(np.clip(share, -1 / np.e, 1 / np.e))  # a cell's term is off by 1/e at most
    return b, b / np.sqrt(0.5 * np.sum(w * w * mu * mu)), bounded


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("edges", [[], [(0, 1)], [(0, 1), (1, 2)], [(0, 2), (1, 3)]])
def test_score_matches_a_dense_sum_over_every_cell(edges, exact):
    """The criterion over a key space of 360 cells: summed over every cell (``exact``: fewer cells
    than draws) it is the dense sum to rounding; by an importance sample of 400 000 draws (the key
    space taken as larger than the draws) within the sample's error."""
    cards = [5, 4, 6, 3]
    codes, f, m = gamma_poisson_margins(3, cards, 0.6, 2.0)
    for kind, pi in (("inverse", 0.05), ("tau1", 0.02)):
        b0, t0, c0 = _dense_score(codes, f.astype(float), cards, edges, pi, kind)
        dr = risk_choice.Draws(m, 400_000, seed=1, exact=exact)
        b, t, c = risk_choice.score(m, edges, pi, dr, kind)
        if exact:
            assert b == pytest.approx(b0, rel=1e-9, abs=1e-12)
            assert t == pytest.approx(t0, rel=1e-9, abs=1e-12)
            assert c == pytest.approx(c0, rel=1e-9, abs=1e-12)
        else:
            assert b == pytest.approx(b0, rel=0.02, abs=0.02 * abs(b0) + 1e-3)
            assert t == pytest.approx(t0, abs=0.05)
            assert c == pytest.approx(c0, rel=0.02, abs=0.02 * abs(c0) + 1e-3)


@pytest.mark.parametrize("edges", [[], [(0, 1)], [(0, 1), (1, 2)], [(0, 2), (1, 3)],
                                   [(0, 1), (1, 2), (2, 3)]])
def test_score_by_the_binned_key_space_matches_the_dense_sum(edges, monkeypatch):
    """Where the key space has more cells than draws but the forest's trees can be listed, the
    empty cells' sum is taken over every cell by the binned distribution of μ̂
    (gpurisk.models.cell_space): the dense sum over all 360 cells to its binning error (linear
    binning at h = 0.01 in ln μ errs by about h²/8 times the weight's second derivative in ln μ,
    (aμ)² for τ1's e^{−aμ}: up to 0.4 % of the sums here, at π = 2 % where every cell has aμ > 13)."""
    cards = [5, 4, 6, 3]
    K = int(np.prod(cards))
    codes, f, m = gamma_poisson_margins(3, cards, 0.6, 2.0)
    for kind, pi in (("inverse", 0.05), ("tau1", 0.02)):
        b0, t0, c0 = _dense_score(codes, f.astype(float), cards, edges, pi, kind)
        monkeypatch.setattr(risk_choice, "LISTED_CELLS", 100)      # 360 cells: not listed
        dr = risk_choice.Draws(m, 1000, seed=1)
        b, t, c = risk_choice.score(m, edges, pi, dr, kind)
        mu = risk_choice.means_at(m, edges, list(np.unravel_index(np.arange(K), cards)))
        # of Σ_all |w| μ̂², what is binned: E's weights are smooth in ln μ, τ1's e^{−aμ} is not
        scale = {"inverse": 1e-4, "tau1": 1e-2}[kind] * float(
            np.sum(np.abs(risk_choice.weights(mu, pi, kind)) * mu * mu))
        assert b == pytest.approx(b0, abs=scale)
        assert c == pytest.approx(c0, abs=scale)
        w = risk_choice.weights(mu, pi, kind)
        assert t == pytest.approx(t0, rel=1e-2, abs=scale / np.sqrt(0.5 * np.sum(w * w * mu * mu)))
        # and no draw was made: the uniforms were never read
        assert dr._u is None


@pytest.mark.parametrize("edges", [[], [(0, 1)], [(1, 0), (2, 1)], [(2, 0), (1, 3)]])
def test_grid_means_are_means_at_every_listed_cell(edges):
    """μ̂ over the grid of the held categories, by broadcasting, is means_at at every cell listed
    by meshgrid, bit for bit (the same factors in the same order), with a category no record has
    (left out of the grid) and a pair too sparse for a dense table (looked up in the sorted list)."""
    rng = np.random.default_rng(8)
    cards = [300, 5, 400, 3]                       # 300 x 400 pairs: not dense for few cells
    n = 60
    codes = [rng.integers(0, 20, n), rng.integers(0, 4, n), rng.integers(0, 25, n),
             rng.integers(0, 3, n)]                 # key 1's category 4: no record
    key = np.ravel_multi_index(codes, cards)
    uniq, f = np.unique(key, return_counts=True)
    codes = list(np.unravel_index(uniq, cards))
    m = Margins(codes, f, cards)
    held = [np.flatnonzero(m.one(v) > 0) for v in range(4)]
    assert held[1].shape[0] == 4
    if (2, 0) in edges:
        assert not m.pair_counts(0, 2)[0] and not m.pair_counts(2, 0)[0]
    every = [g.reshape(-1) for g in np.meshgrid(*held, indexing="ij")]
    want = risk_choice.means_at(m, edges, every)
    got = risk_choice.grid_means(m, edges, held)
    assert got.shape == want.shape and np.array_equal(got, want)
    assert (want == 0).any() == bool(edges)        # unobserved pairs of categories: μ̂ = 0


def test_means_at_the_drawn_cells_are_the_fit():
    rng = np.random.default_rng(4)
    cards = [4, 5, 3]
    K = int(np.prod(cards))
    f = rng.poisson(2.0, K)
    codes = [c[f > 0] for c in np.unravel_index(np.arange(K), cards)]
    f = f[f > 0]
    m = Margins(codes, f, cards)
    edges = [(0, 1), (1, 2)]
    mu, _ = forest_means(codes, f, cards, edges, m)
    assert np.allclose(risk_choice.means_at(m, edges, codes), mu)
    # the draws follow the fit: their cells' frequencies are μ̂/n
    dr = risk_choice.Draws(m, 200_000, seed=2)
    cells = dr.cells(edges)
    got = np.bincount(np.ravel_multi_index(cells, cards), minlength=K)
    every = list(np.unravel_index(np.arange(K), cards))     # every category is seen here
    want = risk_choice.means_at(m, edges, every) / m.n
    assert want.sum() == pytest.approx(1.0)
    assert np.abs(got / 200_000 - want).max() < 0.004


def test_the_criterion_detects_gamma_mixing():
    """With μ known, E[B̂] = −½ α Σ w μ² (the gamma-mixing alternative); T ≈ N(0, 1) without mixing."""
    rng = np.random.default_rng(7)
    mu = rng.gamma(0.5, 0.8, 50_000)
    w = risk_choice.weights(mu, 0.05, "inverse")
    sd = np.sqrt(0.5 * np.sum(w * w * mu * mu))
    ts, bs = [], []
    for alpha in (0.0, 0.3):
        t = []
        for _ in range(60):
            u = rng.gamma(1 / alpha, alpha, mu.shape[0]) if alpha else 1.0
            f = rng.poisson(mu * u)
            b = -0.5 * np.sum(w * ((f - mu) ** 2 - f))
            t.append(b / sd)
            bs.append((alpha, b))
        ts.append(np.array(t))
    assert abs(ts[0].mean()) < 0.5 and 0.6 < ts[0].std() < 1.5
    want = -0.5 * 0.3 * np.sum(w * mu * mu)
    got = np.mean([b for a, b in bs if a == 0.3])
    assert got == pytest.approx(want, rel=0.15)
    assert abs(ts[1].mean()) > 2      # 20 standard errors of the mean of 60 from 0


def _sample(linked, seed, n=3000):
    from tests.test_forest import _chain_population
    pop = _chain_population(200_000, linked, 11)
    cards = [6, 6, 5, 4]
    rng = np.random.default_rng(seed)
    take = rng.choice(len(pop), n, replace=False)
    ids = np.ravel_multi_index([pop[k].to_numpy()[take] for k in "abcd"], cards)
    cells, f = np.unique(ids, return_counts=True)
    return list(np.unravel_index(cells, cards)), f, cards


def test_the_selection_finds_a_chain_and_keeps_nothing_without_one():
    linked, indep = [], []
    for r in range(8):
        codes, f, cards = _sample(True, 100 + r)
        linked.append(risk_choice.choose(Margins(codes, f, cards), 0.015, seed=r)[0])
        codes, f, cards = _sample(False, 200 + r)
        indep.append(risk_choice.choose(Margins(codes, f, cards), 0.015, seed=r)[0])
    assert sum((0, 1) in e for e in linked) >= 7
    assert sum(len(e) == 0 for e in indep) >= 6


@pytest.mark.parametrize("c,a", [(0.01, 1.5), (0.7, 2.0), (5.0, 1.05), (40.0, 11.0), (300.0, 1.3)])
def test_inverse_square_is_the_negative_binomial_sum(c, a):
    """E[1/F² | f = 1] with F − 1 negative binomial (Poisson-gamma), summed term by term."""
    from scipy.special import gammaln

    from gpurisk.models.terms import inverse_square
    k = np.arange(0, 200_000)
    logp = (gammaln(a + k) - gammaln(a) - gammaln(k + 1) - a * np.log1p(c)
            + k * (np.log(c) - np.log1p(c)))
    want = float(np.sum(np.exp(logp) / (1.0 + k) ** 2))
    assert inverse_square(np.array([c]), a)[0] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("m", [1e-3, 0.4, 3.0, 30.0])
def test_inverse_square_tends_to_the_poisson_moment(m):
    """A gamma of tiny variance (a large, c = m/a): E[1/F²] of F − 1 ~ Poisson(m)."""
    from gpurisk.models.terms import inverse_square, inverse_terms
    e1, v = inverse_terms(np.array([m]))
    a = 1e7
    assert inverse_square(np.array([m / a]), a)[0] == pytest.approx(v[0] + e1[0] ** 2, rel=1e-5)
    assert inverse_square(np.array([1e-9]), 2.0)[0] == pytest.approx(1 - 0.75 * 2e-9, rel=1e-12)


def _population_sample(seed, pi=0.05):
    """A sample of the chain population (a × b, b × c interactions) as a frame, and its true E."""
    import pandas as pd

    from tests.test_forest import _chain_population
    pop = _chain_population(60_000, True, 11)
    rng = np.random.default_rng(seed)
    s = pop[rng.random(len(pop)) < pi]
    F = pop.groupby(list("abcd")).size().rename("F").reset_index()
    f = s.groupby(list("abcd")).size().rename("f").reset_index().merge(F, on=list("abcd"))
    return pd.DataFrame(s), float((1.0 / f.loc[f.f == 1, "F"]).sum())


def test_cv_risk_starts_from_the_held_out_forest_and_the_interval_has_no_factor():
    import gpurisk
    s, _ = _population_sample(1)
    got = {}
    for model in ("auto_cv", "cv_risk"):
        r = gpurisk.assess(s, list("abcd"), fraction=0.05, measures=["matches_ll"],
                           options={"loglinear_risk": {"model": model, "interval": "model"}})
        got[model] = r.measures["matches_ll"]
    cv = set((got["auto_cv"].extra["interaction"] or "").split(", ")) - {""}
    both = set((got["cv_risk"].extra["interaction"] or "").split(", ")) - {""}
    assert cv <= both
    x = got["cv_risk"].extra
    # interval=model: the model's variance and the choice's spread, nothing fitted
    assert x["se_factor"] == 1.0 and x["model_error"] == 0.0
    # the misfit's bias moves a bound, not the s.e.
    assert got["cv_risk"].se == pytest.approx(math.sqrt(x["se_poisson"] ** 2 + x["se_choice"] ** 2
                                                        + x.get("se_shared", 0.0) ** 2), rel=1e-9)


def test_the_model_interval_is_honest_where_the_model_holds():
    """Samples of a population made by a chain of interactions (the forest's own kind): the
    interval from the model's variance and the choice's spread, with no fitted factor, has s.e./sd
    near 1 and covers the true E (counted from the population)."""
    import gpurisk
    res = []
    for seed in range(30):
        s, E = _population_sample(100 + seed)
        x = gpurisk.assess(s, list("abcd"), fraction=0.05, measures=["matches_ll"],
                           options={"loglinear_risk": {"interval": "model"}}).measures["matches_ll"]
        res.append((x.value, x.se, E))
    a = np.array(res)
    err = a[:, 0] - a[:, 2]
    assert 0.7 < a[:, 1].mean() / err.std(ddof=1) < 1.5
    assert np.mean(np.abs(err) <= 2.576 * a[:, 1]) >= 0.9


def test_the_exact_sum_skips_categories_the_margins_lack():
    """A bootstrap sample's margins keep the sample's categories, some with no record: summed over
    every cell the criterion is still the dense sum (a cell with a missing category has μ̂ = 0),
    where a shared key's missing category would give 0 × ∞."""
    rng = np.random.default_rng(5)
    cards = [6, 4, 5]
    K = int(np.prod(cards))
    f = rng.poisson(rng.gamma(0.8, 2.0, K))
    codes = list(np.unravel_index(np.arange(K), cards))
    f[codes[1] == 2] = 0                            # key 1's category 2: no record
    keep = f > 0
    codes, f = [c[keep] for c in codes], f[keep]
    m = Margins(codes, f, cards)
    edges = [(0, 1), (1, 2)]                        # key 1 shared by both pairs
    for kind in ("inverse", "tau1"):
        b0, t0, _ = _dense_score(codes, f.astype(float), cards, edges, 0.05, kind)
        b, t, _ = risk_choice.score(m, edges, 0.05, risk_choice.Draws(m, 20_000), kind)
        assert np.isfinite(b) and b == pytest.approx(b0, rel=1e-9, abs=1e-12)
        assert t == pytest.approx(t0, rel=1e-9, abs=1e-12)


def test_the_criterion_is_the_same_whatever_order_the_keys_come_in():
    """A real sample (testdata's urbrur, roof, water at π = 5 %: 80 cells): the criterion at the
    kept forest does not depend on the keys' order nor on the draws' seed (it is summed over every
    cell). With 20 000 draws its T ran from −0.2 to −3.9 over ten seeds and two key orders."""
    import pandas as pd

    from conftest import data_path
    from gpurisk.freq import build_table
    from gpurisk.models.table_fits import eb_means, forest_misfit
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    got = []
    for keys in (["urbrur", "roof", "water"], ["roof", "water", "urbrur"]):
        t = build_table(df, keys)
        edges = eb_means(t, None, "truncated")[2]
        got += [forest_misfit(t, edges, 0.05, "inverse", seed) for seed in (0, 7)]
    assert all(g == pytest.approx(got[0], rel=1e-9) for g in got)
    # six keys (42 240 cells, more than the 20 000 draws): drawn, the keys taken in the order of
    # their names, so two orders of the same keys draw the same cells
    six = []
    for keys in (["urbrur", "roof", "walls", "water", "sex", "age"],
                 ["age", "sex", "water", "walls", "roof", "urbrur"]):
        t = build_table(df, keys)
        edges = eb_means(t, None, "truncated")[2]
        six.append(forest_misfit(t, edges, 0.05, "inverse"))
    assert six[0] == pytest.approx(six[1], rel=1e-9)


def test_the_draws_inversion_is_the_binary_search_it_replaces():
    """_Inverse against np.searchsorted(cum, t, side="right") clipped to the last index, on
    whole-number cumulative counts with empty categories (a bootstrap sample's), targets on and
    beside the integers and at the total; and on fractional counts (searched, not tabled)."""
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 6, 300).astype(float)
    counts[[0, 1, 150, 298, 299]] = 0.0                  # empty at both ends and inside
    cum = np.cumsum(counts)
    t = np.concatenate([rng.random(20_000) * cum[-1], np.arange(int(cum[-1]) + 1, dtype=float),
                        [cum[-1], np.nextafter(cum[-1], 0.0)]])
    want = np.minimum(np.searchsorted(cum, t, side="right"), cum.shape[0] - 1)
    inv = risk_choice._Inverse(cum)
    assert inv.table is not None
    np.testing.assert_array_equal(inv(t), want)
    codes = rng.permutation(300) * 7                     # each index standing for a child's code
    np.testing.assert_array_equal(risk_choice._Inverse(cum, codes)(t), codes[want])
    frac = np.cumsum(rng.random(50))
    inv = risk_choice._Inverse(frac)
    assert inv.table is None
    t = rng.random(1000) * frac[-1]
    np.testing.assert_array_equal(inv(t), np.minimum(np.searchsorted(frac, t, side="right"), 49))
    np.testing.assert_array_equal(risk_choice._Inverse(frac, np.arange(50) + 3)(t), inv(t) + 3)


@pytest.mark.parametrize("cards", [(3, 4, 5), (300, 400, 2)])
def test_sorted_pairs_are_the_observed_pairs_counted_from_the_cells(cards):
    """Margins.sorted_pair(p, v) (taken from the pair's dense or np.unique counts) against the
    observed (x_p, x_v) listed and counted from the cells, both orientations; with cells of f = 0
    (a bootstrap sample's) their pairs listed with count 0."""
    rng = np.random.default_rng(6)
    cells = 400
    codes = [rng.integers(0, c, cells) for c in cards]
    ids = np.unique(np.ravel_multi_index(codes, cards))
    codes = list(np.unravel_index(ids, cards))
    for f in (rng.integers(1, 4, ids.shape[0]).astype(float),
              np.where(rng.random(ids.shape[0]) < 0.3, 0.0, 2.0)):
        m = Margins(codes, f, cards)
        for p, v in ((0, 1), (1, 0), (2, 1), (0, 2)):
            key = codes[p].astype(np.int64) * cards[v] + codes[v]
            listed = {}
            for k, w in zip(key, f):
                listed[int(k)] = listed.get(int(k), 0.0) + w
            want = sorted(listed.items())      # every pair a cell holds (count 0 where f = 0)
            got_key, got_n = m.sorted_pair(p, v)
            assert got_key.tolist() == [k for k, _ in want]
            assert got_n.tolist() == [n for _, n in want]


def test_the_uniforms_are_the_generators_rows_shared_across_tables():
    """uniforms(seed, rows, draws) is default_rng(seed).random((rows, draws)) whether a larger block
    was drawn before or not, and read-only."""
    want = np.random.default_rng(11).random((6, 500))
    risk_choice._UNIFORMS.clear()
    small = risk_choice.uniforms(11, 2, 500)
    np.testing.assert_array_equal(small, want[:2])
    np.testing.assert_array_equal(risk_choice.uniforms(11, 6, 500), want)
    np.testing.assert_array_equal(risk_choice.uniforms(11, 3, 500), want[:3])
    assert not risk_choice.uniforms(11, 3, 500).flags.writeable


@pytest.mark.parametrize("kind", ["inverse", "tau1"])
def test_weights_in_slices_are_the_formula_element_by_element(kind):
    """weights() on a long array (slices of WEIGHTS_CHUNK, the series patched in) against the
    closed forms and their series written out per element (np.where over the whole array)."""
    rng = np.random.default_rng(7)
    mu = np.concatenate([np.exp(rng.uniform(-20, 6, 3 * risk_choice.WEIGHTS_CHUNK + 17)),
                         [0.0, 1e-300, 1e-5]])
    for pi in (0.01, 0.3):
        a = (1 - pi) / pi
        x, em = a * mu, np.exp(-mu)
        k, k1 = mu * em, (1 - mu) * em
        if kind == "tau1":
            ex = np.exp(-x)
            want = 2.0 * k1 * (-a * ex) + k * (a * a * ex)
        else:
            small = x < 1e-2
            xs = np.where(small, 1.0, x)
            ex = np.exp(-xs)
            d1 = np.where(small, -0.5 + x / 3 - x * x / 8 + x ** 3 / 30,
                          (ex * (1 + xs) - 1) / (xs * xs))
            d2 = np.where(small, 1 / 3 - x / 4 + x * x / 10,
                          (2 - ex * (xs * xs + 2 * xs + 2)) / xs ** 3)
            want = 2 * k1 * a * d1 + k * a * a * d2
        np.testing.assert_array_equal(risk_choice.weights(mu, pi, kind), want)


def test_one_cell_cannot_widen_the_interval_beyond_what_its_term_can_be_off():
    """A cell's share of the bias of τ̂_h is E[I(f = 1)(h(λ̂) − h(Λ))], h in [0, 1], so at most
    P(f = 1) ≤ 1/e for any Poisson mixture. FARS read as a 1 % sample, race × sex × injury (60 cells,
    n1 = 3): the first-order criterion puts 85.0 of its 85.0 on one cell (2 records where the forest
    expects μ̂ = 0.0015); the bounded bias stays within what the key space's 480 cells can be off,
    and the widened upper bound of Ê is no longer n1 = 3."""
    import pandas as pd

    from conftest import data_path
    from gpurisk.freq import build_table
    from gpurisk.measure import Context
    from gpurisk.measures.matches_ll import MatchesLL
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    t = build_table(df, ["irace", "isex", "iinjury"])
    got = MatchesLL().compute(t, Context(fraction=0.01, options={"loglinear_risk": {
        "interval": "model"}}))
    x = got.extra
    assert abs(x["misfit_T"]) > 1.96 and x["misfit_bias_first_order"] > 80
    assert abs(x["misfit_bias"]) <= 20 * 3 * 8 / np.e
    assert got.upper < x["n1"] and got.se < 1.0
    assert "at most 1/e" in x["note"]
    # the bias moves the bound on the side it points to; the s.e. stays the model's
    bias = x["misfit_bias"]
    assert got.se == pytest.approx(math.sqrt(x["se_poisson"] ** 2 + x.get("se_alpha", 0.0) ** 2
                                             + x["se_choice"] ** 2 + x["se_shared"] ** 2), rel=1e-12)
    z, z2 = 2.3263478740408408, 2.5758293035489004
    g = x.get("skewness", 0.0)           # the upper ends allow for the sum's skewness

    def up(zz):
        return min(got.value + got.se * max(zz, zz + (zz * zz - 1) * g / 6) + max(-bias, 0.0),
                   x["n1"])
    assert got.upper == pytest.approx(up(z))
    assert x["interval_lower"] == pytest.approx(max(got.value - z2 * got.se - max(bias, 0.0), 0.0))
    assert x["interval_upper"] == pytest.approx(up(z2))
    assert ("upper bound is raised" if bias < 0 else "lower end is lowered") in x["note"]


def test_kept_draws_are_the_draws_made_afresh_and_shared_where_the_same(monkeypatch):
    """Draws.cells keeps each key's draws under what they are made of: a second table with the
    same counts (a scan's other combination) reads the same arrays, every array equals one drawn
    with nothing kept, a table with other counts draws anew, and the memory bound holds."""
    codes, f, cards = _sample(True, 7)
    other = _sample(True, 8)
    edges = [(0, 1), (1, 2)]

    def draw(c, ff, k, fresh):
        if fresh:
            risk_choice._KEPT.clear()
        return risk_choice.Draws(Margins(c, ff, k), 5_000, seed=3).cells(edges)
    risk_choice._KEPT.clear()
    first = draw(codes, f, cards, False)
    again = draw(codes, f, cards, False)
    assert all(a is b for a, b in zip(first, again))               # kept: the same arrays
    assert not any(a.flags.writeable for a in first)
    for a, b in zip(first, draw(codes, f, cards, True)):           # the same numbers afresh
        np.testing.assert_array_equal(a, b)
    risk_choice._KEPT.clear()
    first = draw(codes, f, cards, False)
    moved = draw(*other, False)
    assert any(not np.array_equal(a, b) for a, b in zip(first, moved))
    for a, b in zip(moved, draw(*other, True)):
        np.testing.assert_array_equal(a, b)
    monkeypatch.setattr(risk_choice, "KEPT_DRAWS_BYTES", 2 * 5_000 * 8)
    draw(codes, f, cards, True)
    draw(*other, False)
    assert sum(a.nbytes for a in risk_choice._KEPT.values()) <= 2 * 5_000 * 8
