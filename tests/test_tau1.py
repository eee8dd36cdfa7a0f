"""tau1 and tau1_hat (SPEC §4, §4.1): hand computations, scipy tail probabilities, a Monte Carlo
simulation of the Poisson abundance model, and sdcMicro's testdata at λ = 99."""
from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import gpurisk
from gpurisk.errors import BadInput
from gpurisk.measures import _tau1_series as ser
from gpurisk.measures.tau1_hat import fof_vector, series_for

from conftest import data_path, run_cli


def frame_with_fof(fof: dict[int, int]) -> pd.DataFrame:
    """One key column whose cell sizes give exactly the frequencies of frequencies ``fof``."""
    vals, cell = [], 0
    for r, count in sorted(fof.items()):
        for _ in range(count):
            vals += [cell] * r
            cell += 1
    return pd.DataFrame({"k": vals})


def tau1_hat_of(frame, fraction, **opts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = gpurisk.assess(frame, ["k"], fraction=fraction, measures=["tau1_hat"],
                             options={"tau1_hat": opts} if opts else None)
    return res.measures["tau1_hat"]


# --- hand computations --------------------------------------------------------------------------

SMALL = {1: 5, 2: 3, 3: 1}   # Z_1 = 5, Z_2 = 3, Z_3 = 1 (n = 14)


def test_unbiased_series_by_hand():
    # λ = 0.5 (π = 2/3): 5 − 0.5·2·3 + 0.25·3·1 = 2.75
    r = tau1_hat_of(frame_with_fof(SMALL), 2 / 3)
    assert r.extra["method"] == "unbiased"
    # unreliable: withheld by default (no value, the reason, the raw value in the extras) ...
    assert r.value is None and r.reason.startswith("withheld as unreliable: the s.e. is 0.877")
    assert r.extra["raw_value"] == pytest.approx(2.75, abs=1e-12) and r.extra["withheld"] is True
    # ... and shown when asked
    r = tau1_hat_of(frame_with_fof(SMALL), 2 / 3, show_unreliable=True)
    assert r.value == pytest.approx(2.75, abs=1e-12)
    # s.e.: Σ c_i² Z_{i+1} − τ̂1 = 1·5 + 1·3 + 0.5625·1 − 2.75 = 5.8125
    assert r.se == pytest.approx(math.sqrt(5.8125), abs=1e-12)
    assert r.extra["reliable"] is False                  # s.e. 2.4 against an estimate of 2.75
    assert "the s.e. is 0.877 of the estimate" in r.extra["unreliable_because"]


def test_binomial_smoothed_series_by_hand():
    # λ = 3 (π = 1/4), L ~ Binomial(2, 1/2): P(L≥1) = 3/4, P(L≥2) = 1/4
    # 5 − 3·2·3·(3/4) + 9·3·1·(1/4) = 5 − 13.5 + 6.75 = −1.75
    r = tau1_hat_of(frame_with_fof(SMALL), 0.25, k=2, q=0.5)
    assert r.extra["method"] == "binomial" and r.extra["k"] == 2
    assert r.extra["raw_value"] == pytest.approx(-1.75, abs=1e-12)
    # negative: withheld, never shown as a number; the reason gives the estimate and its s.e.
    # (c = 1, −4.5, 6.75: 5 + 20.25·3 + 45.5625 − 0 = 111.3125)
    assert r.value is None and r.reason.startswith("withheld: the estimate (-1.75, s.e. 10.6)")
    assert "outside [0, n1 = 5]" in r.reason and r.extra["reliable"] is False
    # withheld: no s.e. beside no value; the extras keep it (issue 41)
    assert r.se is None and r.extra["raw_se"] == pytest.approx(math.sqrt(111.3125), abs=1e-12)


def test_a_shown_smoothed_estimate_says_its_bias_is_not_in_its_se():
    # λ = 3, L ~ Binomial(2, 1/2): 20 − 3·2·3·(3/4) + 9·3·1·(1/4) = 13.25, within [0, n1 = 20]
    fof = {1: 20, 2: 3, 3: 1}
    r = tau1_hat_of(frame_with_fof(fof), 0.25, k=2, q=0.5, show_unreliable=True)
    assert r.value == pytest.approx(13.25, abs=1e-12) and r.extra["method"] == "binomial"
    assert r.extra["note"].startswith("the s.e. is the sampling spread only")
    # the unbiased series (λ ≤ 1) has no smoothing bias: no such note
    r = tau1_hat_of(frame_with_fof(fof), 2 / 3, show_unreliable=True)
    assert r.extra["method"] == "unbiased" and r.value is not None and "note" not in r.extra


def test_poisson_smoothed_series_by_hand():
    # λ = 2 (π = 1/3), L ~ Poisson(1): P(L≥1) = 1 − e^−1, P(L≥2) = 1 − 2e^−1
    e = math.exp(-1.0)
    want = 5 - 2 * 2 * 3 * (1 - e) + 4 * 3 * 1 * (1 - 2 * e)
    r = tau1_hat_of(frame_with_fof(SMALL), 1 / 3, smoothing="poisson", r=1.0)
    assert r.extra["method"] == "poisson"
    assert (r.value if r.value is not None else r.extra["raw_value"]) == pytest.approx(want, abs=1e-12)


def test_census_gives_n1_exactly():
    """λ → 0: only the i = 0 term survives, τ̂1 = Z_1 (SPEC §4: the sum starts at i = 0)."""
    fof = {1: 7, 2: 4, 5: 2, 40: 1}
    frame = frame_with_fof(fof)
    r = tau1_hat_of(frame, 1.0)
    assert r.extra["lambda"] == 0.0 and r.value == 7.0
    res = gpurisk.assess(frame, ["k"], population=frame, measures=["tau1_hat", "tau1"])
    assert res.measures["tau1_hat"].value == 7.0 == res.measures["tau1"].value


def test_i0_term_in_the_smoothed_series():
    """With only uniques (Z_r = 0 for r ≥ 2) every smoother returns Z_1 whatever λ, with s.e. 0:
    a degenerate sample, so "not estimable" (issue 27: τ1 was about n1/2 in such samples), never a
    number; the raw value is kept."""
    frame = frame_with_fof({1: 9})
    for opts in ({}, {"smoothing": "poisson"}, {"show_unreliable": True}):
        r = tau1_hat_of(frame, 0.01, **opts)
        assert r.extra["method"] in ("binomial", "poisson") and r.extra["raw_value"] == 9.0
        assert r.value is None and r.reason.startswith("not estimable: the estimate is n1 = 9")
        # the flag agrees with the withheld value: a JSON reader never sees reliable: true beside
        # a value the measure refused (the trust study's 25 200 samples held 29 such: 14 with τ1 = 0,
        # 15 with every record unique)
        assert r.extra["reliable"] is False
        assert r.extra["unreliable_because"].startswith("not estimable")


def test_estimate_at_zero_is_not_estimable():
    # λ = 3, L ~ Binomial(1, 1/2): 5 − 3·2·(1/2)·Z_2 = 5 − 3·Z_2 with Z_1 = 3... choose Z so it is 0:
    # Z_1 = 3, Z_2 = 1: τ̂1 = 3 − 3·2·(1/2)·1 = 0
    r = tau1_hat_of(frame_with_fof({1: 3, 2: 1}), 0.25, k=1, q=0.5)
    assert r.extra["raw_value"] == pytest.approx(0.0, abs=1e-12)
    assert r.value is None and r.reason.startswith("not estimable: the estimate is 0")
    assert r.extra["reliable"] is False


def test_lambda_from_population_size():
    pop = frame_with_fof({1: 10, 2: 10, 3: 10})          # N = 60
    sample = pop.iloc[::3]                                  # n = 20
    res = gpurisk.assess(sample, ["k"], population=pop, fraction=0.9, measures=["tau1_hat"])
    assert res.measures["tau1_hat"].extra["lambda"] == pytest.approx((60 - 20) / 20)


# --- tail probabilities against scipy -------------------------------------------------------------

@pytest.mark.parametrize("k,q", [(6, 2 / 101), (13, 0.5), (40, 0.2), (1, 0.9)])
def test_binomial_tail_matches_scipy(k, q):
    i = np.arange(0, k + 3)
    got = np.exp(ser.binomial_log_tail(i, k, q))
    want = np.where(i <= 0, 1.0, stats.binom.sf(i - 1, k, q))
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=0)


@pytest.mark.parametrize("r", [0.066, 1.0, 7.5, 60.0])
def test_poisson_tail_matches_scipy(r):
    i = np.arange(0, 150)
    got = np.exp(ser.poisson_log_tail(i, r))
    want = np.where(i <= 0, 1.0, stats.poisson.sf(i - 1, r))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-300)


def test_poisson_tail_past_underflow():
    """Where P(L ≥ i) < 1e-280, the log tail still matches a direct log-sum of the pmf."""
    r, i = 0.07, np.array([150, 300, 1000])
    got = ser.poisson_log_tail(i, r)
    for ii, g in zip(i, got):
        m = np.arange(ii, ii + 400)
        want = special.logsumexp(stats.poisson.logpmf(m, r))
        assert np.isfinite(g) and g == pytest.approx(want, rel=1e-12)
    assert stats.poisson.sf(149, r) == 0.0          # scipy's own value underflows here


def test_binomial_tail_past_underflow_exact():
    """Deep Binomial tail against exact rational arithmetic (q = 1/64 is exact in binary)."""
    k, q = 400, Fraction(1, 64)
    for i in (200, 350, 400):
        tail = sum(math.comb(k, m) * q**m * (1 - q)**(k - m) for m in range(i, k + 1))
        want = math.log(tail.numerator) - math.log(tail.denominator)
        got = float(ser.binomial_log_tail(np.array([i]), k, float(q))[0])
        assert got == pytest.approx(want, rel=1e-11)


def test_default_smoothing_parameters():
    """SPEC §4.1 at λ = 99, n = 4580: k = ⌈½ log₃(4580·99²/98)⌉ = ⌈5.93⌉ = 6, q = 2/101,
    r = ln(4580·100²/98)/198 = ln(467 346.9)/198 = 13.05482/198 = 0.065933 (by hand)."""
    k, q = ser.default_binomial_kq(99.0, 4580)
    assert (k, q) == (6, pytest.approx(2 / 101))
    assert ser.default_poisson_r(99.0, 4580) == pytest.approx(0.065933, abs=1e-6)


# --- Monte Carlo: unbiasedness under the Poisson abundance model ---------------------------------

@pytest.mark.parametrize("lam", [0.25, 0.8])
def test_unbiased_series_monte_carlo(lam):
    """Population counts F_j ~ Poisson(μ_j (1+λ)), Bernoulli sample f_j ~ Binomial(F_j, 1/(1+λ)):
    E[τ̂1] = E[τ1] (Camerlenghi et al., the identity that defines τ̂1). Many populations at once."""
    rng = np.random.default_rng(20240505)
    C, R = 600, 3000
    mu = rng.gamma(0.6, 2.0, size=C)                        # cell abundances, many small cells
    F = rng.poisson(mu * (1 + lam), size=(R, C))
    f = rng.binomial(F, 1 / (1 + lam))
    tau1 = ((f == 1) & (F == 1)).sum(axis=1)
    rmax = int(f.max())
    Z = np.zeros((R, rmax + 1))
    np.add.at(Z, (np.repeat(np.arange(R), C), f.ravel()), 1)
    s = series_for(lam, int(f.sum(axis=1).mean()), rmax)
    assert s.method == "unbiased"
    est, _ = ser.evaluate(s, Z)
    diff = est - tau1
    tol = 4 * diff.std(ddof=1) / math.sqrt(R)
    assert abs(diff.mean()) < tol, (diff.mean(), tol, est.mean(), tau1.mean())
    # the estimator is not trivially tracking τ1: dropping the i = 0 term would be far off
    assert abs((est - Z[:, 1]).mean() - tau1.mean()) > 10 * tol
    # the measure computes the same numbers as the array evaluation, replicate by replicate
    for row in range(3):
        t = gpurisk.FreqTable(("k",), [list(range(C))], np.arange(C), f[row], None)
        r = gpurisk.run_measures(t, gpurisk.Context(fraction=1 / (1 + lam)), ["tau1_hat"])["tau1_hat"]
        assert r.extra.get("raw_value", r.value) == pytest.approx(est[row], abs=1e-9)


def test_fof_vector():
    Z = fof_vector(np.array([0, 1, 1, 3, 0, 2, 1]))
    assert Z.tolist() == [0, 3, 1, 1]


# --- real data: sdcMicro testdata at π = 0.01 (λ = 99) ----------------------------------------------

@pytest.mark.parametrize("smoothing", ["binomial", "poisson", "none"])
def test_testdata_lambda_99_finite_and_flagged(smoothing):
    path = data_path("sdcmicro/testdata.csv")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = gpurisk.assess(path, ["urbrur", "water", "sex", "age"], fraction=0.01,
                             measures=["tau1_hat"], options={"tau1_hat": {"smoothing": smoothing}})
    r = res.measures["tau1_hat"]
    assert res.n == 4580 and r.extra["n1"] == 330           # sdcMicro: 330 records with fk = 1
    assert r.extra["lambda"] == pytest.approx(99.0)
    raw = r.extra.get("raw_value", r.value)
    assert raw is not None and math.isfinite(raw)
    if r.value is None:                                      # outside [0, n1]: withheld
        assert r.reason.startswith("withheld") and not 0 <= raw <= 330
    else:
        assert 0 <= r.value <= 330
    assert r.extra["reliable"] is False
    assert "λ = 99 > 20" in r.extra["unreliable_because"]
    if smoothing == "binomial":
        assert (r.extra["k"], r.extra["q"]) == (6, pytest.approx(2 / 101))


def test_huge_parameters_are_never_nan_or_inf():
    frame = frame_with_fof({1: 3, 2: 2, 300: 1})
    r = tau1_hat_of(frame, 0.001, smoothing="poisson", r=500.0)   # λ^i P(L≥i) beyond 1e308
    assert (r.value is None and "double range" in r.reason) or math.isfinite(r.extra["raw_value"])
    r = tau1_hat_of(frame, 0.001, smoothing="none")
    assert (r.value is None and "double range" in r.reason) or math.isfinite(r.extra["raw_value"])
    # a large Poisson r with a moderate λ stays finite and is flagged by its rounding bound
    r = tau1_hat_of(frame, 0.2, smoothing="poisson", r=200.0)
    raw = r.extra.get("raw_value", r.value)
    assert raw is not None and math.isfinite(raw) and r.extra["reliable"] is False
    assert "rounding error" in r.extra["unreliable_because"]


def test_bad_options_are_bad_input():
    frame = frame_with_fof(SMALL)
    with pytest.raises(BadInput, match="smoothing"):
        tau1_hat_of(frame, 0.1, smoothing="gauss")
    with pytest.raises(BadInput, match="q=1.5"):
        tau1_hat_of(frame, 0.1, q=1.5)
    with pytest.raises(BadInput, match="k="):
        tau1_hat_of(frame, 0.1, k=2.5)


def test_cli_option_and_bad_option(tmp_path):
    path = data_path("sdcmicro/testdata.csv")
    ok = run_cli("assess", path, "--keys", "urbrur,water,sex,age", "--fraction", "0.01",
                 "--measures", "tau1_hat", "--option", "tau1_hat.smoothing=poisson", "--json")
    assert ok.returncode == 0, ok.stderr
    import json
    doc = json.loads(ok.stdout)
    m = doc["measures"]["tau1_hat"]
    assert m["method"] == "poisson" and m["reliable"] is False
    assert math.isfinite(m["value"] if m["value"] is not None else m["raw_value"])
    assert "λ = 99 > 20" in m["unreliable_because"]
    bad = run_cli("assess", path, "--keys", "urbrur,water,sex,age", "--fraction", "0.01",
                  "--measures", "tau1_hat", "--option", "tau1_hat.smoothing=gauss")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "smoothing" in bad.stderr
