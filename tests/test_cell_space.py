"""Sums over every cell of the key space by the binned distribution of μ̂ (gpurisk.models.cell_space).

The reference is the sum over every cell listed (the product of the keys' categories, μ̂ at each
from the margins by gpurisk.models.risk_choice.means_at), on samples of the real UCI Adult file and
on a synthetic table with a chain."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import data_path, gamma_poisson_margins
from gpurisk.freq.engine import build_table
from gpurisk.models.table_fits import sample_margins
from gpurisk.models.cell_space import combinations, forest_mass
from gpurisk.models.eb_forest import choose
from gpurisk.models.forest import Margins
from gpurisk.models.risk_choice import means_at

G = {"μ² e^−μ": lambda x: x * x * np.exp(-x),
     "μ e^−3μ (1 − μ)": lambda x: x * np.exp(-3 * x) * (1 - x),
     "μ": lambda x: x}


def _every_cell(m: Margins, edges):
    held = [np.flatnonzero(m.one(v) > 0) for v in range(len(m.codes))]
    cells = [g.reshape(-1) for g in np.meshgrid(*held, indexing="ij")]
    mu = means_at(m, edges, cells)
    return mu[mu > 0]


@pytest.mark.parametrize("keys", [["age", "sex", "race", "marital-status"],
                                  ["race", "marital-status", "relationship", "sex", "workclass"]])
def test_sums_over_every_cell_of_adult_samples(keys):
    adult = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"), usecols=keys)
    rng = np.random.default_rng(1)
    sample = adult[rng.random(len(adult)) < 0.05]
    m = sample_margins(build_table(sample, keys))[4]
    edges = choose(m)[0]
    assert edges                                      # a forest with trees, not main effects alone
    mu = _every_cell(m, edges)
    values, mass = forest_mass(m, edges, 1e-15 / m.n)
    for name, g in G.items():
        want = float(np.sum(g(mu)))
        got = float(np.sum(mass * g(values) / values))
        assert got == pytest.approx(want, rel=2e-5), name
    assert float(mass.sum()) == pytest.approx(m.n, rel=1e-9)      # Σ_x μ̂_x = n


def test_a_chain_and_a_lone_key_and_the_cut_below_mu_min():
    m = gamma_poisson_margins(5, [7, 5, 6, 4], 0.5, 3.0)[2]
    edges = [(0, 1), (1, 2)]                          # key 3 alone
    mu = _every_cell(m, edges)
    values, mass = forest_mass(m, edges, 1e-15 / m.n, h=0.001)
    for name, g in G.items():          # to 10⁻⁵ of Σ |g| (the second g changes sign)
        assert float(np.sum(mass * g(values) / values)) == pytest.approx(
            float(np.sum(g(mu))), abs=1e-5 * float(np.sum(np.abs(g(mu))))), name
    # cells below mu_min are left out, to within the bins either side of it
    cut = float(np.median(mu))
    values, mass = forest_mass(m, edges, cut, h=0.001)
    assert float(mu[mu >= cut * np.exp(0.003)].sum()) <= float(mass.sum()) <= float(
        mu[mu >= cut * np.exp(-0.003)].sum())


def test_a_forest_too_large_to_list_gives_none():
    rng = np.random.default_rng(6)
    cards = [30, 30, 30]
    f = rng.poisson(0.8, int(np.prod(cards)))
    codes = [c[f > 0] for c in np.unravel_index(np.arange(f.shape[0]), cards)]
    m = Margins(codes, f[f > 0], cards)
    edges = [(0, 1), (1, 2)]
    assert forest_mass(m, edges, 1e-15, combos_max=1000) is None
    assert forest_mass(m, edges, 1e-15) is not None


@pytest.mark.parametrize("edges", [[(0, 1), (1, 2), (2, 3)], [(0, 1), (0, 2), (0, 3)]])
def test_the_trees_combinations_counted_are_the_cells_of_positive_mean(edges):
    """One tree over every key: the combinations counted by messages are the key space's cells
    with μ̂ > 0, counted by listing all of them; two trees: what each lists, added (the cells of
    positive mean are then their product)."""
    m = gamma_poisson_margins(7, [6, 5, 4, 3], 0.3, 1.0)[2]
    assert combinations(m, edges) == _every_cell(m, edges).shape[0]
    a, b = combinations(m, [(0, 2)]), combinations(m, [(1, 3)])
    assert combinations(m, [(0, 2), (1, 3)]) == a + b
    assert a * b == _every_cell(m, [(0, 2), (1, 3)]).shape[0]


def test_the_fft_convolution_is_numpys():
    from gpurisk.models.cell_space import _fft_convolve
    rng = np.random.default_rng(8)
    for na, nb in ((1, 1), (7, 300), (1000, 999), (5000, 37)):
        a, b = rng.random(na), rng.random(nb)
        want = np.convolve(a, b)
        assert np.allclose(_fft_convolve(a, b), want, rtol=0, atol=1e-12 * want.max())
