"""The covariance the sample uniques' terms share through the margins (issue 43's interval).

Each term's slope in ln μ against central differences of the terms themselves; the delta method's
cross terms against a brute-force sum over every pair of uniques that share a category (on a
synthetic sample and a sample of the real Adult file, counts recounted from the cells) and against
a simulation of shared margin shares.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conftest import data_path
from gpurisk.freq.engine import build_table
from gpurisk.models.prior import loo_prior, shared_variance
from gpurisk.models.table_fits import sample_margins
from gpurisk.models.terms import nb_terms, unique_terms
from gpurisk.models import eb_forest
from gpurisk.models.forest import Margins
from test_eb_forest import _cells
from test_eb_rooted import _records


@pytest.mark.parametrize("kind", ["inverse", "tau1"])
@pytest.mark.parametrize("alpha", [0.0, 0.3, "cells"])
@pytest.mark.parametrize("pi", [0.01, 0.1, 0.5])
def test_slope_is_the_terms_derivative_in_ln_mu(kind, alpha, pi):
    rng = np.random.default_rng(7)
    m = np.exp(rng.uniform(np.log(1e-3), np.log(300.0), 400))      # (1 − π) λ̂
    a = rng.uniform(0.01, 3.0, m.shape[0]) if alpha == "cells" else alpha
    t, v, d = nb_terms(m, a, pi, kind, slope=True)
    t0, v0 = nb_terms(m, a, pi, kind)
    np.testing.assert_array_equal(t, t0)               # the same terms and variances
    np.testing.assert_array_equal(v, v0)
    h = 1e-5
    up = nb_terms(m * math.exp(h), a, pi, kind)[0]
    down = nb_terms(m * math.exp(-h), a, pi, kind)[0]
    np.testing.assert_allclose(d, (up - down) / (2 * h), rtol=1e-5, atol=1e-11)
    if kind == "inverse":
        assert (d <= 0).all()                          # more people in the cell: 1/F smaller


def _rooted_sample(seed=5, n=300):
    rec, cards = _records(seed=seed, n=n)
    codes, f = _cells(rec)
    m = Margins(codes, f, cards)
    roots, arcs = [1], [(1, 0, 3.0), (1, 2, 11.0)]
    su = np.flatnonzero(f == 1)
    return rec, codes, m, roots, arcs, su


def _groups_and_rv(codes, f, su, roots, arcs, a0=0.5):
    """Per margin: each unique's group (its category, or its (parent, child) pair) and the relative
    variance of that group's share among the other n − 1 records, counted from the cells (codes
    per key, counts f) one unique at a time."""
    n = float(np.sum(f))
    out = []
    cells = np.column_stack([np.asarray(c[su], dtype=np.int64) for c in codes])

    def count(*where):
        return float(np.sum(f[np.logical_and.reduce([codes[v] == x for v, x in where])]))
    for r in roots:
        s = np.array([count((r, x[r])) - 1 + a0 for x in cells])
        out.append((cells[:, r], 1.0 / s))
    for p, c, beta in arcs:
        g = cells[:, p] * (int(codes[c].max()) + 1) + cells[:, c]
        rv = []
        for x in cells:
            q = (count((c, x[c])) - 1 + a0) / (n - 1)
            s = count((p, x[p]), (c, x[c])) - 1 + beta * q
            big = count((p, x[p])) - 1 + beta
            rv.append((big - s) / (s * (big + 1)))
        out.append((g, np.array(rv)))
    return out


def _pairs(d, groups):
    """Σ over margins, Σ over ordered pairs i ≠ j of uniques in one group of rv d_i d_j."""
    out = 0.0
    for g, r in groups:
        same = g[:, None] == g[None, :]
        np.fill_diagonal(same, False)
        out += float(np.sum(same * (r * d)[:, None] * d[None, :]))
    return out


@pytest.mark.parametrize("pi", [0.02, 0.2])
def test_shared_variance_is_the_sum_over_pairs_of_uniques_sharing_a_category(pi):
    rec, codes, m, roots, arcs, su = _rooted_sample()
    counts = eb_forest.rooted_counts(m, roots, arcs, su)
    mu, rv = loo_prior(m.n, counts, 0.2)
    _, _, d = unique_terms(mu, rv, pi, "inverse", slope=True)
    want = _pairs(d, _groups_and_rv(codes, m.f, su, roots, arcs))
    assert want > 0
    assert shared_variance(m.n, counts, d) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("kind", ["inverse", "tau1"])
def test_shared_variance_on_a_sample_of_adult(kind):
    """The forest eb chooses on a 2 % sample of the real Adult file, rooted as the measure roots it."""
    keys = ["age", "sex", "race", "marital-status", "education"]
    adult = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"), usecols=keys)
    sample = adult[np.random.default_rng(4).random(len(adult)) < 0.02]
    m = sample_margins(build_table(sample, keys))[4]
    edges = eb_forest.choose(m)[0]
    roots, arcs = eb_forest.orient(m, edges)
    assert arcs
    su = np.flatnonzero(m.f == 1)
    counts = eb_forest.rooted_counts(m, roots, arcs, su)
    mu, rv = loo_prior(m.n, counts, 0.3)
    _, _, d = unique_terms(mu, rv, 0.02, kind, slope=True)
    want = _pairs(d, _groups_and_rv(m.codes, np.asarray(m.f), su, roots, arcs))
    assert want > 0
    assert shared_variance(m.n, counts, d) == pytest.approx(want, rel=1e-9)


def test_shared_variance_matches_a_simulation_of_shared_shares():
    """Each margin's share of each group drawn once per replicate (gamma, mean 1, relative variance
    ε·rv: small, so that the first order holds) and applied to every unique in the group: the
    variance of Σ t_j over replicates against ε·(the delta method's own part + its cross terms)."""
    rec, codes, m, roots, arcs, su = _rooted_sample(seed=11, n=500)
    counts = eb_forest.rooted_counts(m, roots, arcs, su)
    pi = 0.05
    mu, rv = loo_prior(m.n, counts, 0.1)
    _, _, d = unique_terms(mu, rv, pi, "inverse", slope=True)
    groups = _groups_and_rv(codes, m.f, su, roots, arcs)
    eps = 0.01
    rng = np.random.default_rng(3)
    reps = 20_000
    factor = np.ones((reps, su.shape[0]))
    own = 0.0
    for g, r in groups:
        ids, first = np.unique(g, return_index=True)[0], np.unique(g, return_index=True)[1]
        shape = 1.0 / (eps * r[first])
        draw = rng.gamma(shape[None, :], 1.0 / shape[None, :], (reps, ids.shape[0]))
        factor *= draw[:, np.searchsorted(ids, g)]
        own += eps * float(np.sum(r * d * d))
    sums = np.array([unique_terms(mu * f, rv, pi, "inverse", variance=False)[0].sum()
                     for f in factor])
    want = own + eps * shared_variance(m.n, counts, d)
    assert float(np.var(sums)) == pytest.approx(want, rel=0.05)


def test_a_lone_key_adds_nothing_and_an_uncounted_margin_is_skipped():
    d = np.array([-0.1, -0.2, -0.3])
    assert shared_variance(100.0, [], d) == 0.0
    assert shared_variance(100.0, [(np.array([5.0, 5.0, 7.0]), 1, False)], d) == 0.0
