"""Where π comes from when it is not given (issue 28): design weights that sum to the population
(w = 1/π_i, as in sdcMicro's testdata, weight 100) give π = n/Σw, said as fraction_source "n/Σw", so
θ̂ and τ̂1 run; and a census (π = 1) without a population takes F = f instead of asking for one.
References: sdcMicro 5.8.1's fk/Fk for testdata (../shared/data/sdcmicro/reference) and hand counts."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpurisk

from conftest import data_path, run_cli

KEYS = ["urbrur", "water", "sex", "age"]


@pytest.fixture(scope="module")
def testdata():
    return pd.read_csv(data_path("sdcmicro/testdata.csv"))


@pytest.fixture(scope="module")
def sdcmicro_ref():
    return pd.read_csv(data_path("sdcmicro/reference/testdata_w_fk_Fk_risk.csv"))


def _theta_hat(pi, n1, n2):       # Skinner & Elliot eq. 7
    return pi * n1 / (pi * n1 + 2 * (1 - pi) * n2)


def test_weights_summing_to_the_population_give_pi(testdata, sdcmicro_ref):
    ref = sdcmicro_ref
    # sdcMicro's references: F_k (sum of weights in the cell) per record; each cell's F_k once is
    # Σ F_k / f_k over records, the population the weights stand for
    N_hat = float((ref["Fk"] / ref["fk"]).sum())
    n1 = int((ref["fk"] == 1).sum())                 # cells with f = 1 (one record each)
    n2 = int((ref["fk"] == 2).sum()) // 2            # records in cells of two, halved
    pi = len(testdata) / N_hat
    assert pi == pytest.approx(0.01)                 # weight 100 -> π = 0.01
    a = gpurisk.assess(testdata, KEYS, weights="sampling_weight",
                       measures=["theta_hat", "tau1_hat", "sample_uniques", "indiv_risk"])
    assert a.context.fraction == pytest.approx(pi, rel=1e-12)
    assert a.context.fraction_source == "n/Σw"
    m = a.measures
    assert m["sample_uniques"].value == n1
    assert m["theta_hat"].value == pytest.approx(_theta_hat(pi, n1, n2), rel=1e-12)
    assert m["tau1_hat"].reason is None or "needs the sampling fraction" not in m["tau1_hat"].reason
    # the same as π given by hand
    given = gpurisk.assess(testdata, KEYS, fraction=0.01, weights="sampling_weight",
                           measures=["theta_hat"])
    assert m["theta_hat"].value == pytest.approx(given.measures["theta_hat"].value, rel=1e-12)
    # sdcMicro's global risk from the same weights is unchanged (it reads F from the weights)
    assert m["indiv_risk"].value == pytest.approx(ref["risk"].mean(), rel=1e-6)


def test_cli_and_scan_say_where_pi_came_from(testdata, tmp_path):
    path = data_path("sdcmicro/testdata.csv")
    doc = json.loads(run_cli("assess", path, "--keys", ",".join(KEYS), "--weights",
                             "sampling_weight", "--measures", "theta_hat", "--json",
                             check=True).stdout)
    assert doc["fraction"] == pytest.approx(0.01) and doc["fraction_source"] == "n/Σw"
    assert doc["measures"]["theta_hat"]["value"] is not None
    text = run_cli("assess", path, "--keys", ",".join(KEYS), "--weights", "sampling_weight",
                   "--measures", "theta_hat", check=True).stdout
    assert "π = 0.01 (n/Σw)" in text
    res = gpurisk.scan(testdata, keys=KEYS, max_size=2, weights="sampling_weight",
                       measures=["theta_hat"])
    r = res.results
    assert res.settings["fraction_source"] == "n/Σw" and r["theta_hat"].notna().any()
    assert not r["theta_hat_reason"].fillna("").str.contains("needs the sampling fraction").any()


def test_normalised_weights_give_no_pi(testdata):
    df = testdata.assign(w=testdata["sampling_weight"] / testdata["sampling_weight"].mean())
    a = gpurisk.assess(df, KEYS, weights="w", measures=["theta_hat"])
    assert a.context.fraction is None
    assert "needs the sampling fraction" in a.measures["theta_hat"].reason


def test_a_census_takes_F_from_the_file(testdata):
    counts = testdata[KEYS].value_counts()
    n1 = int((counts == 1).sum())
    names = ["pop_uniques", "theta", "tau1", "pr_pu", "sample_uniques"]
    a = gpurisk.assess(testdata, KEYS, fraction=1, measures=names)
    m = a.measures
    assert a.table.N == len(testdata)
    assert m["pop_uniques"].value == n1                # every sample unique is a population unique
    assert m["tau1"].value == n1
    assert m["theta"].value == 1.0                     # eq. 2 with F = f
    assert m["pr_pu"].value == pytest.approx(n1 / len(testdata))      # Pr(PU) = N1 / N, N = n
    # without π = 1 the population measures still ask for a population
    b = gpurisk.assess(testdata, KEYS, fraction=0.5, measures=["pop_uniques"])
    assert "needs population counts" in b.measures["pop_uniques"].reason
    r = gpurisk.scan(testdata, keys=KEYS, max_size=1, fraction=1, measures=["pop_uniques"]).results
    per_key = [int((testdata[k].value_counts() == 1).sum()) for k in sorted(KEYS)]
    assert r["N1"].tolist() == r["n1"].tolist() and sorted(r["n1"]) == sorted(per_key)


def test_pi_from_weights_on_dask_as_on_pandas(testdata):
    pytest.importorskip("dask.dataframe")
    path = data_path("sdcmicro/testdata.csv")
    args = ["assess", path, "--keys", ",".join(KEYS), "--weights", "sampling_weight",
            "--measures", "theta_hat", "--json"]
    pandas_doc = json.loads(run_cli(*args, check=True).stdout)
    dask_run = run_cli(*args, "--backend", "dask", check=True)
    dask_doc = json.loads(dask_run.stdout[dask_run.stdout.index("{"):])
    assert dask_doc["fraction_source"] == pandas_doc["fraction_source"] == "n/Σw"
    assert dask_doc["fraction"] == pytest.approx(pandas_doc["fraction"], rel=1e-12)
    assert dask_doc["measures"]["theta_hat"]["value"] == \
        pytest.approx(pandas_doc["measures"]["theta_hat"]["value"], rel=1e-12)


def test_a_census_takes_F_from_the_file_on_dask_as_on_pandas():
    """--fraction 1 on the Dask summary path (and its bucket measures) as on pandas: the population
    measures run with F = f; the numbers agree with a hand count of the file's sample uniques."""
    pytest.importorskip("dask.dataframe")
    path = data_path("sdcmicro/testdata.csv")
    n1 = int((pd.read_csv(path)[KEYS].value_counts() == 1).sum())
    names = "pop_uniques,theta,tau1,pr_pu,sample_uniques,journalist"
    args = ["assess", path, "--keys", ",".join(KEYS), "--fraction", "1", "--measures", names, "--json"]
    docs = {}
    for backend in ("pandas", "dask"):
        out = run_cli(*args, "--backend", backend, "--workers", "1", check=True).stdout
        docs[backend] = json.loads(out[out.index("{"):])["measures"]
    for name in names.split(","):
        p, d = docs["pandas"][name], docs["dask"][name]
        assert p["reason"] is None and d["reason"] is None, (name, p["reason"], d["reason"])
        assert d["value"] == pytest.approx(p["value"], rel=1e-12), name
    assert docs["dask"]["pop_uniques"]["value"] == n1 and docs["dask"]["theta"]["value"] == 1.0
