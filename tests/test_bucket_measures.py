"""Measures that read buckets (``Measure.reads = "buckets"``): on Dask their maps run on the workers,
bucket by bucket, and only small dicts reach the client; the results equal the pandas backend's.

The session's Dask cluster (conftest.shared_cluster: two worker processes, one thread each) as in
test_backend_dask.py. ``CELLS_PER_BUCKET`` is lowered so that the small real registers are cut into
many buckets of cells; ``build_table_dask`` (the one way a distributed cell table comes to the
client) is replaced by a function that fails, so a run that gathered the cells would fail.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import data_path

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import gpurisk  # noqa: E402
from gpurisk import Measure, Result  # noqa: E402
from gpurisk.freq import _dask  # noqa: E402
from gpurisk.freq.buckets import MapFailed  # noqa: E402
from gpurisk.freq.summary import CellsNotKept, SummaryTable  # noqa: E402
from gpurisk.io import read_table  # noqa: E402
from gpurisk.plugins import measure_registry  # noqa: E402

BUCKET_MEASURES = ["theta_hat_weighted", "indiv_risk", "journalist", "marketer"]
FARS_KEYS = ["iage", "isex", "irace", "istatenum", "ihispanic"]


@pytest.fixture
def no_gather(monkeypatch):
    """Many buckets of cells, and no way to bring a cell table to the client."""
    def refuse(*a, **k):
        raise AssertionError("the cell table was brought to the client")
    monkeypatch.setattr(_dask, "build_table_dask", refuse)
    monkeypatch.setattr(_dask, "CELLS_PER_BUCKET", 400)


def _fars(share=0.05, seed=3):
    frame = read_table(data_path("arx_genetic/fars_int.csv"))
    frame["in_sample"] = np.random.default_rng(seed).random(len(frame)) < share
    frame["w"] = np.where(frame["in_sample"], 1.0 / share, 1.0)
    return frame


def assert_same_results(a, b, names):
    da, db = a.to_dict(), b.to_dict()
    for k in ("n", "N", "cells", "freq_of_freq", "fraction"):
        assert da[k] == db[k], k
    for name in names:
        ra, rb = da["measures"][name], db["measures"][name]
        assert set(ra) == set(rb), name
        for key, x in ra.items():
            y = rb[key]
            assert x == y or (isinstance(x, float) and isinstance(y, float)
                              and math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15)), (name, key, x, y)


@pytest.mark.parametrize("design", ["register", "weights", "fraction"])
def test_bucket_measures_on_dask_equal_pandas(client, no_gather, design, monkeypatch):
    """FARS (a 5 % sample of 100 000 records): with a population (sample flag), with design weights,
    with a sampling fraction; each bucket measure and theta_hat on Dask, cells cut into many buckets
    that never leave the workers, equal the pandas backend's. With pi given the maps run in the same
    pass as the summaries; with pi = n/N after them, the buckets kept (persisted) on the workers."""
    persisted = []
    persist = distributed.Client.persist
    monkeypatch.setattr(distributed.Client, "persist",
                        lambda self, *a, **k: persisted.append(1) or persist(self, *a, **k))
    frame = _fars()
    kw = {"register": dict(sample_flag="in_sample"),
          "weights": dict(weights="w", fraction=0.05),
          "fraction": dict(fraction=0.05)}[design]
    data = frame if design == "register" else frame[frame["in_sample"]].reset_index(drop=True)
    names = BUCKET_MEASURES + ["theta_hat"]
    # without a population journalist and marketer need ARX's F_j = f_j, asked for by name
    arx = {m: {"sample_as_population": True} for m in ("journalist", "marketer")}
    a = gpurisk.assess(data, FARS_KEYS, measures=names, backend="pandas", options=arx, **kw)
    b = gpurisk.assess(dd.from_pandas(data, npartitions=4, sort=False), FARS_KEYS, measures=names,
                       backend="dask", options=arx, **kw)
    assert isinstance(b.table, SummaryTable) and b.table.summary.buckets > 5
    with pytest.raises(CellsNotKept):
        b.table.f
    maps = b.table.bucket_maps
    ran = {"register": BUCKET_MEASURES[1:], "weights": BUCKET_MEASURES,
           "fraction": BUCKET_MEASURES[1:]}[design]
    assert set(maps.parts) == set(ran)        # theta_hat_weighted maps only with weights
    for name in ran:
        assert len(maps.parts[name]) == b.table.summary.buckets
        assert all(len(p) <= 12 for p in maps.parts[name])   # a few numbers per bucket
    assert_same_results(a, b, names)
    assert bool(persisted) == (design == "register")
    applies = [n for n in ran if b.measures[n].value is not None]
    assert len(applies) == len(ran), {n: b.measures[n].reason for n in ran}


def test_default_assess_on_dask_keeps_the_cells_on_the_workers(client, no_gather):
    """No measure named, ``cells_on_workers=True``: every default measure that can run on Dask
    reads summaries or buckets once the estimated headline (which reads cells) is left out with its
    reason (theta_hat_misclass without matrices reads nothing), so no cell comes back; the same
    values as pandas."""
    frame = _fars()
    sample = frame[frame["in_sample"]].reset_index(drop=True)
    a = gpurisk.assess(sample, FARS_KEYS, fraction=0.05, weights="w", backend="pandas")
    b = gpurisk.assess(dd.from_pandas(sample, npartitions=3, sort=False), FARS_KEYS, fraction=0.05,
                       weights="w", backend="dask", cells_on_workers=True)
    assert isinstance(b.table, SummaryTable)
    assert "stay on the workers" in b.measures["matches_ll"].reason
    assert {"theta_hat_weighted", "indiv_risk"} <= set(b.table.bucket_maps.parts)
    assert b.measures["theta_hat_misclass"].reason.startswith("needs misclassification matrices")
    same = [n for n, r in b.measures.items() if r.value is not None]
    assert {"theta_hat", "theta_hat_weighted", "indiv_risk"} <= set(same)
    assert_same_results(a, b, same)


def test_real_adult_by_name_on_dask(client, no_gather):
    """``example:adult`` read partition-wise by the workers, against pandas."""
    keys = ["age", "sex", "race", "marital-status", "education"]
    names = ["indiv_risk", "journalist", "marketer", "theta_hat"]
    opts = {"indiv_risk": {"method": "exact", "threshold": 0.05}}
    a = gpurisk.assess("example:adult", keys, fraction=0.1, measures=names, options=opts,
                       backend="pandas")
    b = gpurisk.assess("example:adult", keys, fraction=0.1, measures=names, options=opts,
                       backend="dask")
    assert isinstance(b.table, SummaryTable)
    assert_same_results(a, b, names)
    assert b.measures["indiv_risk"].extra["method"] == "exact"


def test_maps_belong_to_their_options(client, no_gather):
    """A SummaryTable's maps were made with one run's options and pi: reducing them under other
    options is refused on the measure's row, never answered with stale numbers."""
    frame = _fars()
    b = gpurisk.assess(dd.from_pandas(frame, npartitions=2, sort=False), FARS_KEYS,
                       sample_flag="in_sample", measures=["journalist"], backend="dask")
    ctx = gpurisk.Context(fraction=b.context.fraction, fraction_source=b.context.fraction_source,
                          options={"journalist": {"threshold": 0.5}})
    res = gpurisk.run_measures(b.table, ctx, ["journalist", "marketer"])
    assert "mapped with other options" in res["journalist"].reason
    assert "were not mapped where the cells are" in res["marketer"].reason


class Pairs(Measure):
    name = "pairs"
    description = "share of records in cells of two"
    reference = "hand"
    reads = "buckets"

    def map_bucket(self, bucket, ctx):
        return {"k": gpurisk.xp.scalar((bucket.f == 2).sum()) * 2}

    def reduce_buckets(self, parts, table, ctx):
        return Result(value=sum(p["k"] for p in parts) / table.n)


class Boom(Pairs):
    name = "boom"

    def map_bucket(self, bucket, ctx):
        if bucket.index == bucket.count - 1:
            raise ZeroDivisionError("the last bucket")
        return super().map_bucket(bucket, ctx)


def test_third_party_bucket_measure_through_inputs(client, no_gather):
    """A measure that is not registered, mapped on the workers by Inputs.summarize: its answer
    equals the one-bucket answer on pandas; a map that raises on one bucket is that measure's error
    only."""
    from gpurisk.inputs import Inputs
    frame = _fars()
    inp = Inputs(dd.from_pandas(frame, npartitions=4, sort=False), FARS_KEYS,
                 sample_flag="in_sample", backend="dask")
    counted = inp.summarize(bucket_measures=[Pairs, Boom], context=gpurisk.Context())
    ctx = gpurisk.Context(fraction=counted.fraction, fraction_source=counted.fraction_source)
    table = gpurisk.build_table(frame, FARS_KEYS, sample_flag="in_sample")
    assert counted.table.summary.buckets > 5
    assert Pairs().compute(counted.table, ctx).value == Pairs().compute(table, ctx).value > 0
    with pytest.raises(MapFailed, match="map_bucket raised ZeroDivisionError: the last bucket"):
        Boom().compute(counted.table, ctx)


def test_measures_list_shows_buckets():
    reg = measure_registry()
    assert {n for n in BUCKET_MEASURES} <= {n for n, r in reg.items() if r.cls.reads == "buckets"}
    assert reg["indiv_risk"].cls.describe()["reads"] == "buckets"


def _doc_measure():
    """The bucket measure shown in docs/plugins.md, executed as shown."""
    import re
    from conftest import ROOT
    text = (ROOT / "docs" / "plugins.md").read_text()
    block = next(b for b in re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
                 if 'reads = "buckets"' in b)
    ns = {"__name__": "docs_plugins_bucket_example"}
    exec(compile(block, "docs/plugins.md", "exec"), ns)
    return ns["SmallPopulationCells"]


def test_the_documented_bucket_measure(client, no_gather):
    """The guide's example passes the conformance kit and gives, on Dask (many buckets, cells on the
    workers) and on pandas, the share computed directly from the records."""
    from gpurisk.inputs import Inputs
    from gpurisk.testing import check_measure
    cls = _doc_measure()
    check_measure(cls, backends=("pandas", "strict"))
    frame = _fars()
    keys = FARS_KEYS
    F = frame.groupby(keys, dropna=False)["in_sample"].transform("size")
    want = float((frame["in_sample"] & (F < 4)).sum()) / int(frame["in_sample"].sum())
    assert 0 < want < 1
    ctx = gpurisk.Context(options={cls.name: {"k": 4}})
    table = gpurisk.build_table(frame, keys, sample_flag="in_sample")
    assert cls().compute(table, ctx).value == pytest.approx(want, rel=1e-12)
    inp = Inputs(dd.from_pandas(frame, npartitions=4, sort=False), keys, sample_flag="in_sample",
                 backend="dask")
    counted = inp.summarize(bucket_measures=[cls], context=ctx)
    ctx_run = gpurisk.Context(fraction=counted.fraction, fraction_source=counted.fraction_source,
                              options={cls.name: {"k": 4}})
    assert counted.table.summary.buckets > 5
    assert cls().compute(counted.table, ctx_run).value == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("name, options", [
    ("theta_hat_weighted", None), ("indiv_risk", None), ("indiv_risk", {"method": "exact"}),
    ("indiv_risk", {"Fk": "population", "threshold": 0.01}), ("journalist", {"threshold": 0.05}),
    ("marketer", None)], ids=lambda v: str(v))
def test_real_registers_split_into_random_buckets(name, options):
    """The kit's bucket check on real registers (FARS with a 5 % sample and design weights; UCI
    Adult with a 20 % one): the cells dealt into 2, 5 and 17 random buckets (and the strict
    namespace) give the one-bucket answer; on FARS that answer equals the formula computed from the
    records with a pandas groupby."""
    from gpurisk.testing import check_buckets
    cls = measure_registry()[name].cls
    fars = _fars()
    adult = read_table(data_path("arx/adult.csv"))
    adult["in_sample"] = np.random.default_rng(5).random(len(adult)) < 0.2
    adult["w"] = np.where(adult["in_sample"], 5.0, 1.0)
    for frame, keys in ((fars, FARS_KEYS), (adult, ["age", "sex", "race", "education"])):
        res = check_buckets(cls, frame, keys, sample_flag="in_sample", weights="w", options=options)
        assert res.value is not None, res.reason
    # the formulas, from the records (FARS)
    ctx = gpurisk.Context(fraction=0.05, options={name: dict(options or {})})
    table = gpurisk.build_table(fars, FARS_KEYS, sample_flag="in_sample", weights="w")
    got = cls().compute(table, ctx)
    s = fars[fars["in_sample"]]
    cell = s.groupby(FARS_KEYS).agg(f=("w", "size"), w=("w", "sum"))
    pop = fars.groupby(FARS_KEYS).size().rename("F")
    cell = cell.join(pop)
    n = len(s)
    if name == "theta_hat_weighted":
        n1 = int((cell.f == 1).sum())
        want = n1 / (n1 + float((cell.w[cell.f == 2] - 2).sum()))
    elif name == "indiv_risk":
        from gpurisk_classic import record_risk
        kw = {k: v for k, v in (options or {}).items() if k != "threshold"}
        want = float(record_risk(table, fraction=0.05, **kw).sum()) / n      # per record, summed
    elif name == "journalist":
        want = 1.0 / cell.F.min()
        assert got.extra["records_at_highest"] == int(cell.f[cell.F == cell.F.min()].sum())
    else:
        want = float((cell.f / cell.F).sum()) / n
    assert got.value == pytest.approx(want, rel=1e-12)
