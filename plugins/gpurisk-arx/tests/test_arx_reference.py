"""ARX's own test values (SPEC §10, ARX ``TestRiskMetrics`` on arx/adult.csv, all nine columns as keys,
N = n/π). ARX compares after truncating to 4 decimals; the values below are ARX's printed doubles."""
from __future__ import annotations

import math

import pandas as pd
import pytest

import gpurisk
from arx_data import ADULT_KEYS, data_path

pytest.importorskip("gpurisk_arx")


def trunc4(x: float) -> float:
    return math.trunc(x * 1e4) / 1e4


@pytest.fixture(scope="module")
def adult():
    return pd.read_csv(data_path("arx/adult.csv"), sep=";", dtype=str)


def _assess(adult, fraction, **options):
    opts = {"pop_uniqueness": {"rule": "arx", **options}}
    return gpurisk.assess(adult, ADULT_KEYS, fraction=fraction, options=opts,
                          measures=["prosecutor", "pop_uniqueness"])


def test_counts_of_arx_test(adult):
    a = _assess(adult, 0.01)
    pu = a.measures["pop_uniqueness"].extra
    assert (a.table.n, pu["classes"], pu["n1"], pu["n2"]) == (30162, 19502, 15512, 2098)


def test_prosecutor_values_of_arx_test(adult):
    pr = _assess(adult, 0.01).measures["prosecutor"]
    assert pr.value == 1.0 and pr.extra["highest"] == 1.0
    assert pr.extra["average"] == pytest.approx(0.6465751607983555, rel=1e-15)
    assert pr.extra["sample_uniqueness"] == pytest.approx(0.5142895033485844, rel=1e-15)


@pytest.mark.parametrize("pi, arx, chosen", [
    (0.01, 0.1446083531167384, "pitman"),
    (0.1, 0.27684993883653597, "pitman"),
    (1.0, 0.5142895033485844, "zayatz"),
])
def test_dankar_values_of_arx_test(adult, pi, arx, chosen):
    r = _assess(adult, pi).measures["pop_uniqueness"]
    assert r.extra["model"] == chosen and r.extra["rule"] == "arx" and r.extra["decision"] == "dankar"
    assert trunc4(r.extra["share"]) == trunc4(arx)
    assert r.extra["share"] == pytest.approx(arx, rel=1e-6)
    assert r.value == pytest.approx(arx * 30162 / pi, rel=1e-6)      # the number, N = n/π


def test_dankar_at_02_reproduces_arx_with_arxs_class_count(adult):
    """ARX: 0.3577099234829125 at π = 0.2 (Zayatz chosen). ARX's SNB finds no fit because its Sh3
    estimate of K has a misplaced parenthesis (SPEC §10); with K computed as ARX does
    (k_estimator=arx) SNB has no solution and the rule falls back to Zayatz, ARX's number."""
    r = _assess(adult, 0.2, k_estimator="arx").measures["pop_uniqueness"]
    assert r.extra["model"] == "zayatz" and r.extra["snb_uniques"] is None
    assert "SNB" in r.extra["snb_reason"]
    assert r.extra["snb_K"] == pytest.approx(29246.0, abs=1.0)
    assert r.extra["share"] == pytest.approx(0.3577099234829125, rel=1e-9)


def test_dankar_at_02_with_the_published_class_count_differs_from_arx(adult):
    """With Sh3 as published K = 65 150 and SNB fits below Zayatz, so the rule picks SNB: 0.3195,
    not ARX's 0.3577 (the difference is ARX's K, not the rule)."""
    r = _assess(adult, 0.2).measures["pop_uniqueness"]
    assert r.extra["model"] == "snb"
    assert r.extra["snb_K"] == pytest.approx(65150.0, abs=1.0)
    assert r.extra["share"] < r.extra["zayatz_uniques"] / r.extra["N"]
    assert r.extra["share"] == pytest.approx(0.3195, abs=5e-5)


@pytest.mark.parametrize("pi, zayatz, pitman", [
    (0.01, 0.271713, 0.144608), (0.1, 0.320740, 0.276850), (0.2, 0.357710, 0.336628),
    (1.0, 0.514290, 0.530024)])
def test_each_model_against_the_independent_check(adult, pi, zayatz, pitman):
    """SPEC §10's values checked independently from the formulas (6 decimals)."""
    z = _assess(adult, pi, model="zayatz").measures["pop_uniqueness"]
    p = _assess(adult, pi, model="pitman").measures["pop_uniqueness"]
    assert round(z.extra["share"], 6) == zayatz and z.extra["model"] == "zayatz"
    assert round(p.extra["share"], 6) == pitman and p.extra["model"] == "pitman"
    assert p.extra["pitman_theta"] == pytest.approx(3176.23, abs=0.01)
    assert p.extra["pitman_alpha"] == pytest.approx(0.7179, abs=1e-4)
    assert p.extra["converged"] is True and 0 < p.extra["iterations"] <= 1000


def test_highest_risk_after_2_anonymisation(adult):
    """ARX reports highest risk 0.5 on adult after 2-anonymisation without suppression: a recode with
    ARX's own hierarchies whose smallest class has 2 records gives 1/2 (and no record above 1/2)."""
    levels = {"age": 1, "race": 1, "marital-status": 2, "education": 3, "native-country": 2,
              "workclass": 2, "occupation": 1, "salary-class": 1}   # the lowest such node, sex kept
    rec = [f"{k}=hierarchy:{data_path(f'arx/adult_hierarchy_{k}.csv')}:{lv}" for k, lv in levels.items()]
    a = gpurisk.assess(adult, ADULT_KEYS, recode=rec, measures=["prosecutor"])
    pr = a.measures["prosecutor"].extra
    assert min(a.table.freq_of_freq()) == 2            # 2-anonymous, smallest class 2
    assert pr["highest"] == 0.5 and pr["share_above_threshold"] == pytest.approx(
        sum(r * c for r, c in a.table.freq_of_freq().items() if 1 / r > 0.2) / a.table.n)
