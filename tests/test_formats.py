"""Reading Stata, SPSS and SAS files (value labels as categories) and writing results files."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk import BadInput, read_table, write_results

from conftest import data_path, run_cli

KEYS = ["urbrur", "water", "sex", "age"]
SEX = {1: "male", 2: "female"}
WATER = {i: f"source {i}" for i in range(1, 9)}


@pytest.fixture(scope="module")
def testdata():
    return pd.read_csv(data_path("sdcmicro/testdata.csv"))


def _labelled(df):
    out = df[KEYS + ["sampling_weight", "ori_hid"]].copy()
    out["sex"] = pd.Categorical(df["sex"].map(SEX), categories=["male", "female"])
    out["water"] = pd.Categorical(df["water"].map(WATER), categories=list(WATER.values()))
    return out


def _same_partition(a: pd.DataFrame, b: pd.DataFrame, keys):
    ta, tb = gpurisk.build_table(a, keys), gpurisk.build_table(b, keys)
    assert sorted(ta.f.tolist()) == sorted(tb.f.tolist())
    np.testing.assert_array_equal(ta.record_counts(), tb.record_counts())


def test_stata_value_labels_become_categories(tmp_path, testdata):
    p = tmp_path / "t.dta"
    _labelled(testdata).to_stata(p, write_index=False)
    back = read_table(p)
    assert isinstance(back["sex"].dtype, pd.CategoricalDtype)
    assert set(back["sex"].cat.categories) == {"male", "female"}
    assert (back["sex"].astype(str) == testdata["sex"].map(SEX)).all()
    _same_partition(back, testdata, KEYS)
    only = read_table(p, columns=["sex", "age"])
    assert list(only.columns) == ["sex", "age"]
    # the same answer as from the CSV
    a = gpurisk.assess(str(p), KEYS, fraction=0.01).to_dict()
    b = gpurisk.assess(testdata, KEYS, fraction=0.01).to_dict()
    assert a["measures"]["theta_hat"]["value"] == b["measures"]["theta_hat"]["value"]


def test_stata_partial_or_duplicate_labels_keep_the_codes(tmp_path):
    pyreadstat = pytest.importorskip("pyreadstat")
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, np.nan], "y": [1.0, 1.0, 2.0, 2.0], "z": [1.0, 2.0, 1.0, 2.0]})
    p = tmp_path / "p.dta"
    pyreadstat.write_dta(df, str(p), variable_value_labels={
        "x": {1: "one", 2: "two"},            # 3 has no label
        "y": {1: "same", 2: "same"},          # two codes, one label
        "z": {1: "a", 2: "b"}})
    back = read_table(p)
    assert back["x"].tolist()[:3] == [1, 2, 3] and back["x"].isna().tolist()[3]
    assert back["y"].tolist() == [1, 1, 2, 2]
    assert back["z"].astype(str).tolist() == ["a", "b", "a", "b"]


def test_spss_value_labels_and_missing(tmp_path, testdata):
    pyreadstat = pytest.importorskip("pyreadstat")
    df = testdata[KEYS + ["sampling_weight"]].astype(float)
    df.loc[5, "age"] = np.nan
    p = tmp_path / "t.sav"
    pyreadstat.write_sav(df, str(p), variable_value_labels={"sex": SEX, "water": WATER,
                                                            "urbrur": {1: "urban"}})
    back = read_table(p)
    assert isinstance(back["sex"].dtype, pd.CategoricalDtype)
    assert (back["sex"].astype(str) == testdata["sex"].map(SEX)).all()
    assert back["urbrur"].dtype.kind == "f"      # only code 1 is labelled: codes kept
    assert back["age"].isna().sum() == 1
    _same_partition(back, df, KEYS)
    assert list(read_table(p, columns=["age", "sex"]).columns) == ["age", "sex"]
    with pytest.raises(BadInput, match=r"column\(s\) 'nope' not in"):
        read_table(p, columns=["nope"])


@pytest.mark.parametrize("version", [5, 8])  # pandas reads version 5; version 8 goes to pyreadstat
def test_sas_transport_roundtrip(tmp_path, testdata, version):
    pyreadstat = pytest.importorskip("pyreadstat")
    p = tmp_path / "t.xpt"
    pyreadstat.write_xport(testdata[KEYS].astype(float), str(p),
                           file_format_version=version)
    back = read_table(p, columns=KEYS)
    assert list(back.columns) == KEYS and len(back) == len(testdata)
    _same_partition(back, testdata, KEYS)
    with pytest.raises(BadInput, match=r"column\(s\) 'nope' not in"):
        read_table(p, columns=["nope"])


def _installed_sas7bdat():
    root = Path(pd.__file__).parent / "tests" / "io" / "sas" / "data"
    files = sorted(root.glob("*.sas7bdat")) if root.is_dir() else []
    return files[0] if files else None


def test_sas7bdat_sample_file():
    p = _installed_sas7bdat()
    if p is None:
        pytest.skip("no .sas7bdat file to read: nothing writes the format, and this pandas "
                    "installation ships no test data (pandas/tests/io/sas/data)")
    df = read_table(p)
    assert len(df) > 0
    assert df.equals(read_table(p, columns=list(df.columns)))


@pytest.mark.parametrize("suffix, what", [(".sas7bdat", "SAS sas7bdat"), (".dta", "Stata"),
                                          (".sav", "SPSS"), (".xpt", "SAS xport")])
def test_garbage_is_one_line_bad_input(tmp_path, suffix, what):
    p = tmp_path / f"bad{suffix}"
    p.write_bytes(b"this is not a statistical package's file\n" * 20)
    with pytest.raises(BadInput) as err:
        read_table(p)
    assert what in str(err.value) and "\n" not in str(err.value)


def test_cli_on_a_stata_file(tmp_path, testdata):
    p = tmp_path / "t.dta"
    _labelled(testdata).to_stata(p, write_index=False)
    proc = run_cli("assess", p, "--keys", ",".join(KEYS), "--fraction", "0.01", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n"] == len(testdata)


# --- results ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assessment(testdata):
    return gpurisk.assess(testdata, KEYS, fraction=0.01)


def test_write_json_csv_parquet(tmp_path, assessment):
    doc = assessment.to_dict()
    j = write_results(assessment, tmp_path / "r.json")
    # files store a reason's neutral form ({population}), which both the API and the CLI read
    from gpurisk.core.messages import stored
    want = json.loads(json.dumps(doc))
    for name, m in want["measures"].items():
        m["reason"] = stored(doc["measures"][name]["reason"])
    assert json.loads(j.read_text()) == want
    for name in ("r.csv", "r.csv.gz", "r.parquet"):
        p = write_results(doc, tmp_path / name)
        back = pd.read_parquet(p) if name.endswith("parquet") else pd.read_csv(p)
        assert back["measure"].tolist() == list(doc["measures"])
        for _, row in back.iterrows():
            m = doc["measures"][row["measure"]]
            assert (pd.isna(row["value"]) and m["value"] is None) or row["value"] == pytest.approx(m["value"])
            assert row["keys"] == ",".join(KEYS) and row["n"] == doc["n"]
            extra = json.loads(row["extra"])
            assert all(extra[k] == m[k] for k in extra)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.csv", "r.csv.gz", "r.json", "r.parquet"]


def test_write_is_atomic_and_replaces(tmp_path, assessment, monkeypatch):
    p = tmp_path / "r.json"
    p.write_text("old")
    write_results(assessment, p)
    assert json.loads(p.read_text())["n"] == assessment.n
    # a failure half-way leaves the old file and no temporary file
    p.write_text("old")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(BadInput, match="No space left"):
        write_results(assessment, p)
    assert p.read_text() == "old" and [x.name for x in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("name, expect", [("r.xlsx", "unknown extension"), ("nodir/r.json", "does not exist")])
def test_write_bad_targets(tmp_path, assessment, name, expect):
    with pytest.raises(BadInput, match=expect):
        write_results(assessment, tmp_path / name)


def test_cli_output(tmp_path):
    path = data_path("sdcmicro/testdata.csv")
    out = tmp_path / "res.parquet"
    proc = run_cli("assess", path, "--keys", ",".join(KEYS), "--fraction", "0.01", "--output", out)
    assert proc.returncode == 0, proc.stderr
    back = pd.read_parquet(out)
    assert "theta_hat" in back["measure"].tolist()
    bad = run_cli("assess", path, "--keys", "sex", "--output", tmp_path / "r.txt")
    assert bad.returncode == 2 and "unknown extension" in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and not (tmp_path / "r.txt").exists()


@pytest.mark.parametrize("suffix", [".csv.bz2", ".csv.xz", ".csv.zip", ".CSV.GZ"])
def test_compressed_csv_any_case_and_truncated(tmp_path, suffix):
    """Every compression pandas reads, by the name's ending in any case; cut in half: one line."""
    import bz2
    import gzip
    import io
    import lzma
    import zipfile
    text = "age,sex\n" + "".join(f"{20 + i % 7},{'mf'[i % 2]}\n" for i in range(2000))
    if suffix == ".csv.zip":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("x.csv", text)
        data = buf.getvalue()
    else:
        data = {".csv.bz2": bz2.compress, ".csv.xz": lzma.compress,
                ".CSV.GZ": gzip.compress}[suffix](text.encode())
    p = tmp_path / f"x{suffix}"
    p.write_bytes(data)
    df = read_table(p)
    assert len(df) == 2000 and df["age"].sum() == sum(20 + i % 7 for i in range(2000))
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInput) as err:
        read_table(cut)
    assert "\n" not in str(err.value) and "cut" in str(err.value)
