"""IPF fit of the all-two-way log-linear model (SPEC §5): margins, equality with a Poisson GLM
(statsmodels, an independent implementation), limits, and real data."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from gpurisk.errors import BadInput
from gpurisk.freq.engine import build_table
from gpurisk.models.loglinear import check_cells, fit_table, fit_two_way, observed_margins, two_way_margins

from conftest import data_path


def dense_codes(cards):
    return [c.ravel() for c in np.indices(cards)]


def glm_two_way(codes, f):
    """Fitted values of the Poisson GLM with all main effects and two-way interactions."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf
    df = pd.DataFrame({f"v{i}": pd.Categorical(c) for i, c in enumerate(codes)})
    terms = "+".join(df.columns)
    df["y"] = f
    res = smf.glm(f"y ~ ({terms})**2", df, family=sm.families.Poisson()).fit(tol=1e-14, maxiter=200)
    return res.fittedvalues.to_numpy()


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("cards, mean, seed", [((3, 4, 2), 5.0, 0), ((3, 4, 2, 3), 3.0, 1),
                                               ((2, 3, 2, 2, 3), 4.0, 2)])
def test_ipf_equals_poisson_glm(cards, mean, seed, sparse):
    rng = np.random.default_rng(seed)
    K = math.prod(cards)
    f = rng.poisson(mean, K)
    f[rng.random(K) < 0.1] = 0          # a few empty cells, all two-way margins positive
    codes = dense_codes(cards)
    fit = fit_two_way(codes, f, cards, tol=1e-10, sparse=sparse)
    assert fit.converged and fit.sparse == sparse
    glm = glm_two_way(codes, f)
    assert np.abs(fit.mu.ravel() - glm).max() < 1e-6
    # and the model is not saturated: the fit differs from the data
    assert np.abs(fit.mu.ravel() - f).max() > 0.1


def test_ipf_equals_glm_on_real_data():
    # adult (UCI) over sex × race × relationship × income: 2 × 5 × 6 × 2 = 120 cells
    keys = ["sex", "race", "relationship", "income"]
    frame = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"), usecols=keys)
    frame["income"] = frame["income"].str.rstrip(".")
    t = build_table(frame, keys)
    fit = fit_table(t, tol=1e-9)
    cards = t.cards
    codes = dense_codes(cards)
    f = np.zeros(math.prod(cards))
    f[t.cell_id] = t.f
    glm = glm_two_way(codes, f)
    mu = fit.p_hat_codes(codes) * fit.n   # μ̂ of every cell, addressed by the table's codes
    pos = glm > 1e-6  # cells the GLM drives towards 0 (zero margins) are exactly 0 in IPF
    assert np.allclose(mu[pos], glm[pos], rtol=1e-7, atol=1e-6)
    assert np.all(mu[~pos] < 1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_margins_reproduced_sparse_table(sparse):
    rng = np.random.default_rng(5)
    cards = (4, 3, 5, 2, 6)
    K = math.prod(cards)
    f = rng.poisson(0.3, K)                      # sparse: many zero cells, some zero margins
    codes = dense_codes(cards)
    fit = fit_two_way(codes, f, cards, tol=1e-8, max_iter=5000, sparse=sparse)
    for (a, b), m_obs in zip(two_way_margins(5), observed_margins(np, codes, f, cards, two_way_margins(5))):
        others = tuple(i for i in range(5) if i not in (a, b))
        m_fit = fit.mu.sum(axis=others)
        # the observed margin, computed here without the library
        m_ref = np.zeros((cards[a], cards[b]))
        np.add.at(m_ref, (codes[a], codes[b]), f)
        assert np.array_equal(m_obs, m_ref)
        assert np.abs(m_fit - m_ref).max() < 1e-6
    assert fit.mu.sum() == pytest.approx(f.sum())
    assert fit.discrepancy < 1e-6


def test_sparse_and_dense_ipf_agree_and_switch():
    rng = np.random.default_rng(11)
    cards = (9, 8, 7, 6, 5)
    K = math.prod(cards)
    f = np.zeros(K, np.int64)
    f[rng.choice(K, 40, replace=False)] = 1        # very sparse: the support is a small part of K
    codes = dense_codes(cards)
    auto = fit_two_way(codes, f, cards, tol=1e-3, max_iter=300)
    dense = fit_two_way(codes, f, cards, tol=1e-3, max_iter=300, sparse=False)
    assert auto.sparse and not dense.sparse
    assert auto.iterations == dense.iterations     # the same IPF cycles, on different storage
    assert auto.discrepancy == pytest.approx(dense.discrepancy, rel=1e-6)
    assert np.allclose(auto.mu, dense.mu, rtol=1e-9, atol=1e-12)
    ids = np.arange(K)
    assert np.allclose(auto.p_hat(ids), dense.p_hat(ids), rtol=1e-9, atol=1e-15)
    assert auto.support.size * 3 <= K
    assert np.all(dense.mu.ravel()[np.setdiff1d(ids, auto.support)] == 0)


def test_zero_margin_gives_zero_fit():
    cards = (3, 3, 2)
    f = np.ones(math.prod(cards), dtype=np.int64).reshape(cards)
    f[1, 2, :] = 0                            # margin (v0 = 1, v1 = 2) is empty
    fit = fit_two_way(dense_codes(cards), f.ravel(), cards, tol=1e-10)
    assert np.all(fit.mu[1, 2, :] == 0)
    assert np.all(fit.mu[f > 0] > 0)


def test_two_keys_saturated_and_one_key():
    rng = np.random.default_rng(0)
    f = rng.poisson(3, 12)
    fit = fit_two_way(dense_codes((3, 4)), f, (3, 4))
    assert np.allclose(fit.mu.ravel(), f)     # two-way model on two keys = the data
    fit1 = fit_two_way([np.arange(5)], np.array([1, 0, 4, 2, 3]), (5,))
    assert np.allclose(fit1.mu, [1, 0, 4, 2, 3])


def test_independence_table_fits_exactly_in_one_cycle():
    # counts that are exactly a product of pairwise factors are their own MLE
    cards = (3, 4, 5)
    rng = np.random.default_rng(9)
    mu = np.ones(cards)
    for a, b in itertools.combinations(range(3), 2):
        shape = [1, 1, 1]
        shape[a], shape[b] = cards[a], cards[b]
        mu = mu * rng.uniform(0.5, 2, (cards[a], cards[b])).reshape(shape)
    fit = fit_two_way(dense_codes(cards), mu.ravel(), cards, tol=1e-10)
    assert np.allclose(fit.mu, mu, rtol=1e-8)


def test_sparse_cells_only_equals_dense_input():
    # passing only the non-empty cells gives the same fit as the dense table
    rng = np.random.default_rng(3)
    cards = (4, 3, 5)
    f = rng.poisson(1.0, math.prod(cards))
    codes = dense_codes(cards)
    nz = f > 0
    a = fit_two_way(codes, f, cards, tol=1e-10)
    b = fit_two_way([c[nz] for c in codes], f[nz], cards, tol=1e-10)
    assert np.allclose(a.mu, b.mu, rtol=1e-12, atol=1e-12)


def test_k_above_limit_is_bad_input():
    with pytest.raises(BadInput, match=r"K = 100 × 100 × 100 = 1,000,000 cells.*max_cells = 500,000"):
        check_cells((100, 100, 100), 5e5)
    with pytest.raises(BadInput, match="max_cells"):
        fit_two_way([np.zeros(1, int)] * 3, np.ones(1), (100, 100, 100), max_cells=5e5)


def test_not_converged_is_reported():
    rng = np.random.default_rng(5)
    cards = (4, 3, 5, 6)
    f = rng.poisson(0.5, math.prod(cards))
    fit = fit_two_way(dense_codes(cards), f, cards, tol=1e-12, max_iter=2)
    assert fit.iterations == 2 and not fit.converged and fit.discrepancy > 1e-12


def test_fit_table_real_data_fars():
    keys = ["iage", "isex", "irace", "ihispanic"]
    frame = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";", usecols=keys)
    sample = frame.sample(frac=0.05, random_state=1)
    t = build_table(sample, keys)
    fit = fit_table(t, tol=0.01)
    assert fit.K == math.prod(sample[k].nunique() for k in keys)
    assert fit.mu.sum() == pytest.approx(t.n)
    # observed two-way margins computed with pandas, independently of the library
    for a, b in itertools.combinations(range(4), 2):
        obs = sample.groupby([keys[a], keys[b]]).size()
        others = tuple(i for i in range(4) if i not in (a, b))
        m = fit.mu.sum(axis=others)
        maps = [np.asarray(m) for m in fit.level_maps]  # table codes -> the fit's codes
        ia = [maps[a][t.categories[a].index(v)] for v in obs.index.get_level_values(0)]
        ib = [maps[b][t.categories[b].index(v)] for v in obs.index.get_level_values(1)]
        assert np.abs(m[ia, ib] - obs.to_numpy()).max() <= fit.discrepancy + 1e-9
        assert m.sum() == pytest.approx(t.n)


@pytest.mark.gpu
def test_ipf_on_cupy_equals_numpy():
    import cupy
    rng = np.random.default_rng(0)
    cards = (5, 4, 6, 3)
    f = rng.poisson(0.8, math.prod(cards))
    codes = dense_codes(cards)
    a = fit_two_way(codes, f, cards, tol=1e-9)
    b = fit_two_way([cupy.asarray(c) for c in codes], cupy.asarray(f), cards, xp=cupy, tol=1e-9)
    assert np.allclose(a.mu, cupy.asnumpy(b.mu), rtol=1e-9, atol=1e-12)
