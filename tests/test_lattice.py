"""Roll-up over the lattice of key subsets equals a recount from the records."""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpurisk
from gpurisk.freq import cellid
from gpurisk.freq import planner as plan_mod, rollup as rollup_mod
from gpurisk.freq.lattice import CodeMap, Lattice, cell_codes, regroup, rollup

from conftest import data_path


def assert_same_table(a, b, check_records=True):
    assert a.keys == b.keys
    assert a.categories == b.categories
    assert a.radix == b.radix
    np.testing.assert_array_equal(a.cell_id, b.cell_id)
    np.testing.assert_array_equal(a.f, b.f)
    if b.F is None:
        assert a.F is None
    else:
        np.testing.assert_array_equal(a.F, b.F)
    if b.w is None:
        assert a.w is None
    else:
        np.testing.assert_allclose(a.w, b.w, rtol=1e-12)
    for ca, cb in zip(a.cell_codes(), b.cell_codes()):
        np.testing.assert_array_equal(np.asarray(ca), np.asarray(cb))
    if check_records:
        np.testing.assert_array_equal(a.record_cell(), b.record_cell())
    # the margins of f a roll-up hands on from its parent (rollup.f_margins) are the recount's own
    for v, got in enumerate(rollup_mod.f_margins(a)):
        own = np.bincount(np.asarray(b.cell_codes()[v]).astype(np.int64),
                          weights=np.asarray(b.f, dtype=np.float64), minlength=len(b.categories[v]))
        np.testing.assert_array_equal(np.asarray(got), own)


@st.composite
def frames(draw):
    n = draw(st.integers(1, 60))
    nkeys = draw(st.integers(1, 5))
    cols = {}
    for k in range(nkeys):
        kind = draw(st.sampled_from(["int", "str", "float_na"]))
        card = draw(st.integers(1, 7))
        vals = draw(st.lists(st.integers(0, card - 1), min_size=n, max_size=n))
        if kind == "int":
            cols[f"k{k}"] = np.array(vals, dtype=np.int64) * 3 - 2
        elif kind == "str":
            cols[f"k{k}"] = [None if v == 0 else f"v{v}" for v in vals]
        else:
            cols[f"k{k}"] = [np.nan if v == 1 else float(v) for v in vals]
    cols["s"] = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    cols["w"] = draw(st.lists(st.floats(0.5, 50), min_size=n, max_size=n))
    df = pd.DataFrame(cols)
    keys = [f"k{k}" for k in range(nkeys)]
    sub = draw(st.permutations(keys).flatmap(lambda p: st.integers(1, len(p)).map(lambda r: p[:r])))
    design = draw(st.sampled_from(["sample", "flag", "weights", "population"]))
    return df, keys, list(sub), design


def _build(df, keys, design):
    if design == "flag":
        if not df["s"].any():
            df = df.assign(s=True)
        return gpurisk.build_table(df, keys, sample_flag="s")
    if design == "weights":
        return gpurisk.build_table(df, keys, weights="w")
    if design == "population":
        sample = df[df["s"]] if df["s"].any() else df.iloc[:1]
        return gpurisk.build_table(sample, keys, population=df)
    return gpurisk.build_table(df, keys)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames())
def test_rollup_equals_recount(case):
    df, keys, sub, design = case
    finest = _build(df, keys, design)
    if design == "population":
        # a separate population frame: categories come from sample and population alike
        sample = df[df["s"]] if df["s"].any() else df.iloc[:1]
        recount = gpurisk.build_table(sample, sub, population=df)
    else:
        recount = _build(df, sub, design)
    assert_same_table(rollup(finest, sub), recount)


def test_rollup_of_surrogate_ids_equals_recount():
    """Nine keys of ~150 categories each overflow int64: ids are surrogate ranks on both paths."""
    rng = np.random.default_rng(7)
    n = 400
    df = pd.DataFrame({f"k{i}": rng.integers(0, 150, n) * 1000 + i for i in range(9)})
    df["s"] = rng.random(n) < 0.5
    keys = [f"k{i}" for i in range(9)]
    finest = gpurisk.build_table(df, keys, sample_flag="s")
    assert not finest.radix  # the point of the test
    for sub in (keys[:8], keys[1:], keys[::2], ["k8", "k0", "k4"], ["k3"]):
        recount = gpurisk.build_table(df, sub, sample_flag="s")
        got = rollup(finest, sub)
        assert got.radix == cellid.fits_radix(recount.cards)
        assert_same_table(got, recount)


@pytest.mark.parametrize("cards", [
    [97, 1001, 13, 7919, 2, 251],          # space ~ 2**44: float64 decoding
    [3, 127, 5, 1101],                      # space 2_097_255, just over 2**21: float64
    [2, 128, 8, 1024],                      # space 2**21 exactly: float32, every id
    [7, 9, 11, 13, 17, 19],                 # 2_909_907 > 2**21: float64
    [3, 5, 7, 11, 13, 17, 19],              # 4_849_845: float64
    [1021, 2047],                           # 2_089_987 < 2**21: float32, every id
])
def test_cell_codes_fast_decode_matches_integer_decode(cards):
    rng = np.random.default_rng(1)
    space = int(np.prod(cards))
    ids = np.unique(np.concatenate([rng.integers(0, space, 200_000), [0, space - 1]]))
    if space < 2**21 + 1:
        ids = np.arange(space)            # small float32 spaces: check every id
    table = gpurisk.FreqTable(tuple("abcdefg"[:len(cards)]), [list(range(c)) for c in cards], ids,
                              np.ones(ids.size, np.int64))
    fast = cell_codes(table)
    slow = cellid.decode_radix(ids, cards)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a.astype(np.int64), b)


def test_regroup_with_code_map_equals_recount_of_mapped_column():
    rng = np.random.default_rng(3)
    n = 3000
    df = pd.DataFrame({"age": rng.integers(0, 90, n), "sex": rng.choice(["f", "m"], n),
                       "s": rng.random(n) < 0.2})
    finest = gpurisk.build_table(df, ["age", "sex"], sample_flag="s")
    cats = finest.categories[0]
    lut = np.array([c // 10 for c in cats])
    groups = sorted(set(lut.tolist()))
    cm = CodeMap(np.searchsorted(groups, lut), groups)
    got = regroup(finest, ["sex", "age"], {"age": cm})
    recount = gpurisk.build_table(df.assign(age=df["age"] // 10), ["sex", "age"], sample_flag="s")
    assert_same_table(got, recount)


def _register(n, seed=2):
    rng = np.random.default_rng(seed)
    cards = [2, 40, 6, 17, 10, 25]
    cols = {}
    for i, c in enumerate(cards):
        p = 1.0 / np.arange(1, c + 1) ** 1.1
        cols[f"k{i}"] = rng.choice(c, size=n, p=p / p.sum())
    cols["s"] = rng.random(n) < 0.1
    return pd.DataFrame(cols), [f"k{i}" for i in range(len(cards))]


def test_lattice_plan_with_intermediates_equals_recount(monkeypatch):
    df, keys = _register(60_000)
    finest = gpurisk.build_table(df, keys, sample_flag="s")
    monkeypatch.setattr(Lattice, "PLAN_MIN_CELLS", 1)      # plan intermediates on a small root
    monkeypatch.setattr(Lattice, "OVERHEAD", 0)
    targets = [c for r in range(1, 4) for c in itertools.combinations(keys, r)]
    lat = Lattice(finest)
    plan = lat.plan(targets)
    assert plan.intermediates, "expected the planner to add intermediate tables here"
    got = dict(lat.tables(targets, plan=plan))
    assert sorted(got) == list(range(len(targets)))
    for i in range(0, len(targets), 7):
        recount = gpurisk.build_table(df, list(targets[i]), sample_flag="s")
        assert_same_table(got[i], recount)
    # parents always contain their children, and the order builds parents first
    seen = {lat.full}
    for m in plan.order:
        p = plan.parent[m]
        assert p & m == m and p != m and p in seen
        seen.add(m)


def test_tables_read_from_the_root_are_paired_into_cubes_one_pass_serves():
    """A register whose finest table is about its records (12 skewed keys): every 1- to 3-key table.
    Weighing the unions of tables still built from the root's cells (two tables that one cube's
    pass can serve) leaves fewer passes over the root than the plan without that step, costs no
    more by the planner's own measure, and every table still equals a recount."""
    rng = np.random.default_rng(40)
    cards = [120, 12, 2, 100, 6, 17, 10, 50, 5, 80, 3, 25]
    cols = {}
    for i, c in enumerate(cards):
        p = 1.0 / np.arange(1, c + 1) ** 1.1
        cols[f"k{i}"] = rng.choice(c, size=200_000, p=p / p.sum())
    cols["s"] = rng.random(200_000) < 0.01
    df, keys = pd.DataFrame(cols), [f"k{i}" for i in range(len(cards))]
    finest = gpurisk.build_table(df, keys, sample_flag="s")
    targets = [c for r in range(1, 4) for c in itertools.combinations(keys, r)]

    def root_passes(plan):
        return sum(plan.parent[m] == lat.full for m in plan.order)

    def modelled(plan):
        total = 0.0
        for m in plan.order:
            par = plan.parent[m]
            total += (lat._space(par) if par in plan.cube
                      else lat.CELL_COST * plan.estimate.get(par, lat.root_cells) * lat._penalty(m))
        return total
    lat = Lattice(finest)
    assert lat.root_cells >= lat.PLAN_MIN_CELLS
    refined = lat.plan(targets)
    lat_plain = Lattice(finest)
    lat_plain.REFINE_ROUNDS = 0
    plain = lat_plain.plan(targets)
    assert root_passes(refined) < root_passes(plain)
    assert modelled(refined) <= modelled(plain)
    got = dict(lat.tables(targets, plan=refined))
    for i in range(0, len(targets), 11):
        assert_same_table(got[i], gpurisk.build_table(df, list(targets[i]), sample_flag="s"))


def test_pass_penalty_grows_with_the_accumulator_beyond_the_cache(monkeypatch):
    """A pass over sparse cells into a dense accumulator: 1 up to 2**CACHE_BITS sums, then
    CACHE_SLOPE more per doubling; a sparse table that must sort: SORT_PENALTY."""
    df, keys = _register(5_000)
    lat = Lattice(gpurisk.build_table(df, keys, sample_flag="s"))
    mask_small = lat.mask_of(["k0", "k1"])                     # 2 x 40 = 80 sums
    assert lat._penalty(mask_small) == 1.0
    lat.CACHE_BITS = 4                                         # 2**4 = 16 sums "in cache"
    assert lat._penalty(mask_small) == pytest.approx(1.0 + lat.CACHE_SLOPE * (np.log2(80) - 4))
    wide = lat.mask_of(keys[:-1])                              # 81 600 sums
    monkeypatch.setattr(plan_mod, "CUBE_LIMIT", 1000)
    monkeypatch.setattr(plan_mod, "DENSE_LIMIT", 1000)
    assert not lat.is_cube(wide) and lat._penalty(wide) == lat.SORT_PENALTY


def test_lattice_skip_gives_identical_tables():
    df, keys = _register(20_000, seed=5)
    df["w"] = np.random.default_rng(0).uniform(1, 3, len(df))
    finest = gpurisk.build_table(df, keys, weights="w")
    targets = [c for r in range(1, 4) for c in itertools.combinations(keys, r)]
    full = dict(Lattice(finest).tables(targets))
    skip = set(range(0, len(targets), 3))
    part = dict(Lattice(finest).tables(targets, skip=skip))
    assert set(part) == set(range(len(targets))) - skip
    for i, t in part.items():
        np.testing.assert_array_equal(t.cell_id, full[i].cell_id)
        np.testing.assert_array_equal(t.w, full[i].w)   # bit-identical float sums


def test_rollup_on_real_fars_equals_recount():
    path = data_path("arx_genetic/fars_int.csv")
    df = pd.read_csv(path, sep=";")
    keys = list(df.columns)
    finest = gpurisk.build_table(df, keys)
    targets = [("iage", "isex", "istatenum"), ("ideathday", "iinjury"), ("irace",), tuple(keys[:7])]
    got = dict(Lattice(finest).tables(targets))
    for i, t in enumerate(targets):
        assert_same_table(got[i], gpurisk.build_table(df, list(t)))


def test_lattice_hands_the_roots_margins_and_codes_on():
    """The root's margins of f are summed once; every table of the lattice gets them from its
    parent (no bincount of its own), a parent keeps the codes it was decoded into, and both are
    what the table's own cells give."""
    df, keys = _register(20_000, seed=6)
    finest = gpurisk.build_table(df, keys, sample_flag="s")
    targets = [c for r in (1, 2, 3, 5) for c in itertools.combinations(keys, r)]
    for threads in (0, 2):
        for i, t in Lattice(finest).tables(targets, threads=threads):
            assert all(rollup_mod.MARGIN + k in t._memo for k in t.keys), targets[i]
            assert_same_table(t, gpurisk.build_table(df, list(t.keys), sample_flag="s"))
            if rollup_mod.CODES in t._memo:
                for c, own in zip(t._memo[rollup_mod.CODES], cellid.decode_radix(t.cell_id, t.cards)):
                    np.testing.assert_array_equal(np.asarray(c).astype(np.int64), own)


def test_a_recoded_key_gets_its_own_margin():
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"age": rng.integers(0, 90, 2000), "sex": rng.choice(["f", "m"], 2000)})
    finest = gpurisk.build_table(df, ["age", "sex"])
    rollup_mod.f_margins(finest)
    groups = sorted({c // 10 for c in finest.categories[0]})
    cm = CodeMap(np.searchsorted(groups, np.array([c // 10 for c in finest.categories[0]])), groups)
    got = regroup(finest, ["age", "sex"], {"age": cm})
    assert rollup_mod.MARGIN + "age" not in got._memo and rollup_mod.MARGIN + "sex" in got._memo
    assert_same_table(got, gpurisk.build_table(df.assign(age=df["age"] // 10), ["age", "sex"]))


def test_rollup_rejects_unknown_keys():
    df, keys = _register(100)
    finest = gpurisk.build_table(df, keys)
    with pytest.raises(gpurisk.BadInput, match="'nope'"):
        rollup(finest, ["k1", "nope"])
    with pytest.raises(gpurisk.BadInput, match="more than once"):
        rollup(finest, ["k1", "k1"])


def test_lattice_without_packed_counts_equals_recount(monkeypatch):
    """Populations too large to pack f and F in one float64 are summed with two accumulators."""
    monkeypatch.setattr(rollup_mod, "pack_limit_ok", lambda n, N: None)
    df, keys = _register(5_000, seed=9)
    df["w"] = np.random.default_rng(1).uniform(1, 9, len(df))
    sample = df[df["s"]]
    finest = gpurisk.build_table(sample, keys, population=df, weights="w")
    targets = [c for r in (2, 3) for c in itertools.combinations(keys, r)]
    got = dict(Lattice(finest).tables(targets))
    for i in (0, 5, len(targets) - 1):
        assert_same_table(got[i], gpurisk.build_table(sample, list(targets[i]), population=df,
                                                      weights="w"))


class _ArrayNamespace:
    """numpy seen through another namespace object, as a cupy table would be: the lattice must then
    take its generic path (``table.xp`` calls only, no numpy-only fused pass)."""

    def __getattr__(self, name):
        return getattr(np, name)


def test_lattice_generic_array_namespace_path():
    df, keys = _register(8_000, seed=4)
    finest = gpurisk.build_table(df, keys, sample_flag="s")
    finest = dataclasses.replace(finest, xp=_ArrayNamespace())   # a table is frozen: a new one
    targets = [c for r in (1, 2, 3) for c in itertools.combinations(keys, r)]
    got = dict(Lattice(finest).tables(targets))
    for i in (0, 9, len(targets) - 1):
        recount = gpurisk.build_table(df, list(targets[i]), sample_flag="s")
        np.testing.assert_array_equal(got[i].cell_id, recount.cell_id)
        np.testing.assert_array_equal(got[i].f, recount.f)
        np.testing.assert_array_equal(got[i].F, recount.F)


# --- cubes, threads -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.sampled_from(["cubes", "sparse", "mixed"]), st.sampled_from([0, 2]))
def test_lattice_equals_recount_on_every_path(case, paths, threads):
    """Every target of a Lattice equals a recount, whether summed from cubes, from sparse tables or
    from both (a cube built from a sparse intermediate), in the calling thread or in a pool."""
    df, keys, _, design = case
    finest = _build(df, keys, design)
    limit = {"cubes": plan_mod.CUBE_LIMIT, "sparse": 0, "mixed": 6}[paths]
    old = plan_mod.CUBE_LIMIT, Lattice.PLAN_MIN_CELLS, Lattice.OVERHEAD
    plan_mod.CUBE_LIMIT, Lattice.PLAN_MIN_CELLS, Lattice.OVERHEAD = limit, 1, 0.0
    try:
        targets = [c for r in range(1, len(keys) + 1) for c in itertools.combinations(keys, r)]
        got = dict(Lattice(finest).tables(targets, threads=threads))
    finally:
        plan_mod.CUBE_LIMIT, Lattice.PLAN_MIN_CELLS, Lattice.OVERHEAD = old
    assert sorted(got) == list(range(len(targets)))
    for i, t in enumerate(targets):
        if design == "population":
            sample = df[df["s"]] if df["s"].any() else df.iloc[:1]
            recount = gpurisk.build_table(sample, list(t), population=df)
        else:
            recount = _build(df, list(t), design)
        assert_same_table(got[i], recount)


def _register_targets(n=30_000, seed=3):
    df, keys = _register(n, seed=seed)
    finest = gpurisk.build_table(df, keys, sample_flag="s")
    targets = [c for r in range(1, 5) for c in itertools.combinations(keys, r)]
    return df, keys, finest, targets


def test_plan_mixes_cubes_and_sparse_tables(monkeypatch):
    """With a cube limit below some subsets' spaces the plan keeps those sparse, and the result
    still equals a recount; a cube's parent is a cube or a sparse table, never the reverse."""
    df, keys, finest, targets = _register_targets()
    monkeypatch.setattr(plan_mod, "CUBE_LIMIT", 2_000)
    monkeypatch.setattr(Lattice, "PLAN_MIN_CELLS", 1)
    lat = Lattice(finest)
    plan = lat.plan(targets)
    sparse = [m for m in plan.order if m not in plan.cube]
    assert plan.cube and sparse, "expected both kinds of table here"
    for m in plan.cube:
        assert lat._space(m) <= 2_000
    for m in sparse:
        assert plan.parent[m] not in plan.cube
    got = dict(lat.tables(targets, plan=plan))
    for i in range(0, len(targets), 5):
        assert_same_table(got[i], gpurisk.build_table(df, list(targets[i]), sample_flag="s"))


def test_threads_give_bit_identical_tables_in_the_same_order():
    df, keys = _register(20_000, seed=5)
    df["w"] = np.random.default_rng(0).uniform(1, 3, len(df))
    finest = gpurisk.build_table(df, keys, weights="w")
    targets = [c for r in range(1, 5) for c in itertools.combinations(keys, r)]
    serial = list(Lattice(finest).tables(targets, threads=0))
    pooled = list(Lattice(finest).tables(targets, threads=3))
    assert [i for i, _ in serial] == [i for i, _ in pooled]
    for (_, a), (_, b) in zip(serial, pooled):
        np.testing.assert_array_equal(a.cell_id, b.cell_id)
        np.testing.assert_array_equal(a.f, b.f)
        np.testing.assert_array_equal(a.w, b.w)   # bit-identical float sums
    skip = set(range(0, len(targets), 4))
    part = dict(Lattice(finest).tables(targets, skip=skip, threads=2))
    for i, t in part.items():
        np.testing.assert_array_equal(t.w, dict(serial)[i].w)


def test_failure_in_a_rollup_thread_reaches_the_caller(monkeypatch):
    """An error in a worker is raised where its table is asked for, and the pool is shut down."""
    import threading
    from gpurisk.freq import lattice
    df, keys, finest, targets = _register_targets(5_000)
    real = lattice.sum_axes
    calls = []

    def boom(x, axes):
        calls.append(1)
        if len(calls) == 5:
            raise MemoryError("no room for this cube")
        return real(x, axes)

    monkeypatch.setattr(lattice, "sum_axes", boom)
    got = []
    with pytest.raises(MemoryError, match="no room"):
        for i, t in Lattice(finest).tables(targets, threads=2):
            got.append(i)
    assert got    # the tables before the failing one came out
    assert not [t for t in threading.enumerate() if t.name.startswith("gpurisk-rollup")]


def test_prepare_runs_on_every_target_where_it_is_built():
    import threading
    df, keys, finest, targets = _register_targets(5_000)
    seen = {}

    def prepare(t):
        seen[t.keys] = threading.current_thread().name
        t.fof_vector()

    out = dict(Lattice(finest).tables(targets, threads=2, prepare=prepare))
    assert set(seen) == {t.keys for t in out.values()}
    assert all(name.startswith("gpurisk-rollup") for name in seen.values())
    assert all("Z" in t._memo for t in out.values())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6).flatmap(
    lambda shape: st.tuples(st.just(tuple(shape)),
                            st.sets(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape)))))
def test_sum_axes_equals_numpy_sum(case):
    from gpurisk.freq.lattice import sum_axes
    shape, axes = case
    axes = tuple(sorted(axes))
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * 3 + 1
    got = sum_axes(x, axes)
    want = x.sum(axis=axes)
    assert got.shape == np.shape(want)
    np.testing.assert_array_equal(got, want)


def test_plan_keeps_at_most_a_group_of_the_roots_children_open():
    """The root's children are built ROOT_GROUP at a time, each group's subtrees before the next
    group: at any point of the order at most ROOT_GROUP of them still have tables to build below."""
    df, keys, finest, targets = _register_targets(5_000)
    old = plan_mod.CUBE_LIMIT
    plan_mod.CUBE_LIMIT = 400                   # many small cubes: many children of the root
    try:
        lat = Lattice(finest)
        plan = lat.plan(targets)
    finally:
        plan_mod.CUBE_LIMIT = old
    top = [m for m in plan.order if plan.parent[m] == lat.full]
    assert len(top) > Lattice.ROOT_GROUP

    def root_child(m):
        while plan.parent[m] != lat.full:
            m = plan.parent[m]
        return m

    last = {}
    for pos, m in enumerate(plan.order):
        last[root_child(m)] = pos
    first = {m: plan.order.index(m) for m in top}
    for pos in range(len(plan.order)):
        open_ = [t for t in top if first[t] <= pos < last[t]]
        assert len(open_) <= Lattice.ROOT_GROUP
