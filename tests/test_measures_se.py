"""Skinner & Elliot measures against hand computations, edge cases and simulations (SPEC §2)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.errors import BadInput
from gpurisk.measures.theta_hat import theta_hat

from conftest import data_path


def frame_from_counts(counts):
    """A sample whose cells have the given sizes (one key)."""
    return pd.DataFrame({"k": np.repeat(np.arange(len(counts)), counts)})


def test_theta_hat_and_variance_by_hand():
    # f = 1,1,1,2,2,3: n1 = 3, n2 = 2, n3 = 1; pi = 0.1
    # by hand: theta = 0.3 / (0.3 + 2*0.9*2) = 0.3/3.9 = 1/13
    #          v = (1/13)^2 * 2*0.9*(3*0.9*1 + 1.9*2) / 3.9^2 = (1/169) * 11.7/15.21 = 10/2197
    r = gpurisk.assess(frame_from_counts([1, 1, 1, 2, 2, 3]), ["k"], fraction=0.1)
    m = r.measures["theta_hat"]
    assert m.value == pytest.approx(1 / 13, rel=1e-12)
    assert m.se == pytest.approx(math.sqrt(10 / 2197), rel=1e-12)
    assert m.upper == pytest.approx(1 / 13 + 2.3263478740408408 * math.sqrt(10 / 2197), rel=1e-12)
    r = gpurisk.assess(frame_from_counts([1, 1, 1, 2, 2, 3]), ["k"], fraction=0.1, alpha=0.05)
    assert r.measures["theta_hat"].upper == pytest.approx(1 / 13 + 1.6448536269514722 * math.sqrt(10 / 2197))


def test_theta_hat_testdata_by_hand():
    # testdata, keys urbrur water sex age: n1 = 330, n2 = 172 (sdcMicro), pi = 0.01
    # theta = 3.3 / (3.3 + 2*0.99*172) = 3.3 / 343.86
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    r = gpurisk.assess(df, ["urbrur", "water", "sex", "age"], fraction=0.01)
    assert r.measures["theta_hat"].value == pytest.approx(3.3 / 343.86, rel=1e-12)


@pytest.mark.parametrize("counts,pi,expect", [
    ([2, 2, 3], 0.1, 0.0),        # n1 = 0 < n2
    ([1, 1, 3], 0.1, 1.0),        # n2 = 0 < n1
    ([1, 2, 2], 1.0, 1.0),        # census released whole
])
def test_theta_hat_edges(counts, pi, expect):
    r = gpurisk.assess(frame_from_counts(counts), ["k"], fraction=pi)
    assert r.measures["theta_hat"].value == expect
    assert r.measures["theta_hat"].reason is None


def test_theta_hat_undefined_without_uniques_or_pairs():
    r = gpurisk.assess(frame_from_counts([3, 4]), ["k"], fraction=0.1)
    m = r.measures["theta_hat"]
    assert math.isnan(m.value) and "undefined" in m.reason
    assert r.to_dict()["measures"]["theta_hat"]["value"] is None
    assert "undefined" in r.measures["theta_hat_dis"].reason or r.measures["theta_hat_dis"].reason


@pytest.mark.parametrize("pi", [0.0, -0.1, 1.0001, float("nan")])
def test_fraction_outside_domain(pi):
    with pytest.raises(BadInput, match="outside"):
        gpurisk.assess(frame_from_counts([1, 2]), ["k"], fraction=pi)


def test_theta_hat_function_formula_edges():
    th, v = theta_hat(0, 0, 5, 0.5)
    assert math.isnan(th) and math.isnan(v)
    th, v = theta_hat(4, 0, 0, 0.3)
    assert th == 1.0 and v == 0.0


def test_population_measures_by_hand():
    # cells:       A    B    C    D    E
    # sample f:    1    1    2    0    1
    # population F 1    3    4    1    2
    samp = pd.DataFrame({"k": list("ABCCE")})
    pop = pd.DataFrame({"k": list("A" + "BBB" + "CCCC" + "D" + "EE")})
    r = gpurisk.assess(samp, ["k"], population=pop)
    m = r.measures
    assert r.context.fraction == pytest.approx(5 / 11)
    assert m["theta"].value == pytest.approx(3 / (1 + 3 + 2))
    assert m["pr_pu"].value == pytest.approx(2 / 11)
    assert m["pr_pu_su"].value == pytest.approx(1 / 3)
    assert m["match_prob_a"].value == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)
    doc = r.to_dict()
    assert doc["N"] == 11 and doc["n"] == 5 and doc["cells"] == 4


def test_population_measures_without_population_say_why():
    r = gpurisk.assess(frame_from_counts([1, 2]), ["k"], fraction=0.5)
    for name in ("theta", "pr_pu", "pr_pu_su", "match_prob_a"):
        assert r.measures[name].value is None
        assert "population" in r.measures[name].reason


def test_theta_hat_dis_converges_to_theta_hat():
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex", "age"]
    r = gpurisk.assess(df, keys, fraction=0.05, options={"theta_hat_dis": {"K": 4_000_000}}, seed=7)
    dis, th = r.measures["theta_hat_dis"], r.measures["theta_hat"]
    assert abs(dis.value - th.value) < 4 * dis.se
    assert dis.se < 0.002
    # seeded: the same seed gives the same number, another seed another one
    again = gpurisk.assess(df, keys, fraction=0.05, options={"theta_hat_dis": {"K": 4_000_000}}, seed=7)
    assert again.measures["theta_hat_dis"].value == dis.value


def test_theta_hat_dis_record_level_simulation_matches():
    """The vectorised DIS against a literal simulation of the paper's steps on records."""
    rng = np.random.default_rng(11)
    df = frame_from_counts([1, 1, 1, 1, 2, 2, 2, 3, 5])
    keys = df["k"].to_numpy()
    pi, K = 0.3, 20000
    ru = rc = 0
    for _ in range(K):  # test-only literal loop over simulated intrusions
        i = rng.integers(len(keys))
        rest = np.delete(np.arange(len(keys)), i)
        back = rng.random() < pi
        pool = np.append(rest, i) if back else rest
        matches = pool[keys[pool] == keys[i]]
        if len(matches) == 1:
            ru += 1
            rc += int(matches[0] == i)
    literal = rc / ru
    r = gpurisk.assess(df, ["k"], fraction=pi, options={"theta_hat_dis": {"K": 400_000}})
    th = r.measures["theta_hat"].value  # 1.2 / (1.2 + 1.4*3) = 0.2222
    assert th == pytest.approx(1.2 / (1.2 + 1.4 * 3))
    assert abs(literal - th) < 0.02
    assert abs(r.measures["theta_hat_dis"].value - th) < 4 * r.measures["theta_hat_dis"].se


def test_proposition_2_by_bernoulli_simulation_on_real_population():
    """E[2(1-pi) n2 / pi] = E[sum_j (F_j - 1) I(f_j = 1)] under Bernoulli sampling (eq. 8)."""
    pop = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"))
    t = gpurisk.build_table(pop, ["age", "sex", "race", "marital-status"])
    F = t.f
    pi, R = 0.1, 400
    rng = np.random.default_rng(5)
    f = rng.binomial(F, pi, size=(R, F.size))
    lhs = 2 * (1 - pi) * (f == 2).sum(axis=1) / pi
    rhs = ((F - 1) * (f == 1)).sum(axis=1)
    diff = lhs - rhs
    assert abs(diff.mean()) < 4 * diff.std(ddof=1) / math.sqrt(R)
