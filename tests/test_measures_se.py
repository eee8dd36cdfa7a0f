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
    # the default bound is on the log scale: θ̂·exp(z v̂^½/θ̂) (0.59 against Wald's 0.23: with two
    # sample pairs the log bound is wide where the Wald bound is short)
    se = math.sqrt(10 / 2197)
    log_bound = 1 / 13 * math.exp(2.3263478740408408 * se * 13)
    # with n2 = 2 < 20 pairs it is raised to the exact-Poisson bound (issue 27): n1 at its 99 %
    # upper limit ½χ²(0.99; 8) = 10.0451, n2 at its lower one ½χ²(0.01; 4) = 0.14855
    from scipy.stats import chi2
    n1u, n2l = chi2.ppf(0.99, 8) / 2, chi2.ppf(0.01, 4) / 2
    assert n1u == pytest.approx(10.0451, abs=1e-4) and n2l == pytest.approx(0.14855, abs=1e-5)
    poisson = 0.1 * n1u / (0.1 * n1u + 2 * 0.9 * n2l)
    assert m.upper == pytest.approx(max(log_bound, poisson), rel=1e-12) and poisson > log_bound
    off = gpurisk.assess(frame_from_counts([1, 1, 1, 2, 2, 3]), ["k"], fraction=0.1,
                         options={"theta_hat": {"few_pairs": 0}}).measures["theta_hat"]
    assert off.upper == pytest.approx(log_bound, rel=1e-12)
    assert m.extra["bound"] == "log"
    r = gpurisk.assess(frame_from_counts([1, 1, 1, 2, 2, 3]), ["k"], fraction=0.1, alpha=0.05,
                       options={"theta_hat": {"bound": "wald"}})
    assert r.measures["theta_hat"].upper == pytest.approx(1 / 13 + 1.6448536269514722 * se)
    assert r.measures["theta_hat"].extra["bound"] == "wald"


def test_poisson_bound_is_scipy_stats_chi2_bit_for_bit():
    # poisson_bound takes χ² quantiles from scipy.special (scipy.stats costs half a second to
    # import): the same numbers as Garwood's limits through scipy.stats' chi2.ppf, to the last bit
    from scipy.stats import chi2

    from gpurisk.measures.theta_hat import poisson_bound
    for n1 in (1, 2, 5, 17, 40, 333, 4000):
        for n2 in (0, 1, 3, 19):
            for pi, alpha in ((0.01, 0.01), (0.1, 0.05), (0.5, 0.001)):
                n1u = 0.5 * float(chi2.ppf(1.0 - alpha, 2 * n1 + 2))
                n2l = 0.5 * float(chi2.ppf(alpha, 2 * n2)) if n2 > 0 else 0.0
                want = min(pi * n1u / (pi * n1u + 2.0 * (1.0 - pi) * n2l), 1.0)
                assert poisson_bound(n1, n2, pi, alpha) == want


def test_theta_hat_log_bound_by_hand():
    # f = 1 x 10, 2 x 40, 3 x 5; π = 0.2: θ̂ = 2 / (2 + 1.6·40) = 2/66
    counts = [1] * 10 + [2] * 40 + [3] * 5
    th, v = theta_hat(10, 40, 5, 0.2)
    assert th == pytest.approx(2 / 66)
    r = gpurisk.assess(frame_from_counts(counts), ["k"], fraction=0.2)
    m = r.measures["theta_hat"]
    z = 2.3263478740408408
    assert m.upper == pytest.approx(th * math.exp(z * math.sqrt(v) / th), rel=1e-12)
    assert th < m.upper < 1.0
    wald = gpurisk.assess(frame_from_counts(counts), ["k"], fraction=0.2,
                          options={"theta_hat": {"bound": "wald"}}).measures["theta_hat"]
    assert wald.upper == pytest.approx(th + z * math.sqrt(v), rel=1e-12)
    assert wald.value == m.value and wald.se == m.se


def test_bounds_of_probabilities_never_leave_0_1():
    """Every upper bound of θ̂ (both kinds) and of θ̂(K) lies in [0, 1], whatever the counts."""
    rng = np.random.default_rng(4)
    for _ in range(60):
        counts = rng.integers(1, 5, rng.integers(1, 12))
        pi = float(rng.choice([0.001, 0.01, 0.3, 0.9]))
        for bound in ("log", "wald"):
            r = gpurisk.assess(frame_from_counts(counts), ["k"], fraction=pi,
                               measures=["theta_hat", "theta_hat_dis", "matches_hat"],
                               options={"theta_hat": {"bound": bound}})
            for name in ("theta_hat", "theta_hat_dis"):
                up = r.measures[name].upper
                assert up is None or 0.0 <= up <= 1.0, (name, counts, pi, up)
            m = r.measures["matches_hat"]
            n1 = int((counts == 1).sum())
            assert m.value is not None and 0.0 <= m.value <= n1 and 0.0 <= m.upper <= n1


def test_theta_hat_testdata_by_hand():
    # testdata, keys urbrur water sex age: n1 = 330, n2 = 172 (sdcMicro), pi = 0.01
    # theta = 3.3 / (3.3 + 2*0.99*172) = 3.3 / 343.86
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    r = gpurisk.assess(df, ["urbrur", "water", "sex", "age"], fraction=0.01)
    assert r.measures["theta_hat"].value == pytest.approx(3.3 / 343.86, rel=1e-12)


@pytest.mark.parametrize("counts,pi,expect", [
    ([2, 2, 3], 0.1, 0.0),        # n1 = 0 < n2
    ([1, 2, 2], 1.0, 1.0),        # census released whole
])
def test_theta_hat_edges(counts, pi, expect):
    # named: at π = 1 (a census) the population counts are known and θ̂ runs only when named
    r = gpurisk.assess(frame_from_counts(counts), ["k"], fraction=pi, measures=["theta_hat"])
    assert r.measures["theta_hat"].value == expect
    assert r.measures["theta_hat"].reason is None


def test_theta_hat_not_estimable_without_pairs():
    """n2 = 0 < n1 (π < 1): eq. 7 would give 1 ± 0; the measures say not estimable, with the counts."""
    r = gpurisk.assess(frame_from_counts([1, 1, 3]), ["k"], fraction=0.1,
                       measures=["theta_hat", "theta_hat_dis", "matches_hat"])
    m = r.measures["theta_hat"]
    assert m.value is None and m.upper is None and m.se is None
    assert m.reason.startswith("not estimable: no sample pair (n2 = 0)")
    assert "n1 = 2, n2 = 0, n3 = 1" in m.reason and m.extra["estimable"] is False
    assert r.measures["theta_hat_dis"].value is None
    assert "not estimable" in r.measures["theta_hat_dis"].reason
    # matches_hat: half a pair (continuity correction), flagged, bounded by n1
    mh = r.measures["matches_hat"]
    th_half, _ = theta_hat(2, 0.5, 1, 0.1)
    assert mh.value == pytest.approx(2 * th_half) and mh.upper == 2.0
    assert mh.extra["estimable"] is False and "half a sample pair" in mh.extra["note"]
    # min_pairs raises the rule: 1 pair is then too few
    r = gpurisk.assess(frame_from_counts([1, 1, 2, 3]), ["k"], fraction=0.1,
                       options={"theta_hat": {"min_pairs": 2}})
    assert r.measures["theta_hat"].value is None
    assert "fewer than min_pairs = 2" in r.measures["theta_hat"].reason
    assert r.measures["matches_hat"].value is not None                 # eq. 7 with n2 = 1, flagged
    assert r.measures["matches_hat"].extra["estimable"] is False


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
