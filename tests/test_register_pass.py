"""The register scan's passes (issue 40), each against an oracle it does not share code with:
pandas groupby of the records and numpy's lexicographic sort.

- several int64 words are grouped by one-word stable sorts (:func:`gpurisk.freq.partial._word_order`),
  in lexsort's order, ties included, and partials that are sorted runs merge to pandas' sums;
- a register whose keys overflow one word is counted (F and f, and w) in one grouping;
- a cube is summed from a table's cells chunk by chunk, as counts plus the exceptions to the common
  weight (:func:`gpurisk.freq.rollup._cube_pass`);
- the finest table's codes are kept in the narrowest integer type.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from gpurisk.freq import partial as P
from gpurisk.freq import rollup as R
from gpurisk.freq.engine import build_table
from gpurisk.freq.plan import make_plan, pack_words, unpack_words


@pytest.mark.parametrize("nwords,top", [(2, 5), (3, 4), (2, 2**40)])
def test_word_order_sorts_like_lexsort(nwords, top):
    rng = np.random.default_rng(nwords)
    n = 5000
    words = [rng.integers(0, top, n)] + [rng.integers(0, 7, n) for _ in range(nwords - 1)]
    order = P._word_order(words)
    ref = np.lexsort(np.stack(words[::-1]))
    # the same order, ties (rows of one cell) included: a weight summed in row order is the same
    np.testing.assert_array_equal(order, ref)


def test_word_order_merges_sorted_runs_as_lexsort_does():
    """Partials to merge are a few runs, each sorted by its words, with cells in common between
    runs (a cell counted in several partitions): grouped like numpy's lexicographic sort, ties in
    row order, and the merged partial's f, F and w are the sums of the runs' (pandas' groupby)."""
    rng = np.random.default_rng(11)
    parts = []
    for r in range(5):
        n = 3000
        words = [rng.integers(0, 40, n), rng.integers(0, 2**40, n) % 9]
        o = np.lexsort(np.stack(words[::-1]))
        cells = {"words": [w[o] for w in words], "F": rng.integers(1, 4, n), "f": rng.integers(0, 2, n),
                 "w": rng.random(n)}
        g = pd.DataFrame({"a": cells["words"][0], "b": cells["words"][1], "F": cells["F"],
                          "f": cells["f"], "w": cells["w"]}).groupby(["a", "b"], sort=True).sum()
        parts.append({"words": [g.index.get_level_values(0).to_numpy(np.int64),
                                g.index.get_level_values(1).to_numpy(np.int64)],
                      "F": g["F"].to_numpy(np.int64), "f": g["f"].to_numpy(np.int64),
                      "w": g["w"].to_numpy(np.float64)})
    words = [np.concatenate([p["words"][i] for p in parts]) for i in range(2)]
    np.testing.assert_array_equal(P._word_order(words), np.lexsort(np.stack(words[::-1])))
    merged = P.merge(*parts)
    frame = pd.concat([pd.DataFrame({"a": p["words"][0], "b": p["words"][1], "F": p["F"], "f": p["f"],
                                     "w": p["w"]}) for p in parts]).groupby(["a", "b"], sort=True).sum()
    np.testing.assert_array_equal(merged["words"][0], frame.index.get_level_values(0))
    np.testing.assert_array_equal(merged["words"][1], frame.index.get_level_values(1))
    np.testing.assert_array_equal(merged["F"], frame["F"])
    np.testing.assert_array_equal(merged["f"], frame["f"])
    np.testing.assert_allclose(merged["w"], frame["w"], rtol=1e-12)


def test_word_order_declines_when_the_fold_would_overflow():
    words = [np.arange(10, dtype=np.int64), np.array([2**62] * 10, dtype=np.int64)]
    assert P._word_order(words) is None
    assert P._word_order([np.zeros(0, np.int64), np.zeros(0, np.int64)]) is None


def _register(n=20000, seed=3):
    """12 keys of 40-60 categories (a space over 2**63: two words), skewed, a 5 % flag, weights."""
    rng = np.random.default_rng(seed)
    cols = {}
    for i in range(12):
        c = 40 + 2 * i
        p = 1.0 / np.arange(1, c + 1) ** 4     # mostly the first categories: many ties
        cols[f"k{i}"] = rng.choice(c, size=n, p=p / p.sum())
        cols[f"k{i}"][rng.choice(n, size=c, replace=False)] = np.arange(c)   # every category present
    cols["s"] = rng.random(n) < 0.05
    cols["wt"] = rng.uniform(1, 30, n)
    return pd.DataFrame(cols)


@pytest.mark.parametrize("weights", [None, "wt"])
def test_a_register_of_two_words_counts_like_groupby(weights):
    df = _register()
    keys = [f"k{i}" for i in range(12)]
    tab = build_table(df, keys, sample_flag="s", weights=weights)
    assert not tab.radix                           # the space overflows int64: two words
    g = df.groupby(keys).agg(F=("s", "size"), f=("s", "sum"))
    codes = np.stack([np.asarray(c, dtype=np.int64) for c in tab.cell_codes()], axis=1)
    got = pd.DataFrame(codes, columns=keys)
    # the keys are 0..c-1 integers: their codes are their values
    got["F"], got["f"] = np.asarray(tab.F), np.asarray(tab.f)
    got = got.set_index(keys).sort_index()
    assert len(got) == len(g)
    np.testing.assert_array_equal(got["F"].to_numpy(), g["F"].to_numpy())
    np.testing.assert_array_equal(got["f"].to_numpy(), g["f"].to_numpy())
    if weights:
        wsum = df[df["s"]].groupby(keys)["wt"].sum().reindex(g.index, fill_value=0.0)
        np.testing.assert_allclose(np.asarray(tab.w),
                                   wsum.to_numpy(), rtol=1e-12)


def test_narrow_codes_are_the_codes():
    df = _register(3000)
    keys = [f"k{i}" for i in range(12)]
    tab = build_table(df, keys, sample_flag="s")
    assert all(c.dtype == np.int8 for c in tab.stored_cell_codes)
    plan = make_plan(keys, {k: np.unique(df[k]) for k in keys})
    words = pack_words(plan, [df[k].to_numpy() for k in keys])
    wide, narrow = unpack_words(plan, words), unpack_words(plan, words, narrow=True)
    for k, a, b in zip(keys, wide, narrow):
        assert a.dtype == np.int64 and b.dtype == np.int8
        np.testing.assert_array_equal(a, df[k].to_numpy())
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("chunk", [7, 1 << 16])
@pytest.mark.parametrize("kind", ["register", "sample"])
def test_cube_pass_equals_groupby(monkeypatch, chunk, kind):
    monkeypatch.setattr(R, "CUBE_CHUNK", chunk)
    rng = np.random.default_rng(11)
    n = 6000
    df = pd.DataFrame({"a": rng.integers(0, 9, n), "b": rng.integers(0, 30, n),
                       "c": rng.integers(0, 5, n), "d": rng.integers(0, 70, n),
                       "s": rng.random(n) < 0.1})
    keys = ["a", "b", "c", "d"]
    if kind == "register":
        tab = build_table(df, keys, sample_flag="s")
    else:
        tab = build_table(df[df["s"]], keys)
    codes, packed = R.kept_codes(tab), R.pack_weights(tab)
    for sub in itertools.chain.from_iterable(itertools.combinations(keys, r) for r in (1, 2, 3)):
        cube = R._cube_from_cells(tab, sub, codes, packed)[0]
        f, F = R.unpack_counts(np, cube.ravel(), None, packed[2], tab.F is not None)
        # the keys are 0..c-1 integers present in the data: cube index = the values' mixed radix
        recs = df if kind == "register" else df[df["s"]]
        g = recs.groupby(list(sub)).agg(F=("s", "size"), f=("s", "sum"))
        idx = np.ravel_multi_index(tuple(g.index.get_level_values(k) for k in sub),
                                   tuple(int(tab.cards[tab.keys.index(k)]) for k in sub))
        want_f = np.zeros(cube.size, np.int64)
        want_f[idx] = g["f"].to_numpy() if kind == "register" else g["F"].to_numpy()
        np.testing.assert_array_equal(f, want_f)
        if kind == "register":
            want_F = np.zeros(cube.size, np.int64)
            want_F[idx] = g["F"].to_numpy()
            np.testing.assert_array_equal(F, want_F)


def test_cube_pass_without_a_common_weight(monkeypatch):
    """Cells whose weights are mostly not one value: the weighted pass, the same sums."""
    monkeypatch.setattr(R, "CUBE_CHUNK", 5)
    rng = np.random.default_rng(2)
    n = 3000
    df = pd.DataFrame({"a": rng.integers(0, 3, n), "b": rng.integers(0, 4, n), "c": rng.integers(0, 2, n)})
    tab = build_table(df, ["a", "b", "c"])           # 24 cells of about 125 records each
    packed = R.pack_weights(tab)
    assert R._common_weight(tab, packed) is None
    cube = R._cube_from_cells(tab, ("a", "c"), R.kept_codes(tab), packed)[0]
    g = df.groupby(["a", "c"]).size().unstack(fill_value=0)
    np.testing.assert_array_equal(cube.astype(np.int64), g.to_numpy())


@pytest.mark.parametrize("weights", [None, "wt"])
def test_a_register_counted_in_two_ranges_is_the_same_table(monkeypatch, weights):
    """From PARALLEL_ROWS rows (lowered here) a register of several words is grouped as two ranges
    of its first word in two threads: the same cells, F, f and w as one grouping, and as groupby."""
    df = _register(30000, seed=5)
    keys = [f"k{i}" for i in range(12)]
    one = build_table(df, keys, sample_flag="s", weights=weights)
    calls = []
    real = P._register_in_two_ranges

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(P, "PARALLEL_ROWS", 1000)
    monkeypatch.setattr(P.schedule, "usable_cpus", lambda: 2)
    monkeypatch.setattr(P, "_register_in_two_ranges", spy)
    two = build_table(df, keys, sample_flag="s", weights=weights)
    assert calls
    for a, b in zip(one.cell_codes(), two.cell_codes()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(one.F, two.F)
    np.testing.assert_array_equal(one.f, two.f)
    if weights:
        np.testing.assert_array_equal(one.w, two.w)
    g = df.groupby(keys).agg(F=("s", "size"), f=("s", "sum"))
    np.testing.assert_array_equal(np.asarray(two.F), g["F"].to_numpy())
    np.testing.assert_array_equal(np.asarray(two.f), g["f"].to_numpy())
    # the sample's records find their cells (the locator keeps the sampled rows' words)
    rc = np.asarray(two.record_cell())
    np.testing.assert_array_equal(rc, np.asarray(one.record_cell()))


def test_words_decoded_in_two_ranges_are_the_codes(monkeypatch):
    from gpurisk.freq import plan as PL
    df = _register(5000, seed=7)
    keys = [f"k{i}" for i in range(12)]
    plan = make_plan(keys, {k: np.unique(df[k]) for k in keys})
    words = pack_words(plan, [df[k].to_numpy() for k in keys])
    monkeypatch.setattr(PL, "UNPACK_PARALLEL", 100)
    monkeypatch.setattr(PL, "UNPACK_CHUNK", 64)
    monkeypatch.setattr(PL, "usable_cpus", lambda: 2)
    for k, c in zip(keys, unpack_words(plan, words, narrow=True)):
        np.testing.assert_array_equal(c, df[k].to_numpy())
