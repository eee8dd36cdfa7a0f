"""record-risk on Dask: the cells' risks are computed on the client from the gathered cell table, each
record's cell is found on the workers bucket by bucket, and the per-record rows are written by the
workers as a Parquet dataset (one file per partition), never gathered. Reference: the pandas backend
on the same data (its numbers are checked against sdcMicro and hand values in test_record_risk.py),
and a pandas groupby for the population counts."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import data_path, run_cli
from gpurisk.errors import BadInput
from gpurisk.models.record_risk import record_risk

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

FARS_KEYS = ["iage", "isex", "irace", "istatenum"]


@pytest.fixture(scope="module")
def fars():
    return pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")


def _same(a: dict, b: dict):
    a, b = dict(a), dict(b)
    a.pop("output", None), b.pop("output", None)
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@pytest.mark.parametrize("all_records,bucket_bytes", [(False, 2**28), (True, 2**28),
                                                     (False, 40_000), (True, 40_000)])
def test_dask_rows_and_summary_equal_pandas(client, fars, tmp_path, all_records, bucket_bytes,
                                            monkeypatch):
    """One bucket of cells, or (40 kB, about 600 cells, a bucket) many: each sent where a record
    looks it up."""
    from gpurisk.freq import _dask
    monkeypatch.setattr(_dask, "LOOKUP_BYTES_PER_BUCKET", bucket_bytes)
    kw = dict(fraction=0.05, all_records=all_records, methods=["r1", "r1u", "r2", "b1"])
    a = record_risk(fars, FARS_KEYS, output=tmp_path / "a.parquet", **kw)
    b = record_risk(dd.from_pandas(fars, npartitions=5), FARS_KEYS, backend="dask",
                    output=tmp_path / "b.parquet", **kw)
    _same(a, b)
    assert b["output"]["files"] == 5 and b["output"]["rows"] == a["output"]["rows"] > 0
    assert sorted(p.name for p in (tmp_path / "b.parquet").iterdir()) == \
        [f"part.{i:05d}.parquet" for i in range(5)]
    ra, rb = pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet")
    pd.testing.assert_frame_equal(ra, rb.reset_index(drop=True))


def test_dask_register_with_sample_flag(client, fars, tmp_path):
    reg = fars[FARS_KEYS].copy()
    reg["s"] = np.random.default_rng(4).random(len(reg)) < 0.1
    a = record_risk(reg, FARS_KEYS, sample_flag="s", output=tmp_path / "a.parquet")
    b = record_risk(dd.from_pandas(reg, npartitions=4), FARS_KEYS, sample_flag="s",
                    backend="dask", output=tmp_path / "b.parquet")
    _same(a, b)
    rb = pd.read_parquet(tmp_path / "b.parquet")
    assert reg["s"].to_numpy()[rb["row"]].all()
    Fk = reg.groupby(FARS_KEYS)[FARS_KEYS[0]].transform("size").to_numpy()   # by pandas
    assert np.array_equal(rb["F"].to_numpy(), Fk[rb["row"]])
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "a.parquet"), rb)


def test_dask_without_output_still_numbers_table3(client, fars):
    a = record_risk(fars, FARS_KEYS, fraction=0.05)
    b = record_risk(dd.from_pandas(fars, npartitions=3), FARS_KEYS, fraction=0.05, backend="dask")
    _same(a, b)
    assert all(isinstance(r["row"], int) for r in b["table3"]) and "output" not in b


def test_dask_output_folder_replaced_whole_or_refused(client, fars, tmp_path):
    out = tmp_path / "r.parquet"
    out.write_text("an earlier file")                     # a file of that name: replaced
    ddf = dd.from_pandas(fars, npartitions=3)
    record_risk(ddf, FARS_KEYS, fraction=0.05, backend="dask", output=out)
    assert out.is_dir() and len(list(out.iterdir())) == 3
    record_risk(dd.from_pandas(fars, npartitions=2), FARS_KEYS, fraction=0.05, backend="dask",
                output=out)                               # an earlier dataset: replaced whole
    assert sorted(p.name for p in out.iterdir()) == ["part.00000.parquet", "part.00001.parquet"]
    keep = tmp_path / "mine.parquet"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    with pytest.raises(BadInput, match="other files than part"):
        record_risk(ddf, FARS_KEYS, fraction=0.05, backend="dask", output=keep)
    assert (keep / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]   # no temporary left
    with pytest.raises(BadInput, match="^record-risk with recode on the dask backend"):
        record_risk(ddf, FARS_KEYS, fraction=0.05, backend="dask", recode=["iage=bands:10"])


def test_cli_dask_ids_carried_by_the_workers(tmp_path):
    """`record-risk DATA --backend dask -o OUT --id COL`: the ids travel with each partition's rows;
    the dataset equals the pandas file row for row, ids included."""
    td = data_path("sdcmicro/testdata.csv")
    args = ["record-risk", str(td), "--keys", "urbrur,water,sex,age", "--fraction", "0.01",
            "--id", "ori_hid,relat", "--json"]
    p = run_cli(*args, "-o", str(tmp_path / "a.parquet"), check=True)
    q = run_cli(*args, "-o", str(tmp_path / "b.parquet"), "--backend", "dask", "--workers", "2",
                check=True)
    da, db = json.loads(p.stdout), json.loads(q.stdout)
    assert db["output"]["id_columns"] == ["ori_hid", "relat"] and db["output"]["rows"] == 330
    assert da["table3"] == db["table3"]
    ra, rb = pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet")
    # Dask reads CSV integer columns as float64 (assume_missing: a later block may hold NaN)
    pd.testing.assert_frame_equal(ra, rb.reset_index(drop=True), check_dtype=False)
    data = pd.read_csv(td)
    assert (data["ori_hid"].to_numpy()[rb["row"]] == rb["ori_hid"].to_numpy()).all()
