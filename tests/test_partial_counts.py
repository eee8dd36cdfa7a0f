"""The pieces of distributed counting, on numpy, against references computed another way (pandas
groupby, Python dicts, ``np.lexsort``): the global plan, words, partial counts, merges, range
buckets and record lookup. No cluster needed."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gpurisk.freq import partial as P
from gpurisk.freq.cellid import INT64_LIMIT
from gpurisk.freq.encode import encode_keys
from gpurisk.freq.plan import (encode_partition, make_plan, merge_uniques, pack_words,
                               partition_uniques, unpack_words, word_layout)


def _frame(rng, n=3000):
    cat = pd.Categorical(rng.choice(["x", "y", "z"], n), categories=["z", "y", "x", "unused"])
    flt = rng.choice([1.0, 2.0, 7.0, np.nan], n)
    return pd.DataFrame({
        "int": rng.integers(-5, 40, n),
        "wide": rng.choice([0, 10**9, 3 * 10**9, -(10**8)], n),           # beyond the dense range
        "nint": pd.array(np.where(rng.random(n) < 0.1, None, rng.integers(0, 9, n)), dtype="Int64"),
        "fint": flt,                                                      # integral floats + NaN
        "fdec": rng.choice([0.5, 1.25, np.nan], n),                       # non-integral floats
        "txt": pd.Series(np.where(rng.random(n) < 0.05, None, rng.choice(["b", "a", "c"], n)),
                         dtype="object"),
        "cat": cat,
        "flag": rng.random(n) < 0.4,
        "w": rng.uniform(0.5, 3.0, n),
    })


def _pieces(frame, cuts):
    bounds = [0, *cuts.tolist(), len(frame)]
    return [frame.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


KEYS = ["int", "wide", "nint", "fint", "fdec", "txt", "cat", "flag"]


def _cuts(n, k, rng):
    return np.sort(rng.choice(np.arange(1, n), k - 1, replace=False))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plan_from_partitions_equals_encode_keys(seed):
    """Categories fixed from per-partition distinct values, then codes per partition, equal the
    pandas backend's encoding of the whole frame (with a population too)."""
    rng = np.random.default_rng(seed)
    sample, pop = _frame(rng, 2000), _frame(rng, 5000)
    ref = encode_keys(sample, KEYS, pop)
    s_parts = _pieces(sample, _cuts(len(sample), 4, rng))
    p_parts = _pieces(pop, _cuts(len(pop), 3, rng))
    us = merge_uniques(*[partition_uniques(p, KEYS) for p in s_parts])
    up = merge_uniques(*[partition_uniques(p, KEYS) for p in p_parts])
    assert us["n"] == len(sample) and us["na"]["txt"] == int(sample["txt"].isna().sum())
    plan = make_plan(KEYS, us["uniq"], up["uniq"], us["na"], up["na"])
    assert plan.categories == [e.categories for e in ref]
    for parts, attr in ((s_parts, "sample"), (p_parts, "population")):
        codes = [np.concatenate(c) for c in zip(*[list(encode_partition(plan, p)) for p in parts])]
        for e, c in zip(ref, codes):
            np.testing.assert_array_equal(c, getattr(e, attr), err_msg=e.name)


def test_word_layout_and_order():
    rng = np.random.default_rng(5)
    cards = [3000, 2**20, 2**30, 17, 2**40, 5]
    layout = word_layout(cards)
    assert [i for run in layout for i in run] == list(range(len(cards)))
    for a, b in zip(layout, layout[1:]):
        assert math.prod(cards[i] for i in a) <= INT64_LIMIT
        assert math.prod(cards[i] for i in a + [b[0]]) > INT64_LIMIT   # greedy: runs are maximal
    assert word_layout([10, 20, 30]) == [[0, 1, 2]]

    class _Plan:  # pack/unpack read .cards and .layout only
        pass
    plan = _Plan()
    plan.cards, plan.layout = cards, layout
    codes = [rng.integers(0, min(c, 4), 500) for c in cards]
    words = pack_words(plan, codes)
    back = unpack_words(plan, words)
    for a, b in zip(codes, back):
        np.testing.assert_array_equal(a, b)
    # sorting by words is sorting by the code tuples
    by_words = np.lexsort(words[::-1])
    by_codes = np.lexsort(codes[::-1])
    np.testing.assert_array_equal(np.stack(codes)[:, by_words], np.stack(codes)[:, by_codes])


def _reference(words, flag=None, w=None):
    """Counts by cell from a pandas groupby (sorted)."""
    df = pd.DataFrame({f"w{i}": x for i, x in enumerate(words)})
    df["one"] = 1
    if flag is not None:
        df["f"] = flag.astype(np.int64)
    if w is not None:
        df["wt"] = w
    g = df.groupby([f"w{i}" for i in range(len(words))], sort=True).sum()
    return g


@pytest.mark.parametrize("nwords", [1, 2])
def test_partials_merge_in_any_grouping(nwords):
    rng = np.random.default_rng(nwords)
    n = 20000
    words = [rng.integers(0, 300, n) * 7 for _ in range(nwords)]
    flag = rng.random(n) < 0.3
    w = rng.uniform(1, 2, n)
    ref = _reference(words, flag, w)
    pieces = np.split(np.arange(n), _cuts(n, 9, rng))
    # each piece: F and w over every row, f over the flagged rows
    parts = [P.merge(P.reduce_cells(np, [x[idx] for x in words], {"F": None}, {"w": w[idx]}),
                     P.reduce_cells(np, [x[idx][flag[idx]] for x in words], {"f": None}, {}))
             for idx in pieces]
    for grouping in ([parts], [parts[:2], parts[2:5], parts[5:]], [[p] for p in parts]):
        level = [P.merge(*g) for g in grouping]
        out = P.merge(*level)
        got_words = np.stack(out["words"])
        np.testing.assert_array_equal(got_words, np.stack([ref.index.get_level_values(i)
                                                            for i in range(nwords)]))
        np.testing.assert_array_equal(out["F"], ref["one"].to_numpy())
        np.testing.assert_array_equal(out["f"], ref["f"].to_numpy())
        np.testing.assert_allclose(out["w"], ref["wt"].to_numpy(), rtol=1e-13)


def test_merge_fills_missing_fields_with_zeros():
    a = {"words": [np.array([1, 5, 9])], "f": np.array([2, 1, 4]), "w": np.array([1.0, 2.0, 3.0])}
    b = {"words": [np.array([0, 5, 11])], "F": np.array([3, 6, 1])}
    out = P.merge(a, b)
    np.testing.assert_array_equal(out["words"][0], [0, 1, 5, 9, 11])
    np.testing.assert_array_equal(out["f"], [0, 2, 1, 4, 0])
    np.testing.assert_array_equal(out["F"], [3, 0, 6, 0, 1])
    np.testing.assert_array_equal(out["w"], [0.0, 1.0, 2.0, 3.0, 0.0])
    # where a's cells, then b's, went
    np.testing.assert_array_equal(P.locate([np.array([1, 5, 9, 0, 5, 11])], out["words"]),
                                  [1, 2, 3, 0, 2, 4])


@pytest.mark.parametrize("nwords", [1, 3])
def test_split_concat_and_locate(nwords):
    rng = np.random.default_rng(11)
    words = [rng.integers(0, 50, 5000) for _ in range(nwords)]
    part = P.reduce_cells(np, words, {"f": None}, {})
    inv = P.locate(words, part["words"], space=50 ** nwords if nwords == 1 else None,
                   counts=part["f"], complete=True)
    width = -(-50 // 6)
    pieces = P.split(part, width, 6)
    assert sum(P.size(p) for p in pieces) == P.size(part)
    for b, p in enumerate(pieces):
        assert np.all(p["words"][0] // width == b)
    joined = P.concat(pieces)
    for x, y in zip(joined["words"], part["words"]):
        np.testing.assert_array_equal(x, y)
    # locate: each record's cell, against a dict of tuples
    idx = P.locate(words, part["words"])
    np.testing.assert_array_equal(idx, inv)
    table = {tuple(int(c[i]) for c in part["words"]): i for i in range(P.size(part))}
    probe = [np.append(x[:50], 10**6) for x in words]
    want = [table.get(tuple(int(c[i]) for c in probe), -1) for i in range(51)]
    np.testing.assert_array_equal(P.locate(probe, part["words"]), want)


def test_empty_piece():
    part = P.reduce_cells(np, [np.zeros(0, np.int64)], {"f": None}, {"w": np.zeros(0)})
    assert P.size(part) == 0 and part["w"].dtype == np.float64
    assert P.locate([np.zeros(0, np.int64)], part["words"]).size == 0
    full = {"words": [np.array([3])], "f": np.array([2])}
    out = P.merge(part, full)
    np.testing.assert_array_equal(out["f"], [2])


def test_narrow_integer_keys_with_negative_values():
    """int8/int16 keys spanning more than their type's positive range (hand-checked counts)."""
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"a": np.array([-100, 100, 5, 5, -100, 100, 100] * 300, dtype=np.int8),
                          "b": np.array([-30000, 30000, 0, 0, 1, 1, 1] * 300, dtype=np.int16)})
    (ea, eb) = encode_keys(frame, ["a", "b"])
    for e, vals in ((ea, [-100, 5, 100]), (eb, [-30000, 0, 1, 30000])):
        assert set(vals) <= set(e.categories) and e.categories == sorted(e.categories)
    pieces = _pieces(frame, _cuts(len(frame), 5, rng))
    u = merge_uniques(*[partition_uniques(p, ["a", "b"]) for p in pieces])
    plan = make_plan(["a", "b"], u["uniq"])
    assert plan.categories == [ea.categories, eb.categories]
    codes = [np.concatenate(c) for c in zip(*[list(encode_partition(plan, p)) for p in pieces])]
    np.testing.assert_array_equal(codes[0], ea.sample)
    np.testing.assert_array_equal(codes[1], eb.sample)
    # cells (a, b): (-100,-30000) x300, (100,30000) x300, (5,0) x600, (-100,1) x300, (100,1) x600
    part = P.partial(plan, frame, "sample")
    got = {tuple(plan.categories[v][int(c[i])] for v, c in enumerate(unpack_words(plan, part["words"]))):
           int(part["f"][i]) for i in range(P.size(part))}
    assert got == {(-100, -30000): 300, (100, 30000): 300, (5, 0): 600, (-100, 1): 300, (100, 1): 600}


def test_distinct_ints_on_a_device_namespace():
    """The device path's distinct values of integer keys (one min/max pass for all keys, a presence
    count per key, two copies to the host) in the strict namespace, against Python's set of each
    column; a range beyond the limit is left to hashing (None); several kinds of integer, negative
    values and int8 columns whose range exceeds int8's positive half."""
    from gpurisk.freq.plan import distinct_ints
    from gpurisk.testing.strict import xp as strict
    rng = np.random.default_rng(11)
    cols = [rng.integers(-100, 100, 5000).astype(np.int8), rng.choice([3, 7, 7, 40], 5000),
            rng.integers(0, 65_000, 5000).astype(np.uint16), np.array([-(2**40), 2**40, 0] * 9),
            np.full(4, 9, dtype=np.int32), np.array([-(2**62), 2**62, 5] * 3)]
    got = distinct_ints([strict.asarray(c) for c in cols], strict, limit=1 << 17)
    for c, g in zip(cols[:3] + cols[4:5], got[:3] + got[4:5]):
        assert g.dtype == np.int64 and g.tolist() == sorted({int(x) for x in c})
    assert got[3] is None                      # a range of 2**41: too wide for a presence count
    assert got[5] is None                      # 2**63 + 1 values: beyond int64, still too wide
    # a pandas partition takes the same path and keeps its dtype; the merge of pieces is exact
    frame = pd.DataFrame({"a": cols[0][:3000], "b": cols[2][:3000]})
    u = merge_uniques(*[partition_uniques(p, ["a", "b"]) for p in (frame[:1500], frame[1500:])])
    for k in ("a", "b"):
        assert u["uniq"][k].dtype == frame[k].dtype
        assert sorted(u["uniq"][k].tolist()) == sorted(set(frame[k].tolist()))


def test_distinct_ints_probe_then_whole_columns(monkeypatch):
    """The presence count reads a strided probe first and counts a column whole only where the probe
    misses a value of its range: a coded key whose probe holds every value is read once (its probe),
    a value only at rows the probe skips is still found, and a value absent from the column (a gap
    in the range) is not invented. Against Python's set of each column, in the strict namespace,
    with the bincount calls' lengths recorded."""
    from gpurisk.freq import plan as PL
    from gpurisk.testing.strict import xp as strict
    monkeypatch.setattr(PL, "PROBE_ROWS", 100)

    class Counting:                         # the strict namespace, recording each bincount's length
        def __init__(self):
            self.lengths = []

        def __getattr__(self, name):
            fn = getattr(strict, name)
            if name != "bincount":
                return fn
            return lambda a, **kw: (self.lengths.append(a.shape[0]), fn(a, **kw))[1]
    n = 5000                                 # the probe: every 50th row, 100 rows
    coded = np.arange(n) % 7                 # 0..6, all on the probe's rows
    hidden = np.zeros(n, dtype=np.int16)
    hidden[[1, 4999]] = [3, 5]               # 3 only at row 1, 5 only at the last row: off the probe
    gap = np.where(np.arange(n) % 2 == 0, 10, 12).astype(np.int8)   # 11 never occurs
    ns = Counting()
    got = PL.distinct_ints([strict.asarray(c) for c in (coded, hidden, gap)], ns, limit=1 << 10)
    for c, g in zip((coded, hidden, gap), got):
        assert g.tolist() == sorted({int(x) for x in c})
    assert ns.lengths == [100, 100, 100, n, n]      # probes of all three, then the two with a gap


def test_merge_of_a_subset_equals_the_merge_sort():
    """Two partials where one's cells hold the other's (a register and its sample) are merged by
    binary search; the result equals the general merge (forced here by a third, empty partial)."""
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 400, 3000)
    flag = rng.random(3000) < 0.2
    w = rng.uniform(1, 3, 3000)
    big = P.reduce_cells(np, [ids], {"F": None}, {})
    small = P.reduce_cells(np, [ids[flag]], {"f": None}, {"w": w[flag]})
    empty = P.reduce_cells(np, [ids[:0]], {"f": None}, {})
    fast, general = P.merge(small, big), P.merge(big, small, empty)
    for k in ("words", "f", "F", "w"):
        a, b = (np.stack(fast[k]), np.stack(general[k])) if k == "words" else (fast[k], general[k])
        np.testing.assert_array_equal(a, b)
    # hand check: the register's counts, and the sample's where it has records
    ref = pd.DataFrame({"id": ids, "s": flag.astype(int)}).groupby("id")["s"].agg(["size", "sum"])
    np.testing.assert_array_equal(fast["F"], ref["size"].to_numpy())
    np.testing.assert_array_equal(fast["f"], ref["sum"].to_numpy())
    # not a subset: the general merge
    other = P.reduce_cells(np, [np.array([1000, 1001])], {"f": None}, {})
    out = P.merge(big, other)
    assert P.size(out) == P.size(big) + 2 and out["f"][-2:].tolist() == [1, 1]


def test_partition_codes_in_the_smallest_integer_type():
    """A worker holds each key's codes in the narrowest type (issue 16): int8 up to 127 categories,
    int16 up to 32 767; the codes index the plan's categories exactly."""
    from gpurisk.freq.plan import partition_uniques
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"small": rng.integers(-3, 2, 1000), "wide": rng.integers(0, 300, 1000) * 3,
                          "text": rng.choice(["a", "b", None], 1000)})
    u = partition_uniques(frame, list(frame.columns))
    plan = make_plan(list(frame.columns), u["uniq"], None, u["na"])
    codes = list(encode_partition(plan, frame))
    assert [c.dtype for c in codes] == [np.int8, np.int16, np.int8]
    for c, kp, col in zip(codes, plan.key_plans, frame.columns):
        back = [kp.categories[i] for i in c]
        assert back == [None if pd.isna(v) else v for v in frame[col].tolist()]


@pytest.mark.parametrize("space,n", [(1, 5), (7, 1000), (20_400, 3_000), (1 << 16, 10), (5_000_000, 100)])
def test_dense_count_equals_the_sort(space, n):
    """The histogram path (ids in a small known range) and the sort path give the same cells and
    counts, hand-checked on the ids' own value_counts; a space far larger than the ids sorts."""
    ids = np.random.default_rng(space + n).integers(0, space, n)
    dense = P.count_ids(ids, space=space)
    sort = P.count_ids(ids)
    ref = pd.Series(ids).value_counts().sort_index()
    for cells, counts in (dense, sort):
        np.testing.assert_array_equal(cells, ref.index.to_numpy())
        np.testing.assert_array_equal(counts, ref.to_numpy())
        assert cells.dtype == np.int64 and counts.dtype == np.int64
    assert P.dense_count(space, n) == (space <= max(4 * n, 1 << 16))


def test_few_key_table_is_one_dask_bucket():
    """A table whose keys allow few cells is counted in one bucket whatever the number of records
    (cutting 12 possible cells into range buckets only adds tasks); a larger space keeps the
    record-based ranges that bound each merge's memory."""
    pytest.importorskip("distributed")
    from types import SimpleNamespace

    from gpurisk.freq._dask import CELLS_PER_BUCKET, SPLIT_EVERY, _Run
    run = _Run.__new__(_Run)
    run.s_parts, run.p_parts, run.gpu = list(range(80)), [], False
    run.plan = SimpleNamespace(cards=[3, 4])
    run.records = 10 * CELLS_PER_BUCKET
    assert run.max_cells() == 12 and run.default_buckets() == 1
    run.plan = SimpleNamespace(cards=[CELLS_PER_BUCKET // SPLIT_EVERY + 1])
    assert run.default_buckets() == 10
    run.plan = SimpleNamespace(cards=[1000, 1000, 100])
    assert run.max_cells() == run.records and run.default_buckets() == 10


def test_bucket_summary_runs_where_the_cells_are():
    """A dask-cuda worker summarises its bucket on the GPU (only the summary and at most three
    cells with f > F reach the host): the strict namespace, which refuses every implicit host
    conversion, gives the numpy summary; hand-checked counts."""
    pytest.importorskip("distributed")
    from gpurisk.freq._dask import bucket_summary
    from gpurisk.testing.strict import xp as sx
    words = [np.array([3, 5, 8, 9, 12], dtype=np.int64)]
    f = np.array([1, 1, 2, 3, 4], dtype=np.int64)
    F = np.array([1, 4, 2, 2, 9], dtype=np.int64)    # cell 9 has f > F
    host = bucket_summary({"words": words, "f": f, "F": F})
    dev = bucket_summary({"words": [sx.asarray(words[0])], "f": sx.asarray(f), "F": sx.asarray(F)})
    assert host["n"] == dev["n"] == 11 and host["N"] == dev["N"] == 18
    assert host["fof"] == dev["fof"] == {1: 2, 2: 1, 3: 1, 4: 1}
    assert host["joint"] == dev["joint"] == {(1, 1): 1, (1, 4): 1, (2, 2): 1, (3, 2): 1}
    assert host["bad"] == dev["bad"] == 1
    for s in (host, dev):
        assert list(s["bad_cells"]["words"][0]) == [9] and isinstance(s["bad_cells"]["f"], np.ndarray)


@pytest.mark.parametrize("complete", [False, True])
def test_locate_many_records_in_sorted_order_equals_a_plain_search(complete):
    """From SORTED_SEARCH_MIN records on, numpy's binary search runs in sorted order; the result is
    each record's cell index (or -1) exactly as a search in record order gives it."""
    from gpurisk.freq import partial as P
    rng = np.random.default_rng(11)
    cells = np.unique(rng.integers(0, 5_000_000, 300_000)).astype(np.int64)
    n = P.SORTED_SEARCH_MIN * 3
    ids = rng.choice(cells, n) if complete else rng.integers(0, 5_000_000, n)
    ids = ids.astype(np.uint32)
    want = np.searchsorted(cells, ids.astype(np.int64))
    if not complete:
        hit = cells[np.minimum(want, cells.size - 1)] == ids
        want = np.where(hit, want, -1)
        assert (want == -1).any() and (want >= 0).any()
    got = P.locate([ids], [cells], complete=complete)
    np.testing.assert_array_equal(got, want)


def test_plan_from_nullable_integers_above_2_53_is_exact():
    """What a cuDF integer column with nulls brings to the host (pandas' nullable Int64, see
    plan._host_series): the plan's categories are the exact integers, which float64 would round."""
    big = [2**60 + 1, 2**60 + 10**9 + 7]
    p = make_plan(["a"], {"a": pd.Series(big + [None], dtype="Int64")}, na_sample={"a": 1})
    cats = p.key_plans[0].categories
    assert [int(c) for c in cats[:2]] == big and cats[2] is None
    rounded = make_plan(["a"], {"a": pd.Series(big + [None], dtype="float64")}, na_sample={"a": 1})
    assert [int(c) for c in rounded.key_plans[0].categories[:2]] != big   # why float64 is not used


@pytest.mark.parametrize("space", [None, 1000, 5_000_000])
def test_group_ids_equals_numpy_unique(space):
    """group_ids (a histogram and lookup table for a small id space, else one argsort) gives
    np.unique's distinct ids and inverse."""
    from gpurisk.freq import partial as P
    ids = np.random.default_rng(3).integers(0, 1000, 20_000)
    cells, inv = P.group_ids(ids, space=space)
    want, winv = np.unique(ids, return_inverse=True)
    np.testing.assert_array_equal(cells, want)
    np.testing.assert_array_equal(inv, winv.reshape(-1))
    assert P.group_ids(ids[:0])[0].size == 0


def test_splitters_cut_weighted_records_into_equal_shares():
    """Splitters of the first word: equal shares of the records' weight in each range (hand
    values), a value holding several ranges' share alone in one range, and ``split`` with them
    keeps every piece sorted and inside its range; under the strict namespace too."""
    from gpurisk.testing.strict import xp as sx
    from gpurisk.xp import to_host
    np.testing.assert_array_equal(P.splitters(np.arange(100), np.ones(100), 4), [25, 50, 75])
    # weights: values 0-9 stand for 30 records each, 10-99 for 1 each: 390 in all, 97.5 a range;
    # the running total first exceeds 97.5, 195 and 292.5 at values 3 (120), 6 (210) and 9 (300)
    w = np.r_[np.full(10, 30.0), np.ones(90)]
    np.testing.assert_array_equal(P.splitters(np.arange(100), w, 4), [3, 6, 9])
    # 90 of 100 records share the value 5: it is a range of its own, the rest another
    heavy = P.splitters(np.r_[np.full(90, 5), np.arange(6, 16)], np.ones(100), 4)
    np.testing.assert_array_equal(heavy, [5, 6, 6])
    np.testing.assert_array_equal(P.bucket_ids(np, [np.array([4, 5, 6, 15])], heavy), [0, 1, 3, 3])
    rng = np.random.default_rng(5)
    p = 1.0 / np.arange(1, 201) ** 1.1
    words = [rng.choice(200, 20000, p=p / p.sum()), rng.integers(0, 7, 20000)]
    part = P.reduce_cells(np, words, {"f": None}, {})
    cut = P.splitters(words[0], np.ones(20000), 5)
    pieces = P.split(part, cut, 5)
    assert sum(P.size(q) for q in pieces) == P.size(part)
    for b, q in enumerate(pieces):
        np.testing.assert_array_equal(P.bucket_ids(np, q["words"], cut), np.full(P.size(q), b))
        dev = P.bucket_ids(sx, [sx.asarray(q["words"][0])], cut)
        np.testing.assert_array_equal(to_host(dev), np.full(P.size(q), b))
    for x, y in zip(P.concat(pieces)["words"], part["words"]):
        np.testing.assert_array_equal(x, y)


def test_bucket_size_follows_the_workers_memory_and_count():
    """Buckets hold at most the workers' memory limit over BUCKET_BYTES_PER_CELL cells (within
    CELLS_PER_BUCKET_MIN and CELLS_PER_BUCKET), and there are BUCKETS_PER_WORKER per worker where
    the records allow buckets of CELLS_PER_BUCKET_MIN: hand values for 2 workers of 3 GB."""
    pytest.importorskip("distributed")
    from types import SimpleNamespace

    from gpurisk.freq import _dask
    run = _dask._Run.__new__(_dask._Run)
    run.s_parts, run.p_parts, run.gpu = list(range(20)), [], False
    run.plan = SimpleNamespace(cards=[1000, 1000, 1000])
    run.nworkers, run.worker_memory = 2, 3_000_000_000
    assert _dask.BUCKET_BYTES_PER_CELL == 600 and _dask.CELLS_PER_BUCKET_MIN == 1_000_000
    assert run.cells_per_bucket() == 5_000_000
    run.records = 20_000_000
    assert run.default_buckets() == 4             # 20 M / 5 M (and 2 a worker)
    run.records = 100_000_000
    assert run.default_buckets() == 20
    run.records = 2_000_000
    assert run.default_buckets() == 2             # 2 M allows 2 buckets of 1 M, not 4
    run.records = 3_000_000
    assert run.default_buckets() == 3
    run.worker_memory = 100_000_000               # 100 MB: the floor of 1 M cells
    assert run.cells_per_bucket() == 1_000_000
    run.worker_memory = None                      # no limit: CELLS_PER_BUCKET
    assert run.cells_per_bucket() == _dask.CELLS_PER_BUCKET
    run.gpu = True                                # one bucket a GPU's 64 M cells, no spreading
    assert run.cells_per_bucket() == _dask.GPU_CELLS_PER_BUCKET
    run.records = 10_000_000
    assert run.default_buckets() == 2             # 20 partitions // SPLIT_EVERY
    run.s_parts = list(range(4))
    assert run.default_buckets() == 1
