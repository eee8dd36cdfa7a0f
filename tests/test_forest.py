"""Main effects plus a forest of two-way interactions (gpurisk.models.forest), the default model of
matches_ll / tau1_ll.

References not derived from the code: the closed-form fit against IPF (gpurisk.models.loglinear,
another algorithm) and Σ μ̂² against a dense sum over every cell; simulations from populations with
a known chain of interactions and with none; Ê under the chosen forest and the leave-one-out prior
written from the formulas with pandas.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.models import forest
from gpurisk.models.loglinear import fit_two_way


@pytest.mark.parametrize("edges", [[(0, 1)], [(0, 2)], [(1, 3)], [(0, 1), (1, 2)],
                                   [(0, 1), (1, 2), (1, 3)], [(0, 2), (1, 3)], []])
def test_forest_fit_matches_ipf_and_a_dense_sum(edges):
    rng = np.random.default_rng(5)
    cards = (4, 3, 5, 2)
    K = int(np.prod(cards))
    f = rng.poisson(0.8, K)
    codes = list(np.unravel_index(np.arange(K), cards))
    s = f > 0
    mu, s2 = forest.forest_means([c[s] for c in codes], f[s], cards, edges)
    lone = [(v,) for v in range(4) if not any(v in e for e in edges)]
    fit = fit_two_way([c[s] for c in codes], f[s], cards, tol=1e-11, max_iter=2000,
                      margins=list(edges) + lone, sparse=False)
    dense = fit.mu.reshape(-1)
    assert np.allclose(mu, dense[s], rtol=1e-8, atol=1e-10)
    assert s2 == pytest.approx(float(np.sum(dense ** 2)), rel=1e-8)


def _chain_population(N, linked, seed):
    """Keys a (6), b (6), c (5), d (4); with ``linked`` b copies a and c copies b (mod 5) in part of
    the records: the interactions a × b and b × c, a chain."""
    rng = np.random.default_rng(seed)
    a = rng.choice(6, N, p=[0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    b = rng.choice(6, N, p=[0.1, 0.1, 0.2, 0.2, 0.2, 0.2])
    c = rng.choice(5, N, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    if linked:
        b = np.where(rng.random(N) < 0.5, a, b)
        c = np.where(rng.random(N) < 0.5, b % 5, c)
    d = rng.choice(4, N)
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


def _choices(linked, reps=20, n=3000):
    pop = _chain_population(200_000, linked, 11)
    cards = [6, 6, 5, 4]
    rng = np.random.default_rng(12)
    out = []
    for r in range(reps):
        take = rng.choice(len(pop), n, replace=False)
        ids = np.ravel_multi_index([pop[k].to_numpy()[take] for k in "abcd"], cards)
        cells, f = np.unique(ids, return_counts=True)
        codes = list(np.unravel_index(cells, cards))
        out.append(forest.choose_forest(codes, f, cards, seed=r, max_pairs=3)[0])
    return out


def test_keeps_both_links_of_a_chain_and_no_cycle():
    picks = _choices(linked=True)
    assert sum(p == [(0, 1), (1, 2)] for p in picks) >= 16
    for p in picks:                                    # a forest: fewer pairs than keys, no cycle
        assert len(p) <= 3 and not {(0, 1), (1, 2), (0, 2)} <= set(p)


def test_keeps_main_effects_when_there_is_no_interaction():
    picks = _choices(linked=False)
    assert sum(p == [] for p in picks) >= 16


def test_estimate_under_a_chain_by_hand():
    """Ê with the forest a × b, b × c and the leave-one-out prior, from the formulas: per sample
    unique, s = count − 1/2 for the margins (a, b), (b, c), d and the shared key b, μ̃ =
    (n − 1) (s_ab/(n−1)) (s_bc/(n−1)) (s_d/(n−1)) / (s_b/(n−1)), α̃ = (1 + α̂)(1 + 1/s_ab)(1 + 1/s_bc)
    (1 + 1/s_d) − 1 (the shared key's count is not in the variance), α̂ the moment estimate over
    every cell with μ̂ = n p_ab p_bc p_d / p_b, Σ μ̂² by a dense sum."""
    pop = _chain_population(100_000, True, 21)
    sample = pop.sample(frac=0.05, random_state=1)
    keys = ["a", "b", "c", "d"]
    r = gpurisk.assess(sample, keys, measures=["matches_ll"], fraction=0.05,
                       options={"loglinear_risk": {"model": "auto_cv"}}).measures["matches_ll"]
    assert r.extra["interaction"] == "a x b, b x c"
    n = float(len(sample))
    cnt = sample.groupby(keys).size()
    idx = cnt.index.to_frame(index=False)
    fobs = cnt.to_numpy(float)

    def count(cols):
        c = sample.groupby(cols).size()
        return c.reindex(pd.MultiIndex.from_frame(idx[cols]) if len(cols) > 1 else idx[cols[0]]
                         ).to_numpy(float)
    ab, bc, b, d = count(["a", "b"]), count(["b", "c"]), count(["b"]), count(["d"])
    mu = n * (ab / n) * (bc / n) * (d / n) / (b / n)
    full = pd.MultiIndex.from_product([range(6), range(6), range(5), range(4)], names=keys)
    pab = (sample.groupby(["a", "b"]).size() / n).to_dict()
    pbc = (sample.groupby(["b", "c"]).size() / n).to_dict()
    pb = (sample["b"].value_counts() / n).to_dict()
    pdd = (sample["d"].value_counts() / n).to_dict()
    s2 = sum((n * pab.get((x[0], x[1]), 0) * pbc.get((x[1], x[2]), 0) * pdd.get(x[3], 0)
              / pb[x[1]]) ** 2 for x in full if x[1] in pb)
    alpha = max((np.sum(fobs ** 2 - 2 * fobs * mu) + s2 - fobs.sum()) / s2, 0.0)
    su = fobs == 1
    s_ab, s_bc, s_b, s_d = (x[su] - 0.5 for x in (ab, bc, b, d))
    m = n - 1
    mu_t = m * (s_ab / m) * (s_bc / m) * (s_d / m) / (s_b / m)
    al = (1 + alpha) * (1 + 1 / s_ab) * (1 + 1 / s_bc) * (1 + 1 / s_d) - 1
    c = 0.95 / (1 / (al * mu_t / 0.05) + 0.05)
    want = float(np.sum(al * (1 - (1 + c) ** (-1 / al)) / c))
    assert r.extra["alpha"] == pytest.approx(alpha, rel=1e-9, abs=1e-12)
    assert r.value == pytest.approx(want, rel=1e-9)


def test_doubtful_forests_and_their_weights_by_hand():
    """The forests one test away and the chance that test goes the other way, Φ from scipy: a kept
    pair (G = 10, V = 16, z = 2) is dropped with Φ(−(10 − 8)/4); a pair left out that could join
    (G = 6, V = 9) is added with Φ(−(6 − 6)/3) = ½; one that would close a cycle is not offered;
    a pair with no gain is not offered."""
    from scipy.stats import norm
    kept = [(0, 1), (1, 2)]
    scores = {(0, 1): (10.0, 16.0), (1, 2): (30.0, 4.0), (0, 2): (9.0, 1.0),
              (2, 3): (6.0, 9.0), (0, 3): (-1.0, 4.0), (1, 3): (1.0, 25.0)}
    got = {tuple(e): w for w, e in forest.doubtful(kept, scores, z=2.0, least=0.0)}
    want = {((1, 2),): norm.cdf(-(10 - 8) / 4), ((0, 1),): norm.cdf(-(30 - 4) / 2),
            ((0, 1), (1, 2), (2, 3)): 0.5, ((0, 1), (1, 2), (1, 3)): norm.cdf(-(10 - 1) / 5)}
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k] == pytest.approx(w, rel=1e-9, abs=1e-300)
    # weights below 1 % dropped (dropping (1, 2): Φ(−13)); additions by decreasing weight
    assert [e for _, e in forest.doubtful(kept, scores, z=2.0)] == [
        [(1, 2)], [(0, 1), (1, 2), (2, 3)], [(0, 1), (1, 2), (1, 3)]]


def test_the_choice_spread_adds_to_the_se_in_quadrature():
    """Where the choice is in doubt (Adult, four keys, 1 % samples: pairs near the test's threshold) the
    s.e. is sqrt((k · Poisson s.e.)² + shared² + (c · Ê)² + spread²) (shared: the margins'
    covariance, under interval=model), the spread 0 when switched off."""
    from conftest import data_path
    df = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"))
    keys = ["age", "sex", "race", "marital-status"]
    seen = 0
    for seed in range(6):
        sample = df.sample(frac=0.01, random_state=seed)
        on = gpurisk.assess(sample, keys, fraction=0.01, measures=["matches_ll"],
                            options={"loglinear_risk": {"model": "auto_cv"}}).measures["matches_ll"]
        off = gpurisk.assess(sample, keys, fraction=0.01, measures=["matches_ll"],
                             options={"loglinear_risk": {"choice_spread": False,
                                                         "model": "auto_cv"}}
                             ).measures["matches_ll"]
        k, c = on.extra["se_factor"], on.extra["model_error"]
        assert off.extra["se_choice"] == 0.0 and off.value == on.value
        assert off.se == pytest.approx(math.sqrt((k * off.extra["se_poisson"]) ** 2
                                                 + off.extra.get("se_shared", 0.0) ** 2
                                                 + (c * off.value) ** 2), rel=1e-12)
        assert on.se ** 2 == pytest.approx(off.se ** 2 + on.extra["se_choice"] ** 2, rel=1e-12)
        seen += on.extra["se_choice"] > 0
    assert seen >= 1
