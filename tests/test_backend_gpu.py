"""cuDF (one GPU) and dask-cudf (a dask-cuda LocalCUDACluster) give the pandas backend's counts,
measures and record-level counts, on every real data set. Marked ``gpu``: the conftest skips them,
with the reason, where no CUDA device is usable. Run them with ``pytest -m gpu``."""
from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import pandas as pd
import pytest

from _datasets import DATASETS, IDS
from conftest import data_path, run_cli
from gpurisk.workflows.assess import run_measures
from gpurisk.freq import build_table, summarize, write_record_counts
from gpurisk.freq.summary import summary_of_table
from gpurisk.io import read_lazy, read_table
from gpurisk.measure import Context
from gpurisk.plugins import measure_registry

pytestmark = pytest.mark.gpu


def assert_same(a, b, backend, where=""):
    """b (any namespace) equals the pandas table a."""
    assert b.backend == backend, where
    assert a.categories == b.categories and a.radix == b.radix, where
    h = b.to_numpy()
    np.testing.assert_array_equal(a.cell_id, h.cell_id, err_msg=where)
    np.testing.assert_array_equal(a.f, h.f, err_msg=where)
    if a.F is not None:
        np.testing.assert_array_equal(a.F, h.F, err_msg=where)
    if a.w is not None:  # device sums use atomics: equal to rounding
        np.testing.assert_allclose(a.w, h.w, rtol=1e-12, err_msg=where)
    for x, y in zip(a.cell_codes(), h.cell_codes()):
        np.testing.assert_array_equal(x, y, err_msg=where)
    assert a.freq_of_freq() == b.freq_of_freq()


def assert_same_measures(a, b, ctx):
    """Every measure as on pandas; on dask-cudf a record-level measure declines (no record cells)."""
    ra, rb = run_measures(a, ctx), run_measures(b, ctx)
    reg = measure_registry()
    for name in ra:
        if b.record_locator is None and "records" in reg[name].cls.needs:
            assert rb[name].value is None and "did not keep" in rb[name].reason, name
            continue
        da, db = ra[name].to_dict(), rb[name].to_dict()
        assert da.keys() == db.keys(), name
        for k in da:
            if isinstance(da[k], float):
                assert db[k] == pytest.approx(da[k], rel=1e-12), (name, k)
            else:
                assert da[k] == db[k], (name, k)


@pytest.fixture(scope="module")
def cuda_client():
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    cluster = dask_cuda.LocalCUDACluster(dashboard_address=None, silence_logs=40)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("rel,keys,weights", DATASETS, ids=IDS)
def test_cudf_equals_pandas(rel, keys, weights):
    cudf = pytest.importorskip("cudf")
    import cupy
    cols = keys + ([weights] if weights else [])
    frame = read_table(data_path(rel), columns=cols)
    a = build_table(frame, keys, weights=weights)
    b = build_table(cudf.from_pandas(frame), keys, weights=weights)
    assert b.xp is cupy and isinstance(b.f, cupy.ndarray)
    assert_same(a, b, "cudf", rel)
    np.testing.assert_array_equal(a.record_counts(), cupy.asnumpy(b.record_counts()))
    assert_same_measures(a, b, Context(fraction=0.01, fraction_source="given"))
    reg = frame.copy()
    reg["in_sample"] = np.random.default_rng(7).random(len(reg)) < 0.3
    a2 = build_table(reg, keys, sample_flag="in_sample", weights=weights)
    b2 = build_table(reg, keys, sample_flag="in_sample", weights=weights, backend="cudf")
    assert_same(a2, b2, "cudf", rel + " (flag)")
    np.testing.assert_array_equal(a2.record_counts(), cupy.asnumpy(b2.record_counts()))
    assert_same_measures(a2, b2, Context(fraction=a2.n / a2.N, fraction_source="n/N"))
    reg["in_sample"] = reg["in_sample"].astype("int8")      # a 0/1 flag: read on the device
    b3 = build_table(reg, keys, sample_flag="in_sample", weights=weights, backend="cudf")
    assert_same(a2, b3, "cudf", rel + " (0/1 flag)")


@pytest.mark.parametrize("rel,keys,weights", DATASETS, ids=IDS)
def test_dask_cudf_equals_pandas(cuda_client, rel, keys, weights):
    path = data_path(rel)
    cols = keys + ([weights] if weights else [])
    frame = read_table(path, columns=cols)
    a = build_table(frame, keys, weights=weights)
    lazy = read_lazy(path, columns=cols, blocksize=max(4096, math.ceil(os.path.getsize(path) / 4)),
                     gpu=True)
    b = build_table(lazy, keys, weights=weights)
    assert_same(a, b, "dask-cudf", rel)
    assert_same_measures(a, b, Context(fraction=0.01, fraction_source="given"))


def test_surrogate_ids_missing_keys_population_on_gpu(cuda_client):
    cudf = pytest.importorskip("cudf")
    frame = read_table(data_path("uci_adult/adult_full_48842.csv"))
    keys = list(frame.columns)
    a = build_table(frame, keys)
    assert not a.radix
    assert_same(a, build_table(frame, keys, backend="cudf"), "cudf")
    assert_same(a, build_table(frame, keys, backend="dask-cudf"), "dask-cudf")
    sample = frame.iloc[::7]
    k8 = ["age", "workclass", "education", "marital-status", "occupation", "race", "sex",
          "native-country"]
    a = build_table(sample, k8, population=frame)
    b = build_table(cudf.from_pandas(sample), k8, population=cudf.from_pandas(frame))
    assert_same(a, b, "cudf")
    import cupy
    np.testing.assert_array_equal(a.record_counts(), cupy.asnumpy(b.record_counts()))
    s = summarize(frame, k8, sample_flag=None, backend="dask-cudf", buckets=3).to_dict()
    ref = summary_of_table(build_table(frame, k8)).to_dict()
    for d in (s, ref):
        d.pop("backend"), d.pop("buckets")
    assert s == ref


@pytest.mark.parametrize("backend", ["cudf", "dask-cudf"])
def test_record_counts_match_sdcmicro_on_gpu(cuda_client, tmp_path, backend):
    path = data_path("sdcmicro/testdata.csv")
    ref = pd.read_csv(data_path("sdcmicro/reference/testdata_w_fk_Fk_risk.csv"))
    res = write_record_counts(str(path), ["urbrur", "water", "sex", "age"], tmp_path / backend,
                              backend=backend, weights="sampling_weight", buckets=2)
    files = sorted(glob.glob(str(tmp_path / backend / "*.parquet")))
    got = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    assert res["rows"] == len(ref)
    np.testing.assert_array_equal(got["f"].to_numpy(), ref["fk"].to_numpy())
    np.testing.assert_allclose(got["w"].to_numpy(), ref["Fk"].to_numpy(), rtol=1e-12)


def test_auto_takes_the_gpu_and_cli_matches_pandas():
    from gpurisk.backends import resolve_backend
    assert resolve_backend("auto") in ("cudf", "dask-cudf")
    args = ["assess", str(data_path("sdcmicro/testdata.csv")), "--keys", "urbrur,water,sex,age",
            "--weights", "sampling_weight", "--fraction", "0.01", "--json"]
    a = json.loads(run_cli(*args, check=True).stdout)
    b = json.loads(run_cli(*args, "--backend", "cudf", check=True).stdout)
    assert a.pop("backend") == "pandas" and b.pop("backend") == "cudf"
    assert_same_json(a, b)


def assert_same_json(a, b, where="$"):
    """Equal documents, floats to 1e-12 relative: weighted sums on the device use atomics, so
    their last bits depend on the order the threads add in (seen on an H100: the weighted measures
    of testdata differed in the 16th digit)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            assert_same_json(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_json(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and not isinstance(b, bool):
        assert b == pytest.approx(a, rel=1e-12, nan_ok=True), where
    else:
        assert a == b, where


@pytest.mark.parametrize("cube_limit", [None, 0], ids=["cubes", "sparse"])
def test_scan_on_cudf_equals_pandas(cube_limit, monkeypatch):
    """A scan whose finest table lives on the GPU (CuPy roll-ups: cubes summed by cupy.einsum, or
    sparse tables only) gives the pandas scan's rows."""
    pytest.importorskip("cudf")
    import gpurisk
    from gpurisk.freq import planner
    if cube_limit is not None:
        monkeypatch.setattr(planner, "CUBE_LIMIT", cube_limit)
    keys = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
            "occupation"]
    frame = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    frame["s"] = np.random.default_rng(0).random(len(frame)) < 0.1
    a = gpurisk.scan(frame, keys=keys, max_size=3, sample_flag="s").results
    b = gpurisk.scan(frame, keys=keys, max_size=3, sample_flag="s", backend="cudf").results
    assert list(a.columns) == list(b.columns) and len(a) == len(b) == 8 + 28 + 56
    for c in a.columns:
        if a[c].dtype.kind == "f":
            np.testing.assert_allclose(b[c].to_numpy(), a[c].to_numpy(), rtol=1e-12, err_msg=c)
        else:
            assert a[c].astype(str).tolist() == b[c].astype(str).tolist(), c


def test_dask_cudf_scan_fits_the_estimate_on_the_workers(cuda_client):
    """A sample scanned on dask-cuda keeps its cells on the GPU worker: each combination's table is
    built there (CuPy arrays) and Ê and τ̂1 are fitted there (gpurisk.freq.subsets.table_measures),
    with the pandas scan's rows."""
    import gpurisk
    keys = ["sex", "age", "race", "marital-status", "education"]
    frame = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    frame = frame[np.random.default_rng(0).random(len(frame)) < 0.1].reset_index(drop=True)
    a = gpurisk.scan(frame, keys=keys, max_size=3, fraction=0.1).results
    b = gpurisk.scan(frame, keys=keys, max_size=3, fraction=0.1, backend="dask-cudf").results
    assert a["matches_ll"].notna().all() and list(a.columns) == list(b.columns)
    for c in a.columns:
        if a[c].dtype.kind == "f":
            np.testing.assert_allclose(b[c].to_numpy(), a[c].to_numpy(), rtol=1e-9, err_msg=c)
        else:
            assert a[c].astype(str).tolist() == b[c].astype(str).tolist(), c


def test_big_integers_with_nulls_and_boolean_keys_with_nulls_on_gpu(cuda_client):
    """Integers above 2**53 with nulls keep their exact values in the plan (to_pandas would round
    them through float64), and a boolean key with nulls encodes on the device (fillna of an int on
    a boolean column raises in cuDF): cuDF and dask-cudf give pandas' table."""
    cudf = pytest.importorskip("cudf")
    rng = np.random.default_rng(2)
    n = 5000
    big = (2**60 + rng.integers(0, 40, n) * 1_000_000_007).astype(np.int64)
    frame = pd.DataFrame({"big": pd.array(big, dtype="Int64"),
                          "flag": pd.array(rng.random(n) < 0.4, dtype="boolean"),
                          "c": rng.integers(0, 5, n)})
    frame.loc[rng.random(n) < 0.05, "big"] = pd.NA
    frame.loc[rng.random(n) < 0.05, "flag"] = pd.NA
    keys = ["big", "flag", "c"]
    a = build_table(frame, keys)
    gdf = cudf.from_pandas(frame)
    assert_same(a, build_table(gdf, keys), "cudf", "big ints / boolean with nulls")
    assert_same(a, build_table(gdf, keys, backend="dask-cudf"), "dask-cudf", "big ints / nulls")
    s = summarize(gdf, keys, backend="dask-cudf", buckets=3).to_dict()
    ref = summary_of_table(a).to_dict()
    for d in (s, ref):
        d.pop("backend"), d.pop("buckets")
    assert s == ref
