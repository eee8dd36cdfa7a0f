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
    # a register: compare shows the exact θ and E (issue 40), recoded on the population too
    assert res.columns == ["N1", "pr_pu", "matches", "theta"]
    base = gpurisk.scan(df, keys=KEYS, max_size=4, sample_flag="s",
                        measures=["pop_uniques", "pr_pu", "theta"]).results
    both = gpurisk.scan(df, keys=KEYS, max_size=4, sample_flag="s", recode=alts,
                        measures=["pop_uniques", "pr_pu", "theta", "matches"]).results
    labels = ["original"] + [a.name for a in res.alternatives]
    np.testing.assert_array_equal(t[f"N1 [{labels[0]}]"], base["N1"])
    np.testing.assert_array_equal(t[f"N1 [{labels[2]}]"], both["N1"])      # cumulative: both recodes
    np.testing.assert_allclose(t[f"theta [{labels[2]}]"], both["theta"], equal_nan=True)
    np.testing.assert_allclose(t[f"matches [{labels[2]}]"], both["matches"], equal_nan=True)
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


def _small(tmp_path):
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"a": rng.integers(0, 40, 500), "b": rng.integers(0, 3, 500),
                       "s": rng.random(500) < 0.3})
    df.to_csv(tmp_path / "d.csv", index=False)
    return df


def test_compare_shows_only_the_measures_that_apply(tmp_path):
    """Issue 28: without a population compare printed a pr_pu table of "—" on every row. Now a
    measure that applies to no row under any coding is left out, in one line saying why."""
    df = _small(tmp_path)
    p = run_cli("compare", tmp_path / "d.csv", "--keys", "a,b", "--alt", "a=bands:10", check=True)
    lines = p.stdout.splitlines()
    left = [ln for ln in lines if ln.startswith("left out")]
    assert len(left) == 1
    assert "pr_pu (needs population counts" in left[0]
    assert "matches_hat, theta_hat (needs the sampling fraction" in left[0]
    assert not any(ln.startswith(("pr_pu:", "theta_hat:", "matches_hat:")) for ln in lines)
    assert "—" not in p.stdout                          # no column of "not applicable" cells
    # the n1 table holds the independent count of sample uniques under the original coding
    n1_ab = int((df[["a", "b"]].value_counts() == 1).sum())
    assert any(ln.split("│")[2].strip() == "a, b" and ln.split("│")[3].strip().startswith(f"{n1_ab} →")
               for ln in lines if ln.count("│") >= 4)
    # with π: θ̂ and matches_hat apply, pr_pu still not (JSON says so)
    doc = json.loads(run_cli("compare", tmp_path / "d.csv", "--keys", "a,b", "--alt", "a=bands:10",
                             "--fraction", "0.1", "--json", check=True).stdout)
    assert set(doc["left_out"]) == {"pr_pu"}
    assert set(doc["rows"][0]) >= {"n1", "matches_hat", "theta_hat"} and "pr_pu" not in doc["rows"][0]


def test_compare_help_lists_the_default_columns_truthfully(tmp_path):
    _small(tmp_path)
    help_text = " ".join(run_cli("compare", "--help", check=True).stdout.split())
    # with a population (here: a sample flag) every default applies, the exact E and θ in place of
    # the estimates (issue 40): the help names each column
    res = compare(str(tmp_path / "d.csv"), ["a", "b"], ["a=bands:10"], sample_flag="s")
    assert res.columns == ["N1", "pr_pu", "matches", "theta"] and res.left_out == {}
    for col in ["N1 (pop_uniques)", "n1 (sample_uniques)", "pr_pu", "matches_ll", "matches_hat",
                "theta_hat", "exact matches, theta"]:
        assert col in help_text, col
    res = compare(str(tmp_path / "d.csv"), ["a", "b"], ["a=bands:10"], fraction=0.2)
    assert res.columns == ["n1", "matches_ll", "matches_hat", "theta_hat"] and list(res.left_out) == ["pr_pu"]
    assert not any(c.startswith("pr_pu") for c in res.table.columns)
