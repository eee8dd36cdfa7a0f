"""The engine, every registered measure and the scan under the strict array namespace (issue 15).

:mod:`gpurisk.testing.strict` stands in for CuPy on this CPU machine: its arrays refuse every
implicit host conversion and offer only what CuPy has. Tables counted by the device engine (the one
the cuDF backend runs) in that namespace must give exactly the pandas engine's counts, and every
measure — built-in and the bundled plugin's — exactly the pandas result: a host round-trip or a
numpy-only call anywhere below fails here.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.plugins import measure_registry
from gpurisk.testing import EXTRA_COLUMN, synthetic_register
from gpurisk.testing.strict import StrictArray, StrictError, strict_table, xp
from gpurisk.xp import namespace, readonly, scalar, to_host

from conftest import data_path


# --- the namespace itself ---------------------------------------------------------------------------

def test_strict_arrays_refuse_every_implicit_host_conversion():
    a = xp.asarray(np.arange(5))
    s = a.sum()
    assert isinstance(s, StrictArray) and s.ndim == 0          # reductions stay on the device
    for convert in (np.asarray, float, int, bool, list, lambda v: [*v], lambda v: v.item(),
                    lambda v: v.tolist(), lambda v: np.sum(v), lambda v: np.log1p(v),
                    lambda v: v + np.arange(5), lambda v: v[np.array([0, 1])]):
        with pytest.raises(StrictError):
            convert(a if convert not in (float, int, bool) else s)
    with pytest.raises(StrictError):
        len(s)
    assert len(a) == 5                                           # shape is host metadata
    with pytest.raises(StrictError, match="repeat"):
        xp.repeat(a, a)                                          # CuPy takes int/list/tuple repeats
    with pytest.raises(StrictError, match="kind"):
        xp.argsort(a, kind="quicksort")
    with pytest.raises(StrictError, match="not offered"):
        xp.busday_count                                          # noqa: B018 - numpy only
    with pytest.raises(AttributeError):
        xp.add.reduceat                                          # noqa: B018 - ufunc methods: none
    assert namespace(a) is xp and namespace(np.zeros(1)) is np
    assert scalar(s) == 10 and isinstance(scalar(s), int)
    np.testing.assert_array_equal(to_host(a * 2), np.arange(5) * 2)


def test_readonly_arrays_refuse_writes():
    a = readonly(xp.asarray(np.arange(3)))
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        a += 1


# --- the engine -----------------------------------------------------------------------------------

#: the designs the engine and the measures are checked on
DESIGNS = ["sample", "population", "register+flag+weights", "real: sdcMicro testdata"]


def _design(name: str) -> dict:
    """The inputs of design ``name``; the real file is read only for its own tests (a machine
    without ``shared/data`` skips those, not the module)."""
    if name == "real: sdcMicro testdata":
        return dict(sample=pd.read_csv(data_path("sdcmicro/testdata.csv")),
                    keys=["urbrur", "water", "sex", "age"])
    reg = synthetic_register(4000, seed=3)
    s = reg[reg["in_sample"]].reset_index(drop=True)
    return {
        "sample": (dict(sample=s, keys=["k1", "k2", "k3"])),
        "population": (dict(sample=s, keys=["k1", "k2", "k3"], population=reg)),
        "register+flag+weights": (dict(sample=reg, keys=["k1", "k2", "k3"], sample_flag="in_sample",
                                       weights="w")),
    }[name]


def _host_table(t):
    return {k: to_host(getattr(t, k)) for k in ("cell_id", "f", "F", "w")}


@pytest.mark.parametrize("design", DESIGNS)
def test_engine_in_the_strict_namespace_equals_pandas(design):
    kw = _design(design)
    ref = gpurisk.build_table(**kw)
    got = strict_table(**kw)
    assert got.xp is xp and isinstance(got.f, StrictArray)
    assert (got.keys, got.categories, got.radix) == (ref.keys, ref.categories, ref.radix)
    for k, v in _host_table(ref).items():
        g = _host_table(got)[k]
        assert (v is None) == (g is None), k
        if v is not None:
            np.testing.assert_array_equal(g, v, err_msg=k)
    assert (got.n, got.N, got.sample_cells) == (ref.n, ref.N, ref.sample_cells)
    assert got.freq_of_freq() == ref.freq_of_freq()
    np.testing.assert_array_equal(to_host(got.record_counts()), ref.record_counts())
    idx = np.array([0, 3, ref.cell_id.shape[0] - 1])
    assert got.cell_labels(xp.asarray(idx)) == ref.cell_labels(idx)
    if ref.F is not None:
        assert got.unique_stats() == ref.unique_stats() and got.pop_uniques() == ref.pop_uniques()


def test_f_over_F_is_found_in_the_strict_namespace():
    reg = synthetic_register(500, seed=1)
    with pytest.raises(gpurisk.BadInput, match=r"f_j > F_j"):
        strict_table(reg, ["k1", "k2"], population=reg.iloc[:100])


# --- every measure --------------------------------------------------------------------------------

def _options(cls):
    return {o: EXTRA_COLUMN for o in cls.column_options}


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
    return a == b


@pytest.mark.parametrize("design", ["sample", "population", "register+flag+weights"])
def test_every_registered_measure_in_the_strict_namespace_equals_pandas(design):
    """All measures, default or not, built-in or from the bundled plugin."""
    kw = _design(design)
    frame = kw["sample"]
    reg = measure_registry()
    names = list(reg)
    options = {n: _options(reg[n].cls) for n in names}
    options["pr_cm_um"] = {"perturb": "pram:vars=k2,p=0.8", "max_iter": 3, "stable": 2}
    options["theta_hat_misclass"] = {"matrices": {"k2": 0.9}}
    cols = {EXTRA_COLUMN: (frame[frame[kw["sample_flag"]]] if kw.get("sample_flag") else frame)
            [EXTRA_COLUMN].to_numpy()}
    ctx_kw = dict(fraction=None if kw.get("population") is not None or kw.get("sample_flag") else 0.2)
    results = {}
    for which, table in (("pandas", gpurisk.build_table(**kw)), ("strict", strict_table(**kw))):
        pi = ctx_kw["fraction"] or table.n / table.N
        ctx = gpurisk.Context(fraction=pi, fraction_source="given", options=options, columns=cols)
        results[which] = gpurisk.run_measures(table, ctx, names)
    bad = []
    for name in names:
        a, b = results["pandas"][name], results["strict"][name]
        for attr in ("value", "se", "upper", "reason"):
            if not _same(getattr(a, attr), getattr(b, attr)):
                bad.append(f"{name}.{attr}: strict {getattr(b, attr)!r} != pandas {getattr(a, attr)!r}")
    assert not bad, "\n".join(bad)
    ran = [n for n in names if results["strict"][n].value is not None]
    assert len(ran) >= (9 if design == "sample" else 20), ran   # not a comparison of reasons alone


def test_scan_roll_ups_in_the_strict_namespace_equal_pandas():
    from itertools import combinations

    from gpurisk.freq.lattice import Lattice
    kw = _design("register+flag+weights")
    keys = kw["keys"]
    targets = [c for r in (1, 2, 3) for c in combinations(keys, r)]
    ref = dict(Lattice(gpurisk.build_table(**kw)).tables(targets))
    got = dict(Lattice(strict_table(**kw)).tables(targets))
    assert ref.keys() == got.keys()
    for i in ref:
        assert got[i].xp is xp
        for k, v in _host_table(ref[i]).items():
            if v is not None:
                np.testing.assert_array_equal(_host_table(got[i])[k], v, err_msg=f"{targets[i]} {k}")


def test_guards_and_recodes_in_the_strict_namespace_equal_pandas():
    from gpurisk.freq.guards import check_cardinality, sample_categories
    from gpurisk.freq.recode import apply_recodes
    kw = _design("register+flag+weights")
    ref, got = gpurisk.build_table(**kw), strict_table(**kw)
    assert sample_categories(got) == sample_categories(ref)
    check_cardinality(got)                                     # passes, as on pandas
    big = pd.DataFrame({"id": np.arange(3000), "s": np.arange(3000) % 2})
    with pytest.raises(gpurisk.BadInput, match="'id' has 3000 distinct values"):
        check_cardinality(strict_table(big, ["id", "s"]))
    spec = ["k1=bands:5"]
    a, b = apply_recodes(ref, spec), apply_recodes(got, spec)
    assert b.xp is xp and b.categories == a.categories
    for k, v in _host_table(a).items():
        if v is not None:
            np.testing.assert_array_equal(_host_table(b)[k], v, err_msg=k)
    np.testing.assert_array_equal(to_host(b.record_counts()), a.record_counts())


@pytest.mark.parametrize("design", ["population", "register+flag+weights"])
def test_summary_in_the_strict_namespace_equals_pandas(design):
    from gpurisk.freq.summary import summary_of_table
    kw = _design(design)
    a, b = summary_of_table(gpurisk.build_table(**kw)), summary_of_table(strict_table(**kw))
    assert a.joint and dataclasses_replace(b, backend="pandas") == a


def dataclasses_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


def test_to_host_takes_every_kind_of_array():
    np.testing.assert_array_equal(to_host(pd.Series([1, 2])), [1, 2])     # Series.get(key) is no copy
    np.testing.assert_array_equal(to_host([1, 2]), [1, 2])
    assert to_host(None) is None and scalar(np.float64(2.5)) == 2.5 and scalar(3) == 3
    with pytest.raises(ValueError, match="2 elements"):
        scalar(np.arange(2))


def test_a_measure_may_return_a_device_scalar():
    """A GPU measure that returns ``table.f.sum() / n`` (a 0-d device array) gets a plain float."""
    from gpurisk.measure import checked_result
    r = checked_result(gpurisk.Result(value=xp.asarray(np.arange(4)).sum() / 4))
    assert r.value == 1.5 and type(r.value) is float
    bad = checked_result(gpurisk.Result(value=xp.asarray(np.arange(4)) > 1))
    assert bad.value is None and "not a real number" in bad.reason
