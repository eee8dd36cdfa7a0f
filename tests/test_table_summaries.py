"""The summaries a FreqTable keeps for its measures equal direct computations from f and F."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurisk.freq.table import FreqTable


@st.composite
def tables(draw):
    m = draw(st.integers(0, 40))
    f = np.array(draw(st.lists(st.integers(0, 6), min_size=m, max_size=m)), dtype=np.int64)
    with_pop = draw(st.booleans())
    F = None
    if with_pop:
        extra = np.array(draw(st.lists(st.integers(0, 4), min_size=m, max_size=m)), dtype=np.int64)
        F = f + extra
        F[F == 0] = 1                     # every cell has F_j >= 1 when there is a population
    return FreqTable(("k",), [list(range(max(m, 1)))], np.arange(m, dtype=np.int64), f, F)


@settings(max_examples=200, deadline=None)
@given(tables())
def test_kept_summaries_equal_direct_computation(t):
    f, F = t.f, t.F
    assert t.n == int(f.sum())
    assert t.sample_cells == int((f > 0).sum())
    want = {int(r): int((f == r).sum()) for r in np.unique(f[f > 0])}
    assert t.freq_of_freq() == want
    Z = t.fof_vector()
    assert Z[0] == 0 and len(Z) >= 2
    for r in range(1, 8):
        assert t.n_r(r) == want.get(r, 0)
        assert (Z[r] if r < len(Z) else 0) == want.get(r, 0)
    if F is None:
        assert t.N is None
        return
    assert t.N == int(F.sum())
    assert t.pop_uniques() == int((F == 1).sum()) == t.N_r(1)
    su = f == 1
    s = t.unique_stats()
    assert s.n1 == int(su.sum())
    assert s.F_sum == int(F[su].sum())
    assert s.pop_unique == int((su & (F == 1)).sum())
    assert np.isclose(s.inv_F_sum, float((1.0 / F[su]).sum()), rtol=1e-15, atol=0)


def test_a_table_is_frozen_and_new_counts_make_a_new_table():
    """Issue 15: a FreqTable cannot be changed once built (its kept summaries could go stale);
    other counts are another table, with summaries of its own."""
    import dataclasses
    f0 = np.array([1, 1, 2])
    t = FreqTable(("k",), [[0, 1, 2]], np.arange(3), f0, np.array([1, 3, 2]))
    assert (t.n, t.N, t.n_r(1), t.unique_stats().n1, t.pop_uniques()) == (4, 6, 2, 2, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.f = np.array([0, 2, 2])
    with pytest.raises(ValueError, match="read-only"):
        t.f[0] = 5                       # a measure writing into the counts
    with pytest.raises(ValueError, match="read-only"):
        t.F += 1
    with pytest.raises(ValueError, match="read-only"):
        f0[0] = 7                        # the table took the array: not even its maker writes into it
    t2 = dataclasses.replace(t, f=np.array([0, 2, 2]), F=np.array([1, 2, 2]))
    assert (t2.n, t2.N, t2.n_r(1), t2.n_r(2), t2.unique_stats().n1, t2.pop_uniques()) == (4, 5, 0, 2, 0, 1)
    assert (t.N, t.n_r(1)) == (6, 2)     # the first table is unchanged


def test_a_measure_writing_into_the_counts_changes_no_other_measure():
    """Issue 20: a plugin that wrote into table.f turned θ̂ 0.0096 into 1.0 for every measure after
    it; the counts are read-only, so it is reported on its own row and the others are unchanged."""
    import gpurisk
    from gpurisk import plugins

    class Vandal(gpurisk.Measure):
        name = "vandal"
        description = "writes into the counts"
        reference = "test"

        def compute(self, table, ctx):
            table.f[:] = 1
            return gpurisk.Result(value=0.0)

    class Holder:
        @gpurisk.hookimpl
        def gpurisk_register_measures(self):
            return [Vandal]

    from gpurisk.testing import synthetic_register
    reg = synthetic_register(2000, seed=5)
    ref = gpurisk.assess(reg, ["k1", "k2"], fraction=0.1, measures=["theta_hat"])
    plugins.register(Holder(), name="vandal-test")
    try:
        got = gpurisk.assess(reg, ["k1", "k2"], fraction=0.1, measures=["vandal", "theta_hat"])
    finally:
        plugins.unregister("vandal-test")
    assert got.measures["vandal"].value is None and "read-only" in got.measures["vandal"].reason
    assert got.measures["theta_hat"].value == ref.measures["theta_hat"].value


@pytest.mark.parametrize("cells,top", [(5, 10**9), (100, 5 * 10**6), (3000, 10**6), (40, 50)])
def test_population_counts_of_millions_are_tallied_alike(cells, top):
    """A register's one-key table: a few cells of millions of people each. Its frequencies of
    frequencies are tallied by sorting (no vector as long as the largest F), and equal a direct
    count; the bucket summary a Dask scan sends the client says the same, in the strict namespace
    too (the array discipline of CuPy)."""
    import collections

    from gpurisk.freq.partial import summary
    from gpurisk.freq.cellid import dense_count
    from gpurisk.freq.table import fof_dict
    from gpurisk.testing.strict import xp
    rng = np.random.default_rng(cells)
    F = rng.integers(1, top, cells)
    F[: cells // 4] = F[cells - 1]                   # some counts shared by several cells
    f = rng.binomial(F, 0.01)
    sparse = not dense_count(int(F.max()) + 1, cells)
    assert sparse == (top > 10**5)
    want = dict(sorted(collections.Counter(F.tolist()).items()))
    got = fof_dict(np, F)
    assert got == want and list(got) == list(want)
    t = FreqTable(("k",), [list(range(cells))], np.arange(cells, dtype=np.int64), f, F)
    assert t.pop_freq_of_freq() == want
    for s in (summary(f, F), summary(xp.asarray(f), xp.asarray(F))):
        assert s["pop_fof"] == want and s["pop_cells"] == cells and s["N"] == int(F.sum())
        assert s["fof"] == dict(sorted(collections.Counter(f[f > 0].tolist()).items()))
        assert s["cells"] == int((f > 0).sum())
