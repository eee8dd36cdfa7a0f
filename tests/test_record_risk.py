"""Record-level risk (SPEC §5): the record-risk command, the r1..b1 measures, the Parquet writer, and
a validation on a real file used as the population."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from conftest import data_path, run_cli
from gpurisk.workflows.assess import assess
from gpurisk.errors import BadInput
from gpurisk.freq.engine import build_table
from gpurisk.measures import search_methods as sm
from gpurisk.models.record_risk import build_model, record_risk, summarize, write_records

ADULT_KEYS = ["age", "sex", "race", "marital-status", "education"]


@pytest.fixture(scope="module")
def adult():
    return pd.read_csv(data_path("uci_adult/adult_full_48842.csv"), usecols=ADULT_KEYS + ["relationship"])


@pytest.fixture(scope="module")
def adult_sample(adult):
    return adult.sample(n=4000, random_state=7).reset_index(drop=True)


def test_cli_writes_one_row_per_sample_unique(adult_sample, tmp_path):
    src = tmp_path / "s.csv"
    adult_sample.to_csv(src, index=False)
    out = tmp_path / "risks.parquet"
    N = 400_000
    proc = run_cli("record-risk", src, "--keys", ",".join(ADULT_KEYS), "--population-size", N,
                   "--output", out, "--json", check=True, subprocess=True)
    doc = json.loads(proc.stdout)
    risks = pd.read_parquet(out)
    # sample uniques found independently with pandas
    sizes = adult_sample.groupby(ADULT_KEYS, dropna=False)[ADULT_KEYS[0]].transform("size")
    su_rows = np.flatnonzero(sizes.to_numpy() == 1)
    assert np.array_equal(np.sort(risks["row"].to_numpy()), su_rows)
    assert list(risks.columns) == ["row", "f", "p_hat", "r1", "r1u", "r2", "b1"]
    assert (risks["f"] == 1).all() and len(risks) == doc["sample_uniques"] == doc["output"]["rows"]
    # every column follows its formula from p̂ (N given, n = 4000)
    p = risks["p_hat"].to_numpy()
    assert np.allclose(risks["r2"], 1 / (1 + (N - 1) * p), rtol=1e-12)
    assert np.allclose(risks["b1"], 1 / (1 + (N - 4000) * p), rtol=1e-12)
    assert np.allclose(risks["r1u"], sm.r1_risk(p, N - 4000 + 1), rtol=1e-12)
    # the summary is the file-level view of the same rows
    for m in ("r1", "r1u", "r2", "b1"):
        s = doc["methods"][m]
        assert s["sum"] == pytest.approx(risks[m].sum(), rel=1e-10)
        assert s["max"] == pytest.approx(risks[m].max(), rel=1e-12)
        assert s["above"]["0.1"] == int((risks[m] > 0.1).sum())
        assert s["above"]["0.5"] == int((risks[m] > 0.5).sum())
    # Table 3 rows: the minimum / median / maximum p̂ among the sample uniques
    t3 = {r["which"]: r for r in doc["table3"]}
    srt = np.sort(p)
    assert t3["minimum"]["p_hat"] == pytest.approx(srt[0])
    assert t3["median"]["p_hat"] == pytest.approx(srt[(srt.size - 1) // 2])
    assert t3["maximum"]["p_hat"] == pytest.approx(srt[-1])
    assert risks.loc[risks["row"] == t3["minimum"]["row"], "p_hat"].item() == pytest.approx(srt[0])
    assert doc["ipf"]["converged"] and doc["ipf"]["iterations"] >= 1
    assert "key" not in t3["minimum"]


def test_cli_show_records_prints_keys_only_when_asked(adult_sample, tmp_path):
    src = tmp_path / "s.csv"
    adult_sample.to_csv(src, index=False)
    args = ["record-risk", src, "--keys", ",".join(ADULT_KEYS), "--fraction", 0.01]
    t3 = json.loads(run_cli(*args, "--show-records", "--json", check=True).stdout)["table3"]
    for r in t3:
        row = adult_sample.iloc[r["row"]]
        assert r["key"] == {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in ADULT_KEYS}
    assert all("key" not in r for r in json.loads(run_cli(*args, "--json", check=True).stdout)["table3"])
    flat = lambda s: "".join(s.split()).replace("│", "")  # noqa: E731 - rich wraps long cells
    plain = flat(run_cli(*args, check=True).stdout)
    shown = flat(run_cli(*args, "--show-records", check=True).stdout)
    edu = "education=" + "".join(str(adult_sample.iloc[t3[0]["row"]]["education"]).split())
    assert "Table3" in plain and "expectedcorrectids" in plain
    assert "education=" not in plain and edu in shown


def test_cli_errors(adult_sample, tmp_path):
    src = tmp_path / "s.csv"
    adult_sample.to_csv(src, index=False)
    keys = ",".join(ADULT_KEYS)
    p = run_cli("record-risk", src, "--keys", keys)
    assert p.returncode == 2 and "population size N" in p.stderr
    p = run_cli("record-risk", src, "--keys", keys, "--population-size", 1e6, "--max-cells", 1000)
    cards = [adult_sample[k].nunique() for k in ADULT_KEYS]
    shape = " × ".join(f"{c} ({k})" for c, k in zip(cards, ADULT_KEYS)) + f" = {math.prod(cards):,} cells"
    assert p.returncode == 2 and f"K = {shape}" in p.stderr and "max_cells = 1,000" in p.stderr
    p = run_cli("record-risk", src, "--keys", keys, "--population-size", 1e6, "--methods", "r1,r3")
    assert p.returncode == 2 and "r3 needs y" in p.stderr
    p = run_cli("record-risk", src, "--keys", keys, "--population-size", 100)
    assert p.returncode == 2 and "smaller than the sample size" in p.stderr
    p = run_cli("record-risk", src, "--keys", keys, "--population-size", 1e6, "--methods", "r7")
    assert p.returncode == 2 and "unknown search method 'r7'" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_all_records_and_r3_r4(adult_sample, tmp_path):
    out = tmp_path / "all.parquet"
    N = 1_000_000
    doc = record_risk(adult_sample, ADULT_KEYS, population_size=N, methods=["r1u", "r3", "r4"],
                      y=500, database_size=2001, all_records=True, output=out)
    risks = pd.read_parquet(out)
    assert len(risks) == len(adult_sample) and np.array_equal(risks["row"], np.arange(len(adult_sample)))
    sizes = adult_sample.groupby(ADULT_KEYS)[ADULT_KEYS[0]].transform("size").to_numpy()
    assert np.array_equal(risks["f"].to_numpy(), sizes)
    assert risks["r1u"].isna().to_numpy().tolist() == (sizes > 1).tolist()  # defined for uniques only
    p = risks["p_hat"].to_numpy()
    assert np.allclose(risks["r3"], 1 / (1 + (N - 1 - 500) * p))
    assert np.allclose(risks["r4"], 1 / (1 + (N - 2001) * p))
    assert doc["methods"]["r3"]["records"] == len(adult_sample)
    assert doc["methods"]["r1u"]["records"] == int((sizes == 1).sum())
    assert doc["methods"]["r3"]["sum"] == pytest.approx(risks["r3"].sum())


def test_writer_chunks_give_the_same_file(adult_sample, tmp_path):
    t = build_table(adult_sample, ADULT_KEYS)
    model = build_model(t, ("r1", "r2"), population_size=500_000)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    n1 = write_records(model, a, all_records=True, chunk=1 << 20)
    n2 = write_records(model, b, all_records=True, chunk=333)
    import pyarrow.parquet as pq
    assert n1 == n2 == len(adult_sample)
    assert pq.ParquetFile(b).metadata.num_row_groups == math.ceil(len(adult_sample) / 333)
    pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))


def test_for_ids_matches_for_cells(adult_sample):
    # the partition-wise entry point: records given by their mixed-radix cell ids
    t = build_table(adult_sample, ADULT_KEYS)
    model = build_model(t, ("r1", "r1u", "b1"), population_size=500_000, p_tilde=1e-5)
    cells = t.record_cell()
    a = model.for_cells(cells)
    b = model.for_ids(t.cell_id[cells])
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert np.allclose(a["b1"], 1 / (1 + (500_000 - t.n) * 1e-5))   # p̃ given


def test_sample_flag_rows_are_register_rows(adult, tmp_path):
    reg = adult[ADULT_KEYS].copy()
    reg["s"] = np.random.default_rng(3).random(len(reg)) < 0.1
    out = tmp_path / "r.parquet"
    doc = record_risk(reg, ADULT_KEYS, sample_flag="s", output=out)
    assert doc["N"] == len(reg) and doc["N_source"] == "population"
    risks = pd.read_parquet(out)
    assert reg["s"].to_numpy()[risks["row"]].all()
    # F column: the population count of each record's cell, computed here with pandas
    Fk = reg.groupby(ADULT_KEYS)[ADULT_KEYS[0]].transform("size").to_numpy()
    assert np.array_equal(risks["F"].to_numpy(), Fk[risks["row"]])
    assert "F" in doc["table3"][0] and doc["table3"][0]["F"] >= 1


def test_measures_in_assess_agree_with_record_risk(adult_sample):
    opts = {"record_risk": {"population_size": 400_000}, "r3": {"y": 10}}
    res = assess(adult_sample, ADULT_KEYS, measures=["r1", "r1u", "r2", "r3", "r4", "b1"], options=opts)
    doc = record_risk(adult_sample, ADULT_KEYS, population_size=400_000, methods=["r1", "r1u", "r2", "r3", "b1"],
                      y=10)
    for m in ("r1", "r1u", "r2", "r3", "b1"):
        r = res.measures[m]
        assert r.value == pytest.approx(doc["methods"][m]["sum"], rel=1e-12)
        assert r.extra["records"] == doc["sample_uniques"]
        assert r.extra["above_0.5"] == doc["methods"][m]["above"]["0.5"]
        assert r.extra["iterations"] == doc["ipf"]["iterations"]
    assert res.measures["r4"].value is None and "database size" in res.measures["r4"].reason
    # the IPF ran once for the six measures (cached on the table)
    fits = res.table.cached("_gpurisk_loglinear_fits", dict)    # the cache the table owns
    assert len(fits) == 1


def test_measures_not_applicable_reasons(adult_sample):
    res = assess(adult_sample, ADULT_KEYS, measures=["r1"])
    assert res.measures["r1"].value is None and "population size N" in res.measures["r1"].reason
    res = assess(adult_sample, ADULT_KEYS, fraction=0.01, measures=["r1"],
                 options={"record_risk": {"max_cells": 1000}})
    K = math.prod(adult_sample[k].nunique() for k in ADULT_KEYS)
    assert res.measures["r1"].value is None and f"{K:,} cells" in res.measures["r1"].reason
    res = assess(adult_sample, ADULT_KEYS, fraction=0.01, measures=["r1", "r2"])
    assert res.measures["r1"].extra["N"] == pytest.approx(4000 / 0.01)


def test_api_bad_inputs(adult_sample):
    with pytest.raises(BadInput, match="p_tilde"):
        record_risk(adult_sample, ADULT_KEYS, population_size=1e6, methods=["b1"], p_tilde=2)
    with pytest.raises(BadInput, match="r4: database size"):
        record_risk(adult_sample, ADULT_KEYS, population_size=1e6, methods=["r4"], database_size=2e6)


def test_real_population_validation_adult(adult):
    """adult (48 842) as the population, a 10 % Bernoulli sample: the model's expected number of
    correct identifications Σ r1u over sample uniques against the truth Σ 1/F_j."""
    reg = adult[ADULT_KEYS].copy()
    reg["s"] = np.random.default_rng(0).random(len(reg)) < 0.10
    t = build_table(reg, ADULT_KEYS, sample_flag="s")
    model = build_model(t, ("r1u", "r2"))
    su = np.flatnonzero(t.f == 1)
    truth = float((1.0 / t.F[su]).sum())
    r1u = model.risks(model.p_cell[su])["r1u"]
    assert 0.6 < r1u.sum() / truth < 1.4
    # calibration by decile: the riskiest tenth (by r1u) is about as risky as predicted (0.91 vs
    # 0.92 with this seed), the least risky tenth far below the mean of the sample uniques
    order = np.argsort(-r1u)
    d = su.size // 10
    true_risk = 1.0 / t.F[su]
    assert abs(true_risk[order[:d]].mean() - r1u[order[:d]].mean()) < 0.1
    assert true_risk[order[-d:]].mean() < 0.5 * true_risk.mean()
    # and using a wrong N (ten times too large) would have missed the truth by far
    wrong = sm.r1u_risk(model.p_cell[su], 10 * t.N, t.n).sum()
    assert not 0.6 < wrong / truth < 1.4


def test_categories_absent_from_the_sample_change_nothing(adult, adult_sample):
    # with the whole file as the population, categories only the population has (and empty
    # categories of any encoding) are left out of the log-linear table: same K, same p̂
    small = adult_sample.iloc[:1500]
    alone = build_model(build_table(small, ADULT_KEYS), ("r2",), population_size=len(adult))
    with_pop = build_model(build_table(small, ADULT_KEYS, population=adult[ADULT_KEYS]), ("r2",))
    assert with_pop.table.cards != alone.table.cards          # the population adds categories
    assert with_pop.fit.K == alone.fit.K == math.prod(small[k].nunique() for k in ADULT_KEYS)
    pa = alone.p_cell[alone.table.record_cell()]
    pb = with_pop.p_cell[with_pop.table.record_cell()]
    np.testing.assert_allclose(pa, pb, rtol=1e-12)
    assert np.all(with_pop.p_cell[with_pop.table.f == 0][:1000] >= 0)


def test_summary_over_every_record_counts_records_not_cells(adult_sample):
    t = build_table(adult_sample, ADULT_KEYS)
    model = build_model(t, ("r2",), population_size=1e5)
    doc = summarize(model, all_records=True)
    p = model.p_cell[t.record_cell()]
    r = 1 / (1 + (1e5 - 1) * p)
    assert doc["methods"]["r2"]["sum"] == pytest.approx(r.sum(), rel=1e-12)
    assert doc["methods"]["r2"]["records"] == len(adult_sample)
    assert doc["methods"]["r2"]["above"]["0.1"] == int((r > 0.1).sum())


def test_id_columns_join_the_risks_back_to_the_file(tmp_path):
    """record-risk -o FILE --id COL (repeatable or comma list) copies COL of each record next to its
    risks, so ``merge(on=COL)`` gives each record of the user's file its risk (issue 20)."""
    td = data_path("sdcmicro/testdata.csv")
    out = tmp_path / "r.parquet"
    p = run_cli("record-risk", td, "--keys", "urbrur,water,sex,age", "--fraction", "0.01",
                "-o", out, "--id", "ori_hid,relat", "--id", "expend", "--json", check=True)
    assert json.loads(p.stdout)["output"]["id_columns"] == ["ori_hid", "relat", "expend"]
    risks = pd.read_parquet(out)
    assert list(risks.columns[:4]) == ["ori_hid", "relat", "expend", "row"]
    data = pd.read_csv(td)
    for col in ("ori_hid", "relat", "expend"):
        assert (data[col].to_numpy()[risks["row"]] == risks[col].to_numpy()).all()
    joined = data.reset_index().merge(risks, left_on="index", right_on="row")
    assert len(joined) == len(risks) == 330


@pytest.mark.parametrize("args, needle", [
    (["--id", "nope", "-o", "{out}"], "'nope' not in"),
    (["--id", "ori_hid"], "give -o FILE.parquet too"),
    (["--id", "ori_hid,ori_hid", "-o", "{out}"], "more than once"),
])
def test_id_column_errors(tmp_path, args, needle):
    td = data_path("sdcmicro/testdata.csv")
    args = [a.replace("{out}", str(tmp_path / "r.parquet")) for a in args]
    p = run_cli("record-risk", td, "--keys", "urbrur,water,sex,age", "--fraction", "0.01", *args)
    assert p.returncode == 2 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.parquet").exists()
