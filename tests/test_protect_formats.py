"""protect on the files offices hold (issue 28): Stata .dta and SPSS .sav are read and the release
written in the same format, with the codes, variable labels and value labels of untouched columns;
SAS has no writer, so its release goes to Parquet or CSV as -o names it. A value set missing by
local suppression is marked in a KEY_suppressed column, so it is told apart from a value that was
missing before."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import data_path, run_cli

pyreadstat = pytest.importorskip("pyreadstat")

KEYS = ["urbrur", "water", "sex", "age"]


@pytest.fixture(scope="module")
def survey():
    """sdcMicro's testdata (a real survey): the four keys as numeric codes, sex value-labelled,
    and a few ages missing BEFORE protection (to be told apart from suppressed ones)."""
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))[KEYS + ["ori_hid", "hhcivil"]].astype(float)
    df.loc[df.index[:7], "age"] = np.nan
    return df


def _write(df, path):
    labels = {"sex": {1.0: "male", 2.0: "female"}}
    if path.suffix == ".sav":
        pyreadstat.write_sav(df, str(path), variable_value_labels=labels,
                             column_labels=["urban or rural", "", "sex of person", "age in years", "", ""])
    else:
        pyreadstat.write_dta(df, str(path), variable_value_labels={"sex": {1: "male", 2: "female"}},
                             column_labels=["urban or rural", "", "sex of person", "age in years", "", ""])


def _read(path):
    return (pyreadstat.read_sav if path.suffix == ".sav" else pyreadstat.read_dta)(str(path))


@pytest.mark.parametrize("suffix", [".sav", ".dta"])
def test_protect_reads_and_writes_stata_and_spss_and_marks_suppressed_values(tmp_path, survey, suffix):
    src = tmp_path / f"survey{suffix}"
    _write(survey, src)
    out = tmp_path / f"release{suffix}"
    plan = tmp_path / "plan.json"
    p = run_cli("protect", src, "--keys", ",".join(KEYS), "--hierarchy", "age=bands:10",
                "--criterion", "k_anonymity>=3", "--suppress-limit", "0.05", "-o", out,
                "--plan", plan)
    assert p.returncode == 0, p.stderr
    rel, meta = _read(out)
    assert len(rel) == len(survey)
    doc = json.loads(plan.read_text())
    per_key = doc["suppress"]["values"]          # values set missing per key, from the plan
    flags = [c for c in rel.columns if c.endswith("_suppressed")]
    assert flags, "suppression happened, so some key has a flag column"
    for key in KEYS:
        col = f"{key}_suppressed"
        assert (col in rel) == (per_key[key] > 0)
        if col not in rel:
            continue
        marked = rel[col].to_numpy() == 1
        assert set(np.unique(rel[col])) <= {0, 1}
        # every marked value is missing in the release, and was present in the input
        missing = rel[key].isna() | (rel[key].astype(str) == "")
        assert missing[marked].all()
        assert survey[key].notna().to_numpy()[marked].all()
        assert int(marked.sum()) == per_key[key]
    # the ages missing before protection are missing and NOT marked
    before = survey["age"].isna().to_numpy()
    assert (rel["age"].isna() | (rel["age"].astype(str) == ""))[before].all()
    if "age_suppressed" in rel:
        assert (rel["age_suppressed"].to_numpy()[before] == 0).all()
    # untouched columns keep their codes and labels; the generalised key holds its groups' names
    node = doc["node"]
    assert np.array_equal(rel["hhcivil"].to_numpy(), survey["hhcivil"].to_numpy(), equal_nan=True)
    assert meta.column_labels[KEYS.index("sex")] == "sex of person"
    if "sex_suppressed" not in rel:
        assert {int(k): v for k, v in meta.variable_value_labels["sex"].items()} == {1: "male", 2: "female"}
    if node["age"] > 0:
        assert pd.api.types.is_string_dtype(rel["age"]) or rel["age"].dtype == object
        assert rel["age"].dropna().astype(str).str.contains("-").any()     # "30-39", not codes


def test_protect_of_a_sas_file_writes_parquet(tmp_path, survey):
    xpt = tmp_path / "survey.xpt"
    pyreadstat.write_xport(survey.fillna({"age": 0}), str(xpt))
    out = tmp_path / "release.parquet"
    p = run_cli("protect", xpt, "--keys", ",".join(KEYS), "--criterion", "k_anonymity>=1", "-o", out)
    assert p.returncode == 0, p.stderr
    rel = pd.read_parquet(out)
    assert len(rel) == len(survey) and list(rel.columns[:4]) == KEYS
    bad = run_cli("protect", xpt, "--keys", ",".join(KEYS), "--criterion", "k_anonymity>=1",
                  "-o", tmp_path / "release.xpt")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_protect_takes_a_backend_and_refuses_a_distributed_one(tmp_path, survey):
    src = tmp_path / "survey.csv"
    survey.to_csv(src, index=False)
    args = ["protect", src, "--keys", ",".join(KEYS), "--criterion", "k_anonymity>=1"]
    ok = run_cli(*args, "--backend", "pandas", "-o", tmp_path / "a.csv")
    auto = run_cli(*args, "--backend", "auto", "-o", tmp_path / "b.csv")
    assert ok.returncode == auto.returncode == 0, ok.stderr + auto.stderr
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    for bad, why in (("dask", "needs each record's cell"), ("spark", "is not one of auto, pandas, cudf")):
        p = run_cli(*args, "--backend", bad, "-o", tmp_path / "c.csv")
        assert p.returncode == 2 and why in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "c.csv").exists()
