"""The Dask backend gives the pandas backend's counts and measures, on every real data set.

The session's Dask cluster (conftest.shared_cluster: two worker processes, one thread each, loopback,
memory limit per worker ``WORKER_MEMORY``) serves every test but the one that measures a count's
memory, which starts fresh workers of the same settings; build_table on ``dask`` uses it as the
active client. Inputs are cut into several partitions, so the records of a cell straddle them.
"""
from __future__ import annotations

import glob
import json
import math
import os
import threading
import time

import numpy as np
import pandas as pd
import pytest

from _datasets import DATASETS, IDS
from conftest import WORKER_MEMORY, data_path, run_cli

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from gpurisk.workflows.assess import run_measures  # noqa: E402
from gpurisk.errors import BadInput  # noqa: E402
from gpurisk.freq import build_table, summarize, write_record_counts  # noqa: E402
from gpurisk.freq.summary import summary_of_table  # noqa: E402
from gpurisk.io import read_lazy, read_table  # noqa: E402
from gpurisk.measure import Context  # noqa: E402
from gpurisk.plugins import measure_registry  # noqa: E402

WORKER_MEMORY_BYTES = 400 * 2**20      # conftest.WORKER_MEMORY, the shared cluster fixture's


def assert_same_table(a, b, where=""):
    assert b.backend == "dask" and b.record_locator is None
    assert a.keys == b.keys and a.radix == b.radix, where
    assert a.categories == b.categories, where
    np.testing.assert_array_equal(a.cell_id, b.cell_id, err_msg=where)
    np.testing.assert_array_equal(a.f, b.f, err_msg=where)
    for x, y in zip(a.cell_codes(), b.cell_codes()):
        np.testing.assert_array_equal(x, y, err_msg=where)
    if a.F is None:
        assert b.F is None
    else:
        np.testing.assert_array_equal(a.F, b.F, err_msg=where)
    if a.w is None:
        assert b.w is None
    else:  # sums of floats in another order: equal to rounding
        np.testing.assert_allclose(a.w, b.w, rtol=1e-12, err_msg=where)
    assert a.freq_of_freq() == b.freq_of_freq()


def assert_same_measures(a, b, ctx):
    """Every measure gives pandas' answer on the Dask table, except that a record-level measure
    declines there (the Dask table keeps no record cells: record-level output is partition-wise)."""
    ra, rb = run_measures(a, ctx), run_measures(b, ctx)
    assert ra.keys() == rb.keys()
    reg = measure_registry()
    compared = 0
    for name in ra:
        if "records" in reg[name].cls.needs:
            assert rb[name].value is None and "did not keep" in rb[name].reason, name
            continue
        assert ra[name].to_dict() == rb[name].to_dict(), name
        compared += 1
    assert compared >= 6


def assert_same_docs(a: dict, b: dict):
    """Two `assess --json` documents agree; record-level measures decline on Dask."""
    reg = measure_registry()
    ma, mb = a.pop("measures"), b.pop("measures")
    ha, hb = a.pop("headline"), b.pop("headline")
    a.pop("scenarios"), b.pop("scenarios")
    assert a == b and ma.keys() == mb.keys()
    if hb["value"] is None:     # no measure named on Dask: the log-linear headline keeps to the workers
        assert "reads every cell" in hb["reason"] and ha["value"] is not None
    for name in ma:
        if name in ("matches_ll", "tau1_ll") and mb[name]["value"] is None:
            assert "runs when named (--measures" in mb[name]["reason"], name
        elif "records" in reg[name].cls.needs:
            assert mb[name]["value"] is None and "did not keep" in mb[name]["reason"], name
        else:
            assert ma[name] == mb[name], name


def _blocksize(path) -> int:
    """About four CSV blocks per file, so that the lazy reader makes several partitions."""
    return max(4096, math.ceil(os.path.getsize(path) / 4))


@pytest.mark.parametrize("rel,keys,weights", DATASETS, ids=IDS)
def test_real_data_same_counts_and_measures(client, rel, keys, weights):
    path = data_path(rel)
    cols = keys + ([weights] if weights else [])
    frame = read_table(path, columns=cols)
    a = build_table(frame, keys, weights=weights)
    # the CSV read partition-wise by the workers (cells straddle the blocks)
    lazy = read_lazy(path, columns=cols, blocksize=_blocksize(path))
    if lazy.npartitions < 2:  # a file smaller than a block: cut the frame instead
        lazy = dd.from_pandas(frame, npartitions=3, sort=False)
    b = build_table(lazy, keys, weights=weights)
    assert_same_table(a, b, rel)
    assert_same_measures(a, b, Context(fraction=0.01, fraction_source="given"))

    # a register with a sample flag (a seeded 30 % Bernoulli sample): F, and every measure
    reg = frame.copy()
    reg["in_sample"] = np.random.default_rng(7).random(len(reg)) < 0.3
    a2 = build_table(reg, keys, sample_flag="in_sample", weights=weights)
    b2 = build_table(dd.from_pandas(reg, npartitions=5, sort=False), keys, sample_flag="in_sample",
                     weights=weights)
    assert_same_table(a2, b2, rel + " (flag)")
    ctx = Context(fraction=a2.n / a2.N, fraction_source="n/N")
    assert_same_measures(a2, b2, ctx)


def test_one_large_parquet_file_is_split_by_row_groups(client, tmp_path):
    """One Parquet file of many row groups becomes several partitions of at most the target size
    (from the footer's uncompressed sizes), and counts as the pandas backend does."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpurisk.io import row_groups_per_partition
    frame = read_table(data_path("arx_genetic/fars_int.csv"))
    keys = ["iage", "isex", "irace", "istatenum"]
    path = tmp_path / "one.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=10_000)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 11
    per_rg = max(sum(meta.row_group(g).column(i).total_uncompressed_size
                     for i in range(meta.num_columns) if meta.schema.column(i).name in keys)
                 for g in range(meta.num_row_groups))
    target = 3 * per_rg + 1                        # three row groups fit, four do not
    assert row_groups_per_partition([path], keys, target) == 3
    assert row_groups_per_partition([path], keys, 100 * per_rg) is None   # the file fits: one partition
    # narrow keys: the row cap binds before the byte target (two 10 000-row groups per partition)
    assert row_groups_per_partition([path], keys, 100 * per_rg, max_rows=25_000) == 2
    lazy = read_lazy(path, columns=keys, partition_bytes=target)
    assert lazy.npartitions == 4                   # ceil(11 / 3)
    assert read_lazy(path, columns=keys).npartitions == 1
    assert_same_table(build_table(frame, keys), build_table(lazy, keys), "fars split by row groups")


def test_assess_of_summary_measures_keeps_the_cells_on_the_workers(client, caplog):
    """When every measure to run reads summaries, assess on Dask reduces them on the workers: the
    client gets a SummaryTable (no cell array), and every value equals the pandas backend's."""
    import gpurisk
    from gpurisk.freq.summary import SummaryTable
    frame = read_table(data_path("arx_genetic/fars_int.csv"))
    keys = ["iage", "isex", "irace", "istatenum", "ihispanic"]
    reg = frame.copy()
    reg["in_sample"] = np.random.default_rng(3).random(len(reg)) < 0.05
    names = [m for m, r in measure_registry().items() if r.cls.reads == "summary"]
    assert {"theta_hat", "tau1", "tau1_hat", "pr_pu_su", "risk_broad"} <= set(names)
    a = gpurisk.assess(reg, keys, sample_flag="in_sample", measures=names, backend="pandas")
    b = gpurisk.assess(dd.from_pandas(reg, npartitions=4, sort=False), keys, sample_flag="in_sample",
                       measures=names, backend="dask")
    assert isinstance(b.table, SummaryTable) and not isinstance(a.table, SummaryTable)
    da, db = a.to_dict(), b.to_dict()
    for k in ("n", "N", "cells", "population_cells", "freq_of_freq", "pop_freq_of_freq", "fraction"):
        assert da[k] == db[k], k
    for name in names:
        ra, rb = da["measures"][name], db["measures"][name]
        for field_ in ("value", "se", "upper", "reason"):
            x, y = ra[field_], rb[field_]
            assert (x == y) or (isinstance(x, float) and math.isclose(x, y, rel_tol=1e-12)), (name, field_)
    # a measure that reads cells brings the table back, and says so
    mats = {"theta_hat_misclass": {"matrices": {"isex": 0.95}}}
    with caplog.at_level("INFO", logger="gpurisk.backends"):
        c = gpurisk.assess(dd.from_pandas(reg, npartitions=4, sort=False), keys,
                           sample_flag="in_sample", options=mats,
                           measures=["theta_hat", "theta_hat_misclass"], backend="dask")
    assert not isinstance(c.table, SummaryTable)
    assert any("theta_hat_misclass" in r.getMessage() and "brought to this process" in r.getMessage()
               for r in caplog.records)
    # a cell-reading measure that cannot run here (no matrices given) does not bring the cells back
    d = gpurisk.assess(dd.from_pandas(reg, npartitions=4, sort=False), keys, sample_flag="in_sample",
                       measures=["theta_hat", "theta_hat_misclass"], backend="dask")
    assert isinstance(d.table, SummaryTable)
    assert d.measures["theta_hat_misclass"].reason.startswith("needs misclassification matrices")
    # a measure that reads buckets keeps them there too: its map runs on the workers
    reg["w"] = 20.0
    e = gpurisk.assess(dd.from_pandas(reg, npartitions=4, sort=False), keys, sample_flag="in_sample",
                       weights="w", measures=["theta_hat", "theta_hat_weighted"], backend="dask")
    assert isinstance(e.table, SummaryTable) and "theta_hat_weighted" in e.table.bucket_maps.parts
    assert e.measures["theta_hat_weighted"].value is not None


def test_missing_keys_and_surrogate_ids(client):
    """All 15 columns of UCI Adult: 3 620 rows with an empty key, and a key space beyond int64
    (surrogate cell ids); a separate population frame."""
    path = data_path("uci_adult/adult_full_48842.csv")
    frame = read_table(path)
    keys = list(frame.columns)
    a = build_table(frame, keys)
    assert not a.radix and any(c[-1] is None for c in a.categories)
    b = build_table(read_lazy(path, blocksize=_blocksize(path)), keys)
    assert_same_table(a, b)
    sample = frame.iloc[::7]
    k8 = ["age", "workclass", "education", "marital-status", "occupation", "race", "sex",
          "native-country"]
    a = build_table(sample, k8, population=frame)
    b = build_table(dd.from_pandas(sample, npartitions=3, sort=False), k8,
                    population=dd.from_pandas(frame, npartitions=4, sort=False))
    assert_same_table(a, b)
    assert_same_measures(a, b, Context(fraction=a.n / a.N, fraction_source="n/N"))


def test_f_over_F_and_missing_error_messages(client):
    path = data_path("sdcmicro/testdata.csv")
    frame = read_table(path)
    keys = ["urbrur", "water", "sex", "age"]
    pop = frame.iloc[: len(frame) // 2]
    with pytest.raises(BadInput) as ea:
        build_table(frame, keys, population=pop)
    with pytest.raises(BadInput) as eb:
        build_table(dd.from_pandas(frame, npartitions=3, sort=False), keys,
                    population=dd.from_pandas(pop, npartitions=2, sort=False))
    assert str(ea.value) == str(eb.value)
    with pytest.raises(BadInput, match="more records than the population"):
        summarize(dd.from_pandas(frame, npartitions=3, sort=False), keys,
                  population=dd.from_pandas(pop, npartitions=2, sort=False), buckets=3)
    adult = read_table(data_path("uci_adult/adult_full_48842.csv"), columns=["workclass", "sex"])
    with pytest.raises(BadInput, match="'workclass' has 2799 missing value"):
        build_table(dd.from_pandas(adult, npartitions=3, sort=False), ["sex", "workclass"],
                    missing="error")
    with pytest.raises(BadInput, match="not in the sample"):
        build_table(dd.from_pandas(adult, npartitions=2, sort=False), ["sex", "nope"])


def test_csv_type_change_between_blocks_reads_as_pandas(client, tmp_path):
    """Numbers in the file's head, words in a later block: read as text, as pandas reads the
    whole file (issue 42; it was one line, and with the head typed Int64 an internal error
    quoting the word)."""
    p = tmp_path / "mixed.csv"
    p.write_text("a,b\n" + "".join(f"{i % 7},{i % 5}\n" for i in range(3000))
                 + "".join(f"x{i % 3},{i % 5}\n" for i in range(20)))
    ddf = read_lazy(p, blocksize=4096)
    assert ddf.npartitions > 1
    got = build_table(ddf, ["a", "b"])
    ref = pd.read_csv(p, dtype=str).value_counts(["a", "b"])       # independent count
    assert got.n == 3020 and got.sample_cells == len(ref)
    assert got.freq_of_freq() == {int(k): int(v) for k, v in ref.value_counts().items()}


def test_record_counts_partition_wise_match_sdcmicro(client, tmp_path):
    """fk and Fk per record, written partition by partition, equal sdcMicro 5.8.1's (independent)."""
    path = data_path("sdcmicro/testdata.csv")
    ref = pd.read_csv(data_path("sdcmicro/reference/testdata_w_fk_Fk_risk.csv"))
    keys = ["urbrur", "water", "sex", "age"]
    lazy = read_lazy(path, blocksize=_blocksize(path))
    assert lazy.npartitions >= 3
    for buckets in (1, 3):
        out = tmp_path / f"rc{buckets}"
        res = write_record_counts(lazy, keys, out, weights="sampling_weight", carry=["ori_hid"],
                                  buckets=buckets)
        files = sorted(glob.glob(str(out / "*.parquet")))
        assert res == {"files": lazy.npartitions, "rows": len(ref), "buckets": buckets}
        assert len(files) == lazy.npartitions
        got = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
        np.testing.assert_array_equal(got["f"].to_numpy(), ref["fk"].to_numpy())
        np.testing.assert_allclose(got["w"].to_numpy(), ref["Fk"].to_numpy(), rtol=1e-12)
        np.testing.assert_array_equal(got["ori_hid"].to_numpy(),
                                      read_table(path, columns=["ori_hid"])["ori_hid"].to_numpy())


def test_record_counts_and_summary_equal_pandas(client, tmp_path):
    """Surrogate ids, missing keys and a sample flag: records and summaries as on pandas."""
    frame = read_table(data_path("uci_adult/adult_full_48842.csv"))
    keys = [c for c in frame.columns if c != "fnlwgt"]
    frame["flag"] = np.random.default_rng(3).random(len(frame)) < 0.2
    a = build_table(frame, keys, sample_flag="flag", weights="fnlwgt")
    ddf = client.persist(dd.from_pandas(frame, npartitions=6, sort=False))
    res = write_record_counts(ddf, keys, tmp_path / "rc", sample_flag="flag", weights="fnlwgt",
                              buckets=4)
    got = pd.concat([pd.read_parquet(f) for f in sorted(glob.glob(str(tmp_path / "rc" / "*.parquet")))],
                    ignore_index=True)
    assert res["rows"] == a.n == len(got)
    rc = a.record_cell()
    np.testing.assert_array_equal(got["f"].to_numpy(), a.record_counts())
    np.testing.assert_array_equal(got["F"].to_numpy(), a.F[rc])
    np.testing.assert_allclose(got["w"].to_numpy(), a.w[rc], rtol=1e-12)
    ref = summary_of_table(a).to_dict()
    for buckets in (1, 5):
        s = summarize(ddf, keys, sample_flag="flag", weights="fnlwgt", buckets=buckets).to_dict()
        assert s.pop("backend") == "dask" and s.pop("buckets") == buckets
        wa, wb = ref["weight_total"], s.pop("weight_total")
        assert wb == pytest.approx(wa, rel=1e-12)
        assert s == {k: v for k, v in ref.items() if k not in ("backend", "buckets", "weight_total")}


def _write_big(root, cards, rows_per_file):
    """Cell c (the mixed-radix number of the key values) has 1 + c % 30 records. Records go out in
    30 rounds (round k: every cell with c % 30 >= k, ascending), cut into files of
    ``rows_per_file`` rows, so each cell's records lie in many files."""
    C = math.prod(cards)
    c = np.arange(C, dtype=np.int64)
    nfile, total = 0, 0

    def flush(ids):
        nonlocal nfile
        digits, rest = {}, ids.copy()
        for i in reversed(range(len(cards))):
            digits[f"k{i}"] = (rest % cards[i]).astype(np.int64)
            rest //= cards[i]
        pd.DataFrame({f"k{i}": digits[f"k{i}"] for i in range(len(cards))}).to_parquet(
            root / f"part-{nfile:04d}.parquet", index=False)
        nfile += 1

    pending = np.zeros(0, np.int64)
    for k in range(30):
        pending = np.concatenate([pending, c[c % 30 >= k]])
        while pending.size >= rows_per_file:
            flush(pending[:rows_per_file])
            total += rows_per_file
            pending = pending[rows_per_file:]
    if pending.size:
        flush(pending)
        total += pending.size
    return C, total, nfile


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_larger_than_worker_memory(tmp_path):
    """12.1 M records in 25 Parquet files, 8 int64 key columns: 777 MB in memory as read (97 MB
    more as int64 cell ids), against workers limited to 400 MiB each (about half of it); the cells
    merge in 13 ranges (at most 1 M cells each). Counts known by construction; the per-worker peak
    RSS is sampled every 50 ms. The workers are fresh ones, the shared cluster's settings: what
    earlier tests left in the shared workers (imported modules, a scan's caches) is not this
    count's memory."""
    cards = (2, 8, 6, 17, 10, 12, 2, 2)
    C, N, nfiles = _write_big(tmp_path, cards, 500_000)
    assert nfiles == 25 and N * 8 * len(cards) > 1.8 * WORKER_MEMORY_BYTES
    keys = [f"k{i}" for i in range(len(cards))]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  memory_limit=WORKER_MEMORY, silence_logs=40,
                                  env={"ARROW_DEFAULT_MEMORY_POOL": "system"}) as cluster, \
            distributed.Client(cluster) as client:
        _count_within_worker_memory(client, str(tmp_path), keys, C, N)


def _count_within_worker_memory(client, path, keys, C, N):
    pids = client.run(os.getpid)
    peak = {a: 0 for a in pids}
    stop = threading.Event()

    def sample():
        import psutil
        procs = {a: psutil.Process(p) for a, p in pids.items()}
        while not stop.is_set():
            for a, pr in procs.items():
                try:
                    peak[a] = max(peak[a], pr.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.05)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        t = build_table(path, keys, backend="dask")
    finally:
        stop.set()
        th.join()
    assert client.run(os.getpid) == pids, "a worker was restarted"
    assert t.radix and t.n == N
    assert t.freq_of_freq() == {r: C // 30 for r in range(1, 31)}
    np.testing.assert_array_equal(t.cell_id, np.arange(C))
    np.testing.assert_array_equal(t.f, 1 + np.arange(C) % 30)
    assert max(peak.values()) < WORKER_MEMORY_BYTES, {a: v / 2**20 for a, v in peak.items()}


def test_cli_assess_parquet_dir_on_existing_scheduler(client, tmp_path):
    frame = read_table(data_path("sdcmicro/testdata.csv"))
    d = tmp_path / "pq"
    d.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 4)):
        frame.iloc[part].to_parquet(d / f"part.{i}.parquet", index=False)
    keys = "urbrur,water,sex,age"
    args = ["assess", str(d), "--keys", keys, "--weights", "sampling_weight", "--fraction", "0.01",
            "--json"]
    a = json.loads(run_cli(*args, check=True).stdout)
    b = json.loads(run_cli(*args, "--backend", "dask", "--scheduler", client.scheduler.address,
                           check=True).stdout)
    assert a.pop("backend") == "pandas" and b.pop("backend") == "dask"
    assert_same_docs(a, b)
    assert a["freq_of_freq"]["1"] == 330  # sdcMicro: 330 records with fk = 1


def test_cli_bad_backends():
    p = run_cli("assess", "example:adult", "--keys", "age,sex", "--backend", "cudf")
    assert p.returncode == 2
    assert p.stderr.startswith("gpurisk: error: backend 'cudf' needs") and p.stderr.count("\n") == 1
    p = run_cli("assess", "example:adult", "--keys", "age,sex", "--backend", "spark")
    assert p.returncode == 2 and "is not one of auto, pandas, dask, cudf, dask-cudf" in p.stderr
    p = run_cli("assess", "example:adult", "--keys", "age,sex", "--backend", "dask",
                "--scheduler", "tcp://127.0.0.1:9")
    assert p.returncode == 2 and "cannot reach the Dask scheduler" in p.stderr


@pytest.mark.slow
def test_cli_csv_glob_on_a_local_cluster(tmp_path):
    """--workers 2: a local cluster started for the run; a CSV glob read partition-wise."""
    frame = read_table(data_path("arx_bench/fars_subset.csv"))
    for i, part in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[part].to_csv(tmp_path / f"fars_{i}.csv", sep=";", index=False)
    args = ["assess", str(tmp_path / "fars_*.csv"), "--keys", "iage,isex,istatenum,irace",
            "--fraction", "0.1", "--json"]
    a = json.loads(run_cli(*args, check=True).stdout)
    b = json.loads(run_cli(*args, "--backend", "dask", "--workers", "2", check=True,
                           subprocess=True).stdout)     # a process with no Dask client of its own
    assert a.pop("backend") == "pandas" and b.pop("backend") == "dask"
    assert_same_docs(a, b)
    assert a["n"] == len(frame)


def test_range_buckets_of_a_skewed_register_hold_equal_shares(client):
    """Skewed keys (probabilities ~ 1/rank^1.1, as in bench_register_scan) put a third of the
    records in one of 8 equal-width ranges of the cells; the ranges cut at the splitters pass 1
    finds hold at most 1.5x an eighth of them each, so no merge holds much more than its share of
    the cells. The counts are those of pandas either way."""
    import contextlib

    from gpurisk.freq import partial as P
    from gpurisk.freq._dask import summary_dask
    from gpurisk.freq.plan import encode_words
    rng = np.random.default_rng(40)
    cols = {}
    for i, c in enumerate([120, 12, 100, 6, 50, 80]):
        p = 1.0 / np.arange(1, c + 1) ** 1.1
        cols[f"k{i}"] = rng.choice(c, size=160_000, p=p / p.sum())
    frame = pd.DataFrame(cols)
    frame["s"] = rng.random(len(frame)) < 0.05
    keys = list(cols)
    ddf = client.persist(dd.from_pandas(frame, npartitions=8, sort=False))
    plan, parts = summary_dask(lambda: contextlib.nullcontext(client), ddf, keys, sample_flag="s",
                               buckets=8)
    records = np.array([b["N"] for b in parts])
    assert records.sum() == len(frame) and records.max() <= 1.5 * len(frame) / 8
    equal_width = np.bincount(P.bucket_ids(np, encode_words(plan, frame), plan.bucket_width(8)),
                              minlength=8)
    assert equal_width.max() > 2.5 * len(frame) / 8      # what the splitters avoid
    ref = summary_of_table(build_table(frame, keys, sample_flag="s")).to_dict()
    got = summarize(ddf, keys, sample_flag="s", buckets=8).to_dict()
    assert {k: v for k, v in got.items() if k not in ("backend", "buckets")} == \
        {k: v for k, v in ref.items() if k not in ("backend", "buckets")}
