"""Ê (matches_ll) and τ̂1 (tau1_ll) made cheaper without changing a value (issue 43).

The fast path (pair counts by groups of keys, G and V summed over pairs of categories, the
forest's products and counts slice by slice, the terms on slices, codes in small dtypes, no copies)
is compared with the per-cell computation it replaced, written here in plain numpy/pandas: each
pair's held-out score record by record (``split_score`` on the halves drawn in np.lexsort's order,
as tests/test_model_choice.py's reference), μ̂ of every cell as n Π p_ab Π p_v^{1 − deg} from pandas
group sums, Σ μ̂² over every cell of the key space summed densely, each unique's margin counts
gathered from pandas group sums, and the terms on whole arrays. The fast path runs with slices of
1 000 cells so that small files cross many slices. Every figure of both measures (value, s.e., the
bounds, α̂, the model, the choice's spread, ...) must agree to 1e-12 relative (the sums over cells
and over pairs of categories are taken in another order; α̂'s spread, the difference of two sums
of the terms, to 1e-12 of the estimate), on real files and populations of
../shared/data and a synthetic register with an interaction, with and without population cells in
the table, with the calibrated and the model interval.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.models import forest, model_choice, prior, risk_choice, terms

MEASURES = ["matches_ll", "tau1_ll"]
#: figures that are the difference of two sums over the uniques (summed slice by slice on the fast
#: path, whole on the reference's)
DIFFERENCES = {"se_alpha"}


def _reference_pair_scores(codes, f, cards, splits=1, seed=0, ranks=None, names=None, margins=None):
    """pair_scores record by record: tests/test_model_choice.py's reference (split_score per pair
    on the halves drawn in np.lexsort's order of the cells' ranks, keys by name)."""
    from test_model_choice import _reference_scores
    codes = [np.asarray(c, dtype=np.int64) for c in codes]
    d = len(codes)
    ranks = [np.arange(int(k)) for k in cards] if ranks is None else list(ranks)
    names = [f"{v:09d}" for v in range(d)] if names is None else [str(x) for x in names]
    return _reference_scores(codes, np.asarray(f, dtype=np.int64), cards, splits, seed, ranks, names)


def _frame(codes, f):
    frame = pd.DataFrame({f"k{v}": np.asarray(c, dtype=np.int64) for v, c in enumerate(codes)})
    frame["f"] = np.asarray(f, dtype=np.float64)
    return frame


def _degrees(d, edges):
    deg = [0] * d
    for a, b in edges:
        deg[a] += 1
        deg[b] += 1
    return deg


def _reference_forest_means(codes, f, cards, edges, margins=None, sliced=False):
    """μ̂ of every cell, n Π_{(a,b)} p_ab Π_v p_v^{1 − deg(v)} from pandas group sums, and Σ μ̂² over
    every cell of the key space (K = Π cards, summed densely); ``sliced``: the same array (read
    a slice at a time as the fast path reads its own)."""
    frame = _frame(codes, f)
    n = float(frame["f"].sum())
    d = len(codes)
    deg = _degrees(d, edges)
    mu = np.full(len(frame), n)
    for v in range(d):
        if deg[v] != 1:
            mu *= (frame.groupby(f"k{v}")["f"].transform("sum").to_numpy() / n) ** (1 - deg[v])
    for a, b in edges:
        mu *= frame.groupby([f"k{a}", f"k{b}"])["f"].transform("sum").to_numpy() / n
    grid = np.indices([int(k) for k in cards]).reshape(d, -1)
    dense = np.full(grid.shape[1], n)
    for v in range(d):
        if deg[v] != 1:
            one = np.zeros(int(cards[v]))
            s = frame.groupby(f"k{v}")["f"].sum()
            one[s.index.to_numpy()] = s.to_numpy() / n
            with np.errstate(divide="ignore"):
                dense *= np.where(one > 0, one ** (1 - deg[v]), 0.0)[grid[v]]
    for a, b in edges:
        pair = np.zeros((int(cards[a]), int(cards[b])))
        s = frame.groupby([f"k{a}", f"k{b}"])["f"].sum()
        pair[s.index.get_level_values(0), s.index.get_level_values(1)] = s.to_numpy() / n
        dense *= pair[grid[a], grid[b]]
    return mu, float(np.sum(dense * dense))


def _reference_forest_counts(codes, f, cards, edges, rows, margins=None):
    """Each unique's sample count of its category of every factor, from pandas group sums."""
    frame = _frame(codes, f)
    deg = _degrees(len(codes), edges)
    out = [(frame.groupby(f"k{v}")["f"].transform("sum").to_numpy()[rows], 1 - deg[v], deg[v] == 0)
           for v in range(len(codes)) if deg[v] != 1]
    out += [(frame.groupby([f"k{a}", f"k{b}"])["f"].transform("sum").to_numpy()[rows], 1, True)
            for a, b in edges]
    return out


def _figures(measures) -> dict:
    out = {}
    for name in MEASURES:
        r = measures[name]
        assert r.value is not None, (name, r.extra)
        out[name] = {"value": r.value, "se": r.se, "upper": r.upper,
                     **{k: v for k, v in r.extra.items()
                        if v is None or isinstance(v, (bool, int, float, str))}}
    return out


def _cases():
    """(name, frame, keys, how): real files, populations and a synthetic register, each with a
    key space small enough for the dense reference sum (K at most 6·10⁵)."""
    from conftest import data_path
    rng = np.random.default_rng(43)
    fars = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    adult = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    gss = pd.read_csv(data_path("populations/GSSvocab.csv.gz"))
    wvs = pd.read_csv(data_path("populations/wvs_immig.csv.gz"))
    labsup = pd.read_csv(data_path("populations/labsup.csv.gz"))
    cup = pd.read_csv(data_path("arx_genetic/cup_int.csv"), sep=";")
    n = 300_000
    k0 = rng.integers(0, 2, n)
    synth = pd.DataFrame({"k0": k0, "k1": (k0 * 37 + rng.integers(0, 8, n)) % 100,
                          "k2": rng.integers(0, 6, n), "k3": rng.integers(0, 17, n),
                          "k4": rng.integers(0, 10, n)})
    return [
        ("fars", fars, ["iage", "irace", "isex", "ihispanic", "iinjury"], {"fraction": 0.05}),
        ("adult", adult, ["sex", "age", "race", "marital-status", "education", "workclass"],
         {"fraction": 0.1}),
        ("gss", gss, ["year", "gender", "ageGroup", "educGroup", "vocab", "educ"],
         {"fraction": 0.05}),
        ("wvs", wvs.sample(frac=0.2, random_state=1), ["s002", "s003", "s020", "e143"],
         {"fraction": 0.2}),
        ("labsup", labsup, ["kids", "morekids", "boys2", "girls2", "age", "agefstm", "educ"],
         {"fraction": 0.05}),
        ("synthetic", synth, ["k0", "k1", "k2", "k3", "k4"], {"fraction": 0.01}),
        ("cup, population cells", cup.assign(flag=rng.random(len(cup)) < 0.05),
         ["GENDER", "INCOME", "STATE", "NGIFTALL"], {"sample_flag": "flag"}),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("options", [None, {"loglinear_risk": {"interval": "model"}},
                                     {"loglinear_risk": {"cv_splits": 2, "cv_seed": 3}}],
                         ids=["default", "model_interval", "two_splits"])
def test_every_figure_as_the_per_cell_computation(monkeypatch, options):
    cases = _cases()
    fast = {}
    with monkeypatch.context() as m:       # the fast path across many slices of cells
        m.setattr(forest, "CHUNK", 1000)
        m.setattr(terms, "CHUNK", 1000)
        m.setattr(model_choice, "KEY_CHUNK", 1000)
        for name, frame, keys, how in cases:
            fast[name] = _figures(gpurisk.assess(frame, keys, measures=MEASURES, options=options,
                                                 **how).measures)
    monkeypatch.setattr(forest, "pair_scores", _reference_pair_scores)
    monkeypatch.setattr(forest, "forest_means", _reference_forest_means)
    monkeypatch.setattr(risk_choice, "forest_means", _reference_forest_means)
    monkeypatch.setattr(forest, "forest_counts", _reference_forest_counts)
    monkeypatch.setattr(terms, "CHUNK", 1 << 62)             # the terms on whole arrays
    kept = set()
    for name, frame, keys, how in cases:
        want = _figures(gpurisk.assess(frame, keys, measures=MEASURES, options=options,
                                       **how).measures)
        got = fast[name]
        for measure in MEASURES:
            assert got[measure].keys() == want[measure].keys(), (name, measure)
            for k, w in want[measure].items():
                g = got[measure][k]
                if isinstance(w, float) and not isinstance(w, bool):
                    # a spread that is the difference of two sums of the terms (α̂'s profile
                    # ends) is as exact as the sums are: to 1e-12 of the estimate
                    tol = 1e-12 * abs(want[measure]["value"]) if k in DIFFERENCES else 1e-300
                    assert g == pytest.approx(w, rel=1e-12, abs=tol), (name, measure, k)
                else:
                    assert g == w, (name, measure, k)
        kept.add(want["matches_ll"].get("interaction") is not None)
    assert True in kept                 # interactions kept somewhere: forests fitted


@pytest.mark.parametrize("threads", [1, 4])
def test_slices_change_no_number(monkeypatch, threads):
    """The per-unique formulas on slices (by_chunks), in one thread or shared among four, give
    every element as on the whole arrays, bit for bit: the loo prior and both measures' terms,
    with a gamma effect per cell or none (interval=model's E[1/F²] too: its nodes are summed row by
    row in one order, whatever slice the row is in)."""
    from gpurisk.freq import schedule
    monkeypatch.setattr(terms, "TERMS_THREADS", threads)
    monkeypatch.setattr(terms, "THREADED_CHUNKS", 2)
    monkeypatch.setattr(schedule, "usable_cpus", lambda: 4)
    rng = np.random.default_rng(7)
    n = 5_000
    counts = [(rng.integers(1, 50, n).astype(float), 1, True), (rng.integers(1, 9, n), -1, False),
              rng.integers(1, 200, n).astype(float)]
    whole = prior.loo_prior(1e4, counts, 0.3)
    monkeypatch.setattr(terms, "CHUNK", 333)
    sliced = prior.loo_prior(1e4, counts, 0.3)
    for a, b in zip(whole, sliced):
        assert np.array_equal(a, b)
    mu = np.concatenate([rng.gamma(0.5, 0.02, n // 2), rng.gamma(2.0, 3.0, n // 2)])
    alpha = rng.gamma(1.0, 0.5, n)
    for kind in ("inverse", "tau1"):
        for a, exact in ((alpha, False), (alpha, True), (0.0, False), (0.4, False)):
            want = terms.nb_terms((1.0 - 0.01) * mu / 0.01, a, 0.01, kind, exact)
            got = terms.unique_terms(mu, a, 0.01, kind, exact)
            assert all(np.array_equal(x, y) for x, y in zip(got, want)), (kind, exact)
    assert math.isfinite(float(np.sum(got[0])))
    # the sums alone, slice by slice (no per-unique array): the same numbers in one thread or
    # four, and the whole arrays' sums up to the order of the additions
    def fn(m, a):
        return terms.nb_terms((1.0 - 0.01) * m / 0.01, a, 0.01, "inverse", False,
                              variance=False, slope=True)[::2]
    sums = terms.sums_by_chunks(fn, 2, mu, alpha)
    assert sums == pytest.approx([float(np.sum(x)) for x in fn(mu, alpha)], rel=1e-14)
    monkeypatch.setattr(terms, "TERMS_THREADS", 5 - threads)
    assert terms.sums_by_chunks(fn, 2, mu, alpha) == sums


def test_split_order_and_draws_in_slices(monkeypatch):
    """The cells' order from the rank key formed slice by slice, its ties found across slice
    boundaries, and the halves drawn slice by slice: np.lexsort's order and one call's draws."""
    rng = np.random.default_rng(11)
    monkeypatch.setattr(model_choice, "KEY_CHUNK", 7)
    for n, hi in ((60, 3), (500, 50), (2000, 10**4)):
        codes = [rng.integers(0, hi, n) for _ in range(3)]
        ranks = [rng.permutation(hi) for _ in range(3)]
        want = np.lexsort([r[c] for r, c in zip(ranks, codes)][::-1])
        assert np.array_equal(model_choice.rank_order(codes, ranks, n), want)
    key = np.array([5, 3, 9, 1, 7, 2, 8, 4, 6, 0, 11, 10, 12, 13, 7])     # a tie across slices
    assert np.array_equal(model_choice._key_order(key), np.argsort(key, kind="stable"))
    f = rng.poisson(2.0, 500) + 1
    codes = [rng.integers(0, 9, 500) for _ in range(2)]
    _, _, got = model_choice._split(codes, f, [9, 9], 2, 5, None, None)
    order = np.lexsort(codes[::-1])
    draw = np.random.default_rng(5)
    for a, na, nb in got:
        want = np.empty(500)
        want[order] = draw.binomial(f[order], 0.5)
        assert np.array_equal(a, want) and na == want.sum() and nb == (f - want).sum()
