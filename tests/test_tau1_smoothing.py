"""τ̂1 as the paper means it: each smoothing choice, as the sources state it, against gpurisk's code.

Sources (what each says; the checks below restate every number by hand):

* Camerlenghi, Favaro, Naulet & Panero (seed 002; Ann. Statist. 49, 723-744, 2021).
  Population n̄ = n + λn, so λ = (n̄ − n)/n; n is the *sample* size. Z_{i} = number of cells with
  sample frequency i.
  - unbiased estimator, "legitimated under the assumption λ < 1":
        τ̂1 = Σ_{i≥0} (−1)^i (i+1) λ^i Z_{i+1}
  - smoothed: "truncating the series at an independent random location L, and then averaging over
    the distribution of L", L Poisson or Binomial:
        τ̂1^L = E_L[ Σ_{i=0}^{L} (−1)^i (i+1) λ^i Z_{i+1} ] = Σ_{i≥0} (−λ)^i (i+1) P(L ≥ i) Z_{i+1}
    (term i survives the truncation exactly when L ≥ i: a *tail* probability, not the pmf P(L = i)
    and not P(L > i)). The seed's summary writes the inner sum from i = 1; SPEC §4 resolves this
    slip: the i = 0 term (weight P(L ≥ 0) = 1, i.e. Z_1 itself) is kept, else a census (λ = 0)
    would give 0 instead of Z_1 = τ1.
  - Figure 1: NMSE = MSE / n² (τ1's largest value is n) against the sampling fraction 1/(1+λ);
    uniform cell probabilities, C = 3·10^6 cells, n̄ = 10^6, 100 iterations; "the better
    performance seems to be achieved under the Binomial smoothing" (bench/bench_tau1_fig1.py).
* Orlitsky, Suresh & Wu (2016), PNAS 113:13283, "Optimal prediction of the number of unseen
  species", from whom the smoothing is taken. Sample size n, tn new samples (t = m/n); the
  Good-Toulmin estimator U^GT = −Σ_{i≥1} (−t)^i Φ_i and the smoothed one
  U^L = −Σ_{i≥1} (−t)^i P(L ≥ i) Φ_i, for t > 1, with
  - Poisson smoothing   L ~ Poisson(r),   r = (1/(2t)) ln( n (t+1)² / (t−1) )   (natural log);
  - Binomial smoothing  L ~ Binomial(k, q), q = 2/(t+2), k = ⌈ ½ log₃( n t² / (t−1) ) ⌉
    (their other Binomial choice, q = 1/(t+1) with k = ⌈ ½ log₂( n t² / (t−1) ) ⌉, is not the one
    SPEC §4.1 takes). The same parameter formulas appear in independent public implementations of
    the smoothed Good-Toulmin estimator.
  For τ1 the unseen part of the population is m = n̄ − n = λn new draws, so t = m/n = λ and n is the
  sample size; the unsmoothed τ̂1 is the derivative of U^GT in t (checked below).
* SPEC §4 / §4.1: exactly the above; λ ≤ 1 uses the unbiased series (the parameter formulas divide
  by λ − 1).

Every check below found gpurisk's code doing exactly this; no discrepancy was found, so the code is
unchanged. Hand computations use small n and λ; the exact checks use rational arithmetic
(fractions.Fraction) on the real sdcMicro testdata.
"""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.measures import _tau1_series as ser
from gpurisk.measures.tau1_hat import series_for

from conftest import data_path


def frame_with_fof(fof: dict[int, int], start: int = 0) -> pd.DataFrame:
    """One key column whose cell sizes give exactly the frequencies of frequencies ``fof``."""
    vals, cell = [], start
    for r, count in sorted(fof.items()):
        for _ in range(count):
            vals += [cell] * r
            cell += 1
    return pd.DataFrame({"k": vals})


def run(frame, keys, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gpurisk.assess(frame, keys, measures=["tau1_hat"], **kw).measures["tau1_hat"]


def raw(r):
    return r.value if r.value is not None else r.extra["raw_value"]


# Sample: Z_1 = 3, Z_2 = 1, Z_3 = 1, so n = 3 + 2 + 3 = 8. Population: the sample plus 16 records in
# 16 other cells, N = 24, so λ = (24 − 8)/8 = 2 = t.
SAMPLE = frame_with_fof({1: 3, 2: 1, 3: 1})
POPULATION = pd.concat([SAMPLE, frame_with_fof({1: 16}, start=100)], ignore_index=True)


# --- the parameters, by hand ---------------------------------------------------------------------

def test_binomial_k_log_base_3_and_ceiling_by_hand():
    """k = ⌈½ log₃(n λ²/(λ−1))⌉, q = 2/(λ+2). Each case rules out a neighbouring reading."""
    # n = 4, λ = 2: n λ²/(λ−1) = 16; ½ log₃ 16 = ½ · 2.5237 = 1.2619 → k = 2
    #   (floor or round would give 1)
    assert ser.default_binomial_kq(2.0, 4) == (2, 0.5)
    # n = 18, λ = 2: 72; ½ log₃ 72 = ½ · 3.8928 = 1.9464 → k = 2
    #   (natural log: ½ · 4.2767 = 2.14 → 3; base 2: ½ · 6.1699 = 3.08 → 4)
    assert ser.default_binomial_kq(2.0, 18)[0] == 2
    # n = 18, λ = 3/2: 18 · 2.25 / 0.5 = 81 = 3⁴; ½ log₃ 81 = 2 exactly → k = 2 (not 3)
    assert ser.default_binomial_kq(1.5, 18)[0] == 2
    # n = 8, λ = 2: 32; ½ log₃ 32 = 1.5773 → k = 2; q = 2/(2+2) = 1/2 (Orlitsky's other
    # choice q = 1/(λ+1) would be 1/3)
    assert ser.default_binomial_kq(2.0, 8) == (2, 0.5)
    # λ = 9, n = 4580: 4580 · 81/8 = 46 372.5; 9⁴ = 6 561 < 46 372.5 ≤ 9⁵ = 59 049 → k = 5, q = 2/11
    k, q = ser.default_binomial_kq(9.0, 4580)
    assert k == 5 and q == pytest.approx(2 / 11, rel=1e-15)


def test_binomial_k_matches_exact_rational_ceiling():
    """⌈½ log₃ x⌉ is the least integer k with 9^k ≥ x: decided exactly in rationals, no logarithm,
    over λ = a/b (b ≤ 8) and n from 2 to 10^6 (exact powers of 9 included)."""
    lams = sorted({Fraction(a, b) for b in (1, 2, 4, 5, 8) for a in range(b + 1, 40 * b, 3)})
    ns = list(range(2, 120, 7)) + [18, 162, 1458, 13122, 118098, 4580, 10**5, 10**6]
    for lam in lams:
        for n in ns:
            x = n * lam * lam / (lam - 1)
            k = 0
            while Fraction(9) ** k < x:
                k += 1
            assert ser.default_binomial_kq(float(lam), n)[0] == k, (n, lam)


def test_poisson_r_natural_log_by_hand():
    """r = ln( n (λ+1)² / (λ−1) ) / (2λ)."""
    # n = 8, λ = 2: ln(8 · 9 / 1) / 4 = ln 72 / 4 = 4.276666 / 4 = 1.0691665
    assert ser.default_poisson_r(2.0, 8) == pytest.approx(1.0691665, abs=1e-7)
    # n = 4580, λ = 3: ln(4580 · 16 / 2)/6 = ln 36 640 / 6 = 10.508896 / 6 = 1.7514826
    assert ser.default_poisson_r(3.0, 4580) == pytest.approx(1.7514826, abs=1e-7)


# --- the estimator with its default parameters, by hand -------------------------------------------

def test_binomial_default_by_hand_tail_not_pmf():
    """n = 8, λ = 2 (from N = 24): k = 2, q = 1/2, L ~ Binomial(2, 1/2).
    P(L ≥ 0) = 1, P(L ≥ 1) = 3/4, P(L ≥ 2) = 1/4, P(L ≥ 3) = 0:
        τ̂1^L = 1·1·Z_1 − 2·2·(3/4)·Z_2 + 4·3·(1/4)·Z_3 = 3 − 3 + 3 = 3.
    Other readings give other numbers: the pmf (1/4, 1/2, 1/4) gives 3/4 − 4/2 + 12/4 = 1.75;
    P(L > i) (3/4, 1/4, 0) gives 9/4 − 1 + 0 = 1.25; dropping the i = 0 term gives 0;
    the population size N = 24 in k (⌈½ log₃ 96⌉ = 3: tails 7/8, 1/2, 1/8) gives 3 − 3.5 + 6 = 5.5;
    t = N/n = 3 in place of λ gives q = 2/5, k = ⌈½ log₃ 36⌉ = 2: 3 − 6·0.64 + 27·0.16 = 3.48."""
    r = run(SAMPLE, ["k"], population=POPULATION)
    assert r.extra["lambda"] == 2.0 and r.extra["method"] == "binomial"
    assert (r.extra["k"], r.extra["q"]) == (2, 0.5)
    assert raw(r) == pytest.approx(3.0, abs=1e-12)       # = n1: not estimable, raw value kept
    s = series_for(2.0, 8, 3)
    coef = s.sign * np.exp(s.log_coef)
    np.testing.assert_allclose(coef, [1.0, -3.0, 3.0], rtol=1e-14)   # (−λ)^i (i+1) P(L ≥ i)
    assert s.terms == 3                                  # the series ends with the support (i ≤ k)


def test_poisson_default_by_hand():
    """n = 8, λ = 2: r = ln 72 / 4 = 1.0691665, e^{−r} = 0.3432945;
    P(L ≥ 1) = 1 − e^{−r} = 0.6567055, P(L ≥ 2) = 1 − e^{−r}(1 + r) = 0.2896665:
        τ̂1^L = 3 − 4 · 0.6567055 + 12 · 0.2896665 = 3.8491756 (> n1 = 3: withheld, raw value kept)."""
    r = run(SAMPLE, ["k"], population=POPULATION, options={"tau1_hat": {"smoothing": "poisson"}})
    assert r.extra["method"] == "poisson"
    assert r.extra["r"] == pytest.approx(1.0691665, abs=1e-7)
    assert r.value is None and r.extra["raw_value"] == pytest.approx(3.8491756, abs=1e-7)


def test_domain_lambda_at_most_1_is_the_unbiased_series():
    """λ ≤ 1: the unbiased series, whatever the smoothing option (the formulas need λ > 1).
    λ = 1 (π = 1/2), Z = (3, 1, 1): 3 − 1·2·1 + 1·3·1 = 4 (> n1: withheld); λ = 0.5:
    3 − 0.5·2 + 0.25·3 = 2.75. Just above 1 the smoother takes over."""
    for smoothing in ("binomial", "poisson"):
        r = run(SAMPLE, ["k"], fraction=0.5, options={"tau1_hat": {"smoothing": smoothing}})
        assert r.extra["method"] == "unbiased" and raw(r) == pytest.approx(4.0, abs=1e-12)
        r = run(SAMPLE, ["k"], fraction=2 / 3, options={"tau1_hat": {"smoothing": smoothing}})
        assert r.extra["method"] == "unbiased" and raw(r) == pytest.approx(2.75, abs=1e-12)
        r = run(SAMPLE, ["k"], fraction=0.499, options={"tau1_hat": {"smoothing": smoothing}})
        assert r.extra["method"] == smoothing


def test_census_keeps_the_i0_term():
    """λ = 0: τ̂1 = Z_1 (only the i = 0 term is left), which is τ1 in a census."""
    r = run(SAMPLE, ["k"], population=SAMPLE)
    assert r.extra["lambda"] == 0.0 and r.value == 3.0


# --- the expectation over L, exactly, on real data -----------------------------------------------

KEYS = ["urbrur", "water", "sex", "age"]


def _testdata_fof():
    """Z_r of sdcMicro's testdata (n = 4580) over KEYS, counted with pandas, not gpurisk."""
    frame = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    sizes = frame.groupby(KEYS, dropna=False).size().to_numpy()
    Z = np.bincount(sizes)
    assert int((np.arange(Z.size) * Z).sum()) == 4580 and Z[1] == 330
    return frame, [int(z) for z in Z]


def partial_sums(Z, lam):
    """S_l = Σ_{i=0}^{l} (−λ)^i (i+1) Z_{i+1}, exactly, for l = 0..len(Z)−2 (then constant)."""
    out, s = [], Fraction(0)
    for i in range(len(Z) - 1):
        s += (-lam) ** i * (i + 1) * Z[i + 1]
        out.append(s)
    return out


def test_binomial_is_the_average_of_truncated_series_exactly():
    """On testdata treated as a 25 % sample (λ = 3): L ~ Binomial(k, 2/5), k = 5 (9⁴ = 6561 <
    4580·9/2 = 20 610 ≤ 9⁵). E_L[S_L] = Σ_l C(k,l) q^l (1−q)^(k−l) S_min(l, ·), in rationals."""
    frame, Z = _testdata_fof()
    lam, q, k = Fraction(3), Fraction(2, 5), 5
    S = partial_sums(Z, lam)
    want = sum(math.comb(k, l) * q**l * (1 - q) ** (k - l) * S[min(l, len(S) - 1)]
               for l in range(k + 1))
    r = run(frame, KEYS, fraction=0.25)
    assert r.extra["lambda"] == 3.0 and (r.extra["k"], r.extra["q"]) == (5, pytest.approx(0.4))
    scale = sum(3**i * (i + 1) * Z[i + 1] for i in range(min(k + 1, len(Z) - 1)))   # Σ |terms|
    assert raw(r) == pytest.approx(float(want), abs=1e-12 * scale)


def test_poisson_is_the_average_of_truncated_series():
    """Same sample, L ~ Poisson(r), r = ln(36 640)/6 = 1.7514826: Σ_l P(L = l) S_l over l ≤ 400
    (pmf from math.lgamma; the rest of the mass is below 1e-300)."""
    frame, Z = _testdata_fof()
    S = partial_sums(Z, Fraction(3))
    r_par = math.log(4580 * 16 / 2) / 6
    want = sum(math.exp(l * math.log(r_par) - r_par - math.lgamma(l + 1)) * float(S[min(l, len(S) - 1)])
               for l in range(401))
    r = run(frame, KEYS, fraction=0.25, options={"tau1_hat": {"smoothing": "poisson"}})
    assert r.extra["r"] == pytest.approx(r_par, rel=1e-14)
    scale = r.extra["rounding_bound"] / (8 * np.finfo(np.float64).eps)          # Σ_i |c_i| Z_{i+1}
    assert raw(r) == pytest.approx(want, abs=1e-11 * scale)


def test_unbiased_series_is_the_derivative_of_good_toulmin():
    """SPEC §4.1: τ̂1 = d/dt U^GT(t) at t = λ, U^GT = −Σ_{i≥1} (−t)^i Φ_i (Orlitsky et al.), with
    Φ_i = Z_i. Derivative by the complex step (exact to rounding for a polynomial); λ = 1/2, and
    the unbiased series exactly in rationals on testdata."""
    frame, Z = _testdata_fof()
    lam = 0.5
    h = 1e-20
    t = complex(lam, h)
    U = -sum((-t) ** i * Z[i] for i in range(1, len(Z)))
    exact = float(partial_sums(Z, Fraction(1, 2))[-1])
    r = run(frame, KEYS, fraction=1 / (1 + lam))
    assert r.extra["method"] == "unbiased"
    assert U.imag / h == pytest.approx(exact, rel=1e-12)
    assert raw(r) == pytest.approx(exact, rel=1e-12)
