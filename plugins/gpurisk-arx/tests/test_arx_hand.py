"""Each model on a small table, the arithmetic written out (references not derived from the code:
hand computation, math.comb, a direct maximisation of the Pitman likelihood, a direct sum over the
population class sizes of the SNB model)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from gpurisk import Context
from gpurisk.testing import run_measure, table_from_counts

pytest.importorskip("gpurisk_arx")
from gpurisk_arx import uniqueness as U  # noqa: E402
from gpurisk_arx.population import PopUniqueness  # noqa: E402
from gpurisk_arx.sample_risk import Journalist, Marketer, Prosecutor  # noqa: E402

F6 = [1, 1, 1, 2, 2, 3]            # n = 10, J = 6, J1 = 3, J2 = 2, J3 = 1
POP6 = [1, 4, 10, 2, 5, 6]         # F_j of the same classes: N = 28


def run(cls, f, F=None, fraction=None, **opts):
    table = table_from_counts(f, F)[0] if F is not None else table_from_counts(f)[0]
    if F is None:                    # a sample without a population
        from gpurisk import build_table
        table = build_table(table_from_counts(f)[1], ["k"])
    return run_measure(cls, table, Context(fraction=fraction, options={cls.name: opts}))


def run_arx(cls, f, F=None, fraction=None, **opts):
    """``pop_uniqueness`` with ARX's fits (rule=arx): ARX's numbers and behaviour."""
    opts.setdefault("rule", "arx")
    return run(cls, f, F, fraction, **opts)


# --- prosecutor, journalist, marketer --------------------------------------------------------------
def test_prosecutor_by_hand():
    r = run(Prosecutor, F6)
    # risks 1/f: 1, 1, 1, 1/2, 1/2, 1/3 -> highest 1, lowest 1/3; every record above 0.2 (10 of 10);
    # records at the highest risk: the 3 uniques; average J/n = 6/10
    assert r.value == 1.0 and r.extra["lowest"] == pytest.approx(1 / 3)
    assert (r.extra["records_above_threshold"], r.extra["share_above_threshold"]) == (10, 1.0)
    assert (r.extra["records_at_highest"], r.extra["share_at_highest"]) == (3, 0.3)
    assert r.extra["average"] == 0.6 and r.extra["sample_uniqueness"] == 0.3
    # threshold 0.4: 1/f > 0.4 for f = 1, 2 -> 3·1 + 2·2 = 7 records
    r = run(Prosecutor, F6, threshold=0.4)
    assert r.extra["records_above_threshold"] == 7 and r.extra["share_above_threshold"] == 0.7
    # threshold 0.5: 1/2 > 0.5 is false, so only the 3 uniques
    assert run(Prosecutor, F6, threshold=0.5).extra["records_above_threshold"] == 3


def test_journalist_by_hand():
    r = run(Journalist, F6, POP6)
    # risks 1/F: 1, 1/4, 1/10, 1/2, 1/5, 1/6 -> highest 1, lowest 1/10
    # above 0.2 (1/F > 0.2 <=> F < 5): F = 1 (f 1), 4 (f 1), 2 (f 2) -> 4 records
    # at the highest (F = 1): 1 record
    # Σ f/F = 1/1 + 1/4 + 1/10 + 2/2 + 2/5 + 3/6 = 3.25; /n = 0.325; J/ΣF = 6/28 = 0.2143
    # average = max(0.2143, 0.325) = 0.325
    assert r.value == 1.0 and r.extra["lowest"] == pytest.approx(0.1)
    assert r.extra["records_above_threshold"] == 4 and r.extra["share_above_threshold"] == 0.4
    assert r.extra["records_at_highest"] == 1
    assert r.extra["average"] == pytest.approx(0.325) and r.extra["marketer"] == pytest.approx(0.325)
    assert r.extra["population_used"] is True
    # f = [2, 1], F = [4, 1]: J/ΣF = 2/5 = 0.4 beats Σ f/F / n = (2/4 + 1)/3 = 0.5? no: 0.5 wins;
    # f = [3], F = [3]: J/ΣF = 1/3 = Σ f/F / n = 1/3
    assert run(Journalist, [2, 1], [4, 1]).extra["average"] == pytest.approx(0.5)
    assert run(Journalist, [3], [3]).extra["average"] == pytest.approx(1 / 3)


def test_journalist_without_population_is_prosecutor_as_in_arx():
    j, p = run(Journalist, F6, sample_as_population=True), run(Prosecutor, F6)
    assert j.value == p.value and j.extra["average"] == p.extra["average"] == 0.6
    assert j.extra["population_used"] is False


def test_journalist_and_marketer_need_a_population_by_default():
    for cls in (Journalist, Marketer):
        r = run(cls, F6)
        assert r.value is None and "needs population counts F_j" in r.reason
        assert f"{cls.name}.sample_as_population=true" in r.reason.cli


def test_marketer_by_hand():
    assert run(Marketer, F6, POP6).value == pytest.approx(3.25 / 10)
    # no population, ARX's way: J/n
    assert run(Marketer, F6, sample_as_population=True).value == pytest.approx(6 / 10)


def test_population_cells_the_sample_misses_hold_no_record():
    # f = [0, 2, 1], F = [5, 9, 1]: classes of the sample F = 9 and 1 -> highest 1, lowest 1/9;
    # Σ f/F = 2/9 + 1 = 11/9 over n = 3 -> 0.4074; J/ΣF = 2/10
    r = run(Journalist, [0, 2, 1], [5, 9, 1])
    assert r.value == 1.0 and r.extra["lowest"] == pytest.approx(1 / 9)
    assert r.extra["average"] == pytest.approx(11 / 27) and r.extra["classes"] == 2


# --- Zayatz -------------------------------------------------------------------------------------
def test_zayatz_by_hand():
    # f = [1, 1, 2]: n = 4, J = 3, J1 = 2, J2 = 1; N = 8 (π = 1/2)
    # h(s) = s·C(8−s, 3)/C(8, 4): h(1) = 35/70 = 1/2, h(2) = 2·20/70 = 4/7
    assert 1 * math.comb(7, 3) / math.comb(8, 4) == 0.5
    assert 2 * math.comb(6, 3) / math.comb(8, 4) == pytest.approx(4 / 7)
    # u = (2/3)(1/2) / [(2/3)(1/2) + (1/3)(4/7)] = (7/21)/(11/21) = 7/11
    # uniques = n1·u/(n/N) = 2·(7/11)/(1/2) = 28/11
    r = run_arx(PopUniqueness, [1, 1, 2], [1, 1, 6], fraction=0.5, model="zayatz")
    assert r.value == pytest.approx(28 / 11, rel=1e-12)
    assert r.extra["share"] == pytest.approx(28 / 11 / 8, rel=1e-12)
    assert r.extra["zayatz_u"] == pytest.approx(7 / 11, rel=1e-12)


def test_zayatz_census_is_the_sample_uniques():
    # π = 1: h(1) = 1, h(s > 1) = 0 -> u = 1 and uniques = n1 = 3
    r = run_arx(PopUniqueness, F6, F6, fraction=1.0, model="zayatz")
    assert r.value == pytest.approx(3.0)


# --- Pitman -------------------------------------------------------------------------------------
PITMAN_F = [1] * 10 + [2, 2, 2, 3, 4, 6]      # n = 29, J = 16, J1 = 10, J2 = 3, J3 = J4 = J6 = 1


def _pitman_loglik(theta, alpha, f):
    """log L(θ, α) of the Pitman sampling formula, up to a constant, by its literal sums."""
    n, J = sum(f), len(f)
    out = sum(math.log(theta + i * alpha) for i in range(1, J))
    out -= sum(math.log(theta + i) for i in range(1, n))
    out += sum(math.log(l - alpha) for s in f for l in range(1, s))
    return out


def test_pitman_by_hand():
    N = 29 * 50
    r = run_arx(PopUniqueness, PITMAN_F, [x * 50 for x in PITMAN_F], fraction=1 / 50, model="pitman")
    e = r.extra
    # ARX's start: c = n1(n1−1)/n2 = 10·9/3 = 30
    # θ0 = (nJc − n1(n−1)(2J+c)) / (2 n1 J + n1 c − n c) = (13920 − 17360)/(320 + 300 − 870) = 13.76
    # α0 = (θ0(n1 − n) + (n − 1) n1)/(nJ) = (13.76·(−19) + 280)/464 = 18.56/464 = 0.04
    assert e["pitman_theta0"] == pytest.approx(13.76) and e["pitman_alpha0"] == pytest.approx(0.04)
    # the maximum of the likelihood, found without the equations (Nelder-Mead on log L)
    best = optimize.minimize(lambda x: -_pitman_loglik(x[0], x[1], PITMAN_F), [13.76, 0.04],
                             method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14,
                                                            "maxiter": 20000})
    theta, alpha = best.x
    assert e["pitman_theta"] == pytest.approx(theta, rel=1e-5)
    assert e["pitman_alpha"] == pytest.approx(alpha, rel=1e-4, abs=1e-6)
    # uniques = Γ(θ+1)/Γ(θ+α) N^α
    th, al = e["pitman_theta"], e["pitman_alpha"]
    assert r.value == pytest.approx(math.exp(math.lgamma(th + 1) - math.lgamma(th + al)) * N ** al,
                                    rel=1e-12)
    assert e["converged"] is True and e["model"] == "pitman" and e["iterations"] >= 1


def test_pitman_reasons():
    # one class: no maximum
    r = run_arx(PopUniqueness, [1], [4], fraction=0.25, model="pitman")
    assert r.value is None and "one class" in r.reason
    # f = [1,1,1,2,2,3]: ARX's start θ0 = −15, α0 = 2.2 lies outside the model
    # (c = 3·2/2 = 3; θ0 = (180 − 405)/(36 + 9 − 30) = −15; α0 = (105 + 27)/60 = 2.2)
    r = run_arx(PopUniqueness, F6, [x * 20 for x in F6], fraction=0.05, model="pitman")
    assert r.value is None and "θ0 = -15, α0 = 2.2" in r.reason
    assert r.extra["converged"] is False


# --- SNB ----------------------------------------------------------------------------------------
def test_class_count_by_hand():
    # f = [1, 1, 2], π = 1/2: J = 3, n1 = 2; s = 1 (J1 = 2), s = 2 (J2 = 1)
    # a = Σ (1−π)^s J_s = 0.5·2 + 0.25·1 = 1.25;   b = Σ s π (1−π)^{s−1} J_s = 0.5·2 + 2·0.25 = 1.5
    # c = Σ s π²(1−π²)^{s−1} J_s = 0.25·2 + 2·0.25·0.75 = 0.875
    # d = Σ (1−π)^s ((1+π)^s − 1) J_s = 0.5·0.5·2 + 0.25·1.25 = 0.8125
    # Sh3 = 3 + 2 (0.875/0.8125)(1.25/1.5)² = 4.4957265;  Shlosser = 3 + 2·1.25/1.5 = 4.6667
    # ARX's denominator Σ [J_s (1−π)^s (1+π)^s − 1] = (1.5 − 1) + (0.5625 − 1) = 0.0625
    #   -> 3 + 2 (0.875/0.0625)(1.25/1.5)² = 22.444
    sm = U.sample(np.bincount([1, 1, 2]), 8)
    assert U.classes_estimate(sm, "sh3") == pytest.approx(3 + 2 * (0.875 / 0.8125) * (1.25 / 1.5) ** 2)
    assert U.classes_estimate(sm, "sh3") == pytest.approx(4.4957265, rel=1e-7)
    assert U.classes_estimate(sm, "shlosser") == pytest.approx(3 + 2 * 1.25 / 1.5)
    assert U.classes_estimate(sm, "arx") == pytest.approx(3 + 2 * 14 * (1.25 / 1.5) ** 2)


def _snb_pf(s, alpha, beta, pi, Fmax=20000):
    """P(f = s) under the SNB model by direct summation over population class sizes F:
    P(F) = C(F−2+α, F−1) β^α (1−β)^(F−1), f | F ~ Binomial(F, π)."""
    from scipy import special, stats
    F = np.arange(1, Fmax + 1)
    logpF = (special.gammaln(F - 1 + alpha) - special.gammaln(alpha) - special.gammaln(F)
             + alpha * math.log(beta) + (F - 1) * math.log1p(-beta))
    return float(np.exp(logpF + stats.binom.logpmf(s, F, pi)).sum())


def test_snb_fit_matches_n1_n2_by_direct_summation():
    # f = PITMAN_F at π = 0.2: the fitted (α, β) and K must give K·P(f=1) = n1 = 10, K·P(f=2) = n2 = 3
    r = run_arx(PopUniqueness, PITMAN_F, [x * 5 for x in PITMAN_F], fraction=0.2, model="snb")
    e = r.extra
    a, b, K = e["snb_alpha"], e["snb_beta"], e["snb_K"]
    assert K * _snb_pf(1, a, b, 0.2) == pytest.approx(10, rel=1e-6)
    assert K * _snb_pf(2, a, b, 0.2) == pytest.approx(3, rel=1e-6)
    assert r.value == pytest.approx(K * b ** a, rel=1e-12)     # K·P(F = 1) = K β^α
    assert e["converged"] is True and e["model"] == "snb"


def test_snb_reasons():
    r = run_arx(PopUniqueness, F6, F6, fraction=1.0, model="snb")
    assert r.value is None and "π = 1" in r.reason
    r = run_arx(PopUniqueness, [1, 3, 3], [3, 9, 9], fraction=1 / 3, model="snb")
    assert r.value is None and "n2 = 0" in r.reason


# --- Dankar and the edge cases ---------------------------------------------------------------------
def test_dankar_rule():
    # π ≤ 0.1, Pitman valid -> Pitman
    r = run_arx(PopUniqueness, PITMAN_F, [x * 50 for x in PITMAN_F], fraction=0.02)
    assert r.extra["model"] == "pitman" and "zayatz_uniques" not in r.extra
    # π ≤ 0.1, Pitman invalid (ARX's start outside the model) -> Zayatz
    r = run_arx(PopUniqueness, F6, [x * 20 for x in F6], fraction=0.05)
    assert r.extra["model"] == "zayatz" and r.extra["pitman_uniques"] is None
    assert r.value == r.extra["zayatz_uniques"]
    # π > 0.1: the smaller of Zayatz and SNB
    r = run_arx(PopUniqueness, PITMAN_F, [x * 5 for x in PITMAN_F], fraction=0.2)
    assert r.value == min(r.extra["zayatz_uniques"], r.extra["snb_uniques"])
    assert r.extra["model"] == ("snb" if r.extra["snb_uniques"] < r.extra["zayatz_uniques"] else "zayatz")
    # π > 0.1, SNB invalid (n2 = 0) -> Zayatz
    r = run_arx(PopUniqueness, [1, 3, 3], [3, 9, 9], fraction=1 / 3)
    assert r.extra["model"] == "zayatz" and r.extra["snb_uniques"] is None and r.value > 0


@pytest.mark.parametrize("model", U.MODELS)
def test_no_sample_uniques_gives_zero(model):
    r = run_arx(PopUniqueness, [2, 3, 2, 5], [20, 30, 20, 50], fraction=0.1, model=model)
    assert r.value == 0.0 and r.reason is None


def test_population_size_is_the_populations_when_given():
    # with a population N = ΣF, not n/π
    r = run_arx(PopUniqueness, [1, 1, 2], [1, 1, 6], fraction=0.5, model="zayatz")
    assert r.extra["N"] == 8.0
    r = run_arx(PopUniqueness, [1, 1, 2], fraction=0.25, model="zayatz")
    assert r.extra["N"] == 16.0


def test_dankar_reads_the_given_fraction_not_the_realised_one():
    # N = 270, n = 29: n/N = 0.1074 > 0.1, but the run's π is 0.1 (a Bernoulli design at 10 %):
    # the rule takes Pitman, as it would for every replicate of that design
    F = [x * 10 for x in PITMAN_F]
    F[-1] -= 20
    assert sum(F) == 270
    r = run_arx(PopUniqueness, PITMAN_F, F, fraction=0.1)
    assert r.extra["model"] == "pitman" and r.extra["fraction"] == 0.1 and r.extra["N"] == 270.0
    r = run_arx(PopUniqueness, PITMAN_F, F, fraction=29 / 270)       # n/N: π > 0.1, Zayatz or SNB
    assert r.extra["model"] in ("zayatz", "snb") and "pitman_uniques" not in r.extra


def test_class_count_with_a_large_class_does_not_overflow():
    # (1+π)^s overflows a double for s = 5000 at π = 0.2 (1.2^5000 ≈ 1e396); the published
    # Σ (1−π)^s((1+π)^s − 1) J_s computed literally in 60-digit decimals must match
    from decimal import Decimal, getcontext
    getcontext().prec = 60
    Z = np.zeros(5001, np.int64)
    Z[[1, 2, 3, 5000]] = [40, 10, 5, 1]
    n = int((np.arange(Z.size) * Z).sum())
    sm = U.sample(Z, n / 0.2)
    p, q = Decimal(n) / Decimal(sm.N), 1 - Decimal(n) / Decimal(sm.N)
    S = [(s, Decimal(int(Z[s]))) for s in (1, 2, 3, 5000)]
    a = sum(q ** s * J for s, J in S)
    b = sum(s * p * q ** (s - 1) * J for s, J in S)
    c = sum(s * p * p * (1 - p * p) ** (s - 1) * J for s, J in S)
    d = sum(q ** s * ((1 + p) ** s - 1) * J for s, J in S)
    K = 56 + 40 * (c / d) * (a / b) ** 2
    got = U.classes_estimate(sm, "sh3")
    assert math.isfinite(got) and got == pytest.approx(float(K), rel=1e-12)


def _ratio_cases():
    """(θ, α, J) with x = θ/α at ratios to J−1 either side of SERIES_FROM and far beyond, both signs
    of x and of α."""
    out = []
    for J in (5000, 300_000):
        for r in (1.5, 3.9, 4.1, 30.0, 1e4, 1e9):
            for sx in (1, -1):
                for a in (0.5, -0.5):
                    out.append((sx * r * (J - 1) * abs(a) * 1.0001 * (1 if a > 0 else -1), a, J))
    return out


@pytest.mark.parametrize("theta,alpha,J", [(3176.23, 0.7179, 5000), (12.5, 0.3, 250_000),
                                            (80_000.0, 0.95, 100_000), (0.5, 0.02, 40_000),
                                            (1.3 * 27 * 300_000, -1.3, 300_000),     # K = 27 J
                                            (0.4 * 300_001.5, -0.4, 300_000),        # K just above J-1
                                            (5e9, 0.5, 10_000),                      # x far above J
                                            (-2.107e8, 0.34526, 290_000),            # every d < 0
                                            (-1234.56, 0.5, 50_000),                 # d changes sign
                                            (2000.0, -0.01, 50_000),                 # d changes sign
                                            (17.0, 0.0, 50_000), (-17.0, 0.0, 50_000),   # α = 0
                                            *_ratio_cases()])
def test_pitman_sums_in_closed_form_equal_the_terms(theta, alpha, J):
    """The five sums over i = 1 .. J-1 of the Pitman equations (digamma/trigamma differences, the
    power series in i/x, or α = 0's sums) equal the same sums added term by term (math.fsum)."""
    got = U._i_sums(theta, alpha, J)
    i = np.arange(1, J, dtype=float)
    d = theta + i * alpha
    want = [math.fsum(1 / d), math.fsum(i / d), math.fsum(1 / d**2), math.fsum(i / d**2),
            math.fsum(i * i / d**2)]
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("r,m", [(0, 7), (1, 7), (2, 1000), (5, 1234), (12, 99), (30, 17)])
def test_power_sums_scaled(r, m):
    """Faulhaber's Σ i^r / m^(r+1) against the sum of the integers themselves."""
    from fractions import Fraction
    want = Fraction(sum(i ** r for i in range(1, m + 1)), m ** (r + 1))
    assert U._power_sum_scaled(r, m) == pytest.approx(float(want), rel=1e-15)


@pytest.mark.parametrize("z", [-0.3, -2.5, -344.26, -1000.7, 0.7, 3.0])
def test_trigamma_by_reflection(z):
    """ψ'(z) for negative z by reflection against the series Σ_k 1/(z+k)² (k = 0 .. 2e6, with the
    tail ≈ 1/(z+K) + 1/(2(z+K)²))."""
    k = np.arange(0, 2_000_000, dtype=float)
    K = z + 2_000_000
    want = math.fsum(1.0 / (z + k) ** 2) + 1.0 / K + 0.5 / K**2
    assert float(U._trigamma(z)) == pytest.approx(want, rel=1e-9)


# frequencies of frequencies of bench_backends' 30 M-row, 8-key register (seed 0): 29.3 M classes
REGISTER_Z = np.array([0, 28_564_864, 700_174, 11_399, 144, 3])


@pytest.mark.parametrize("Z,N", [(np.array([0, 28_000_000, 900_000, 30_000]), 300_000_000),
                                 (REGISTER_Z, 3e9)])
def test_pitman_fit_of_a_register_sized_sample_never_adds_the_terms(Z, N, monkeypatch):
    """29 M sample classes (nearly all unique, as a register with many keys). ARX's start for the
    register lies outside the model (θ0 = −2.1e11, α0 = 345); every Newton step must run in O(1)
    (the steps once summed 29 M terms each, and SciPy's trigamma at θ ≈ −2e11 walked up one step at
    a time: an `assess` of that register did not end in 500 s). The fit ends with a value or its
    reason, and Dankar's rule then falls back to Zayatz."""
    def no_terms(*a, **k):
        raise AssertionError("term-by-term sums over 29 M classes")
    monkeypatch.setattr(U, "_term_sums", no_terms)
    sm = U.sample(Z, N)
    fit = U.pitman(sm)
    assert fit.value is not None or fit.reason
    if Z is REGISTER_Z:
        assert fit.value is None and "outside the model" in fit.reason
        chosen, fits = U.estimate(sm, "dankar", "sh3", sm.pi)
        assert chosen.model == "zayatz" and chosen.value == fits["zayatz"].value


@pytest.mark.parametrize("model", ["loglinear_forest", "pitman", "zayatz", "snb", "dankar"])
def test_no_sample_unique_is_zero_with_an_interval_under_every_model(model):
    """gpurisk's rule, n1 = 0 (cells of 2, 3, 5 in a population 10 times as large, π = 0.1): every
    model gives 0 and the measure shows the model-free one-sided bound 43 at 1 − α = 99 % (log 0.01 /
    log 0.9 = 43.7; issue 41: levels from --alpha, as every bound) with the reason, never a bare 0;
    ARX's rule keeps its own bare 0. With level=0.95: 28 (log 0.05 / log 0.9 = 28.4)."""
    f = [2, 3, 5]
    r = run(PopUniqueness, f, [x * 10 for x in f], fraction=0.1, model=model)
    assert r.value == 0.0 and r.extra["lower"] == 0.0 and r.upper == 43.0
    assert r.extra["interval_upper"] == 43.0 and r.extra["interval_level"] == 0.99
    assert r.extra["bound_level"] == 0.99 and "n1 = 0" in r.extra["note"]
    r95 = run(PopUniqueness, f, [x * 10 for x in f], fraction=0.1, model=model, level=0.95)
    assert r95.extra["interval_upper"] == 28.0 and r95.extra["interval_level"] == 0.95
    assert r95.upper == 43.0                             # the bound stays at 1 − α
    arx = run_arx(PopUniqueness, f, [x * 10 for x in f], fraction=0.1, model="pitman")
    assert arx.value == 0.0 and arx.upper is None
