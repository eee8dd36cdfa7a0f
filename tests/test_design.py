"""Unequal probabilities, strata and clusters (Skinner & Elliot 2002, §§5.2-5.4; SPEC §2)."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from gpurisk.workflows.assess import assess
from gpurisk.workflows.design import cluster_pairs, design_report, stratified, stratum_weights
from gpurisk.errors import BadInput

from conftest import data_path, run_cli


def mc_weighted_dis(frame, keys, w, K, seed):
    """The modified DIS of §5.3 on the records (pandas, not gpurisk's counting): remove record i
    with probability w_i / Σ w, copy it back with probability π_i = 1 / w_i."""
    rng = np.random.default_rng(seed)
    fi = frame.groupby(keys, dropna=False)[keys[0]].transform("size").to_numpy()
    i = rng.choice(len(frame), size=K, p=w / w.sum())
    back = rng.random(K) < 1.0 / w[i]
    rc = (fi[i] == 1) & back
    ru = rc | ((fi[i] == 2) & ~back)
    est = rc.sum() / ru.sum()
    se = math.sqrt(np.mean((rc - est * ru) ** 2) / K) / ru.mean()
    return est, se


def _weighted(frame, keys, wcol):
    a = assess(frame, keys, weights=wcol, measures=["theta_hat_weighted"])
    return a.measures["theta_hat_weighted"]


def test_equal_weights_give_theta_hat():
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))  # sampling_weight = 100: pi = 0.01
    keys = ["urbrur", "water", "sex", "age"]
    a = assess(d, keys, weights="sampling_weight", fraction=0.01,
               measures=["theta_hat", "theta_hat_weighted"])
    assert a.measures["theta_hat_weighted"].value == pytest.approx(a.measures["theta_hat"].value,
                                                                   rel=1e-13)
    assert a.measures["theta_hat_weighted"].extra["experimental"] is True
    rng = np.random.default_rng(3)
    syn = pd.DataFrame({"a": rng.integers(0, 40, 4000), "b": rng.integers(0, 25, 4000)}).assign(w=1 / 0.15)
    a = assess(syn, ["a", "b"], weights="w", fraction=0.15, measures=["theta_hat", "theta_hat_weighted"])
    assert a.measures["theta_hat_weighted"].value == pytest.approx(a.measures["theta_hat"].value,
                                                                   rel=1e-13)


def test_closed_form_agrees_with_the_weighted_monte_carlo_synthetic():
    rng = np.random.default_rng(4)
    n = 3000
    a = rng.integers(0, 30, n)
    frame = pd.DataFrame({"a": a, "b": rng.integers(0, np.where(a < 10, 8, 60))})
    # weights tied to the keys: small where cells are dense (a < 10), plus noise
    frame["w"] = np.where(frame["a"] < 10, 1.5, 20.0) * rng.choice([1.0, 2.0], n)
    r = _weighted(frame, ["a", "b"], "w")
    est, se = mc_weighted_dis(frame, ["a", "b"], frame["w"].to_numpy(), 1_000_000, seed=5)
    assert abs(est - r.value) < 4 * se, (est, r.value, se)
    # unequal weights matter: eq. 7 with the overall pi = n / Σ w is a different number
    th = assess(frame, ["a", "b"], fraction=n / frame["w"].sum(), measures=["theta_hat"])
    assert abs(th.measures["theta_hat"].value - r.value) > 10 * se
    # the closed form by hand (pandas): n1 / (n1 + Σ over records in pairs of (w_i − 1))
    fi = frame.groupby(["a", "b"])["w"].transform("size")
    hand = (fi == 1).sum() / ((fi == 1).sum() + (frame["w"][fi == 2] - 1).sum())
    assert r.value == pytest.approx(hand, rel=1e-13)


def test_closed_form_agrees_with_the_weighted_monte_carlo_real_weights():
    """mu-Argus demo file free1: design weights between 112.7 and 420."""
    d = pd.read_csv(data_path("sdcmicro/free1.csv"))
    keys = ["SEX", "AGE", "MARSTAT", "KINDPERS"]
    r = _weighted(d, keys, "WEIGHT")
    est, se = mc_weighted_dis(d, keys, d["WEIGHT"].to_numpy(), 2_000_000, seed=6)
    assert abs(est - r.value) < 4 * se, (est, r.value, se)


def test_normalised_weights_do_not_apply():
    d = pd.read_csv(data_path("sdcmicro/free1.csv"))
    d["wn"] = d["WEIGHT"] / d["WEIGHT"].mean()
    r = _weighted(d, ["SEX", "AGE"], "wn")
    assert r.value is None and "normalised weights" in r.reason and "fraction=PI" in r.reason


def test_stratified_weights_and_per_stratum_theta_hat():
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["sex", "age", "relat"]
    fr = {"1": 0.01, "2": 0.05}
    w = stratum_weights(d, "urbrur", fr)
    assert set(np.unique(w)) == {100.0, 20.0}
    out = stratified(d, keys, "urbrur", fr)
    for h, pi in ((1, 0.01), (2, 0.05)):
        sub = d[d["urbrur"] == h]
        ref = assess(sub, keys, fraction=pi, measures=["theta_hat"]).measures["theta_hat"].value
        assert out["strata"][str(h)]["theta_hat"] == pytest.approx(ref, rel=1e-14)
        assert out["strata"][str(h)]["pi"] == pytest.approx(pi)
    ref = _weighted(d.assign(w=w), keys, "w").value
    assert out["theta_hat_weighted"] == pytest.approx(ref, rel=1e-14)
    with pytest.raises(BadInput, match=r"no sampling fraction for 1 stratum value\(s\) of 'urbrur', "
                                       r"e.g. \['2'\]"):
        stratum_weights(d, "urbrur", {"1": 0.01})
    one = d.assign(urbrur=d["urbrur"].where(d.index != 0, 7))     # stratum 7: one record
    with pytest.raises(BadInput, match=r"e.g. \['<withheld: a value of 1 record>'\]") as err:
        stratum_weights(one, "urbrur", {"1": 0.01, "2": 0.05})
    assert "7" not in str(err.value)
    with pytest.raises(BadInput, match="pi=1.5 of stratum '2' is outside"):
        stratum_weights(d, "urbrur", {"1": 0.01, "2": 1.5})


def test_cluster_pairs_hand_example():
    frame = pd.DataFrame({"k": list("AABBCCCD"), "h": [1, 1, 2, 3, 4, 4, 5, 6]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = cluster_pairs(frame, ["k"], "h")
    # pairs: A (both in cluster 1), B (clusters 2 and 3); C is a triple, D a unique
    assert (r["pairs"], r["same_cluster"], r["share"]) == (2, 1, 0.5)
    assert r["warning"] and "1 of 2 sample pairs" in r["warning"] and len(caught) == 1
    r = cluster_pairs(frame, ["k"], "h", threshold=0.6)
    assert r["warning"] is None


def test_cluster_pairs_on_household_data():
    d = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hh = cluster_pairs(d, ["urbrur", "roof", "walls", "water", "electcon", "hhcivil"], "ori_hid")
        ind = cluster_pairs(d, ["urbrur", "water", "sex", "age"], "ori_hid")
    assert hh["share"] > 0.5 and hh["warning"]
    assert ind["share"] < 0.05 and ind["warning"] is None


def test_design_cli():
    path = data_path("sdcmicro/testdata.csv")
    proc = run_cli("design", str(path), "--keys", "roof,walls,water,electcon,hhcivil",
                   "--fraction", "0.01", "--cluster", "ori_hid", "--strata", "urbrur",
                   "--fractions", "1=0.01,2=0.02", "--json", check=True, subprocess=True)
    doc = json.loads(proc.stdout)
    assert doc["cluster"]["share"] > 0.5 and doc["warnings"]
    assert set(doc["stratified"]["strata"]) == {"1", "2"}
    assert "theta_hat" in doc
    proc = run_cli("design", str(path), "--keys", "sex,age", "--weights", "sampling_weight",
                   "--strata", "urbrur", "--fractions", "0.01")
    assert proc.returncode == 2 and proc.stderr.startswith("gpurisk: error: give either --weights")
