"""indiv_risk against sdcMicro 5.8.1's measure_risk output, and the exact method against the model.

References not derived from this code: sdcMicro's per-record ``risk`` column and summary
(shared/data/sdcmicro/reference, README there), scipy's hypergeometric function, the negative
binomial expectation summed term by term, a Monte Carlo draw of the model, and sdcMicro's own
alternating closed form (transcribed below from R/indivRisk.R) where it is well conditioned.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

gc = pytest.importorskip("gpurisk_classic")
import gpurisk  # noqa: E402
from gpurisk.testing import run_cli  # noqa: E402

from classic_data import data_path  # noqa: E402

TESTDATA_KEYS = ["urbrur", "water", "sex", "age"]
FRANC_KEYS = ["Key1", "Key2", "Key3", "Key4"]


def _testdata():
    return pd.read_csv(data_path("sdcmicro/testdata.csv"))


@pytest.mark.parametrize("data, keys, weight, ref", [
    ("sdcmicro/testdata.csv", TESTDATA_KEYS, "sampling_weight", "testdata_w_fk_Fk_risk.csv"),
    ("sdcmicro/francdat.csv", FRANC_KEYS, "w", "francdat_w_fk_Fk_risk.csv"),
])
def test_record_risk_reproduces_sdcmicro(data, keys, weight, ref):
    df = pd.read_csv(data_path(data))
    want = pd.read_csv(data_path(f"sdcmicro/reference/{ref}"))
    table = gpurisk.build_table(df, keys, weights=weight)
    np.testing.assert_array_equal(table.record_counts(), want["fk"])
    np.testing.assert_allclose(np.asarray(table.w)[table.record_cell()], want["Fk"], rtol=1e-12)
    np.testing.assert_allclose(gc.record_risk(table), want["risk"], rtol=1e-8, atol=1e-12)


def test_global_risk_and_expected_reidentifications_testdata():
    a = gpurisk.assess(_testdata(), TESTDATA_KEYS, weights="sampling_weight", measures=["indiv_risk"])
    res = a.measures["indiv_risk"]
    # sdcMicro 5.8.1 measure_risk: global risk 0.005411326, ER 24.78387 (shared/data/README.md)
    assert res.value == pytest.approx(0.005411326, abs=5e-10)
    assert res.extra["expected_reidentifications"] == pytest.approx(24.78387, abs=5e-6)
    assert res.extra["Fk_from"] == "weights"
    want = pd.read_csv(data_path("sdcmicro/reference/testdata_w_fk_Fk_risk.csv"))
    assert res.extra["max_risk"] == pytest.approx(want["risk"].max(), rel=1e-10)
    assert res.extra["records_above_threshold"] == int((want["risk"] > 0.1).sum())


def test_without_weights_sdcmicros_one_over_fk_only_when_asked():
    df = _testdata()
    want = pd.read_csv(data_path("sdcmicro/reference/testdata_now_fk_Fk_risk.csv"))
    table = gpurisk.build_table(df, TESTDATA_KEYS)
    np.testing.assert_allclose(gc.record_risk(table, Fk="sample"), want["risk"], rtol=1e-8, atol=1e-12)
    with pytest.raises(gpurisk.BadInput, match="Fk='sample'"):
        gc.record_risk(table)
    res = gpurisk.assess(df, TESTDATA_KEYS, measures=["indiv_risk"]).measures["indiv_risk"]
    assert res.value is None and "options={'indiv_risk': {'Fk': 'sample'}}" in res.reason
    assert "--option indiv_risk.Fk=sample" in res.reason.cli
    res = gpurisk.assess(df, TESTDATA_KEYS, measures=["indiv_risk"],
                         options={"indiv_risk": {"Fk": "sample"}}).measures["indiv_risk"]
    assert res.extra["Fk_from"] == "sample"
    assert res.value == pytest.approx(want["risk"].mean(), rel=1e-10)
    # asking for a source that is not there says what is missing
    res = gpurisk.assess(df, TESTDATA_KEYS, measures=["indiv_risk"],
                         options={"indiv_risk": {"Fk": "weights"}}).measures["indiv_risk"]
    assert res.value is None and "weights=COL" in res.reason and "--weights COL" in res.reason.cli
    with pytest.raises(gpurisk.BadInput, match="indiv_risk.Fk='census'"):
        gpurisk.assess(df, TESTDATA_KEYS, measures=["indiv_risk"], options={"indiv_risk": {"Fk": "census"}})


def test_fraction_and_population_give_fk():
    df = _testdata()
    by_weights = gpurisk.assess(df, TESTDATA_KEYS, weights="sampling_weight",
                                measures=["indiv_risk"]).measures["indiv_risk"]
    by_fraction = gpurisk.assess(df, TESTDATA_KEYS, fraction=0.01,
                                 measures=["indiv_risk"]).measures["indiv_risk"]
    assert by_fraction.extra["Fk_from"] == "fraction"
    assert by_fraction.value == pytest.approx(by_weights.value, rel=1e-12)  # all weights are 100
    # a register with a sample flag: F_k is the true population count
    rng = np.random.default_rng(3)
    reg = df.assign(flag=rng.random(len(df)) < 0.3)
    table = gpurisk.build_table(reg, TESTDATA_KEYS, sample_flag="flag")
    res = gpurisk.assess(reg, TESTDATA_KEYS, sample_flag="flag",
                         measures=["indiv_risk"]).measures["indiv_risk"]
    assert res.extra["Fk_from"] == "population"
    f, F = table.f[table.f > 0], table.F[table.f > 0]
    p = f / F
    with np.errstate(divide="ignore", invalid="ignore"):  # F = f: sdcMicro's 1/f, chosen below
        r = np.where(F == f, 1 / f, np.where(f == 1, p / (1 - p) * np.log(1 / p),
                     np.where(f == 2, p / (1 - p) - (p / (1 - p)) ** 2 * np.log(1 / p), p / (f - (1 - p)))))
    assert res.value == pytest.approx(float((f * r).sum() / table.n), rel=1e-12)


def test_calibrated_weights_below_one_take_the_cell_at_its_count():
    """gpurisk's one rule for weights (issue 41): a cell whose weights sum below its count is taken
    at its count, F̂ = f (sdcMicro's r = 1/f there); the other cell's F̂ is its weight sum."""
    df = pd.DataFrame({"a": [1, 1, 2], "w": [0.2, 0.3, 5.0]})
    res = gpurisk.assess(df, ["a"], weights="w", measures=["indiv_risk"]).measures["indiv_risk"]
    p = 1 / 5.0                                  # cell a=2: f = 1, F̂ = 5
    hand = (2 * (1 / 2) + p / (1 - p) * np.log(1 / p)) / 3
    assert res.value == pytest.approx(hand, rel=1e-12)


def test_normalised_weights_without_a_population_size_say_how_to_give_it():
    df = pd.DataFrame({"a": [1, 1, 2, 3], "w": [0.5, 1.5, 1.0, 1.0]})        # Σw = n
    res = gpurisk.assess(df, ["a"], weights="w", measures=["indiv_risk"]).measures["indiv_risk"]
    assert res.value is None and "normalised weights" in res.reason and "fraction=PI" in res.reason
    # with π given they are scaled by 1/π: the same risk as the design weights w/π
    a = gpurisk.assess(df, ["a"], weights="w", fraction=0.1, measures=["indiv_risk"])
    b = gpurisk.assess(df.assign(w=df["w"] / 0.1), ["a"], weights="w", measures=["indiv_risk"])
    assert a.measures["indiv_risk"].value == pytest.approx(b.measures["indiv_risk"].value, rel=1e-12)


# --- the exact method ----------------------------------------------------------------------------
def sdcmicro_exact(f: int, p: float) -> float:
    """R/indivRisk.R (sdcMicro >= 2.6.5), method = "exact", fk > 2, transcribed term by term."""
    A = (p ** (1 - f) - 1) / (f - 1)

    def B(i):
        return (f - 1 - i) ** 2 / ((i + 1) * (f - 2 - i)) * (p ** (i + 2 - f) - 1) / (p ** (i + 1 - f) - 1)
    bb = 0.0
    for m in range(0, f - 2):
        b = 1.0
        for m2 in range(m + 1):
            b *= B(m2)
        bb += (-1) ** (m + 1) * b
    return (p / (1 - p)) ** f * (A * (1 + bb) + (-1) ** f * math.log(p))


def nb_expectation(f: int, p: float) -> float:
    """E[1/F], F - f ~ NegBin(f, p), summed over h until the terms vanish."""
    from scipy.special import gammaln
    q = 1.0 - p
    h = np.arange(f, f + int(f * q / p + 60 * math.sqrt(f * q) / p) + 200, dtype=float)
    t = np.exp(gammaln(h) - gammaln(f) - gammaln(h - f + 1) + f * np.log(p) + (h - f) * np.log1p(-p)) / h
    return math.fsum(t)


GRID_F = [1, 2, 3, 4, 6, 9, 15, 19, 20, 25, 60, 300]
GRID_P = [0.002, 0.01, 0.05, 0.2, 0.45, 0.5, 0.55, 0.8, 0.97, 0.999]


def test_exact_against_hypergeometric_and_series():
    from scipy.special import hyp2f1
    f = np.repeat(GRID_F, len(GRID_P))
    p = np.tile(GRID_P, len(GRID_F))
    got = gc.cell_risk(f, f / p, "exact")
    want = p / f * hyp2f1(1.0, 1.0, f + 1.0, 1.0 - p)   # E[1/F] = (p/f) 2F1(1, 1; f+1; q)
    ok = np.isfinite(want)                               # scipy gives NaN for f = 300, p <= 0.05
    assert ok.sum() >= len(ok) - 3
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-11)
    from scipy.integrate import quad
    for fi, pi, g in zip(f, p, got):
        c = (1 - pi) / pi  # E[1/F] = ∫_0^1 v^(f-1) / (1 + c v) dv, by adaptive quadrature
        integral, _ = quad(lambda v: v ** (fi - 1) / (1 + c * v), 0, 1, epsabs=0, epsrel=1e-13, limit=200)
        assert g == pytest.approx(integral, rel=1e-11), (fi, pi)
        if fi / pi < 1e4:  # the definition, summed term by term (cheap only for modest F)
            assert g == pytest.approx(nb_expectation(int(fi), float(pi)), rel=1e-10), (fi, pi)


@pytest.mark.parametrize("f", [3, 4, 5, 6, 8])
@pytest.mark.parametrize("p", [0.01, 0.1, 0.3, 0.5])
def test_exact_equals_sdcmicros_closed_form_where_it_is_well_conditioned(f, p):
    assert gc.cell_risk([f], [f / p], "exact")[0] == pytest.approx(sdcmicro_exact(f, p), rel=1e-9)


def test_exact_monte_carlo_of_the_model():
    rng = np.random.default_rng(2024)
    for f, p in [(3, 0.05), (5, 0.3), (30, 0.02)]:
        F = f + rng.negative_binomial(f, p, size=400_000)
        x = 1.0 / F
        se = x.std() / math.sqrt(x.size)
        assert abs(gc.cell_risk([f], [f / p], "exact")[0] - x.mean()) < 4 * se


def test_approx_and_exact_agree_for_f_up_to_two_and_differ_above():
    f = np.array([1, 2, 1, 2, 5])
    Fk = np.array([7.0, 9.0, 1.0, 2.0, 50.0])
    a, e = gc.cell_risk(f, Fk, "approx"), gc.cell_risk(f, Fk, "exact")
    np.testing.assert_allclose(a[:4], e[:4], rtol=1e-13)
    assert a[2] == 1.0 and a[3] == 0.5           # F_k = f_k: risk 1/f_k
    assert abs(a[4] - e[4]) > 1e-4


def test_exact_method_through_assess_and_options():
    df = _testdata()
    res = gpurisk.assess(df, TESTDATA_KEYS, weights="sampling_weight", measures=["indiv_risk"],
                         options={"indiv_risk": {"method": "exact", "qual": 0.5}}).measures["indiv_risk"]
    t = gpurisk.build_table(df, TESTDATA_KEYS, weights="sampling_weight")
    want = 0.5 * float(np.dot(t.f, gc.cell_risk(t.f, t.w, "exact"))) / t.n
    assert res.value == pytest.approx(want, rel=1e-12) and res.extra["method"] == "exact"
    with pytest.raises(gpurisk.BadInput, match="indiv_risk.method"):
        gpurisk.assess(df, TESTDATA_KEYS, measures=["indiv_risk"], fraction=0.01,
                       options={"indiv_risk": {"method": "bogus"}})


def test_cli_json_and_bad_option():
    path = data_path("sdcmicro/testdata.csv")
    proc = run_cli("assess", path, "--keys", ",".join(TESTDATA_KEYS), "--weights", "sampling_weight",
                   "--measures", "indiv_risk", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["measures"]["indiv_risk"]["value"] == pytest.approx(0.005411326, abs=5e-10)
    bad = run_cli("assess", path, "--keys", "sex", "--measures", "indiv_risk", "--fraction", "0.01",
                  "--option", "indiv_risk.method=fast")
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "indiv_risk.method='fast'" in bad.stderr
