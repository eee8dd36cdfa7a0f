"""Search-method risk formulas (SPEC §5, Skinner 2007 eqs. 5, 7-10) against the paper's check values,
exact rational / high-precision decimal arithmetic, series expansions and Monte Carlo simulation of
each search method."""
from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpurisk.errors import BadInput
from gpurisk.measures import search_methods as sm


def one(f, *args):
    return float(f(np.array([args[0]]), *args[1:])[0])


# --- the paper's check values --------------------------------------------------------------------
def test_balding_donnelly_r2_exact():
    # N = 101, p = 0.004: 1/{1 + 100·0.004} = 1/1.4 (quoted 0.714)
    assert one(sm.r2_risk, 0.004, 101) == pytest.approx(1 / 1.4, rel=1e-14)
    assert round(one(sm.r2_risk, 0.004, 101), 3) == 0.714


def test_balding_donnelly_r1_both_readings():
    # exact rational values of eq. 5 with p = 1/250
    p = Fraction(1, 250)
    for N, quoted in ((100, 0.8256), (101, 0.8240)):
        exact = (1 - (1 - p) ** N) / (N * p)
        got = one(sm.r1_risk, 0.004, N)
        assert got == pytest.approx(float(exact), rel=1e-13)
        assert abs(got - quoted) < 1e-4           # SPEC's four-decimal values
    assert round(one(sm.r1_risk, 0.004, 100), 3) == 0.826  # the paper's quote counts 100 others


def test_r3_needs_y_at_least_48():
    # Skinner §5.4.1: with N = 101, p = 0.004, 1/{1 + (N−1−y)p} > 0.826 requires y >= 48
    ys = np.arange(0, 101)
    r = np.array([one(sm.r3_risk, 0.004, 101, y) for y in ys])
    assert ys[r > 0.826].min() == 48
    # r4 is eq. 8 with y + 1 = the database size
    assert one(sm.r4_risk, 0.004, 101, 49) == one(sm.r3_risk, 0.004, 101, 48)
    # y = 0: r3 is r2 (the paper: "if y = 0, methods r2 and r3 are identical")
    assert one(sm.r3_risk, 0.004, 101, 0) == one(sm.r2_risk, 0.004, 101)


TABLE3 = [  # p̂, printed r1, r1u, r2, B1
    (1.56e-7, 0.9298, 0.9301, 0.8715, 0.8721),
    (7.08e-5, 0.0149, 0.0150, 0.0148, 0.0148),
    (0.00121, 0.0009, 0.0009, 0.0009, 0.0009),
]


@pytest.mark.parametrize("p, r1, r1u, r2, b1", TABLE3)
def test_skinner_table3(p, r1, r1u, r2, b1):
    # N ≈ 950 000 and n ≈ 4 750 are rounded in the paper: agreement to about 1e-3 only
    N, n = 950_000, 4_750
    assert one(sm.r1_risk, p, N) == pytest.approx(r1, abs=1e-3)
    assert one(sm.r1u_risk, p, N, n) == pytest.approx(r1u, abs=1e-3)
    assert one(sm.r2_risk, p, N) == pytest.approx(r2, abs=1e-3)
    assert one(sm.b1_risk, p, N, n) == pytest.approx(b1, abs=1e-3)


def test_skinner_table3_eq5_recomputed():
    # SPEC §5: eq. 5 at the rounded inputs gives 0.9294, 0.0149, 0.0009
    for (p, *_), want in zip(TABLE3, (0.9294, 0.0149, 0.0009)):
        assert round(one(sm.r1_risk, p, 950_000), 4) == want


def test_database_size_for_r4_to_reach_r1u():
    # Skinner §6: databases of at least 463 000 and 5 550 for the minimum and maximum p̂ cases.
    # (The paper's 17 300 for the median case is not reproduced: y + 1 ≈ n + 1/p̂ = 18 900 there.)
    N, n = 950_000, 4_750
    for p, want in ((1.56e-7, 463_000), (0.00121, 5_550)):
        target = one(sm.r1u_risk, p, N, n)
        size = sm.database_size_for(p, target, N)
        assert size == pytest.approx(want, rel=0.01)
        assert one(sm.r4_risk, p, N, math.ceil(size)) >= target > one(sm.r4_risk, p, N, math.floor(size) - 1)


# --- numerical stability ---------------------------------------------------------------------------
def decimal_r1(p: float, N: int) -> float:
    """eq. 5 in 80-digit decimal arithmetic: (1−p)^N by exact integer powering."""
    with localcontext() as ctx:
        ctx.prec = 80
        dp = Decimal(p)  # the exact binary value of the float
        return float((1 - (1 - dp) ** N) / (N * dp))


@pytest.mark.parametrize("p", [1e-12, 3e-11, 1e-9, 1e-7, 1e-5, 1e-3, 0.1, 0.5, 0.999])
@pytest.mark.parametrize("N", [1, 2, 100, 10**6, 10**9])
def test_r1_matches_high_precision(p, N):
    assert one(sm.r1_risk, p, N) == pytest.approx(decimal_r1(p, N), rel=1e-13, abs=1e-300)


def test_high_precision_reference_catches_the_naive_formula():
    # the naive (1 − (1−p)**N)/(N p) loses digits at tiny p: the reference above must see it
    p, N = 1e-12, 1000
    naive = (1 - (1 - p) ** N) / (N * p)
    assert abs(naive / decimal_r1(p, N) - 1) > 1e-6
    assert abs(one(sm.r1_risk, p, N) / decimal_r1(p, N) - 1) < 1e-14


@pytest.mark.parametrize("p, N", [(1e-12, 10**9), (1e-12, 10**6), (1e-15, 10**9), (1e-10, 10**5)])
def test_r1_series_expansion_small_Np(p, N):
    # E 1/(1 + Bin(N−1, p)) = 1 − (N−1)p/2 + (N−1)(N−2)p²/6 − (N−1)(N−2)(N−3)p³/24 + O((Np)^4)
    m = N - 1
    series = 1 - m * p / 2 + m * (m - 1) * p * p / 6 - m * (m - 1) * (m - 2) * p ** 3 / 24
    assert one(sm.r1_risk, p, N) == pytest.approx(series, rel=1e-14)


def test_r1_large_Np_asymptote():
    # Np ≫ 1: r1 → 1/(Np) (the (1−p)^N term underflows, not overflows)
    p, N = 1e-3, 10**9
    assert one(sm.r1_risk, p, N) == pytest.approx(1 / (N * p), rel=1e-15)


def test_limits_p0_p1():
    p = np.array([0.0, 1.0])
    r = sm.r1_risk(p, 1000)
    assert r[0] == 1.0 and r[1] == pytest.approx(1 / 1000)
    assert np.all(np.isfinite(sm.r2_risk(p, 10**9)))


@given(p=st.floats(1e-12, 1.0), N=st.integers(2, 10**9), frac=st.floats(0.0, 1.0))
@settings(max_examples=200, deadline=None)
def test_orderings(p, N, frac):
    n = max(1, int(frac * N))
    a = np.array([p])
    r1, r2 = sm.r1_risk(a, N)[0], sm.r2_risk(a, N)[0]
    assert 0 < r2 <= r1 * (1 + 1e-12) <= 1 + 1e-12          # Jensen: E 1/X >= 1/E X
    assert sm.r1u_risk(a, N, n)[0] >= r1 * (1 - 1e-12)        # fewer unseen units, higher risk
    assert sm.b1_risk(a, N, n)[0] >= r2 * (1 - 1e-12)


# --- Monte Carlo simulation of each search method ------------------------------------------------
N_MC = 400_000


def _close(est, sims, formula):
    se = math.sqrt(max(est * (1 - est), 1e-12) / sims)
    assert abs(est - formula) < 5 * se + 1e-9, (est, formula, se)


def test_mc_r1_search_until_match():
    # record r's key is matched by A; the others match independently with prob. p; the intruder
    # picks one of the F matches at random: correct with probability 1/F
    rng = np.random.default_rng(1)
    N, p = 60, 0.03
    F = 1 + rng.binomial(N - 1, p, N_MC)
    correct = rng.random(N_MC) < 1.0 / F
    _close(correct.mean(), N_MC, one(sm.r1_risk, p, N))


def test_mc_r1u_srs_sample_unique():
    # population counts under the multinomial model, a simple random sample of n without replacement,
    # keep the cells seen once in the sample: correct with probability 1/F
    rng = np.random.default_rng(2)
    N, n, p = 80, 30, 0.04
    F = rng.binomial(N, p, 4 * N_MC)
    F = F[F > 0]
    f = rng.hypergeometric(F, N - F, n)
    keep = f == 1
    Fk = F[keep]
    correct = rng.random(Fk.size) < 1.0 / Fk
    _close(correct.mean(), Fk.size, one(sm.r1u_risk, p, N, n))
    assert abs(one(sm.r1u_risk, p, N, n) - one(sm.r1_risk, p, N)) > 0.01  # the test can tell them apart


def test_mc_r2_random_individual_matches():
    rng = np.random.default_rng(3)
    N, p = 60, 0.03
    F = 1 + rng.binomial(N - 1, p, N_MC)
    B = rng.integers(0, N, N_MC)               # a random individual; A is unit 0, matches are 0..F−1
    match = B < F
    _close((B[match] == 0).mean(), int(match.sum()), one(sm.r2_risk, p, N))


def test_mc_b1_directed_search():
    # target B; a sample of n out of N; each other unit matches B's key with prob. p̃; the intruder
    # finds exactly one matching microdata record: correct when it is B's own
    rng = np.random.default_rng(4)
    N, n, p = 100, 40, 0.02
    inS = rng.random(N_MC) < n / N
    others = rng.binomial(np.where(inS, n - 1, n), p)
    unique = (inS & (others == 0)) | (~inS & (others == 1))
    correct = inS & (others == 0)
    _close(correct[unique].mean(), int(unique.sum()), one(sm.b1_risk, p, N, n))


def test_mc_r3_length_of_search_recorded():
    # search the population in random order; condition on y non-matches before the first match
    rng = np.random.default_rng(5)
    N, p, y = 40, 0.05, 12
    sims = 600_000
    Z = rng.random((sims, N - 1)) < p          # the others' match indicators, in search order ...
    A = rng.integers(0, N, sims)               # ... with A inserted at a random position
    pos_first_other = np.where(Z.any(1), Z.argmax(1), N)
    # position of the first match in the full order: A at position A, others shifted past it
    first_other_full = np.where(pos_first_other >= A, pos_first_other + 1, pos_first_other)
    first = np.minimum(A, first_other_full)
    keep = first == y
    correct = (A == first)[keep]
    _close(correct.mean(), int(keep.sum()), one(sm.r3_risk, p, N, y))


def test_check_params():
    with pytest.raises(BadInput, match="needs y"):
        sm.check_params("r3", 100, 10)
    with pytest.raises(BadInput, match="database"):
        sm.check_params("r4", 100, 10)
    with pytest.raises(BadInput, match="outside"):
        sm.check_params("r4", 100, 10, database_size=101)
    with pytest.raises(BadInput, match="unknown search method"):
        sm.check_params("r9", 100, 10)
