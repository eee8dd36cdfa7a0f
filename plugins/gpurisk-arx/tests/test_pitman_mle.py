"""gpurisk's rule for pop_uniqueness (issue 27): Pitman's likelihood maximised over its whole space,
the exact finite-N expectations, the bounds the sample sets, SNB's root scan and the interval.
References not derived from the code: the likelihood's literal sums, a brute-force grid over both
branches, the expectations by their one-step recursion and by simulating the Chinese restaurant
process, the SNB probabilities by direct summation over population class sizes."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from gpurisk import Context
from gpurisk.testing import run_measure, table_from_counts

pytest.importorskip("gpurisk_arx")
from gpurisk_arx import pitman_mle as PM  # noqa: E402
from gpurisk_arx import fitted as G  # noqa: E402
from gpurisk_arx import uniqueness as U  # noqa: E402
from gpurisk_arx.population import PopUniqueness  # noqa: E402

PITMAN_F = [1] * 10 + [2, 2, 2, 3, 4, 6]      # n = 29, J = 16
F6 = [1, 1, 1, 2, 2, 3]                       # ARX's start lies outside the model (θ0 = −15, α0 = 2.2)


def literal_loglik(theta, alpha, f):
    n, J = sum(f), len(f)
    out = math.fsum(math.log(theta + i * alpha) for i in range(1, J))
    out -= math.fsum(math.log(theta + i) for i in range(1, n))
    out += math.fsum(math.log(l - alpha) for s in f for l in range(1, s))
    return out


def sm_of(f, N):
    return U.sample(np.bincount(f), N)


@pytest.mark.parametrize("theta,alpha", [(3.0, 0.3), (50.0, -2.0), (1e7, 0.2), (5.0, 0.0),
                                         (1e9, -1e-8), (0.01, 0.9), (16 * 0.7, -0.7), (1e3, 0.999)])
def test_loglik_equals_the_literal_sums(theta, alpha):
    sm = sm_of(PITMAN_F, 1000)
    assert PM.loglik(theta, alpha, sm)[0] == pytest.approx(literal_loglik(theta, alpha, PITMAN_F),
                                                            rel=1e-12, abs=1e-9)


def test_loglik_is_minus_infinity_outside_the_space():
    sm = sm_of(PITMAN_F, 1000)
    # α ≥ 1; θ ≤ −α; α < 0 with θ + (J−1)α ≤ 0 (the accepted fits outside the space)
    for theta, alpha in [(5.0, 1.0), (-0.5, 0.3), (10.0, -1.0)]:
        assert PM.loglik(theta, alpha, sm)[0] == -math.inf


def _grid_max(f):
    """The likelihood's maximum over a dense grid of both branches by the literal sums."""
    J = len(f)
    best = -math.inf
    for alpha in np.concatenate([np.linspace(0.0, 0.995, 200)]):
        for theta in np.geomspace(1e-4, 1e6, 300) - alpha + 1e-9:
            best = max(best, literal_loglik(theta, alpha, f))
    for a in np.geomspace(1e-3, 1e3, 120):
        for K in np.unique(np.geomspace(J, 1e6, 150).astype(int)):
            best = max(best, literal_loglik(K * a, -a, f))
    return best


@pytest.mark.parametrize("f", [PITMAN_F, F6, [1, 1, 1, 1, 2], [1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4]])
def test_mle_is_at_least_the_best_grid_point_and_inside_the_space(f):
    m = PM.fit(sm_of(f, 500))
    assert not isinstance(m, str)
    assert m.loglik == pytest.approx(literal_loglik(m.theta, m.alpha, f), rel=1e-10, abs=1e-9)
    assert m.loglik >= _grid_max(f) - 1e-7
    if m.alpha >= 0:
        assert m.alpha < 1 and m.theta > -m.alpha and m.K is None
    else:
        assert m.K >= len(f) and m.theta == pytest.approx(-m.K * m.alpha, rel=1e-12)


def test_mle_agrees_with_a_direct_maximisation_where_arx_converges():
    f = PITMAN_F
    best = optimize.minimize(lambda x: -literal_loglik(x[0], x[1], f), [13.76, 0.04],
                             method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14,
                                                            "maxiter": 20000})
    m = PM.fit(sm_of(f, 1450))
    assert m.theta == pytest.approx(best.x[0], rel=1e-5) and m.alpha == pytest.approx(best.x[1], abs=1e-6)


def test_mle_where_arxs_start_lies_outside_the_model():
    """F6: ARX's Newton fails (Dankar then falls back to Zayatz); the likelihood has a maximum."""
    sm = sm_of(F6, 200)
    assert U.pitman(sm).value is None
    fit = G.pitman_mle_fit(sm)
    assert fit.value is not None and 0 < fit.value <= sm.N - (sm.n - sm.n1)


def test_finite_k_branch_takes_an_integer_k():
    """Ten classes of four records each: the Dirichlet-multinomial with K categories fits best."""
    f = [4] * 10 + [1]
    m = PM.fit(sm_of(f, 1000))
    assert m.alpha < 0 and m.K == int(m.K) and m.K >= len(f)
    # no other integer K near it, with |α| refitted, does better (the literal sums)
    for K in (m.K - 1, m.K + 1):
        if K < len(f):
            continue
        r = optimize.minimize_scalar(lambda la: -literal_loglik(K * math.exp(la), -math.exp(la), f),
                                     bounds=(-10, 15), method="bounded")
        assert -r.fun <= m.loglik + 1e-9


def test_every_record_unique_is_not_estimable():
    sm = sm_of([1] * 20, 400)
    assert isinstance(PM.fit(sm), str)
    for model in U.MODELS:
        fit, _ = U.estimate(sm, model, rule="gpurisk", pi=0.05)
        assert fit.value is None and "not estimable" in fit.reason


# --- the expectations --------------------------------------------------------------------------
def _recursion(theta, alpha, n, n1, J, N):
    """E[N1] after continuing the Chinese restaurant process from (n records, n1 singletons, J
    tables) to N, by the one-step recursion of the expectations (exact, O(N − n) steps):
    E[M1'] = E[M1](1 − (1−α)/(θ+m)) + E[θ+αK]/(θ+m), E[θ+αK'] = E[θ+αK](1 + α/(θ+m))."""
    m1, tk = float(n1), theta + alpha * J
    for m in range(n, N):
        m1, tk = m1 * (1 - (1 - alpha) / (theta + m)) + tk / (theta + m), tk * (1 + alpha / (theta + m))
    return m1


@pytest.mark.parametrize("theta,alpha", [(13.5, 0.02), (3176.23, 0.7179), (2.0, 0.5), (12.0, -1.5)])
def test_conditional_and_finite_expectations_equal_the_recursion(theta, alpha):
    f = PITMAN_F
    sm = sm_of(f, 3000)
    got = PM.uniques(theta, alpha, sm, "conditional")
    assert got == pytest.approx(_recursion(theta, alpha, 29, 10, 16, 3000), rel=1e-9)
    # unconditional: from the first record (n = 1, one singleton, one table)
    want = _recursion(theta, alpha, 1, 1, 1, 3000)
    assert PM.uniques(theta, alpha, sm, "finite") == pytest.approx(want, rel=1e-9)


def test_limit_is_the_finite_expectation_as_n_grows():
    sm = sm_of(PITMAN_F, 1e12)
    th, al = 13.5, 0.3
    assert PM.uniques(th, al, sm, "finite") == pytest.approx(PM.uniques(th, al, sm, "limit"), rel=1e-6)
    sm = sm_of(PITMAN_F, 2000)         # at N = 2000 the two differ
    assert abs(PM.uniques(th, al, sm, "finite") / PM.uniques(th, al, sm, "limit") - 1) > 1e-3


def _crp_continue(rng, sizes, theta, alpha, N):
    """Continue the Chinese restaurant process from table sizes ``sizes`` to N customers: customer
    m + 1 sits at table k with probability (s_k − α)/(m + θ), at a new table with (θ + αK)/(m + θ)."""
    table = np.zeros(N, dtype=float)
    K = len(sizes)
    table[:K] = sizes
    for m in range(int(sum(sizes)), N):
        u = rng.random() * (m + theta)             # the weights (s_k − α, …, θ + αK) sum to m + θ
        k = int(np.searchsorted(np.cumsum(table[:K] - alpha), u, side="right"))
        if k >= K:
            table[K] = 1
            K += 1
        else:
            table[k] += 1
    return [int(s) for s in table[:K]]


def test_conditional_expectation_against_simulation():
    rng = np.random.default_rng(27)
    theta, alpha, N = 5.0, 0.4, 60
    sims = [sum(1 for s in _crp_continue(rng, PITMAN_F, theta, alpha, N) if s == 1) for _ in range(3000)]
    want = np.mean(sims)
    se = np.std(sims) / math.sqrt(len(sims))
    got = PM.uniques(theta, alpha, sm_of(PITMAN_F, N), "conditional")
    assert abs(got - want) < 4 * se
    # the process variance the interval uses is of the right size (within 25 %)
    assert PM.process_variance(theta, alpha, sm_of(PITMAN_F, N)) == pytest.approx(np.var(sims), rel=0.25)


def test_huge_theta_keeps_its_digits():
    """The finite-K branch's uniform-multinomial end (θ ≈ 1e16, α ≈ −2e7, N = 3e9): the expectation by
    Stirling's series equals ((K−1)/K)^(N−n) [n1 + (K−J)(N−n)/(K−1)] within 1e-9."""
    Z = np.array([0, 28_564_864, 700_174, 11_399, 144, 3])
    sm = U.sample(Z, 3e9)
    K, a = 612_482_078, 1.8e7
    got = PM.uniques(K * a, -a, sm)
    n, J, n1, N = sm.n, sm.J, sm.n1, sm.N
    # the a → ∞ limit (uniform on K categories) plus the first order in 1/a is below 1e-6 here
    want = math.exp((N - n) * math.log1p(-1 / K)) * (n1 + (K - J) * (N - n) / (K - 1))
    assert got == pytest.approx(want, rel=1e-6)


# --- bounds, SNB, the interval, the measure ----------------------------------------------------
def test_every_gpurisk_value_lies_within_what_the_sample_allows():
    rng = np.random.default_rng(5)
    for _ in range(40):
        f = rng.geometric(rng.uniform(0.3, 0.9), size=rng.integers(3, 40))
        n = int(f.sum())
        N = n + int(rng.integers(0, 3 * n))
        sm = U.sample(np.bincount(f), N)
        lo, hi = max(0, sm.n1 - (N - n)), N - (n - sm.n1)
        for model in U.MODELS:
            fit, _ = U.estimate(sm, model, rule="gpurisk", pi=n / N)
            if fit.value is not None:
                assert lo - 1e-9 <= fit.value <= hi + 1e-9, (model, list(f), N)
            if fit.upper is not None:
                assert lo - 1e-9 <= fit.lower <= fit.value <= fit.upper <= hi + 1e-9


def test_an_estimate_above_what_the_sample_allows_is_capped():
    # f = 1×6, 2, 4: n = 12, n1 = 6, N = 13: at most N − (n − n1) = 7 population uniques.
    # ARX's Pitman (N → ∞ expectation) prints more; gpurisk's rule caps it and says from what
    sm = U.sample(np.bincount([1] * 6 + [2, 4]), 13)
    arx = U.pitman(sm).value
    fit, _ = U.estimate(sm, "pitman", rule="gpurisk", expectation="limit")
    assert arx > 7 and fit.value == 7 and fit.params["capped_from"] > 7
    fit, _ = U.estimate(sm, "pitman", rule="gpurisk")
    assert 0 < fit.value <= 7 and "capped_from" not in fit.params


def _snb_pf(s, alpha, beta, pi, Fmax=20000):
    from scipy import special, stats
    F = np.arange(1, Fmax + 1)
    logpF = (special.gammaln(F - 1 + alpha) - special.gammaln(alpha) - special.gammaln(F)
             + alpha * math.log(beta) + (F - 1) * math.log1p(-beta))
    return float(np.exp(logpF + stats.binom.logpmf(s, F, pi)).sum())


def test_snb_scan_finds_the_root_newton_misses():
    """Every one of SNB's seven Newton starts fails here (a singular Jacobian); the scan brackets a
    root, which the direct sums over population class sizes confirm."""
    Z = [0, 5, 9, 14, 4, 2, 9, 5, 1, 1, 3]
    sm = U.sample(Z, 227 / 0.15)
    assert U.snb(sm).value is None and "failed" in U.snb(sm).reason
    fit = U.snb(sm, scan=True)
    a, b, K = fit.params["alpha"], fit.params["beta"], fit.params["K"]
    assert K * _snb_pf(1, a, b, sm.pi) == pytest.approx(5, rel=1e-6)
    assert K * _snb_pf(2, a, b, sm.pi) == pytest.approx(9, rel=1e-6)
    assert fit.value == pytest.approx(K * b ** a, rel=1e-12)


def _crp(rng, theta, alpha, N):
    return _crp_continue(rng, [1], theta, alpha, N)


def test_interval_covers_under_the_model():
    """Populations drawn from Pitman(θ = 30, α = 0.5), N = 3000, simple random samples of 10 %: the
    95 % interval covers the true N1 in at least 85 % of 60 replicates."""
    rng = np.random.default_rng(3)
    cover = 0
    reps = 60
    for _ in range(reps):
        sizes = np.array(_crp(rng, 30.0, 0.5, 3000))
        labels = np.repeat(np.arange(sizes.size), sizes)
        f = np.bincount(rng.choice(labels, 300, replace=False))
        sm = U.sample(np.bincount(f[f > 0]), 3000)
        fit = G.pitman_mle_fit(sm)
        cover += fit.lower <= (sizes == 1).sum() <= fit.upper
    assert cover / reps >= 0.85


def test_measure_reports_the_interval_and_rejects_a_bad_level():
    from gpurisk import BadInput
    table = table_from_counts(PITMAN_F, [x * 10 for x in PITMAN_F])[0]
    r = run_measure(PopUniqueness, table, Context(fraction=0.1, options={"pop_uniqueness": {"model": "pitman"}}))
    assert r.extra["rule"] == "gpurisk" and r.extra["model"] == "pitman"
    assert r.extra["lower"] <= r.value <= r.upper and r.se > 0
    # one convention (issue 41): the two-sided interval at 1 − α, the one-sided bound at 1 − α
    # below its upper end (the central 1 − 2α interval's upper end)
    assert r.extra["interval_level"] == 0.99 and r.extra["bound_level"] == 0.99
    assert r.extra["interval_lower"] <= r.extra["lower"] and r.upper <= r.extra["interval_upper"]
    r95 = run_measure(PopUniqueness, table, Context(fraction=0.1, options={
        "pop_uniqueness": {"model": "pitman", "level": 0.95}}))
    assert r95.extra["interval_level"] == 0.95 and r95.upper == r.upper
    with pytest.raises(BadInput):
        run_measure(PopUniqueness, table, Context(fraction=0.1, options={"pop_uniqueness": {"level": 1.5}}))


def test_finite_k_variance_equals_the_analytic_information():
    """The finite-K branch's delta method (numerical Hessian in (log|α|, log(K − J + 1))) equals the
    delta method with the analytic information of (θ, α) from the score equations' Jacobian at the
    likelihood's maximum with K continuous (there the variance of a function does not depend on the
    parametrisation)."""
    # drawn from a Dirichlet-multinomial; its fit: α ≈ −3.24, K = 24 (J = 22)
    f = [1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 6, 7, 7, 10]
    sm = sm_of(f, 5 * sum(f))
    m = PM.fit(sm)
    assert m.K is not None and -5 < m.alpha < -1
    r = optimize.minimize(lambda x: -literal_loglik(x[0], x[1], f), [m.theta, m.alpha],
                          method="Nelder-Mead", options={"xatol": 1e-12, "fatol": 1e-14, "maxiter": 20000})
    th, al = r.x
    s, Js = sm.s[sm.s >= 2].astype(float), sm.Js[sm.s >= 2]
    _, H = U._pitman_system(th, al, np.arange(1, sm.J, dtype=float), sm, s, Js)
    cov = np.linalg.inv(-H)
    ht, ha = 1e-6 * th, 1e-7
    g = np.array([(PM.uniques(th + ht, al, sm) - PM.uniques(th - ht, al, sm)) / (2 * ht),
                  (PM.uniques(th, al + ha, sm) - PM.uniques(th, al - ha, sm)) / (2 * ha)])
    want = float(g @ cov @ g)
    assert want > 1e-2
    cont = PM.PitmanMLE(th, al, -r.fun, -th / al, 0, None)
    assert PM._finite_k_variance(cont, sm, "conditional") == pytest.approx(want, rel=1e-4)


def test_on_real_samples_the_fit_is_never_below_arxs():
    """FARS at 1 % (the issue's sample where ARX's Newton missed the maximum or left the space): on
    each Bernoulli sample gpurisk's likelihood is at least ARX's wherever ARX's fit lies in the space,
    and gpurisk always gives a value (ARX's Pitman fails on some)."""
    import pandas as pd
    from arx_data import data_path
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";",
                     usecols=["iage", "isex", "irace", "istatenum", "iinjury"])
    F = df.groupby(list(df.columns)).size().to_numpy()
    rng = np.random.default_rng(27)
    arx_failed = 0
    for _ in range(8):
        f = rng.binomial(F, 0.01)
        sm = U.sample(np.bincount(f[f > 0]), F.sum())
        arx = U.pitman(sm)
        mine = G.pitman_mle_fit(sm)
        assert mine.value is not None
        if arx.value is None:
            arx_failed += 1
            continue
        th, al = arx.params["theta"], arx.params["alpha"]
        ll_arx = PM.loglik(th, al, sm)[0]
        assert mine.params["loglik"] >= ll_arx - 1e-6 * abs(ll_arx)
    assert arx_failed >= 1
