"""SUDA and DIS-SUDA (SPEC §9, issue 17): the MSU search over the key-subset lattice, both scorings,
contributions and DIS-SUDA, against SPEC's worked example (SDC Practice Guide / sdcMicro 5.8.1
values), a brute-force oracle, a pandas implementation on real data, the strict namespace, the
measures, the command and its bad input."""
from __future__ import annotations

import json
import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from _suda_oracle import brute_force, pandas_suda
from conftest import data_path, run_cli
from gpurisk.errors import BadInput
from gpurisk.freq.engine import build_table
from gpurisk.models import suda_table as st
from gpurisk.models.suda import find_msus, lattice_size
from gpurisk.models.suda_scores import size_weights
from gpurisk.workflows.suda import suda
from gpurisk.xp import to_host

GUIDE = pd.DataFrame(
    [("Urban", "Female", "Sec. incomplete", "Employed"), ("Urban", "Female", "Sec. incomplete", "Employed"),
     ("Urban", "Female", "Prim. incomplete", "Non-LF"), ("Urban", "Male", "Sec. complete", "Employed"),
     ("Rural", "Female", "Sec. complete", "Unemployed"), ("Urban", "Male", "Sec. complete", "Employed"),
     ("Urban", "Female", "Prim. complete", "Non-LF"), ("Urban", "Male", "Post-secondary", "Unemployed"),
     ("Urban", "Female", "Sec. incomplete", "Non-LF"), ("Urban", "Female", "Sec. incomplete", "Non-LF")],
    columns=["Residence", "Gender", "Education", "Labour"])
GUIDE_KEYS = list(GUIDE.columns)
# SPEC §9 worked example (SDC Practice Guide, measure_risk; sdcMicro 5.8.1 suda2)
GUIDE_ELLIOT = [0, 0, 6, 0, 12, 0, 6, 10, 0, 0]
GUIDE_IHSN = [0, 0, 1.75, 0, 3.25, 0, 1.75, 2.75, 0, 0]
GUIDE_DIS_ELLIOT = [0, 0, 0.004986798, 0, 0.011383007, 0, 0.004986798, 0.009166679, 0, 0]
GUIDE_DIS_IHSN = [0, 0, 0.005120313, 0, 0.010702061, 0, 0.005120313, 0.008775093, 0, 0]

FARS_KEYS = ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic", "istatenum"]


def _cols(df, keys, **kw):
    return st.record_columns(build_table(df, keys), **kw)


# --- SPEC's worked example ---------------------------------------------------------------------

@pytest.mark.parametrize("scoring,want,dis", [("elliot", GUIDE_ELLIOT, GUIDE_DIS_ELLIOT),
                                              ("ihsn", GUIDE_IHSN, GUIDE_DIS_IHSN)])
def test_guide_example_scores_and_dis(scoring, want, dis):
    cols = _cols(GUIDE, GUIDE_KEYS, scoring=scoring)
    np.testing.assert_allclose(to_host(cols["suda"]), want, rtol=0, atol=1e-12)
    # sdcMicro computes part of DIS-SUDA in single precision (SPEC §9): rtol 1e-6
    np.testing.assert_allclose(to_host(cols["dis_suda"]), dis, rtol=1e-6, atol=0)


def test_guide_example_msus_and_contributions():
    cols = _cols(GUIDE, GUIDE_KEYS)
    # record 5 (index 4): {Residence} (6) + {Gender,Education}, {Gender,Labour}, {Education,Labour} (2 each)
    got5 = [float(to_host(cols[f"contrib_{k}"])[4]) for k in GUIDE_KEYS]
    np.testing.assert_allclose(got5, [0.5, 1 / 3, 1 / 3, 1 / 3])
    # record 8 (index 7): {Education} (6) + {Gender,Labour} + {Residence,Labour} = 10
    got8 = [float(to_host(cols[f"contrib_{k}"])[7]) for k in GUIDE_KEYS]
    np.testing.assert_allclose(got8, [0.2, 0.2, 0.6, 0.4])
    assert to_host(cols["msu_min"]).tolist() == [0, 0, 1, 0, 1, 0, 1, 1, 0, 0]
    assert to_host(cols["msu_count"]).tolist() == [0, 0, 1, 0, 4, 0, 1, 3, 0, 0]
    doc = st.summary(build_table(GUIDE, GUIDE_KEYS))
    pct = doc["contributions_pct"]
    # SPEC: Residence 23.53 %, Gender 17.65 %, Education 64.71 %, Labour 23.53 %
    np.testing.assert_allclose([pct[k] for k in GUIDE_KEYS], [23.53, 17.65, 64.71, 23.53], atol=0.005)
    assert doc["dis_P"] == 6 and doc["records_scored"] == 4 and doc["max_score"] == 12
    assert doc["msus_by_size"] == {1: 4, 2: 5, 3: 0, 4: 0}


def test_weights_by_hand():
    # M = 4: elliot (4-k)! = 6, 2, 1, 1; ihsn (2^(4-k)-1)/C(4,k) = 7/4, 3/6, 1/4, 0
    np.testing.assert_allclose(size_weights(4, "elliot")[1:], [6, 2, 1, 1])
    np.testing.assert_allclose(size_weights(4, "ihsn")[1:], [1.75, 0.5, 0.25, 0.0])


# --- brute-force oracle ------------------------------------------------------------------------

def _random_frame(seed, n, cards):
    rng = np.random.default_rng(seed)
    cols = {}
    for j, c in enumerate(cards):
        p = rng.dirichlet(np.ones(c)) if c > 1 else np.ones(1)
        cols[f"k{j}"] = rng.choice(c, size=n, p=p)
    return pd.DataFrame(cols)


def _msus_by_record(table, ms):
    """{record: set of key-index tuples} from the search's (candidate, subset) pairs."""
    rc = to_host(table.record_cell())
    cells = to_host(ms.cells)
    rec_of_cell = {int(c): int(r) for r, c in enumerate(rc)}
    out = {}
    for c, s in zip(to_host(ms.pair_cand).tolist(), to_host(ms.pair_subset).tolist()):
        out.setdefault(rec_of_cell[int(cells[c])], set()).add(ms.subsets[s])
    return out


CASES = [  # seed, n, cards (incl. a key with one category, ties: duplicate records), max_msu
    (1, 40, [2, 3, 4], None),
    (2, 60, [3, 1, 4, 2, 5], None),
    (3, 50, [2, 2, 3, 6, 2], 2),
    (4, 70, [4, 3, 2, 1, 3, 2], 4),
    (5, 30, [6, 5, 7], 1),
    (6, 2, [2, 2], None),
    (7, 1, [3, 2], None),
    (8, 25, [1, 1, 3], None),
]


@pytest.mark.parametrize("seed,n,cards,max_msu", CASES)
@pytest.mark.parametrize("scoring", ["elliot", "ihsn"])
def test_oracle_agrees(seed, n, cards, max_msu, scoring):
    df = _random_frame(seed, n, cards)
    keys = list(df.columns)
    ref = brute_force(list(df.itertuples(index=False, name=None)), max_msu, scoring, 0.05)
    table = build_table(df, keys)
    ms = find_msus(table, max_msu)
    got = _msus_by_record(table, ms)
    assert {i: m for i, m in enumerate(ref["msus"]) if m} == got
    cols = st.record_columns(table, max_msu, scoring, 0.05)
    np.testing.assert_allclose(to_host(cols["suda"]), ref["suda"], rtol=1e-12, atol=0)
    np.testing.assert_allclose(to_host(cols["dis_suda"]), ref["dis"], rtol=1e-12, atol=0)
    assert to_host(cols["msu_min"]).tolist() == ref["msu_min"]
    assert to_host(cols["msu_count"]).tolist() == ref["msu_count"]
    for j, k in enumerate(keys):
        np.testing.assert_allclose(to_host(cols[f"contrib_{k}"]), [c[j] for c in ref["contrib"]],
                                   rtol=1e-12, atol=1e-15)


def test_ties_and_one_category_keys_score_zero():
    # every record has a twin: no sample unique, no MSU, all scores 0 (and DIS 0, not NaN)
    df = pd.DataFrame({"a": [1, 1, 2, 2, 3, 3], "b": ["x", "x", "y", "y", "x", "x"], "c": [0] * 6})
    cols = _cols(df, ["a", "b", "c"])
    assert not to_host(cols["suda"]).any() and not to_host(cols["dis_suda"]).any()
    doc = st.summary(build_table(df, ["a", "b", "c"]))
    assert doc["records_scored"] == 0 and doc["total_score"] == 0.0
    assert all(math.isnan(v) for v in doc["contributions_pct"].values())


@pytest.mark.parametrize("lookup", ["dense", "binary search"])
def test_strict_namespace_matches_numpy(lookup, monkeypatch):
    from gpurisk.models import suda as msu
    from gpurisk.testing.strict import strict_table
    if lookup != "dense":
        monkeypatch.setattr(msu, "DENSE_LOOKUP", 0)
    df = _random_frame(11, 300, [3, 4, 2, 5, 3])
    keys = list(df.columns)
    ref = brute_force(list(df.itertuples(index=False, name=None)), scoring="ihsn")
    np.testing.assert_allclose(to_host(st.record_columns(build_table(df, keys), scoring="ihsn")["suda"]),
                               ref["suda"])
    ref = st.record_columns(build_table(df, keys), scoring="ihsn")
    got = st.record_columns(strict_table(df, keys), scoring="ihsn")
    for name, a in ref.items():
        np.testing.assert_array_equal(to_host(got[name]), to_host(a), err_msg=name)


def test_key_spaces_past_int64_use_surrogate_ids():
    # 10 keys of about 220 categories: any 9 of them span more than 2**63 cells, so those subsets'
    # tables have surrogate ids. Record B's only MSU is {k0..k8} (size 9): R_j equals B except on
    # key j (j = 0..8), so every 8-subset of it matches B and one R_j.
    from gpurisk.freq.cellid import INT64_LIMIT, radix_space
    rng = np.random.default_rng(3)
    filler = pd.DataFrame(rng.integers(0, 300, (300, 10)), columns=[f"k{j}" for j in range(10)])
    B = np.full(10, 5000)
    special = [B] + [np.where(np.arange(10) == j, 6000 + j, B) for j in range(9)]
    df = pd.concat([filler, pd.DataFrame(special, columns=filler.columns)], ignore_index=True)
    keys = list(df.columns)
    table = build_table(df, keys)
    assert radix_space(sorted(table.cards)[:9]) > INT64_LIMIT
    got = st.record_columns(table)
    b = 300
    assert int(to_host(got["msu_min"])[b]) == 9 and int(to_host(got["msu_count"])[b]) == 1
    ref = pandas_suda(df, keys)
    for c in ("suda", "msu_min", "msu_count", "contrib_k3"):
        np.testing.assert_allclose(to_host(got[c]), ref[c], err_msg=c)


# --- real data ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fars():
    return pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";", usecols=FARS_KEYS)


@pytest.mark.parametrize("scoring,max_msu", [("elliot", None), ("ihsn", 3)])
def test_fars_matches_pandas_reference(fars, scoring, max_msu):
    ref = pandas_suda(fars, FARS_KEYS, max_msu, scoring)
    res = suda(fars, FARS_KEYS, max_msu=max_msu, scoring=scoring, dis_fraction=0.01)
    got = res.records
    assert got["row"].tolist() == list(range(len(fars)))
    for c in ref.columns:
        np.testing.assert_allclose(got[c].to_numpy(), ref[c].to_numpy(), rtol=1e-12, atol=1e-15,
                                   err_msg=c)
    s = res.summary
    assert s["records_scored"] == int((ref["suda"] > 0).sum())
    assert s["total_score"] == pytest.approx(ref["suda"].sum())
    assert s["dis_sum"] == pytest.approx(ref["dis_suda"].sum())
    if max_msu is None:     # with every size searched, every sample unique has an MSU
        assert s["records_scored"] == s["sample_uniques"]


def test_text_keys_are_scored_like_categories(fars):
    sub = fars.iloc[:3000].reset_index(drop=True)
    text = sub.astype(str).apply(lambda c: "v" + c)
    a = suda(sub, FARS_KEYS[:5], fraction=0.01).records
    b = suda(text, FARS_KEYS[:5], fraction=0.01).records
    pd.testing.assert_frame_equal(a, b)
    assert (b["suda"] > 0).any()


def test_missing_values_are_a_category():
    df = pd.DataFrame({"a": [1, 1, None, None, 2, 2, None], "b": ["x", "y", "x", "y", "x", "y", "x"]})
    res = suda(df, ["a", "b"])
    ref = brute_force([tuple("NA" if v != v or v is None else v for v in r)
                       for r in df.itertuples(index=False, name=None)])
    np.testing.assert_allclose(res.records["suda"], ref["suda"])
    assert "category of its own" in res.summary["missing"]


# --- measures -----------------------------------------------------------------------------------

def test_measures_through_the_registry():
    import gpurisk
    a = gpurisk.assess(GUIDE, keys=GUIDE_KEYS, fraction=0.01, measures=["suda", "dis_suda"],
                       options={"suda": {"scoring": "ihsn"}})
    s, d = a.measures["suda"], a.measures["dis_suda"]
    assert s.value == 4 and s.extra["scoring"] == "ihsn"
    assert s.extra["total_score"] == pytest.approx(1.75 + 3.25 + 1.75 + 2.75)
    assert d.value == pytest.approx(sum(GUIDE_DIS_IHSN), rel=1e-6)
    assert d.extra["dis_fraction_from"] == "fraction"


def test_measure_conformance():
    from gpurisk.measures.suda import DisSuda, Suda
    from gpurisk.testing import check_measure
    for cls in (Suda, DisSuda):
        report = check_measure(cls)      # raises AssertionError on a problem
        assert "strict" in report.compared and report.results["pandas"].value > 0


def test_measure_not_applicable_on_identifier_key():
    import gpurisk
    df = GUIDE.assign(id=range(10))
    a = gpurisk.assess(df, keys=GUIDE_KEYS[:2] + ["id"], fraction=0.1, measures=["suda"],
                       allow_high_cardinality=True)
    r = a.measures["suda"]
    assert r.value is None and "'id'" in r.reason and "every one" in r.reason


# --- command line -------------------------------------------------------------------------------

def test_cli_summary_and_parquet(tmp_path):
    src = tmp_path / "guide.csv"
    GUIDE.to_csv(src, index=False)
    out = tmp_path / "s.parquet"
    proc = run_cli("suda", src, "--keys", ",".join(GUIDE_KEYS), "-o", out, "--json", check=True,
                   subprocess=True)
    doc = json.loads(proc.stdout)
    assert doc["records_scored"] == 4 and doc["msus_by_size"] == {"1": 4, "2": 5, "3": 0, "4": 0}
    rows = pd.read_parquet(out)
    assert list(rows.columns) == ["row", "suda", "dis_suda", "msu_min", "msu_count"] + \
        [f"contrib_{k}" for k in GUIDE_KEYS]
    assert rows["suda"].tolist() == GUIDE_ELLIOT
    proc = run_cli("suda", src, "--keys", ",".join(GUIDE_KEYS), "--scoring", "ihsn",
                   "--max-msu", "1", "--dis-fraction", "0.1", check=True)
    assert "records with a score > 0: 4" in proc.stdout and "f = 0.1" in proc.stdout
    assert not list(tmp_path.glob(".*.tmp"))


def _err(proc):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpurisk: error: "), proc.stderr
    return lines[0]


def test_cli_bad_input(tmp_path):
    src = tmp_path / "guide.csv"
    GUIDE.assign(id=[f"p{i}" for i in range(10)]).to_csv(src, index=False)
    keys = ",".join(GUIDE_KEYS)
    # an identifier as a key: named, no record's value shown
    msg = _err(run_cli("suda", src, "--keys", keys + ",id"))
    assert "'id'" in msg and "p3" not in msg
    # the lattice over the memory limit: says the limit and what to lower
    msg = _err(run_cli("suda", src, "--keys", keys, "--search-memory", "1e-9"))
    assert "memory limit" in msg and "--max-msu" in msg
    msg = _err(run_cli("suda", src, "--keys", keys, "--dis-fraction", "1.5"))
    assert "(0, 1)" in msg
    msg = _err(run_cli("suda", src, "--keys", keys, "-o", tmp_path / "nodir" / "x.parquet"))
    assert "does not exist" in msg
    msg = _err(run_cli("suda", src, "--keys", keys, "-o", tmp_path / "x.csv"))
    assert ".parquet" in msg
    msg = _err(run_cli("suda", src, "--keys", "Residence,nope"))
    assert "nope" in msg
    # a backend that keeps no record cells: said before any counting
    msg = _err(run_cli("suda", src, "--keys", keys, "--backend", "dask", "-o", tmp_path / "d.parquet"))
    assert "per-record output" in msg and "--backend pandas" in msg


def test_lattice_too_large_is_refused_before_reading():
    keys = [f"k{i}" for i in range(40)]
    with pytest.raises(BadInput, match="over the limit of .*lower max_msu or use fewer keys"):
        suda("/nonexistent.csv", keys, max_msu=6)
    assert lattice_size(40, 6) > 65536 > lattice_size(40, 3)
    assert [len(s) for s in combinations(range(4), 2)] == [2] * 6


def test_summary_never_locates_records():
    """A file-level summary (the measures, a scan) searches in cell order and never asks for the
    records' cells; the per-record columns then search in record order, with the same results."""
    import dataclasses

    def boom():
        raise AssertionError("records located")
    table = dataclasses.replace(build_table(GUIDE, GUIDE_KEYS), record_locator=boom)
    assert st.summary(table)["records_scored"] == 4
    table = build_table(GUIDE, GUIDE_KEYS)
    s1 = st.summary(table)
    cols = st.record_columns(table, scoring="ihsn")
    np.testing.assert_allclose(to_host(cols["suda"]), GUIDE_IHSN)
    assert st.summary(table) == s1


def test_cli_html_report_shows_distribution_and_contributions_without_values(tmp_path):
    src = tmp_path / "guide.csv"
    GUIDE.to_csv(src, index=False)
    page = tmp_path / "suda.html"
    run_cli("suda", src, "--keys", ",".join(GUIDE_KEYS), "--report", page, "--fraction", "0.1",
            check=True)
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 3
    # without π there is no DIS-SUDA figure: its plot is left out and the page says why
    run_cli("suda", src, "--keys", ",".join(GUIDE_KEYS), "--report", page, check=True)
    bare = page.read_text()
    assert bare.count("data:image/png;base64,") == 2 and "DIS-SUDA probabilities</h2>" not in bare
    assert "not applicable" in bare
    assert "Distribution of the SUDA scores" in text and "Contribution of each key" in text
    assert all(k in text for k in GUIDE_KEYS)
    for value in set(GUIDE.to_numpy().ravel()):
        assert value not in text, value
    msg = _err(run_cli("suda", src, "--keys", ",".join(GUIDE_KEYS), "--report", tmp_path / "r.txt"))
    assert ".html" in msg


def test_no_pairs_gives_dis_one_with_a_warning():
    # no full-key cell of 2 records: P = 0, DIS-SUDA = 1 for every scored record (the formula), said
    df = pd.DataFrame({"a": [1, 1, 1, 2, 2], "b": [1, 2, 3, 1, 2]})
    res = suda(df, ["a", "b"], dis_fraction=0.01)
    ref = brute_force(list(df.itertuples(index=False, name=None)))
    np.testing.assert_allclose(res.records["dis_suda"], ref["dis"])
    assert res.summary["dis_P"] == 0 and set(res.records["dis_suda"]) == {1.0}
    assert "P = 0" in res.summary["warnings"][0]
    assert not st.summary(build_table(GUIDE, GUIDE_KEYS))["warnings"]


def test_cli_summary_on_dask_equals_pandas(tmp_path, dask_scheduler):
    src = tmp_path / "guide.csv"
    GUIDE.to_csv(src, index=False)
    args = ["suda", src, "--keys", ",".join(GUIDE_KEYS), "--json", "--scoring", "ihsn"]
    want = json.loads(run_cli(*args, check=True).stdout)
    got = json.loads(run_cli(*args, "--backend", "dask", "--workers", "1", check=True,
                             env={"GPURISK_SCHEDULER": dask_scheduler}).stdout)   # the session's cluster
    assert got == want and got["records_scored"] == 4


@pytest.mark.gpu
def test_cupy_search_matches_numpy(fars):
    """The count and the MSU search on CuPy arrays (the one-piece engine with xp=cupy, as the cuDF
    backend runs it; CuPy alone is enough) give numpy's per-record columns and summary."""
    import cupy
    from gpurisk.freq.piece import build_table_piece
    gpu = build_table_piece(fars, FARS_KEYS, xp=cupy, backend="cupy", plan_first=True)
    host = build_table(fars, FARS_KEYS)
    for scoring in ("elliot", "ihsn"):
        want = st.record_columns(host, scoring=scoring)
        got = st.record_columns(gpu, scoring=scoring)
        for name, a in want.items():
            np.testing.assert_allclose(to_host(got[name]), a, rtol=1e-12, atol=1e-15, err_msg=name)
        sw, sg = st.summary(host, scoring=scoring), st.summary(gpu, scoring=scoring)
        assert sw["msus_by_size"] == sg["msus_by_size"]
        assert sg["dis_sum"] == pytest.approx(sw["dis_sum"], rel=1e-12)
