"""model=auto_cv of tau1_ll / matches_ll: the split-sample choice of one two-way interaction
(gpurisk.models.model_choice).

References not derived from the code: the held-out log-likelihood summed record by record in plain
Python; simulations from populations with and without a known interaction (the closed-form fit of
the kept pairs is checked against IPF in tests/test_forest.py).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.models import model_choice as mc
from gpurisk.models.forest import choose_pair


def test_split_gain_by_hand_record_by_record():
    rng = np.random.default_rng(3)
    cards = [3, 4, 2]
    K = 24
    ids = np.arange(K)
    codes = list(np.unravel_index(ids, cards))
    train = rng.poisson(1.5, K)
    test = rng.poisson(1.5, K)
    a, b = 0, 1
    # plain Python: one-way and pair counts of the training records, the KT-smoothed probabilities,
    # then each test record's log-likelihood ratio
    nt = int(train.sum())
    ca, cb = {}, {}
    cab = {}
    for j in range(K):
        x = (int(codes[0][j]), int(codes[1][j]))
        ca[x[0]] = ca.get(x[0], 0) + int(train[j])
        cb[x[1]] = cb.get(x[1], 0) + int(train[j])
        cab[x] = cab.get(x, 0) + int(train[j])
    total = 0.0
    kappa = 0.5 * 3 * 4
    for j in range(K):
        x = (int(codes[0][j]), int(codes[1][j]))
        pa = (ca[x[0]] + 0.5) / (nt + 0.5 * 3)
        pb = (cb[x[1]] + 0.5) / (nt + 0.5 * 4)
        pab = (cab[x] + kappa * pa * pb) / (nt + kappa)
        for _ in range(int(test[j])):
            total += math.log(pab) - math.log(pa * pb)
    assert mc.split_gain(codes, cards, train, test, a, b) == pytest.approx(total, rel=1e-12)


def _population(N, interaction, seed):
    """Keys a (6), b (6), c (5), d (4); with ``interaction`` b equals a in half of the records."""
    rng = np.random.default_rng(seed)
    a = rng.choice(6, N, p=[0.3, 0.25, 0.2, 0.1, 0.1, 0.05])
    b = rng.choice(6, N, p=[0.1, 0.1, 0.2, 0.2, 0.2, 0.2])
    if interaction:
        same = rng.random(N) < 0.5
        b = np.where(same, a, b)
    c = rng.choice(5, N, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    d = rng.choice(4, N)
    return a, b, c, d


def _choices(interaction, reps=20, n=3000):
    a, b, c, d = _population(200_000, interaction, 11)
    codes_all = [a, b, c, d]
    cards = [6, 6, 5, 4]
    rng = np.random.default_rng(12)
    out = []
    for r in range(reps):
        take = rng.choice(a.shape[0], n, replace=False)
        ids = np.ravel_multi_index([x[take] for x in codes_all], cards)
        cells, f = np.unique(ids, return_counts=True)
        codes = list(np.unravel_index(cells, cards))
        out.append(choose_pair(codes, f, cards, seed=r)[0])
    return out


def test_picks_the_population_interaction():
    picks = _choices(interaction=True)
    assert sum(p == (0, 1) for p in picks) >= 18


def test_keeps_main_effects_when_the_population_has_none():
    picks = _choices(interaction=False)
    assert sum(p is None for p in picks) >= 16


def test_measure_reports_the_interaction_and_the_refit():
    a, b, c, d = _population(100_000, True, 21)
    pop = pd.DataFrame({"a": a, "b": b, "c": c, "d": d})
    sample = pop.sample(frac=0.05, random_state=1)
    keys = ["a", "b", "c", "d"]
    r = gpurisk.assess(sample, keys, measures=["matches_ll", "tau1_ll"], fraction=0.05,
                       options={"loglinear_risk": {"model": "auto_cv", "prior": "plugin"}}).measures
    assert r["matches_ll"].extra["interaction"] == "a x b"
    # the refit by hand: μ̂ = n p_ab p_c p_d at the sample uniques, moment α̂ as matches_ll does
    cnt = sample.groupby(keys).size()
    n = float(len(sample))
    pab = sample.groupby(["a", "b"]).size() / n
    pc = sample["c"].value_counts() / n
    pd_ = sample["d"].value_counts() / n
    idx = cnt.index.to_frame(index=False)
    mu = n * pab.reindex(pd.MultiIndex.from_frame(idx[["a", "b"]])).to_numpy() \
        * pc.reindex(idx["c"]).to_numpy() * pd_.reindex(idx["d"]).to_numpy()
    fobs = cnt.to_numpy(float)
    s2 = n * n * float((pab ** 2).sum() * (pc ** 2).sum() * (pd_ ** 2).sum())
    alpha = max((np.sum(fobs ** 2 - 2 * fobs * mu) + s2 - fobs.sum()) / s2, 0.0)
    su = fobs == 1
    from gpurisk.models.terms import nb_terms
    want = float(nb_terms(0.95 * mu[su] / 0.05, alpha, 0.05, "inverse")[0].sum())
    assert r["matches_ll"].value == pytest.approx(want, rel=1e-9)
    assert r["matches_ll"].extra["alpha"] == pytest.approx(alpha, rel=1e-9)
    # the default prior (loo) reads the counts of the fitted margins, a x b's joint one included,
    # without the unique's own record: s = count − 1/2 for (a, b), c and d
    loo = gpurisk.assess(sample, keys, measures=["matches_ll"], fraction=0.05,
                         options={"loglinear_risk": {"model": "auto_cv"}}).measures["matches_ll"]
    assert loo.extra["interaction"] == "a x b" and loo.extra["prior"] == "loo"
    cab = sample.groupby(["a", "b"]).size().reindex(pd.MultiIndex.from_frame(idx[["a", "b"]]))
    cc, cd = sample["c"].value_counts(), sample["d"].value_counts()
    s = [cab.to_numpy(float)[su] - 0.5, cc.reindex(idx["c"]).to_numpy(float)[su] - 0.5,
         cd.reindex(idx["d"]).to_numpy(float)[su] - 0.5]
    mu_t = (n - 1) * np.prod([x / (n - 1) for x in s], axis=0)
    al = (1 + alpha) * np.prod([1 + 1 / x for x in s], axis=0) - 1
    c = 0.95 / (1 / (al * mu_t / 0.05) + 0.05)
    assert loo.value == pytest.approx(float(np.sum(al * (1 - (1 + c) ** (-1 / al)) / c)), rel=1e-9)


def test_same_estimate_whatever_the_key_order_row_order_or_table():
    """The random halves follow the cells' categories and the keys' names, not where a table keeps
    its cells: listing the keys in another order, shuffling the records, or rolling the table up from
    a finer one (as a scan does) gives the same Ê, interaction included (real data: UCI Adult)."""
    from conftest import data_path
    df = pd.read_csv(data_path("uci_adult/adult_full_48842.csv")).sample(frac=0.05, random_state=3)
    for keys in (["race", "native-country"], ["race", "marital-status", "native-country"],
                 ["age", "sex", "race", "native-country"]):
        _same_whatever_the_order(df, keys)


def _same_whatever_the_order(df, keys):
    opts = {"fraction": 0.05, "measures": ["matches_ll", "tau1_ll"]}
    base = gpurisk.assess(df, keys, **opts).measures
    shuffled = df.sample(frac=1.0, random_state=9)
    for other in (gpurisk.assess(df, keys[::-1], **opts).measures,
                  gpurisk.assess(shuffled, keys[1:] + keys[:1], **opts).measures):
        for m in ("matches_ll", "tau1_ll"):
            assert other[m].value == pytest.approx(base[m].value, rel=1e-12)
            got, want = other[m].extra["interaction"], base[m].extra["interaction"]
            assert (got is None and want is None) or _pairs(got) == _pairs(want)
    scan = gpurisk.scan(df, keys + ["education"], min_size=len(keys), max_size=len(keys),
                        fraction=0.05, measures=["matches_ll"]).results
    row = scan[scan["keys"].apply(lambda k: sorted(k) == sorted(keys))].iloc[0]
    assert row["matches_ll"] == pytest.approx(base["matches_ll"].value, rel=1e-12)


def _pairs(text):
    """The interactions a measure names ("a x b, c x d"), as sets of keys."""
    return {frozenset(p.split(" x ")) for p in text.split(", ")}


def test_a_population_in_the_table_changes_nothing():
    """The choice and the fit read the sample's cells and categories only: assessed alone (π = n/N)
    or flagged in the whole register (the table then also holds the population's cells and
    categories, as in validate), KDD Cup's sample gives the same Ê and τ̂1. Before, the register's
    unsampled categories entered the held-out test's smoothing and it kept pairs on no evidence
    (MINRAMNT/STATE × NGIFTALL here), moving Ê by up to half."""
    from conftest import data_path
    d = pd.read_csv(data_path("arx_genetic/cup_int.csv"), sep=";")
    rng = np.random.default_rng(5)
    for keys in (["AGE", "STATE", "NGIFTALL"], ["GENDER", "INCOME", "MINRAMNT", "NGIFTALL"]):
        m = rng.random(len(d)) < 0.01
        alone = gpurisk.assess(d[m], keys, fraction=m.sum() / len(d),
                               measures=["matches_ll", "tau1_ll"]).measures
        flagged = gpurisk.assess(d.assign(flag=m), keys, sample_flag="flag",
                                 measures=["matches_ll", "tau1_ll"]).measures
        for name in ("matches_ll", "tau1_ll"):
            assert flagged[name].value == pytest.approx(alone[name].value, rel=1e-12)
            assert flagged[name].extra["interaction"] == alone[name].extra["interaction"]


def _reference_scores(codes, f, cards, splits, seed, ranks, names):
    """pair_scores' definition, pair by pair: the halves drawn with np.lexsort's order of the cells
    by (the ranks of) their categories, keys by name; each pair's (G, V) from split_score."""
    rows = np.flatnonzero(f > 0)
    fs, sub = f[rows], [c[rows] for c in codes]
    by = [r[c] for r, c in zip(ranks, sub)]
    by = [by[v] for v in sorted(range(len(by)), key=lambda v: names[v])]
    order = np.lexsort(by[::-1])
    rng = np.random.default_rng(seed)
    halves = []
    for _ in range(splits):
        fa = np.empty_like(fs)
        fa[order] = rng.binomial(fs[order], 0.5)
        halves += [(fa, fs - fa), (fs - fa, fa)]
    out = {}
    for a in range(len(sub)):
        for b in range(a + 1, len(sub)):
            got = [mc.split_score(sub, cards, tr, te, a, b) for tr, te in halves]
            out[(a, b)] = (sum(g for g, _ in got), sum(v for _, v in got))
    return out


def _close(got: dict, want: dict) -> None:
    """Every pair's (G, V) equal to 1e-12 relative: pair_scores sums G and V over the pairs of
    categories, split_score over the cells (the same terms, element by element; the order of the
    last sums differs)."""
    assert got.keys() == want.keys()
    for k, (g, v) in want.items():
        assert got[k][0] == pytest.approx(g, rel=1e-12, abs=1e-12), k
        assert got[k][1] == pytest.approx(v, rel=1e-12, abs=1e-12), k


@pytest.mark.parametrize("splits", [1, 2])
def test_pair_scores_are_split_scores(splits):
    """pair_scores computes each pair's log-ratios once per observed pair of categories, sums G and
    V over those, counts several pairs in one pass over the cells and orders the cells by one sort
    of a combined key: the numbers must be those of split_score on the halves drawn in np.lexsort's
    order, to 1e-12 (a scan's Ê and choice may not move). Cards from 2 to 3000: dense pair indices,
    np.unique's, and pairs with more categories than cells; cells with f = 0 left out; the
    forest's Margins passed or not, and the pair counts it is handed equal to its own."""
    from gpurisk.models.forest import Margins
    rng = np.random.default_rng(4)
    cards = [2, 7, 40, 3000, 5]
    n = 900
    codes = [rng.integers(0, c, n) for c in cards]
    codes[1] = (codes[0] * 3 + rng.integers(0, 2, n)) % 7          # an interaction
    ids = np.ravel_multi_index(codes, cards)
    ids, first = np.unique(ids, return_index=True)
    codes = [c[first] for c in codes]
    f = rng.poisson(1.2, ids.shape[0])
    ranks = [rng.permutation(c) for c in cards]
    names = ["e", "b", "d", "a", "c"]
    want = _reference_scores(codes, f, cards, splits, 7, ranks, names)
    _close(mc.pair_scores(codes, f, cards, splits, 7, ranks, names), want)
    seen = f > 0
    sub = [c[seen] for c in codes]
    handed = Margins(sub, f[seen], cards)
    _close(mc.pair_scores(sub, f[seen], cards, splits, 7, [r for r in ranks], names, handed), want)
    own = Margins(sub, f[seen], cards)
    for a in range(len(cards)):
        for b in range(a + 1, len(cards)):
            assert np.array_equal(handed.pair(a, b)[0], own.pair(a, b)[0])
            assert np.array_equal(handed.pair(a, b)[1], own.pair(a, b)[1])


def test_pair_counts_by_groups_are_bincounts(monkeypatch):
    """pair_counts sums pairs from groups of keys' joint counts (one pass per group): each pair's
    counts equal a bincount of its own index, whatever the groups' size limit."""
    rng = np.random.default_rng(8)
    cards = [2, 100, 6, 17, 10, 50, 12, 5]
    n = 20_000
    codes = [rng.integers(0, c, n) for c in cards]
    w = [rng.poisson(1.0, n).astype(float), rng.integers(0, 3, n).astype(float)]
    pairs = [(a, b) for a in range(8) for b in range(a + 1, 8)]
    for limit in (1 << 16, 1 << 10, 4):
        monkeypatch.setattr(mc, "GROUP_MIN", limit)
        monkeypatch.setattr(mc, "GROUP_MAX", limit)
        groups = mc._groups(cards, pairs, limit)
        assert all(np.prod([cards[v] for v in g]) <= limit for g, _ in groups)
        got = mc.pair_counts(codes, cards, w, pairs)
        assert set(got) == set(pairs)
        for a, b in pairs:
            ids = codes[a] * cards[b] + codes[b]
            layout, counts = got[(a, b)]
            assert layout is None
            for x, c in zip(w, counts):
                assert np.array_equal(c, np.bincount(ids, weights=x, minlength=cards[a] * cards[b]))
    assert len(mc._groups(cards, pairs, 1 << 16)) < len(pairs) // 3    # fewer passes than pairs
    monkeypatch.setattr(mc, "GROUP_MIN", 1 << 12)
    monkeypatch.setattr(mc, "GROUP_MAX", 1 << 12)
    for dtype in (np.int8, np.uint16, np.uint64):                        # any integer codes
        got = mc.pair_counts([c.astype(dtype) for c in codes], cards, w, pairs)
        for a, b in pairs:
            ids = codes[a] * cards[b] + codes[b]
            assert np.array_equal(got[(a, b)][1][0],
                                  np.bincount(ids, weights=w[0], minlength=cards[a] * cards[b]))


def test_lex_order_is_lexsort():
    rng = np.random.default_rng(2)
    for n, hi, lo in ((1, 5, 0), (50, 3, 0), (1000, 40, -7), (1000, 10**6, 0), (500, 2**40, 0)):
        by = [rng.integers(lo, hi, n) for _ in range(4)]      # ties, negative codes, huge spans
        assert np.array_equal(mc.lex_order(by, n), np.lexsort(by[::-1]))
    by = [np.unique(rng.integers(0, 10**9, 2000))[:1000]]     # distinct: any sort, the same order
    assert np.array_equal(mc.lex_order(by, 1000), np.arange(1000))
    assert mc.lex_order([], 3).tolist() == [0, 1, 2]


def test_category_ranks_by_type_then_text_and_the_cache_bounded(monkeypatch):
    """Ranks order a key's categories by (type name, str(value)), as written out here by hand; the
    cache of ranks per list is emptied before it holds more categories than its limit, so that old
    tables' lists are not kept alive without bound."""
    cats = [10, "b", 2, "a", 1.5]          # float '1.5' < int '10' < int '2' < str 'a' < str 'b'
    assert mc.category_ranks([cats])[0].tolist() == [1, 4, 2, 3, 0]
    monkeypatch.setattr(mc, "RANKS_MAX_ITEMS", 25)
    mc._RANKS.clear()
    lists = [list(range(10)) for _ in range(3)]
    for c in lists:
        assert mc.category_ranks([c])[0].tolist() == list(range(10))   # '0' < '1' < ... < '9'
        assert sum(v[1].shape[0] for v in mc._RANKS.values()) <= 25
    assert id(lists[2]) in mc._RANKS and id(lists[0]) not in mc._RANKS
