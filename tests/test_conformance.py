"""The conformance kit (gpurisk.testing) on every built-in measure, and the kit's own teeth: measures
broken on purpose must fail the check that is about their fault."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import gpurisk
from gpurisk import BadInput, Measure, Result
from gpurisk.plugins import measure_registry
from gpurisk.testing import (check_backends_agree, check_bad_input, check_measure, check_metadata,
                             run_measure, table_from_counts)

#: built-in measures only: a third-party plugin in the environment has its own tests
BUILTIN = sorted(n for n, r in measure_registry().items() if r.package == "gpurisk")


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_measure_conforms(name):
    report = check_measure(measure_registry()[name].cls)
    assert "pandas" in report.results
    for backend, why in report.skipped.items():
        assert backend != "pandas" and why


def test_builtins_are_all_checked():
    assert {"theta_hat", "theta", "pr_pu", "pr_pu_su", "match_prob_a", "theta_hat_dis"} <= set(BUILTIN)


class Good(Measure):
    name = "good"
    description = "share of sample uniques"
    reference = "hand"

    def compute(self, table, ctx):
        return Result(value=table.n_r(1) / table.n)


def _variant(name, compute, **attrs):
    return type(name, (Good,), {"name": name, "compute": compute, **attrs})


def test_a_good_measure_passes():
    report = check_measure(Good)
    assert report.results["pandas"].value == pytest.approx(report.results["pandas"].value)


@pytest.mark.parametrize("attrs, expect", [
    ({"name": "Bad-Name"}, "lower_snake_case"),
    ({"description": ""}, "description is empty"),
    ({"reference": "a\nb"}, "reference spans several lines"),
    ({"needs": frozenset({"telepathy"})}, "needs ['telepathy']"),
    ({"level": "cell"}, "level 'cell'"),
    ({"options": {"x": object()}}, "not JSON"),
    ({"column_options": ("col",), "options": {"col": None}}, "not 'columns' in needs"),
    ({"column_options": ("col",), "needs": frozenset({"columns"})}, "has no entry"),
])
def test_metadata_check_catches(attrs, expect):
    bad = type("Bad", (Good,), attrs)
    with pytest.raises(AssertionError, match=expect.replace("[", r"\[").replace("]", r"\]")):
        check_metadata(bad)


def test_metadata_check_catches_missing_compute():
    class NoCompute(Measure):
        name = "nocompute"
        description = "x"
        reference = "y"
    with pytest.raises(AssertionError, match="does not implement compute"):
        check_metadata(NoCompute)


@pytest.mark.parametrize("compute, expect", [
    (lambda self, t, c: Result(value=math.nan), "None/NaN without a reason"),
    (lambda self, t, c: Result(value=(t.n_r(1) - t.n_r(1)) / t.n_r(1) if t.n_r(1) == 0 else 1.0),
     "raised ZeroDivisionError"),
    (lambda self, t, c: Result(value=math.inf if t.n_r(1) == 0 else 0.5), "not finite"),
    (lambda self, t, c: Result(value=0.5, reason="but why"), "comes with a reason"),
    (lambda self, t, c: 0.5, "not a gpurisk.Result"),
    (lambda self, t, c: Result(value=np.float64(0.1), extra={"obj": object()}), "to_dict() is not JSON"),
    (lambda self, t, c: Result(value=1.0, se=math.nan), "se nan is not a finite number"),
    (lambda self, t, c: (_ for _ in ()).throw(BadInput("two\nlines")), "not one line"),
])
def test_bad_input_check_catches(compute, expect):
    with pytest.raises(AssertionError, match=expect.replace("(", r"\(").replace(")", r"\)")):
        check_bad_input(_variant("broken", compute))


def test_bad_input_check_accepts_a_one_line_bad_input():
    def compute(self, t, c):
        raise BadInput("option x is missing")
    check_bad_input(_variant("strict", compute))


def test_backend_comparison_catches_a_disagreement(monkeypatch):
    """A fake second backend (pandas under another name) and a measure that looks at the name."""
    from gpurisk.freq import engine
    real = engine.dispatch_build

    def fake(name, sample, keys, **kw):
        if name == "pandas":      # the reference counts as it does
            return real(name, sample, keys, **kw)
        if name != "dask":
            raise gpurisk.UnsupportedBackend(f"{name} not here")
        t = engine.build_table_piece(sample, keys, kw.get("population"), kw.get("sample_flag"),
                                     kw.get("weights"), kw.get("missing", "category"))
        return dataclasses.replace(t, backend="dask")
    monkeypatch.setattr(engine, "dispatch_build", fake)
    report = check_backends_agree(Good)
    assert report.compared == ["strict", "dask"] and set(report.skipped) == {"cudf", "dask-cudf"}

    def compute(self, t, c):
        return Result(value=0.25 if t.backend == "dask" else 0.5)
    with pytest.raises(AssertionError, match="backend dask: value 0.25 != pandas 0.5"):
        check_backends_agree(_variant("drift", compute))


def test_table_from_counts_and_run_measure():
    table, sample, register = table_from_counts([1, 2, 0, 3], [4, 2, 5, 9])
    assert table.f.tolist() == [1, 2, 0, 3] and table.F.tolist() == [4, 2, 5, 9]
    np.testing.assert_allclose(table.w, [4, 2, 0, 9])
    assert len(sample) == 6 and len(register) == 20
    res = run_measure(measure_registry()["pr_pu"].cls, table, gpurisk.Context())
    assert res.value == pytest.approx(0 / 20)  # no cell has F_j = 1


# --- the strict namespace: a measure learns on a CPU that it would break on a GPU ------------------

def _host_habit(table, ctx):
    f = np.asarray(table.f)                       # the planted fault: a host round-trip
    return Result(value=float((f == 1).sum()) / table.n)


def _float_of_device(table, ctx):
    return Result(value=float(table.f.max()))     # float() of a device scalar


def _numpy_function(table, ctx):
    return Result(value=float(np.count_nonzero(table.f == 1)) / table.n)


@pytest.mark.parametrize("compute, expect", [
    (_host_habit, "np.asarray"), (_float_of_device, "float"), (_numpy_function, "numpy"),
])
def test_strict_namespace_catches_a_host_round_trip(compute, expect):
    """The same measure passes on pandas and fails the kit's strict (GPU stand-in) backend."""
    bad = _variant("host_habit", lambda self, t, c: compute(t, c))
    assert run_measure(bad, table_from_counts([1, 2, 1])[0], gpurisk.Context()).value is not None
    with pytest.raises(AssertionError, match=f"backend strict .*{expect}"):
        check_backends_agree(bad, backends=("strict",))
    good = _variant("device_habit", lambda self, t, c: Result(
        value=gpurisk.xp.scalar((t.f == 1).sum()) / t.n))
    report = check_backends_agree(good, backends=("strict",))
    assert report.compared == ["strict"]


# --- measures that read buckets (reads = "buckets") ----------------------------------------------

class Pairs(Measure):
    """Share of records in cells of two: a sum over cells, mapped bucket by bucket."""
    name = "pairs"
    description = "share of records in cells of size 2"
    reference = "hand"
    reads = "buckets"

    def map_bucket(self, bucket, ctx):
        return {"in_pairs": gpurisk.xp.scalar((bucket.f == 2).sum()) * 2}

    def reduce_buckets(self, parts, table, ctx):
        return Result(value=sum(p["in_pairs"] for p in parts) / table.n)


from gpurisk.freq.buckets import MAX_ITEMS  # noqa: E402


def _bucket_variant(name, **methods):
    return type(name, (Pairs,), {"name": name, **methods})


def test_a_good_bucket_measure_passes_and_equals_the_table():
    from gpurisk.testing import check_buckets, synthetic_register
    check_measure(Pairs)
    res = check_buckets(Pairs)
    table = gpurisk.build_table(synthetic_register(), ["k1", "k2", "k3"], sample_flag="in_sample")
    assert res.value == pytest.approx(2 * table.n_r(2) / table.n) and table.n_r(2) > 0


@pytest.mark.parametrize("methods, expect", [
    # the largest bucket's pairs, not their sum: right in one bucket, wrong when split
    ({"reduce_buckets": lambda self, parts, t, c: Result(value=max(p["in_pairs"] for p in parts) / t.n)},
     "random buckets and an empty one: value"),
    # the reduction reads a cell array: a SummaryTable (a cluster's table) has none
    ({"reduce_buckets": lambda self, parts, t, c: Result(value=float(gpurisk.xp.scalar((t.f == 2).sum())) * 2 / t.n)},
     "CellsNotKept"),
    # a host round-trip in the map: the strict namespace (a GPU stand-in) refuses it
    ({"map_bucket": lambda self, b, c: {"in_pairs": int((np.asarray(b.f) == 2).sum()) * 2}},
     "strict namespace, 2 random buckets"),
    # a large array is not a small result
    ({"map_bucket": lambda self, b, c: {"in_pairs": 0, "f": b.xp.zeros(MAX_ITEMS + 1)}},
     "a bucket's result must be small"),
    # the empty bucket: max() of no cell
    ({"map_bucket": lambda self, b, c: {"in_pairs": gpurisk.xp.scalar((b.f == 2).sum()) * 2,
                                        "top": gpurisk.xp.scalar(b.f.max())}},
     "raised ValueError"),
])
def test_bucket_check_catches(methods, expect):
    from gpurisk.testing import check_buckets
    with pytest.raises(AssertionError, match=expect):
        check_buckets(_bucket_variant("broken_buckets", **methods))


@pytest.mark.parametrize("attrs, expect", [
    ({"map_bucket": Measure.map_bucket}, r"does not implement map_bucket\(\)"),
    ({"reduce_buckets": Measure.reduce_buckets}, r"does not implement reduce_buckets\(\)"),
    ({"compute": lambda self, t, c: Result(value=0.0)}, r"overrides compute\(\)"),
    ({"needs": frozenset({"records"})}, "a bucket holds cells"),
    ({"reads": "rows"}, "reads 'rows' is not one of"),
])
def test_bucket_metadata_check_catches(attrs, expect):
    with pytest.raises(AssertionError, match=expect):
        check_metadata(_bucket_variant("bad_buckets", **attrs))


def test_a_failing_map_is_reported_on_its_row():
    from gpurisk.freq.buckets import MapFailed, collect, map_measures
    boom = _bucket_variant("boom", map_bucket=lambda self, b, c: 1 / 0)
    part = {"words": [np.arange(3)], "f": np.array([1, 2, 2])}
    got = map_measures(part, [Pairs, boom], gpurisk.Context(), 0, 1)
    assert got["pairs"] == {"in_pairs": 4}
    assert isinstance(got["boom"], MapFailed) and "ZeroDivisionError" in str(got["boom"])
    maps = collect([got, got], ("k",))
    assert maps.parts["pairs"] == [{"in_pairs": 4}, {"in_pairs": 4}]
    assert isinstance(maps.parts["boom"], MapFailed)
