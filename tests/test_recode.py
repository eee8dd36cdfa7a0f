"""Recodes (bands, breaks, value maps, ARX hierarchies) regroup counts like recoding the records."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.freq.recode import apply_recodes, parse_recode

from conftest import data_path, run_cli

ADULT_KEYS = ["age", "sex", "race", "marital-status", "education"]


def observed(table, v):
    """The categories of key v that hold records (integer keys may also list empty ones)."""
    counts = np.bincount(np.asarray(table.cell_codes()[v]), weights=table.f, minlength=table.cards[v])
    return [c for c, k in zip(table.categories[v], counts) if k > 0]


def test_bands_labels_and_counts_by_hand():
    df = pd.DataFrame({"age": [17, 19, 20, 24, 25, 90, None], "sex": list("fmfmffm")})
    t = gpurisk.build_table(df, ["age", "sex"])
    r = apply_recodes(t, ["age=bands:5"])
    # bands 15-19 {17 f, 19 m}, 20-24 {20 f, 24 m}, 25-29 {25 f}, 90-94 {90 f}, missing {m}
    assert observed(r, 0) == ["15-19", "20-24", "25-29", "90-94", None]
    cells = {(r.categories[0][a], r.categories[1][b]): int(f)
             for a, b, f in zip(*r.cell_codes(), r.f)}
    assert cells == {("15-19", "f"): 1, ("15-19", "m"): 1, ("20-24", "f"): 1, ("20-24", "m"): 1,
                     ("25-29", "f"): 1, ("90-94", "f"): 1, (None, "m"): 1}
    r10 = apply_recodes(t, ["age=bands:10:5"])
    assert observed(r10, 0) == ["15-24", "25-34", "85-94", None]


def test_breaks_and_value_maps(tmp_path):
    df = pd.DataFrame({"age": [3, 17, 18, 40, 64, 65, 80], "rel": ["h", "s", "c", "c", "h", "o", "s"]})
    t = gpurisk.build_table(df, ["age", "rel"])
    r = apply_recodes(t, ["age=breaks:18,65"])
    assert observed(r, 0) == ["<18", "[18,65)", ">=65"]
    assert dict(zip(r.categories[0], np.bincount(r.cell_codes()[0], weights=r.f))) == \
        {"<18": 2, "[18,65)": 3, ">=65": 2}
    csv = tmp_path / "rel.csv"
    csv.write_text("value,group\nh,family\ns,family\nc,family\n*,other\n")
    r2 = apply_recodes(t, [f"rel=map:{csv}"])
    assert observed(r2, 1) == ["family", "other"]
    toml = tmp_path / "rel.toml"
    toml.write_text('[rel]\nh = "head"\ns = "spouse"\nc = "child"\no = "other"\n')
    r3 = apply_recodes(t, [f"rel=map:{toml}"])
    assert sorted(observed(r3, 1)) == ["child", "head", "other", "spouse"]
    bad = tmp_path / "bad.csv"
    bad.write_text("value,group\nh,family\n")
    with pytest.raises(gpurisk.BadInput, match="not in the mapping"):
        apply_recodes(t, [f"rel=map:{bad}"])


@pytest.mark.parametrize("spec, match", [
    ("age", "KEY=SPEC"), ("age=bins:5", "SPEC must be"), ("age=bands:0", "positive"),
    ("age=breaks:5,3", "increasing"), ("age=hierarchy:/nonexistent.csv:1", "does not exist"),
])
def test_bad_recode_specs(spec, match):
    with pytest.raises(gpurisk.BadInput, match=match):
        parse_recode(spec)


def test_arx_hierarchy_lowers_uniques_monotonically_on_adult():
    path = data_path("arx/adult.csv")
    hier = data_path("arx/adult_hierarchy_age.csv")
    df = pd.read_csv(path, sep=";")
    table = gpurisk.build_table(df, ADULT_KEYS)
    levels = len(pd.read_csv(hier, sep=";", header=None).columns)
    n1 = []
    for level in range(levels):
        r = apply_recodes(table, [f"age=hierarchy:{hier}:{level}"])
        n1.append(r.n_r(1))
        # the same as recoding the records with pandas and counting again
        h = pd.read_csv(hier, sep=";", header=None, dtype=str)
        mapping = pd.Series(h[level].to_numpy(), index=h[0].to_numpy())
        recount = gpurisk.build_table(df.assign(age=df["age"].astype(str).map(mapping)), ADULT_KEYS)
        assert r.n_r(1) == recount.n_r(1) and r.sample_cells == recount.sample_cells
        assert sorted(observed(r, 0)) == sorted(observed(recount, 0))
    assert all(b <= a for a, b in zip(n1, n1[1:])), n1
    assert n1[-1] < n1[0]
    assert levels >= 4


def test_hierarchy_errors(tmp_path):
    h = tmp_path / "h.csv"
    h.write_text("1;a;*\n2;a;*\n")
    df = pd.DataFrame({"x": [1, 2, 3, 3]})  # 3 in two records: a value of one record is withheld
    t = gpurisk.build_table(df, ["x"])
    with pytest.raises(gpurisk.BadInput, match="levels 0..2, not 3"):
        apply_recodes(t, [f"x=hierarchy:{h}:3"])
    with pytest.raises(gpurisk.BadInput, match="'3' of 'x' is not in the mapping"):
        apply_recodes(t, [f"x=hierarchy:{h}:1"])
    with pytest.raises(gpurisk.BadInput, match="not one of the key variables"):
        apply_recodes(t, [f"y=hierarchy:{h}:1"])


def test_assess_with_recode_equals_assess_on_recoded_records():
    df = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    a = gpurisk.assess(df, ADULT_KEYS, fraction=0.1, recode=["age=bands:5"],
                       measures=["theta_hat", "sample_uniques"]).to_dict()
    lo = df["age"] // 5 * 5
    b = gpurisk.assess(df.assign(age=lo.astype(str) + "-" + (lo + 4).astype(str)), ADULT_KEYS,
                       fraction=0.1, measures=["theta_hat", "sample_uniques"]).to_dict()
    assert a["freq_of_freq"] == b["freq_of_freq"]
    assert a["measures"] == b["measures"]


def test_cli_assess_recode_and_bad_recode():
    path = data_path("arx/adult.csv")
    ok = run_cli("assess", path, "--keys", "age,sex", "--fraction", "0.1", "--recode", "age=bands:10",
                 "--measures", "sample_uniques", "--json", check=True)
    doc = json.loads(ok.stdout)
    # ages 17..90 fall in 9 ten-year bands 10-19 .. 90-99; every band holds both sexes
    assert doc["categories"] == {"age": 9, "sex": 2} and doc["cells"] == 18
    with pytest.raises(gpurisk.BadInput, match="'Female' is not a number"):
        gpurisk.assess(path, ["age", "sex"], fraction=0.1, recode=["sex=bands:5"])
