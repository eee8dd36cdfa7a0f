"""gpurisk compare: before -> after tables equal scans with and without the recodes."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.scan.compare import compare

from conftest import data_path, run_cli

KEYS = ["sex", "age", "race", "marital-status"]


def test_compare_columns_equal_separate_scans():
    df = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    df["s"] = np.random.default_rng(2).random(len(df)) < 0.2
    hier = data_path("arx/adult_hierarchy_marital-status.csv")
    alts = ["age=bands:5", f"marital-status=hierarchy:{hier}:1"]
    res = compare(df, KEYS, alts, cumulative=True, sample_flag="s")
    t = res.table
    assert res.uniques == "N1" and len(t) == 15
    base = gpurisk.scan(df, keys=KEYS, max_size=4, sample_flag="s",
                        measures=["pop_uniques", "pr_pu", "theta_hat"]).results
    both = gpurisk.scan(df, keys=KEYS, max_size=4, sample_flag="s", recode=alts,
                        measures=["pop_uniques", "pr_pu", "theta_hat"]).results
    labels = ["original"] + [a.name for a in res.alternatives]
    np.testing.assert_array_equal(t[f"N1 [{labels[0]}]"], base["N1"])
    np.testing.assert_array_equal(t[f"N1 [{labels[2]}]"], both["N1"])      # cumulative: both recodes
    np.testing.assert_allclose(t[f"theta_hat [{labels[2]}]"], both["theta_hat"], equal_nan=True)
    # grouping never creates uniques (Kim & Jeong Tables 3-5 only go down)
    assert (t[f"N1 [{labels[1]}]"] <= t[f"N1 [{labels[0]}]"]).all()
    assert (t[f"N1 [{labels[2]}]"] <= t[f"N1 [{labels[1]}]"]).all()
    assert res.affected()["keys"].map(lambda k: "age" in k or "marital-status" in k).all()


def test_cli_compare_json():
    path = data_path("arx/adult.csv")
    p = run_cli("compare", path, "--keys", ",".join(KEYS), "--fraction", "0.1", "--alt", "age=bands:5",
                "--alt", "age=bands:10", "--measures", "sample_uniques,theta_hat", "--json", check=True,
                subprocess=True)
    doc = json.loads(p.stdout)
    assert doc["uniques"] == "n1" and doc["alternatives"] == ["age=bands:5", "age=bands:10"]
    rows = {tuple(r["keys"]): r for r in doc["rows"]}
    assert ("sex",) not in rows and ("race", "marital-status") not in rows   # age not in them
    r = rows[("sex", "age", "race", "marital-status")]["n1"]
    assert r["original"] >= r["age=bands:5"] >= r["age=bands:10"] and r["original"] > r["age=bands:10"]
    with pytest.raises(gpurisk.BadInput, match="'income'"):
        compare(path, ["sex", "age"], ["income=bands:5"])
