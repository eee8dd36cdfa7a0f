"""The counting engine against sdcMicro's fk and independent pandas groupbys, on real data."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import gpurisk.testing.synth as synth
from unittest import mock
from gpurisk.errors import BadInput
from gpurisk.freq import cellid, partial
from gpurisk.freq.engine import build_table

from conftest import data_path

SDC_CASES = [
    # (data file, keys, reference file) — sdcMicro 5.8.1 freqCalc's fk, per record
    ("sdcmicro/testdata.csv", ["urbrur", "water", "sex", "age"], "sdcmicro/reference/testdata_w_fk_Fk_risk.csv"),
    ("sdcmicro/testdata.csv", ["urbrur", "water", "sex", "age"], "sdcmicro/reference/testdata_now_fk_Fk_risk.csv"),
    ("sdcmicro/francdat.csv", ["Key1", "Key2", "Key3", "Key4"], "sdcmicro/reference/francdat_w_fk_Fk_risk.csv"),
]


@pytest.mark.parametrize("data,keys,ref", SDC_CASES)
def test_record_counts_equal_sdcmicro_fk(data, keys, ref):
    df = pd.read_csv(data_path(data))
    refdf = pd.read_csv(data_path(ref))
    table = build_table(df, keys)
    assert len(refdf) == len(df)
    np.testing.assert_array_equal(table.record_counts(), refdf["fk"].to_numpy())


def test_weight_sums_equal_sdcmicro_Fk():
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    refdf = pd.read_csv(data_path("sdcmicro/reference/testdata_w_fk_Fk_risk.csv"))
    table = build_table(df, ["urbrur", "water", "sex", "age"], weights="sampling_weight")
    np.testing.assert_allclose(table.w[table.record_cell()], refdf["Fk"].to_numpy(), rtol=1e-12)


def test_testdata_summary_matches_sdcmicro_readme():
    # data README: 330 records with fk = 1; 344 records (172 cells) with fk = 2
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    table = build_table(df, ["urbrur", "water", "sex", "age"])
    assert table.n_r(1) == 330 and table.n_r(2) == 172
    assert table.sample_cells == 993


REAL = [
    ("sdcmicro/testdata.csv", ",", ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "age"]),
    ("sdcmicro/testdata2.csv", ",", ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "age"]),
    ("sdcmicro/francdat.csv", ",", ["Key1", "Key2", "Key3", "Key4"]),
    ("sdcmicro/free1.csv", ",", ["REGION", "SEX", "AGE", "MARSTAT", "KINDPERS", "ETNI"]),
    ("arx/adult.csv", ";", ["sex", "age", "race", "marital-status", "education", "native-country",
                            "workclass", "occupation"]),
    ("uci_adult/adult_full_48842.csv", ",", ["age", "workclass", "education", "marital-status",
                                             "occupation", "race", "sex", "native-country"]),
    ("arx_genetic/fars_int.csv", ";", None),
    ("arx_genetic/cup_int.csv", ";", None),
    ("arx_genetic/mach2019_int.csv", ";", ["age", "familysize", "gender", "married", "race", "religion"]),
    ("arx_bench/cup.csv", ";", None),
    ("arx_bench/fars_subset.csv", ";", None),
]


@pytest.mark.parametrize("rel,sep,keys", REAL, ids=[r[0] for r in REAL])
def test_counts_agree_with_pandas_groupby_on_real_files(rel, sep, keys):
    df = pd.read_csv(data_path(rel), sep=sep)
    keys = keys or list(df.columns)
    table = build_table(df, keys)
    ref = df.groupby(keys, dropna=False, sort=False).size()
    # the same multiset of cell sizes
    np.testing.assert_array_equal(np.sort(table.f), np.sort(ref.to_numpy()))
    # and each record gets the size of its own group
    per_record = df.groupby(keys, dropna=False)[keys[0]].transform("size").to_numpy()
    np.testing.assert_array_equal(table.record_counts(), per_record)
    assert sum(r * c for r, c in table.freq_of_freq().items()) == len(df)


def test_missing_is_own_category_and_error_option():
    df = pd.DataFrame({"a": [1, 1, None, None, 2], "b": ["x", None, "x", "x", None]})
    t = build_table(df, ["a", "b"])
    # cells: (1,x) (1,NA) (NA,x)x2 (2,NA)
    assert sorted(t.f.tolist()) == [1, 1, 1, 2]
    assert t.categories[0][-1] is None and t.categories[1][-1] is None
    with pytest.raises(BadInput, match="'a' has 2 missing"):
        build_table(df, ["a", "b"], missing="error")


def test_population_alignment_with_different_category_sets():
    pop = pd.DataFrame({"sex": ["m", "f", "f", "m", "m", "x"], "age": [30, 40, 40, 50, 30, 99]})
    samp = pd.DataFrame({"sex": ["m", "f"], "age": [30, 40]})  # categories 'x' and 50, 99 unseen
    t = build_table(samp, ["sex", "age"], population=pop)
    labels = [tuple(d.values()) for d in t.cell_labels(range(len(t.f)))]
    F = dict(zip(labels, t.F.tolist()))
    f = dict(zip(labels, t.f.tolist()))
    assert F == {("f", 40): 2, ("m", 30): 2, ("m", 50): 1, ("x", 99): 1}
    assert f == {("f", 40): 1, ("m", 30): 1, ("m", 50): 0, ("x", 99): 0}
    assert t.n == 2 and t.N == 6


def test_f_greater_than_F_is_bad_input_with_example_cells():
    pop = pd.DataFrame({"sex": ["m", "f"], "age": [30, 40]})
    samp = pd.DataFrame({"sex": ["m", "m", "f", "q"], "age": [30, 30, 40, 1]})
    with pytest.raises(BadInput) as e:
        build_table(samp, ["sex", "age"], population=pop)
    msg = str(e.value)
    assert "2 sample cell(s)" in msg and "f=2 > F=1" in msg and "sex=<withheld" in msg and "\n" not in msg
    assert "'m'" not in msg            # issue 30: F = 1 is one population record; no values quoted


def test_sample_flag_register():
    reg = pd.DataFrame({"a": [1, 1, 2, 2, 2, 3], "s": [True, False, True, False, False, True]})
    t = build_table(reg, ["a"], sample_flag="s")
    assert t.f.tolist() == [1, 1, 1] and t.F.tolist() == [2, 3, 1]
    assert t.record_counts().tolist() == [1, 1, 1]
    reg["s"] = [1, 0, 1, 0, 0, 2]
    with pytest.raises(BadInput, match="not boolean"):
        build_table(reg, ["a"], sample_flag="s")


@st.composite
def key_frames(draw):
    nkeys = draw(st.integers(1, 4))
    n = draw(st.integers(1, 60))
    cols = {}
    for i in range(nkeys):
        kind = draw(st.sampled_from(["int", "str", "float_na", "bigint"]))
        card = draw(st.integers(1, 6))
        vals = draw(st.lists(st.integers(0, card - 1), min_size=n, max_size=n))
        if kind == "int":
            cols[f"k{i}"] = np.array(vals, dtype=np.int64)
        elif kind == "bigint":
            cols[f"k{i}"] = np.array(vals, dtype=np.int64) * 10**12 - 5
        elif kind == "str":
            cols[f"k{i}"] = [f"v{v}" for v in vals]
        else:
            cols[f"k{i}"] = [np.nan if v == 0 else float(v) for v in vals]
    return pd.DataFrame(cols)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key_frames(), st.randoms(use_true_random=False))
def test_properties_sum_order_and_fallback(df, rnd):
    keys = list(df.columns)
    t = build_table(df, keys)
    # sum_r r n_r = n
    assert sum(r * c for r, c in t.freq_of_freq().items()) == len(df)
    # row order changes nothing, per record
    perm = np.array(rnd.sample(range(len(df)), len(df)))
    t2 = build_table(df.iloc[perm].reset_index(drop=True), keys)
    assert t2.freq_of_freq() == t.freq_of_freq()
    np.testing.assert_array_equal(t2.record_counts(), t.record_counts()[perm])
    # the mixed-radix path equals the surrogate fallback
    with mock.patch.object(cellid, "INT64_LIMIT", 0):
        fb = build_table(df, keys)
    assert t.radix and not fb.radix
    np.testing.assert_array_equal(fb.record_counts(), t.record_counts())
    np.testing.assert_array_equal(np.stack(fb.cell_codes()), np.stack(t.cell_codes()))


def test_overflow_fallback_equals_radix(monkeypatch):
    df = synth.register(20_000, seed=3)
    keys = list(df.columns)
    a = build_table(df, keys)
    monkeypatch.setattr(cellid, "INT64_LIMIT", 1000)  # force the surrogate path
    b = build_table(df, keys)
    assert a.radix and not b.radix
    np.testing.assert_array_equal(a.record_counts(), b.record_counts())
    assert a.freq_of_freq() == b.freq_of_freq()
    # cells decode to the same key values, in the same (lexicographic) order
    np.testing.assert_array_equal(np.stack(a.cell_codes()), np.stack(b.cell_codes()))


def test_true_int64_overflow_uses_fallback():
    rng = np.random.default_rng(1)
    n = 5000
    df = pd.DataFrame({f"c{i}": rng.integers(0, 2000, n) * 7919 for i in range(6)})  # 2000^6 > 2^63
    t = build_table(df, list(df.columns))
    assert not t.radix
    ref = df.groupby(list(df.columns)).size()
    np.testing.assert_array_equal(np.sort(t.f), np.sort(ref.to_numpy()))


@pytest.mark.parametrize("space", [1000, 1 << 27, 1 << 40])
def test_locate_paths_agree(space):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, min(space, 1 << 40), 10_000)
    cells, counts = partial.count_ids(ids)
    for complete, cnt in ((True, counts), (True, None), (False, None)):
        pos = partial.locate([ids], [cells], space, counts=cnt, complete=complete)
        np.testing.assert_array_equal(cells[pos], ids)
    # a record whose cell is absent is -1
    pos = partial.locate([np.array([cells[0], cells[-1] + 1])], [cells], space=None)
    assert pos.tolist() == [0, -1]
