"""tau1_hat: nonparametric estimate of τ1, the number of sample uniques that are population uniques.
SPEC §4, §4.1.

    λ = (N − n)/n  (N from the population when one is given, else λ = (1 − π)/π)
    unbiased (λ ≤ 1):   τ̂1   = Σ_{i≥0} (−λ)^i (i+1) Z_{i+1}
    smoothed (λ > 1):   τ̂1^L = Σ_{i≥0} (−λ)^i (i+1) P(L ≥ i) Z_{i+1}

Z_r = n_r (cells with f_j = r). L ~ Binomial(k, q) (default), q = 2/(λ+2),
k = ⌈½ log₃(n λ²/(λ−1))⌉, or L ~ Poisson(r), r = ln(n (λ+1)²/(λ−1)) / (2λ). The sum starts at i = 0
(SPEC §4: the seed's summary writes i = 1, which would give 0 for a census).

Options (``--option tau1_hat.NAME=VALUE``): ``smoothing`` = binomial | poisson | none (none: the
unbiased series whatever λ), ``r``, ``k``, ``q`` (override the formulas above; with λ ≤ 1 a smoother
is used only when its parameters are all given, since the formulas need λ > 1).

Standard error (analytic): under Bernoulli sampling the cells' sample counts are independent and
τ̂1 − τ1 = Σ_j [g(f_j) − I(f_j = 1, F_j = 1)] with g(r) = c_{r−1}, c_0 = 1, so
E(τ̂1 − τ1)² is estimated by Σ_r c_{r−1}² Z_r − τ̂1 (τ̂1 clipped to [0, n1]): unbiased for the
unbiased series, variance plus the cells' squared biases for a smoothed one. On real populations
(bench/validate_trust.py) it matched the replicate s.d. of τ̂1 − τ1 to within 10 % in nearly every
(population, key set, π). A parametric bootstrap would need a model of the population's cell sizes,
the very thing the estimator avoids assuming.

What is shown. The estimator is proven consistent for λ up to order log n (Camerlenghi et al. 2021,
Theorem 1), but at the λ of real releases (π = 1-10 %: λ = 9-99) it is often far off: its s.d. can
be thousands of cells against a τ1 of tens. A value outside [0, n1] (τ1 counts sample uniques, so it
lies there) is never shown as a number: the result has no value, and a reason that gives the
estimate and its s.e. (``raw_value`` keeps it for validation). Nor is an estimate with s.e. 0 or at
the edge of [0, n1] when n1 > 0 (a degenerate sample: every record unique gives τ̂1 = n1 ± 0 whatever
τ1 is): "not estimable", with the reason. ``reliable`` is true only where the real-population
validation found the estimator sound (see :func:`reliability`); otherwise ``unreliable_because``
says why, and the value is withheld (no value, a reason, ``raw_value`` and ``withheld`` in the
extras, so JSON shows it) unless the option ``show_unreliable`` is true. A withheld value has no
s.e. either (``raw_se`` in the extras keeps it): a table never shows an s.e. beside no value.
Camerlenghi, F., Favaro, S., Naulet, Z. and Panero, F. (2021) Optimal disclosure risk assessment.
Ann. Statist. 49, 723-744.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.freq.table import _fof_vector
from gpurisk.xp import to_host
from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option
from gpurisk.measures import _tau1_series as ser


def series_for(lam: float, n: int, imax: int, smoothing: str = "binomial", r=None, k=None,
               q=None) -> ser.Series:
    """The estimator's coefficients for λ, n and the options (see the module docstring).

    The coefficients depend on λ, n and the options only (plus the longest series needed), so the
    combinations of a scan, which share n and N, share one computation (kept, at most 64).
    """
    if smoothing not in ser.SMOOTHERS:
        raise BadInput(f"tau1_hat: smoothing={smoothing!r} is not one of {', '.join(ser.SMOOTHERS)}")
    r, k, q = _check_params(r, k, q)
    if smoothing == "poisson" and (lam > 1 or r is not None):
        r = ser.default_poisson_r(lam, n) if r is None else r
        return _coefficients(lam, n, imax, "poisson", r=r)
    if smoothing == "binomial" and (lam > 1 or (k is not None and q is not None)):
        if k is None or q is None:
            k0, q0 = ser.default_binomial_kq(lam, n)
            k, q = (k0 if k is None else k), (q0 if q is None else q)
        # the series ends where the Binomial support does: one set of coefficients serves every imax
        return _coefficients(lam, n, min(max(int(imax), 1), int(k) + 1), "binomial", k=k, q=q)
    return ser.coefficients(lam, n, imax, "unbiased")


@functools.lru_cache(maxsize=64)
def _coefficients(lam, n, imax, method, r=None, k=None, q=None) -> ser.Series:
    return ser.coefficients(lam, n, imax, method, r=r, k=k, q=q)


def _check_params(r, k, q):
    if r is not None:
        try:
            r = float(r)
        except (TypeError, ValueError):
            raise BadInput(f"tau1_hat: r={r!r} is not a number") from None
        if not (r > 0 and math.isfinite(r)):
            raise BadInput(f"tau1_hat: r={r!r} must be a positive finite number")
    if k is not None:
        if isinstance(k, bool) or not float(k).is_integer() or not 1 <= int(k) <= 10**6:
            raise BadInput(f"tau1_hat: k={k!r} must be an integer in 1..1000000")
        k = int(k)
    if q is not None:
        try:
            q = float(q)
        except (TypeError, ValueError):
            raise BadInput(f"tau1_hat: q={q!r} is not a number") from None
        if not 0.0 < q <= 1.0:
            raise BadInput(f"tau1_hat: q={q!r} must lie in (0, 1]")
    return r, k, q


def fof_vector(f) -> np.ndarray:
    """Z[r] = n_r for r = 0..max f (Z[0] unused), from the cell counts f (as ``FreqTable.fof_vector``)."""
    return _fof_vector(np, np.asarray(to_host(f)).astype(np.int64))


class Tau1Hat(Measure):
    name = "tau1_hat"
    description = "Estimated number of sample uniques that are population uniques (smoothed series)"
    needs = frozenset({"fraction"})
    reference = "Camerlenghi, Favaro, Naulet & Panero (2021), estimators τ̂1 (λ < 1) and τ̂1^L; smoothing parameters of Orlitsky, Suresh & Wu (2016)"
    options = {
        "smoothing": Option(str, "binomial", choices=ser.SMOOTHERS,
                            help="smoother of the series when lambda > 1 (none: the unbiased series)"),
        "r": Option(float, None, min=0.0, min_open=True, help="Poisson smoother's r (default: formula)"),
        "k": Option(int, None, min=1, max=10**6, help="Binomial smoother's k (default: formula)"),
        "q": Option(float, None, min=0.0, max=1.0, min_open=True,
                    help="Binomial smoother's q (default: 2/(lambda+2))"),
        "show_unreliable": Option(bool, False,
                                  help="show an estimate flagged unreliable as a number (by default "
                                       "it is withheld; raw_value keeps it)"),
    }
    estimates = "tau1"
    reads = "summary"   # n_r, N, unique_stats: runs where the cells stay on the workers

    def compute(self, table, ctx: Context) -> Result:
        n = table.n
        if n == 0:
            return Result.not_applicable("the sample has no records")
        N = table.N
        lam = (N - n) / n if N else (1.0 - ctx.fraction) / ctx.fraction
        opt = {key: ctx.option(self.name, key, default) for key, default in self.options.items()}
        show_unreliable = bool(opt.pop("show_unreliable"))
        Z = table.fof_vector()
        s = series_for(lam, n, Z.size - 1, **opt)
        value, bound = ser.evaluate(s, Z)
        value, bound = float(value), float(bound)
        log_n = math.log(n)
        n1 = int(Z[1]) if Z.size > 1 else 0
        extra = {"lambda": lam, "log_n": log_n, "method": s.method, **s.params, "terms": s.terms,
                 "n1": n1, "rounding_bound": bound}
        if not math.isfinite(value):
            return Result.not_applicable(
                f"the series' terms exceed the double range (λ = {lam:.4g}, method {s.method}); "
                "choose a smoother or smaller smoothing parameters", **extra, reliable=False)
        m2 = float(ser.second_moment(s, Z))
        # E(τ̂1 − τ1)² ≈ Σ_j g(f_j)² − τ1 (see _tau1_series.second_moment); m2 ≥ n1 ≥ the clipped
        # value, so the variance is never negative
        se = math.sqrt(m2 - min(max(value, 0.0), n1)) if math.isfinite(m2) else math.inf
        slack = bound + 1e-9 * max(1, n1)
        what = degenerate(lam, value, n1, se, slack)
        reliable, why = reliability(lam, log_n, value, n1, se, s.method, bound, what)
        extra |= {"reliable": reliable, "relative_se": se / value if value > 0 else math.inf}
        if why:
            extra["unreliable_because"] = why
        if not -slack <= value <= n1 + slack:
            side = "negative" if value < 0 else f"above n1 = {n1}, the number of sample uniques"
            se_txt = f"{se:.3g}" if math.isfinite(se) else "beyond the double range"
            return Result(value=None,           # withheld: no s.e. beside no value (raw_se keeps it)
                          reason=f"withheld: the estimate ({value:.4g}, s.e. {se_txt}) is {side}, "
                                 f"outside [0, n1 = {n1}]: the estimator fails on this sample "
                                 f"(λ = {lam:.3g})",
                          extra=extra | {"raw_value": value, "withheld": True,
                                         "raw_se": se if math.isfinite(se) else None})
        if what:         # withheld, and flagged unreliable with that reason (reliability)
            return Result.not_applicable(
                f"not estimable: {what} (s.e. {se:.3g}); such a value comes from a degenerate "
                f"sample (e.g. every record unique), not from the population (λ = {lam:.3g})",
                **extra, raw_value=value, withheld=True, raw_se=se if math.isfinite(se) else None)
        value = min(max(value, 0.0), float(n1))          # within the rounding slack: onto [0, n1]
        if not reliable and not show_unreliable:
            return Result(value=None,
                          reason=f"withheld as unreliable: {why} (the estimate was {value:.4g}, "
                                 f"s.e. {se:.3g}); show it with {{option:tau1_hat.show_unreliable=true}}",
                          extra=extra | {"raw_value": value, "withheld": True,
                                         "raw_se": se if math.isfinite(se) else None})
        if s.method != "unbiased":     # a smoothed series: its bias is not in the s.e.
            extra["note"] = SMOOTHING_BIAS_NOTE
        return Result(value=value, se=se if math.isfinite(se) else None, extra=extra)


#: reliable needs λ at most this: at λ ≈ 99 (π = 1 %) the smoothed series was biased by 26-400 %
#: on real populations even where its s.e. was under a tenth of the estimate (docs/validation.md)
MAX_LAMBDA = 20.0
#: ... and the s.e. at most this share of the estimate (smoothed series: their bias grows with λ and
#: with the share of sample uniques that are not population uniques, which also widens the s.e.).
#: Issue 27: at 0.1 one sample 29 % off (cup, 4 keys, π = 5 %, λ = 19) was marked reliable; at 0.05
#: the largest error of a sample marked reliable was 16 % (5 populations × 3 key sets × 3 π, 50
#: samples each). Rechecked on issue 43's 14 populations (3 key sets × 3 π, 200 samples a cell,
#: stop 66): 1 787 samples marked reliable in 11 cells, 99.4 % of them within ±20 % of τ1, the
#: largest error 25.8 % (GSS abortion's third key set at λ ≈ 19); see :func:`reliability`
MAX_RELATIVE_SE = 0.05


#: beside a shown smoothed estimate: what its s.e. leaves out (issue 43's stop 66, the samples
#: marked reliable on 14 real populations; :func:`reliability`)
SMOOTHING_BIAS_NOTE = ("the s.e. is the sampling spread only: the smoothed series' own bias, "
                       "upward, is not in it (on 14 real populations +1.7 to +5.4 % at λ ≈ 9 and "
                       "+3.4 to +12 % at λ ≈ 19 where the estimate was marked reliable)")


def degenerate(lam, value, n1, se, slack) -> str | None:
    """Why an estimate within [0, n1] (± ``slack``) says nothing about τ1, or None: a degenerate
    sample (every record unique: τ̂1 = n1 ± 0, s.e. 0) or an estimate at the edge of [0, n1] (issue
    27: τ1 ≈ n1/2 in such samples)."""
    if not (n1 > 0 and lam > 0 and -slack <= value <= n1 + slack):
        return None
    if value <= slack or value >= n1 - slack:
        return f"the estimate is {'0' if value <= slack else f'n1 = {n1}'}, at the edge of [0, n1]"
    return "its s.e. is 0" if se <= 1e-12 * n1 else None


def reliability(lam, log_n, value, n1, se, method, bound,
                degenerate_because=None) -> tuple[bool, str]:
    """(reliable, why not) for one estimate; ``degenerate_because``: :func:`degenerate`'s reason,
    which makes it unreliable first of all (the measure withholds such an estimate).

    Calibrated on five real populations, three key sets each, π = 1, 5, 10 %
    (bench/validate_trust.py): reliable where the estimate lies in [0, n1], λ ≤ MAX_LAMBDA and
    s.e. ≤ MAX_RELATIVE_SE · τ̂1; in every (population, key set, π) where some samples met this, the
    samples that met it had |relative bias| < 25 % and NMSE < 0.1, and (issue 27, 50 samples a
    cell) no single sample marked reliable was off by more than 16 %. λ ≤ ln n alone (the range where the
    estimator is proven consistent) did not track this: it held on FARS at π = 10 % with 40 % of the
    values negative.

    On issue 43's 14 populations (200 samples a cell) the samples marked reliable were within
    ±20 % of τ1 in 99.4 %, at most 25.8 % off. Their error is mostly the smoothing's bias, upward,
    which the s.e. does not hold: at λ ≈ 9 the cells' mean errors were +1.7 to +5.4 % and 12 % of
    the samples lay more than 2.58 s.e. from τ1; at λ ≈ 19, +3.4 to +12.1 % and 50 %. The s.e.
    of a reliable estimate is its sampling spread, not its distance from τ1.
    """
    reasons = [f"not estimable: {degenerate_because}"] if degenerate_because else []
    if not bound < 0.5:
        reasons.append(f"the sum's rounding error may reach {bound:.3g} cells")
    if method == "unbiased" and lam > 1:
        reasons.append(f"the unbiased series is used with λ = {lam:.4g} > 1 (its variance grows "
                       "like λ^(2i))")
    if lam > MAX_LAMBDA:
        reasons.append(f"λ = {lam:.3g} > {MAX_LAMBDA:g}: the smoothed series' bias reached 26-400 % "
                       "on real populations at λ ≈ 99")
    if not 0 <= value <= n1:
        reasons.append("the estimate is outside [0, n1]")
    elif not se <= MAX_RELATIVE_SE * value:
        rel = f"{se / value:.3g} of the estimate" if value > 0 else "above the estimate of 0"
        reasons.append(f"the s.e. is {rel} (reliable needs at most {MAX_RELATIVE_SE:g})")
    return not reasons, "; ".join(reasons)


@hookimpl
def gpurisk_register_measures():
    return [Tau1Hat]
