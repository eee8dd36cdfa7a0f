"""The skewed upper bound of matches_ll (issue 43): E[1/F³] against the negative binomial's own series,
the third cumulants against a simulation of the model, and the bound's Cornish-Fisher form on a
sample of the real FARS file."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import nbinom

from conftest import data_path
from gpurisk.freq.engine import build_table
from gpurisk.measure import Context
from gpurisk.models.terms import inverse_cube, inverse_square, third_cumulants
from gpurisk.measures.matches_ll import MatchesLL


def test_inverse_cube_is_the_negative_binomials_series():
    rng = np.random.default_rng(0)
    c = np.exp(rng.uniform(math.log(1e-3), math.log(50.0), 300))
    a = 1.0 + np.exp(rng.uniform(math.log(0.05), math.log(50.0), 300))
    k = np.arange(20_000)
    want3 = np.array([np.sum(nbinom.pmf(k, ai, 1 / (1 + ci)) / (1.0 + k) ** 3) for ci, ai in zip(c, a)])
    want2 = np.array([np.sum(nbinom.pmf(k, ai, 1 / (1 + ci)) / (1.0 + k) ** 2) for ci, ai in zip(c, a)])
    np.testing.assert_allclose(inverse_cube(c, a), want3, rtol=3e-5)
    np.testing.assert_allclose(inverse_square(c, a), want2, rtol=1e-10)
    # F = 1 for sure, and almost surely
    assert inverse_cube(np.array([0.5]), 3.0, zero=np.array([True]))[0] == 1.0
    assert inverse_cube(np.array([1e-10]), 3.0)[0] == pytest.approx(1 - 7 / 8 * 3e-10, rel=1e-15)


@pytest.mark.parametrize("c, am1, rule", [
    (0.5, 3.0, 0), (2.0, 0.2, 0), (2.0, 7.0, 1), (10.0, 6.0, 2), (20.0, 30.0, 3), (0.5, 200.0, 3),
    (0.0115, 3650.0, 3), (0.5, 90.0, 3), (0.5, 80.0, 4),
    (10.0, 15.0, 4), (5000.0, 0.5, 4), (1e5, 4.0, 4)])
def test_each_rule_of_inverse_square_is_the_negative_binomials_series(c, am1, rule):
    """E[1/F²] by each of inverse_square's rules (fewer Gauss-Legendre nodes where the integrand
    is easy, Gauss-Laguerre where its exponential factor falls by 35-40 e-folds or more, 20 nodes
    elsewhere) against Σ_k P(X = k)/(1 + k)², X negative binomial, summed until its tail is gone."""
    from gpurisk.models.terms import square_rules
    a = 1.0 + am1
    assert square_rules(np.array([c]), np.array([a]))[0] == rule
    k = np.arange(int(60 * c * a / am1 + 200 * (a * c) ** 0.5 + 2_000))
    want = np.sum(nbinom.pmf(k, a, 1 / (1 + c)) / (1.0 + k) ** 2)
    assert inverse_square(np.array([c]), a)[0] == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("a", [1e13, 1e100, 1e300])
def test_the_laguerre_rule_at_a_huge_shape_is_poissons(a):
    """A gamma of almost no variance (a huge) and X's mean 40 or 100: the Gauss-Laguerre rule, whose
    denominator is taken as two factors near the mean so that (a − 1)² does not overflow (it gave 0
    at a = 10³⁰⁰), gives Poisson's E[1/F²], summed term by term (from a = 10¹³ the gamma's own
    variance moves it by less than the tolerance; at 10⁹ it moved it by 3·10⁻⁹)."""
    from scipy.stats import poisson
    from gpurisk.models.terms import square_rules
    k = np.arange(4_000)
    for m in (40.0, 100.0):
        c = np.array([m / a])
        assert square_rules(c, np.array([a]))[0] == 3
        assert inverse_square(c, a)[0] == pytest.approx(np.sum(poisson.pmf(k, m) / (1.0 + k) ** 2),
                                                        rel=1e-10)


@pytest.mark.parametrize("a", [1e9, 1e12, 1e15])
def test_tiny_c_at_a_large_shape_is_the_poisson_limit(a):
    """c below 1e-8 with a large a (a gamma of tiny variance: a sample of 10⁸ records or more) is
    F − 1 ≈ Poisson(a c), not "F = 1 almost surely": E[1/F²] and E[1/F³] are Poisson's, summed
    term by term here (these were 0.0025 and −0.16 at m = 1.33 before)."""
    from scipy.stats import poisson
    k = np.arange(2_000)
    for m in (1e-4, 0.5, 1.33, 10.0):
        p = poisson.pmf(k, m)
        c = np.array([m / a])
        assert inverse_square(c, a)[0] == pytest.approx(np.sum(p / (1.0 + k) ** 2), rel=1e-6)
        assert inverse_cube(c, a)[0] == pytest.approx(np.sum(p / (1.0 + k) ** 3), rel=3e-5)


@pytest.mark.parametrize("c", [1e-7, 1e-3, 0.5, 3.0, 50.0, 1e3, 1e5])
def test_a_shape_of_one_is_the_geometric_series(c):
    """a = 1/α̃ + 1 rounds to 1 where the prior's relative variance α̃ is above 2⁵³ (a unique alone in
    several arcs' pairs); (a − 1) divides in both integrands, which gave 0/0 = NaN there. At a = 1,
    F − 1 is geometric, P(X = k) = p q^k (q = c/(1 + c)), summed term by term here; a − 1 just
    above 0 gives the same to 10⁻⁹."""
    q, p = c / (1.0 + c), 1.0 / (1.0 + c)
    k = np.arange(int(40 / -math.log(q)) + 10)
    pk = p * q ** k
    want2, want3 = np.sum(pk / (1.0 + k) ** 2), np.sum(pk / (1.0 + k) ** 3)
    got2, got3 = inverse_square(np.array([c]), 1.0)[0], inverse_cube(np.array([c]), 1.0)[0]
    assert got2 == pytest.approx(want2, rel=1e-12)
    assert got3 == pytest.approx(want3, rel=1e-4)
    assert inverse_square(np.array([c]), 1.0 + 1e-12)[0] == pytest.approx(got2, rel=1e-9)


def test_matches_ll_s_e_is_a_number_where_a_prior_is_nearly_flat():
    """MACH 2019's questionnaire items at π = 30 % (a sample found by a sweep of random key sets):
    one sample unique's prior has α̃ above 10¹⁶, and Ê's s.e. was NaN (the estimate withheld as
    'returned NaN as se without a reason'). Every figure is now a number."""
    frame = pd.read_csv(data_path("arx_genetic/mach2019_int.csv"), sep=";")
    keys = ["Q1A", "Q4A", "Q2A", "familysize", "Q3A", "Q9A", "race", "Q10A", "gender"]
    sample = frame[np.random.default_rng(6).random(len(frame)) < 0.3]
    table = build_table(sample[keys], keys)
    from gpurisk.models.prior import loo_prior
    from gpurisk.models.table_fits import eb_means
    est = MatchesLL().compute(table, Context(fraction=0.3))
    assert est.value > 0
    for name in ("se_poisson", "lower", "interval_lower", "interval_upper"):
        assert math.isfinite(est.extra[name]), name
    assert math.isfinite(est.se) and math.isfinite(est.upper) and est.upper >= est.value
    # the case this is: a prior whose shape rounds to 1
    mu, alpha, _, counts, *_ = eb_means(table, dispersion="truncated")
    alpha_loo = loo_prior(float(table.n), counts, alpha)[1]
    assert float(np.max(alpha_loo)) > 2.0 ** 53


@pytest.mark.parametrize("kind", ["inverse", "tau1"])
def test_third_cumulants_match_a_simulation_of_the_model(kind):
    """Λ from its gamma posterior given f = 1, F − 1 ~ Poisson((1 − π)Λ): each unique's third central
    moment of 1/F (or I(F = 1)) over replicates, summed, against the sum of the terms' third
    cumulants (the sum's own third moment is the same number, but far noisier to simulate)."""
    rng = np.random.default_rng(5)
    pi = 0.05
    mu = np.exp(rng.uniform(math.log(0.002), math.log(0.2), 20))     # sample-scale means
    alpha = rng.uniform(0.05, 1.5, 20)
    lam = mu / pi
    shape, rate = 1 / alpha + 1, 1 / (alpha * lam) + pi
    reps = 300_000
    big = rng.gamma(shape[None, :], 1 / rate[None, :], (reps, mu.shape[0]))
    F = 1 + rng.poisson((1 - pi) * big)
    x = (F == 1).astype(float) if kind == "tau1" else 1.0 / F
    want = float(np.sum(np.mean((x - x.mean(axis=0)) ** 3, axis=0)))
    got = third_cumulants(mu, alpha, pi, kind)
    assert float(got.sum()) == pytest.approx(want, rel=0.05)
    # and each against the negative binomial's own series
    k = np.arange(5_000)
    c, a = (1 - pi) / rate, shape
    for j in range(mu.shape[0]):
        p = nbinom.pmf(k, a[j], 1 / (1 + c[j]))
        v = (k == 0).astype(float) if kind == "tau1" else 1.0 / (1.0 + k)
        m = float(np.sum(p * v))
        assert got[j] == pytest.approx(float(np.sum(p * (v - m) ** 3)), rel=2e-3, abs=1e-12)


def test_the_upper_ends_are_cornish_fisher_and_never_below_the_normal_ones():
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    sample = df.sample(frac=0.01, random_state=3)
    t = build_table(sample, ["iage", "isex", "irace"])
    # one prior's ends (under root_prior=eb, the default, the ends are taken from the larger of
    # two estimates, tests/test_root_prior.py)
    one = {"root_prior": "jeffreys"}
    on = MatchesLL().compute(t, Context(fraction=0.01, options={"matches_ll": one}))
    off = MatchesLL().compute(t, Context(fraction=0.01, options={"matches_ll": {
        "skew_bound": False, **one}}))
    x = on.extra
    assert on.value == off.value and on.se == off.se and "skewness" not in off.extra
    g = x["skewness"]
    assert g > 0                                        # a few uniques with small λ: right-skewed
    shift = max(-x.get("misfit_bias", 0.0), 0.0)
    for z, got, normal in [(2.3263478740408408, on.upper, off.upper),
                           (2.5758293035489004, x["interval_upper"], off.extra["interval_upper"])]:
        want = min(on.value + on.se * (z + (z * z - 1) * g / 6) + shift, x["n1"])
        assert got == pytest.approx(want, rel=1e-12)
        assert got > normal
    assert x["interval_lower"] == off.extra["interval_lower"]


def test_an_s_e_whose_cube_underflows_still_gives_the_cornish_fisher_bound():
    """τ̂1 of a sample whose every cell holds hundreds in the population (1 000 cells, λ ≈ 600): each
    unique's term is near e^{-600}, the s.e. near 1e-110, so se³ underflows to 0 and the skewness
    was a division by zero (a scan of a 3·10⁶-record register lost τ̂1 for 10 of its 255
    combinations). The bound is the Cornish-Fisher end, from the skewness formed one factor at a
    time."""
    from gpurisk.measures.tau1_ll import Tau1LL
    rng = np.random.default_rng(1)
    df = pd.DataFrame({k: rng.integers(0, 10, 6000) for k in "abc"})
    t = build_table(df, ["a", "b", "c"])
    on = Tau1LL().compute(t, Context(fraction=0.01))
    off = Tau1LL().compute(t, Context(fraction=0.01, options={"tau1_ll": {"skew_bound": False}}))
    assert on.reason is None and off.reason is None
    assert 0 < on.se < 1e-103 and on.se ** 3 == 0.0          # the cube does underflow
    g = on.extra["skewness"]
    assert math.isfinite(g) and g > 0
    z = 2.3263478740408408
    # (and the misfit's shift, and Jeffreys' estimate's excess where a root's gamma is used)
    shift = max(-on.extra.get("misfit_bias", 0.0), 0.0) + \
        max(on.extra.get("estimate_jeffreys", on.value) - on.value, 0.0)
    assert on.upper == pytest.approx(on.value + on.se * (z + (z * z - 1) * g / 6) + shift,
                                     rel=1e-12)
    assert on.upper > off.upper and on.value == off.value and on.se == off.se
    assert on.upper <= on.extra["n1"]


def test_variance_bins_are_ordered_and_narrow():
    """A smaller variance never gets a smaller bin; a bin's variances are within a factor 1.25 of
    each other (four bins an octave, by the mantissa); 0 and the tiniest share the last bin."""
    from gpurisk.models.unique_sums import BINS, variance_bins
    rng = np.random.default_rng(3)
    v = np.concatenate([np.exp(rng.uniform(math.log(1e-18), math.log(0.25), 20_000)),
                        [0.25, 0.0, 1e-300, 2.0 ** -70]])
    b = variance_bins(v)
    order = np.argsort(v)
    assert (np.diff(b[order].astype(int)) <= 0).all()
    for k in np.unique(b[v > 2.0 ** -60]):
        got = v[b == k]
        assert got.max() <= 1.25 * got.min()
    assert b[-3] == b[-2] == b[-1] == BINS - 1


@pytest.mark.parametrize("share", [0.0, 0.05, 0.3, 1.1])
def test_the_uniques_left_out_of_the_skew_are_the_smallest_within_the_budget(share):
    """skew_sum against a sort by variance: the uniques it leaves out are the smallest (whole bins)
    and their Σ Var is within the budget; the next bin would pass it (and the sort, up to the
    budget, leaves out at least as many); Σ κ3 is third_cumulants' over the others, summed whole;
    None where every unique fits in the budget."""
    from gpurisk.models import terms
    from gpurisk.models.unique_sums import FixedPrior, skew_sum, unique_pass
    rng = np.random.default_rng(5)
    mu = np.exp(rng.uniform(math.log(1e-4), math.log(50.0), 3000))
    alpha = rng.gamma(1.0, 0.5, 3000)
    prior, pi = FixedPrior(mu, alpha), 0.05
    got = unique_pass(prior, pi, True, bins=True)
    t, v = terms.nb_terms((1 - pi) * mu / pi, alpha, pi, "inverse", True)
    assert got.sums["inverse"].variance == pytest.approx(v.sum(), rel=1e-13)
    budget = share * float(v.sum())
    k3 = skew_sum(prior, pi, True, got.bins, got.bin_sums, budget)
    if share > 1:
        assert k3 is None
        return
    # the left-out uniques: the bins from some cut on; found here by their variances' sums
    left = np.zeros(3000, dtype=bool)
    for k in sorted(np.unique(got.bins), reverse=True):
        more = left | (got.bins == k)
        if v[more].sum() > budget:
            break
        left = more
    kept = ~left
    assert v[left].sum() <= budget
    assert v[left].size == 0 or v[left].max() <= v[kept].min()
    by_sort = int(np.searchsorted(np.cumsum(np.sort(v)), budget, side="right"))
    assert left.sum() <= by_sort
    want = terms.third_cumulants(mu[kept], alpha[kept], pi, "inverse", t[kept], v[kept],
                                 total=True)
    assert k3 == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("keys", [["iage", "isex", "irace"], ["iage", "isex", "irace", "ihispanic",
                                                             "iinjury"]])
def test_leaving_uniques_out_of_the_skew_moves_the_bound_by_at_most_its_tolerance(keys, monkeypatch):
    """Against Σ κ3 over every sample unique (SKEW_TOL = 0), on a 1 % sample of the real FARS file:
    the upper ends move by at most SKEW_TOL of an s.e., most uniques are left out."""
    import gpurisk.models.loglinear_risk as lp
    from gpurisk.models import terms
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    t = build_table(df.sample(frac=0.01, random_state=5), keys)
    cube = []
    real = terms.inverse_cube
    monkeypatch.setattr(terms, "inverse_cube", lambda c, *a, **k: cube.append(c.shape[0]) or real(c, *a, **k))
    one = Context(fraction=0.01, options={"matches_ll": {"root_prior": "jeffreys"}})  # one prior
    part = MatchesLL().compute(t, one).to_dict()
    monkeypatch.setattr(lp, "SKEW_TOL", 0.0)
    whole = MatchesLL().compute(build_table(df.sample(frac=0.01, random_state=5), keys),
                                one).to_dict()
    assert part["value"] == whole["value"] and part["se"] == whole["se"]
    assert sum(cube[:-1]) < 0.5 * cube[-1]        # E[1/F³] of fewer than half the uniques
    assert whole["skewness"] > 0
    for k in ("upper", "interval_upper"):
        assert abs(part[k] - whole[k]) <= 0.01 * whole["se"] + 1e-12


def test_tau1s_skew_sums_every_unique(monkeypatch):
    """τ̂1's κ3 = t(1 − t)(1 − 2t) is summed over every sample unique (cheaper than sorting their
    variances to leave some out): its skewness is the same whatever SKEW_TOL, even one that would
    leave every unique out of E's."""
    import gpurisk.models.loglinear_risk as lp
    from gpurisk.measures.tau1_ll import Tau1LL
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    sample = df.sample(frac=0.01, random_state=5)
    keys = ["iage", "isex", "irace"]
    exact = Tau1LL().compute(build_table(sample, keys), Context(fraction=0.01)).extra
    monkeypatch.setattr(lp, "SKEW_TOL", 1e9)
    loose = Tau1LL().compute(build_table(sample, keys), Context(fraction=0.01)).extra
    e_loose = MatchesLL().compute(build_table(sample, keys), Context(fraction=0.01)).extra
    assert "skewness" not in e_loose                   # E's uniques all left out at that tolerance
    assert exact["skewness"] == loose["skewness"] and exact["skewness"] > 0
