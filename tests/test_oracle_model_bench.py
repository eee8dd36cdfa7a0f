"""bench/oracle_model.py: Ê's and N̂1's errors taken apart by giving each step the population's
truth. Its population models are the ones it names (checked against counts by pandas, and N̂1's
formula by simulation), replacing the forest changes the forest and nothing else, and both studies
run on a real population."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import data_path

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    import oracle_model
    return oracle_model


def population(n=4000, seed=5):
    """a, b tied (b mostly follows a), c independent of both, d tied to c."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, n)
    b = np.where(rng.random(n) < 0.7, a % 3, rng.integers(0, 3, n))
    c = rng.integers(0, 4, n)
    d = np.where(rng.random(n) < 0.6, c, rng.integers(0, 4, n))
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


def test_tree_means_by_hand(bench):
    """The tree model's μ of a record's cell is N_ab N_bc / N_b for the tree a - b - c (counts by
    pandas), and N_ab N_c / N for a forest of one pair."""
    frame = population()[["a", "b", "c"]]
    keys = list(frame.columns)
    codes = bench.coded(frame, keys)
    cards = codes.max(axis=0) + 1
    at = np.arange(len(frame))
    size = lambda ks: frame.groupby(ks)[ks[0]].transform("size").to_numpy(float)  # noqa: E731
    got = bench.tree_means(codes, cards, [(0, 1), (1, 2)], at)
    np.testing.assert_allclose(got, size(["a", "b"]) * size(["b", "c"]) / size(["b"]), rtol=1e-12)
    got = bench.tree_means(codes, cards, [(0, 1)], at)
    np.testing.assert_allclose(got, size(["a", "b"]) * size(["c"]) / len(frame), rtol=1e-12)
    # leaving each record out: every count less its own record, plus ½
    n1 = len(frame) - 1.0
    s = lambda ks: size(ks) - 0.5  # noqa: E731
    mu, alpha = bench.loo_tree_means(codes, cards, [(0, 1), (1, 2)], at[:50])
    want = (n1 * (s(["a", "b"]) / n1) * (s(["b", "c"]) / n1) / (s(["b"]) / n1))[:50]
    np.testing.assert_allclose(mu, want, rtol=1e-12)
    rv = (1 + 1 / s(["a", "b"])) * (1 + 1 / s(["b", "c"])) * (1 + 1 / s(["b"]))
    np.testing.assert_allclose(alpha, rv[:50] - 1, rtol=1e-12)


def test_chow_liu_keeps_the_tied_pairs(bench):
    """On the population above the tree holds a - b and c - d (the tied pairs), and the mutual
    information of a 2 × 2 table is its closed form."""
    frame = population()
    codes = bench.coded(frame, list(frame.columns))
    tree = bench.chow_liu(codes, codes.max(axis=0) + 1)
    assert (0, 1) in tree and (2, 3) in tree and len(tree) == 3
    t = np.array([[30.0, 10.0], [20.0, 40.0]])
    p, pa, pb = t / 100, np.array([0.4, 0.6]), np.array([0.5, 0.5])
    by_hand = sum(p[i, j] * np.log(p[i, j] / (pa[i] * pb[j])) for i in range(2) for j in range(2))
    assert bench.mutual_information(t) == pytest.approx(by_hand, rel=1e-12)


def test_pairs_grid_holds_every_two_way_margin(bench):
    """IPF's μ has the population's every two-way margin (its definition) and its total; past the
    cell limit it is not made."""
    frame = population()[["a", "b", "c"]]
    codes = bench.coded(frame, list(frame.columns))
    cards = codes.max(axis=0) + 1
    mu = bench.pairs_grid(codes, cards, 1e6)
    for keep in ((0, 1), (0, 2), (1, 2)):
        other = tuple(v for v in range(3) if v not in keep)
        want = bench.pair_table(codes, cards, *keep)
        np.testing.assert_allclose(mu.sum(axis=other), want, atol=1e-6 * len(frame))
    assert bench.pairs_grid(codes, cards, 10) is None


def test_the_forest_replaced_and_nothing_else(bench):
    """Ê with the pairs its own rule keeps put back in is Ê bit for bit; with other pairs the
    measure reports those pairs and another value (FARS, three keys, a 5 % sample)."""
    import gpurisk
    frame = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    keys = ["iage", "isex", "irace"]
    sample = frame[np.random.default_rng(3).random(len(frame)) < 0.05]
    res = gpurisk.assess(sample, keys, fraction=0.05, measures=["matches_ll"]).measures["matches_ll"]
    kept = [tuple(sorted(keys.index(k) for k in p.split(" x ")))
            for p in res.extra["interaction"].split(", ")]
    assert bench.matches_ll(sample, keys, 0.05, kept) == res.value
    other = [(0, 2)] if (0, 2) not in kept else [(0, 1)]
    assert bench.matches_ll(sample, keys, 0.05, other) != res.value


def test_study_on_a_real_population(bench, capsys, tmp_path):
    """sdcMicro's testdata, the small key set, two samples at 10 %: every estimator's line, the
    truth per sample equal to Σ 1/F over the sample uniques counted here."""
    testdata = data_path("sdcmicro/testdata.csv")
    csv = tmp_path / "samples.csv"
    bench.main(["--only", "testdata", "--keysets", "S", "--replicates", "2", "--fractions", "0.1",
                "--csv", str(csv)])
    text = capsys.readouterr().out
    for label in bench.LABELS.values():
        assert label in text
    d = pd.read_csv(csv)
    assert len(d) == 2 and (d["E"] > 0).all()
    frame = pd.read_csv(testdata)
    keys = ["urbrur", "water", "sex"]
    F = frame.groupby(keys, dropna=False)[keys[0]].transform("size").to_numpy(float)
    rng = np.random.default_rng([43, 0, 100])
    sel = rng.random(len(frame)) < 0.1
    f = frame[sel].groupby(keys, dropna=False)[keys[0]].transform("size").to_numpy()
    assert d["E"].iloc[0] == pytest.approx(float((1.0 / F[sel][f == 1]).sum()), rel=1e-12)


def test_tree_grid_is_the_tree_model_at_every_cell(bench):
    """On the grid, the tree model's μ is tree_means' at each record's cell, sums to N (a tree
    holds the total), and is not made past the cell limit."""
    frame = population()
    codes = bench.coded(frame, list(frame.columns))
    cards = codes.max(axis=0) + 1
    tree = bench.chow_liu(codes, cards)
    grid = bench.tree_grid(codes, cards, tree, 1e6)
    np.testing.assert_allclose(grid[tuple(codes.T)],
                               bench.tree_means(codes, cards, tree, np.arange(len(frame))),
                               rtol=1e-12)
    assert grid.sum() == pytest.approx(len(frame), rel=1e-12)
    assert bench.tree_grid(codes, cards, tree, 10) is None


def test_n1_given_by_hand_and_by_simulation(bench):
    """N̂1 at known Poisson means: by hand on four cells; and, simulating the procedure (cells
    F ~ Poisson(μ), a Bernoulli sample at π), its mean over the samples is the mean number of
    population uniques (it is unbiased where the model is the truth)."""
    mu = np.array([[2.0, 0.5], [1.0, 0.0]])
    f = np.array([1, 0, 0, 0])
    by_hand = np.exp(-0.9 * 2.0) + 0.45 * np.exp(-0.45) + 0.9 * np.exp(-0.9)
    assert bench.n1_given(mu, f, 0.1) == pytest.approx(by_hand, rel=1e-14)
    rng = np.random.default_rng(11)
    mu = rng.gamma(0.7, 1.5, 60)
    pi, reps = 0.2, 20000
    F = rng.poisson(mu, size=(reps, mu.size))
    f = rng.binomial(F, pi)
    got = np.mean([bench.n1_given(mu, f[r], pi) for r in range(reps)])
    truth = (F == 1).sum(axis=1)
    assert abs(got - truth.mean()) < 4 * truth.std() / np.sqrt(reps)


def test_n1_study_on_a_real_population(bench, capsys, tmp_path):
    """--n1 on sdcMicro's testdata, the middle key set, two samples at 10 %: N1 counted here, every
    estimator's line, the population's tree put in N̂1's forest (the bench checks the measure's
    report)."""
    pytest.importorskip("gpurisk_arx")
    testdata = data_path("sdcmicro/testdata.csv")
    csv = tmp_path / "n1.csv"
    bench.main(["--n1", "--only", "testdata", "--keysets", "M", "--replicates", "2", "--fractions",
                "0.1", "--csv", str(csv)])
    text = capsys.readouterr().out
    for e in bench.N1_ESTIMATORS:
        assert bench.LABELS[e] in text
    d = pd.read_csv(csv)
    frame = pd.read_csv(testdata)
    keys = ["urbrur", "water", "sex", "age"]
    N1 = int((frame.groupby(keys, dropna=False).size() == 1).sum())
    assert len(d) == 2 and (d["N1"] == N1).all()
    assert d[list(bench.N1_ESTIMATORS)].notna().all().all()
