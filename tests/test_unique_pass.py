"""Both measures' sums over the sample uniques in one pass (gpurisk.models.unique_sums, issue 43's
memory): against the whole arrays the per-measure computation makes (unique_terms, shared_variance,
third_cumulants), on a sample of the real FARS file under Ê's default fit; the same numbers in one
thread or four, in any window; the prior made where read (LooPrior) and the cells' means made where
read (CellMeans, the fit streamed over the cells) element by element what the whole arrays hold."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import data_path
from gpurisk.freq.engine import build_table
from gpurisk.models import eb_forest, terms, unique_sums
from gpurisk.models.prior import LooPrior, SharedSums, loo_prior, shared_variance
from gpurisk.models.table_fits import eb_means, sample_margins
from gpurisk.models.unique_sums import KINDS, Reader, unique_pass

PI = 0.01


def _fars_table(seed=5, frac=0.03):
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    keys = ["iage", "isex", "irace", "ihispanic", "iinjury"]
    return build_table(df.sample(frac=frac, random_state=seed), keys)


def _pass(table, monkeypatch, chunk, slices, threads):
    from gpurisk.freq import schedule
    monkeypatch.setattr(terms, "CHUNK", chunk)
    monkeypatch.setattr(terms, "TERMS_THREADS", threads)
    monkeypatch.setattr(terms, "THREADED_CHUNKS", 2)
    monkeypatch.setattr(schedule, "usable_cpus", lambda: 4)
    monkeypatch.setattr(unique_sums, "WINDOW_SLICES", slices)
    mu, alpha, _, counts, *_ = eb_means(table, dispersion="truncated", root_prior="eb")
    n = float(table.n)
    prior = LooPrior(n, counts, alpha)
    reader = Reader(2, lambda m, a, start, stop: [float(np.sum(m * a)), float(stop - start)])
    return unique_pass(prior, PI, True, shared=lambda: SharedSums(n, counts), bins=True,
                       readers=[reader]), (n, counts, alpha)


def test_the_pass_is_each_measures_sums_of_the_whole_arrays(monkeypatch):
    table = _fars_table()
    got, (n, counts, alpha) = _pass(table, monkeypatch, 31, 3, 4)
    mu_p, al_p = loo_prior(n, counts, alpha)
    assert mu_p.shape[0] > 10 * 31                     # many slices and windows
    for kind in KINDS:
        t, v, d = terms.nb_terms((1 - PI) * mu_p / PI, al_p, PI, kind, True, slope=True)
        s = got.sums[kind]
        assert s.value == pytest.approx(float(t.sum()), rel=1e-13)
        assert s.variance == pytest.approx(float(v.sum()), rel=1e-13)
        assert s.shared == pytest.approx(shared_variance(n, counts, d), rel=1e-11)
        if kind == "tau1":
            assert s.kappa3 == pytest.approx(
                terms.third_cumulants(mu_p, al_p, PI, kind, t, v, total=True), rel=1e-12)
        else:
            assert s.kappa3 is None
            b = unique_sums.variance_bins(v)
            assert np.array_equal(got.bins, b)
            assert got.bin_sums == pytest.approx(np.bincount(b, weights=v, minlength=256),
                                                 rel=1e-12, abs=1e-300)
    assert got.read[0][0] == pytest.approx(float(np.sum(mu_p * al_p)), rel=1e-13)
    assert got.read[0][1] == mu_p.shape[0]


def test_the_pass_gives_the_same_numbers_in_any_threads_and_the_sums_in_any_window(monkeypatch):
    table = _fars_table(seed=6)
    one, _ = _pass(table, monkeypatch, 31, 3, 1)
    four, _ = _pass(table, monkeypatch, 31, 3, 4)
    assert one.sums == four.sums                       # bit for bit
    assert np.array_equal(one.bins, four.bins) and np.array_equal(one.read[0], four.read[0])
    wide, _ = _pass(table, monkeypatch, 31, 40, 4)
    for kind in KINDS:          # the slices' sums alike; the margins' sums by other windows
        assert wide.sums[kind].value == one.sums[kind].value
        assert wide.sums[kind].variance == one.sums[kind].variance
        assert wide.sums[kind].shared == pytest.approx(one.sums[kind].shared, rel=1e-12)


def test_the_prior_made_where_read_is_the_kept_prior(monkeypatch):
    table = _fars_table(seed=7)
    _, alpha, _, counts, *_ = eb_means(table, dispersion="truncated", root_prior="eb")
    n = float(table.n)
    whole = loo_prior(n, counts, alpha)
    prior = LooPrior(n, counts, alpha)
    rng = np.random.default_rng(1)
    at = np.sort(rng.choice(prior.size, 50, replace=False))
    for got, want in zip(prior.at(at), whole):
        assert np.array_equal(got, want[at])
    for got, want in zip(prior.at(slice(3, 40)), whole):
        assert np.array_equal(got, want[3:40])


def test_the_cells_means_made_where_read_are_the_whole_arrays(monkeypatch):
    """rooted_slices' and forest_means' CellMeans read as slices, positions or a mask, against the
    whole arrays; the fit streamed over the cells (the uniques' μ̂ and the truncated likelihood's
    groups) against the whole per-cell array's."""
    from gpurisk.models import dispersion, forest
    from gpurisk.models.table_fits import _streamed, unique_positions
    monkeypatch.setattr(dispersion, "GROUP_CHUNK", 101)
    table = _fars_table(seed=8)
    m = sample_margins(table)[4]
    edges, _, _ = eb_forest.choose(m, None)
    roots, arcs = eb_forest.orient(m, edges)
    whole, s2 = eb_forest.rooted_means(m, roots, arcs)
    lazy, s2_lazy = eb_forest.rooted_slices(m, roots, arcs)
    assert s2 == s2_lazy and np.array_equal(np.asarray(lazy), whole)
    at = np.array([5, 0, 77, 3])
    assert np.array_equal(lazy[at], whole[at]) and np.array_equal(lazy[10:20], whole[10:20])
    assert np.array_equal(lazy[whole > 1.0], whole[whole > 1.0])
    su = unique_positions(m.f)
    assert su.dtype == np.int32 and np.array_equal(su, np.flatnonzero(m.f == 1))
    mu_su, ll = _streamed(m.f, lazy, su)
    assert np.array_equal(np.asarray(mu_su), whole[su])
    assert mu_su.mean() == pytest.approx(float(whole[su].mean()), rel=1e-13)
    want = dispersion.loglik(m.f, whole)
    for a in (0.0, 0.3, 2.0):
        assert ll(a) == want(a)
    fm, _ = forest.forest_means(m.codes, m.f, m.cards, edges, m)
    fl, _ = forest.forest_means(m.codes, m.f, m.cards, edges, m, sliced=True)
    assert np.array_equal(np.asarray(fl), fm) and np.array_equal(fl[7:9], fm[7:9])


@pytest.mark.parametrize("chunk", [1 << 16, 7])
def test_weighted_counts_are_bincounts_taken_a_slice_at_a_time(chunk, monkeypatch):
    """forest.weighted_counts against one np.bincount of every cell, with whole-number counts (as
    integers: no float copy) and with float weights; and Margins keeps a table's integer counts
    as they are, its category and pair counts those of float counts."""
    from gpurisk.models import forest
    from gpurisk.models.forest import Margins, pair_ids, weighted_counts
    monkeypatch.setattr(forest, "COUNTS_CHUNK", chunk)
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 40, 5000)
    f = rng.integers(1, 9, 5000)
    for w in (f, f * 0.5):
        got = weighted_counts(lambda rows: ids[rows], w, 40)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, np.bincount(ids, weights=w, minlength=40))
    codes = [rng.integers(0, 6, 5000), rng.integers(0, 9, 5000)]
    m, mf = Margins(codes, f, [6, 9]), Margins(codes, f.astype(float), [6, 9])
    assert m.f is f and m.n == mf.n
    for v in (0, 1):
        np.testing.assert_array_equal(m.one(v), mf.one(v))
    np.testing.assert_array_equal(m.pair_counts(0, 1)[1], mf.pair_counts(0, 1)[1])
    np.testing.assert_array_equal(m.pair_counts(0, 1)[1], np.bincount(
        pair_ids(codes, [6, 9], 0, 1), weights=f, minlength=54))
