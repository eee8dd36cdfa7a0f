"""τ̂1 or Ê from a frequency table, with its s.e. and bounds: the estimate tau1_ll and matches_ll
report (:mod:`gpurisk.measures._ll_poisson` states the whole method and its options).

:func:`estimate` fits the model the options name (:mod:`gpurisk.models.table_fits`), sums each
sample unique's term τ̂ = Σ_{f=1} t_j (t_j = E[I(F_j = 1) | f_j = 1] for τ1, E[1/F_j | f_j = 1] for
E, :mod:`gpurisk.models.terms`, at the unique's leave-one-out prior, :mod:`gpurisk.models.prior`),
and forms the s.e. either as calibrated, √((k s.e._Poisson)² + (c τ̂)² + se_choice²), or from the
model alone (``interval=model``): √(Σ Var_j + se_shared² + se_choice² + se_alpha²), with the misfit
criterion's bounded bias moving the bound it points to and Cornish-Fisher's upper ends,
τ̂ + s.e. (z + (z² − 1) γ/6), γ = Σ κ3_j / s.e.³. It reads the options through a callable, so a
plugin's measure can call it with options of its own (``gpurisk.models.loglinear_estimate``)."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.measures._util import z_upper
from gpurisk.models.loglinear import check_cells, sample_levels
from gpurisk.models.prior import LooPrior, Moved, SharedSums, category_row, root_moves
from gpurisk.models.root_prior import JEFFREYS, Root
from gpurisk.models.table_fits import (auto_cv_means, eb_means, forest_misfit, lone_uniques,
                                       risk_means, risk_z, sample_unique_means)
from gpurisk.models.terms import SKEW_TOL, nb_both, nb_terms, sums_by_chunks
from gpurisk.models.unique_sums import KINDS, FixedPrior, Reader, skew_sum, unique_pass

#: how the cells may vary around the model (option ``dispersion``)
DISPERSIONS = ("auto", "moment", "truncated", "none")
#: how a sample unique's λ is taken from the fit (option ``prior``)
PRIORS = ("loo", "plugin")


class Estimate(NamedTuple):
    """τ̂1 or Ê (``value``), its s.e. and one-sided upper bound, and what else it reports
    (``extra``); ``reason``: why there is no estimate (then the three numbers are None)."""
    value: float | None
    se: float | None
    upper: float | None
    extra: dict
    reason: str | None = None

    @classmethod
    def not_applicable(cls, reason: str, **extra) -> "Estimate":
        return cls(None, None, None, extra, reason)


#: a root gamma's shape spread (its part of se_root) is taken by Taylor's expansion to second
#: order, from the terms' derivatives summed per category, where neither profile end moves a
#: unique's ln μ̃ or ln(1 + α̃) by more than this (the ends otherwise summed whole). On synthetic
#: tables whose moves reached 0.04-0.1 the spread was within 6·10⁻⁴ (relative) of the ends summed
#: whole and the s.e. within 1.4·10⁻⁷ (tests/test_root_prior.py checks 10⁻³ and 10⁻⁷); over the
#: trust study's 25 200 samples (issue 43's stop 63) it moved the s.e. in 8 036, by at most
#: 1.2·10⁻⁵ (relative), and no tally
ROOT_LINEAR = 0.05
#: the step in ln μ̃ and ln(1 + α̃) of the forward differences that give the terms' second
#: derivative in ln μ̃ (of their slope) and their first in ln(1 + α̃)
ROOT_STEP = 1e-5


#: above this share of the sample uniques alone in a category of some key (:func:`lone_uniques`)
#: the estimate carries a note: in bench/sweep_keysets.py's 3 000 random key sets of the 14
#: populations (π = 1, 5, 10 %) the one-sided 99 % bound held E in 99.7 % of the samples where at
#: most 10 % were such, 98.3 % at 10-30 %, 94.8 % at 30-70 %, 88.6 % above (τ1: 99.4, 97.6, 95.0,
#: 92.0 %). Where the note is shown, not a part of any estimate
LONE_NOTE_SHARE = 0.3
#: what the note quotes, per estimate (E's term, τ1's): the bound's coverage at 30-70 % and above
LONE_HELD = {"inverse": ("95 %", "89 %"), "tau1": ("95 %", "92 %")}


def estimate(table, pi: float, kind: str, opt: Callable, level: float,
             name: str = "loglinear_risk") -> Estimate:
    """τ̂1 (``kind="tau1"``) or Ê (``"inverse"``) of ``table`` at sampling fraction ``pi``, its
    one-sided upper bound at ``level`` (the two-sided interval at ``level``/2 in ``extra``);
    ``opt(key)`` gives each option of :class:`gpurisk.measures._ll_poisson.LoglinearPoisson`
    (``name`` prefixes the messages of options it refuses: :class:`gpurisk.errors.BadInput`). Not
    applicable (with the reason) where the fit cannot be formed."""
    n1 = table.n_r(1)
    model = str(opt("model"))
    extra = {"n1": n1, "model": model, "pi": pi}
    if n1 == 0:       # no sample unique: τ1 = E = 0 exactly
        return Estimate(0.0, 0.0, 0.0, extra)
    max_cells = float(opt("max_cells"))
    dispersion = str(opt("dispersion"))
    if dispersion not in DISPERSIONS:
        raise BadInput(f"{name}: dispersion={dispersion!r} is not one of "
                       f"{', '.join(DISPERSIONS)}")
    if dispersion == "auto":
        dispersion = "truncated" if model == "eb" else "moment"
    extra["dispersion"] = dispersion
    prior = str(opt("prior"))
    if prior not in PRIORS:
        raise BadInput(f"{name}: prior={prior!r} is not one of {', '.join(PRIORS)}")
    span = None         # model=eb, interval=model: α̂'s profile interval
    interval = str(opt("interval"))
    try:
        if model == "auto_cv":
            fit = None
            choice = (int(opt("cv_splits")), int(opt("cv_seed")),
                      float(opt("cv_z")), opt("max_interactions"))
            mu, alpha, pair, counts, alts = auto_cv_means(table, *choice, dispersion)
            model_key = f"{model}_{choice}_{dispersion}"
            extra["interaction"] = _pairs_text(table, pair)
            if interval == "model" and bool(opt("misfit_widen")) and len(table.keys) > 1:
                misfit = forest_misfit(table, pair, pi, kind)
                extra["misfit_T"] = misfit[1]
        elif model == "eb":
            fit = None
            smoothing = str(opt("eb_smoothing"))
            root_prior = str(opt("root_prior"))
            arc_target = str(opt("arc_target"))
            mu, alpha, pair, counts, alts, span, arcs = eb_means(
                table, opt("max_interactions"), dispersion,
                profile=interval == "model" and bool(opt("alpha_spread")),
                smoothing=smoothing, root_prior=root_prior, arc_target=arc_target)
            model_key = (f"eb_{opt('max_interactions')}_{dispersion}_{smoothing}_{root_prior}"
                         + ("" if arc_target == "global" else f"_{arc_target}"))
            extra["interaction"] = _pairs_text(table, pair)
            extra["smoothing"] = smoothing
            if arcs:      # parent → child, as the rooted form conditions them (and the window)
                extra["arcs"] = ", ".join(
                    f"{table.keys[a[0]]} → {table.keys[a[1]]}"
                    + (f" (neighbours ±{a[2]})" if len(a) > 2 and a[2] else "") for a in arcs)
            if smoothing == "rooted":
                extra["root_prior"] = root_prior
                extra["arc_target"] = arc_target
            # one key: the model is the key's own counts, μ̂ = f in every sampled cell, so the
            # criterion's (f − μ̂)² − f is −f whatever the population: it reads no residual, and
            # is not formed (on testdata's, Adult's and FARS's ages at π = 1-10 % its T was 1.2
            # to 3.7, each time putting Ê "high" and lowering the lower end)
            if interval == "model" and bool(opt("misfit_widen")) and len(table.keys) > 1:
                misfit = forest_misfit(table, pair, pi, kind)
                extra["misfit_T"] = misfit[1]
        elif dispersion == "truncated":
            raise BadInput("dispersion=truncated needs a forest model (model=auto_cv or eb)")
        elif model in ("risk", "cv_risk"):
            fit = None
            mu, alpha, pair, counts, alts, misfit = risk_means(
                table, pi, boot=int(opt("choice_boot")) if interval == "model" else 0,
                start="cv" if model == "cv_risk" else "main")
            model_key = model
            extra["interaction"] = _pairs_text(table, pair)
            misfit = misfit[kind]
            extra["misfit_T"] = misfit[1]
        else:
            alts, model_key = [], model
            if model != "independence":      # the closed form forms no K-cell array
                check_cells(sample_levels(table)[1], max_cells, table.keys)
            mu, fit, alpha, counts = sample_unique_means(
                table, model, float(opt("tol")), int(opt("max_iter")),
                max_cells)
    except BadInput as exc:
        return Estimate.not_applicable(f"the log-linear fit is not available: {exc}", **extra)
    except MemoryError:
        return Estimate.not_applicable("the log-linear fit needs more memory than there is "
                                     "(too many support cells)", **extra)
    n = float(table.n)
    if prior == "loo" and (counts is None or n < 2):
        prior = "plugin"          # the two-way fit (or a sample of one record): no such form
    extra["prior"] = prior
    # α̂ as the terms read it
    fitted = alpha if dispersion != "none" else 0.0

    def source(mu, alpha, counts):
        """Each unique's prior under a fitted model, made a slice at a time where it is read (no
        per-unique prior is kept): the leave-one-out prior, or the fitted μ̂ and α̂
        (``prior=plugin``)."""
        alpha = alpha if dispersion != "none" else 0.0
        return LooPrior(n, counts, alpha) if prior == "loo" else FixedPrior(mu, alpha)

    def value_sum(mu, alpha, counts) -> float:
        """The terms' sum (their variance not computed) under one of
        :func:`gpurisk.models.forest.doubtful`'s alternatives, taken slice by slice
        (:func:`sums_by_chunks`): no per-unique array is made."""
        def values(m, a):
            return nb_terms((1.0 - pi) * m / pi, a, pi, kind, False, variance=False)[:1]
        src = source(mu, alpha, counts)
        if prior == "loo":
            return sums_by_chunks(lambda *cs: values(*src.part(*cs)), 1, *src.arrays)[0]
        return sums_by_chunks(values, 1, src.mu, src.alpha)[0]
    exact = interval == "model"
    # interval=model with the leave-one-out prior: the terms' covariance through the margins
    # they share (shared_variance, the delta method), from each term's slope in ln μ
    shared = exact and prior == "loo" and bool(opt("shared_margins"))
    skewed = exact and bool(opt("skew_bound"))
    kept = source(mu, alpha, counts)

    def value_terms(mu_end, alpha_end):     # both measures' terms at a prior, values alone
        return tuple(t for t, _ in nb_both((1.0 - pi) * mu_end / pi, alpha_end, pi))

    def sums_of(arrays):
        return [float(np.sum(x)) for x in arrays]
    # what the interval reads at the same prior, read in the same pass as the terms
    readers = []
    if exact and span is not None:
        # α̂'s own uncertainty (model=eb): both measures' terms at its profile interval's ends,
        # the leave-one-out prior's relative variance (1 + α) Π(1 + 1/s) − 1 rescaled from the
        # fitted α̂'s, not rebuilt (the plug-in prior: α itself)
        def at_end(end):
            if prior == "loo":
                return lambda m, a, *_: sums_of(value_terms(
                    m, (1.0 + end) * ((a + 1.0) / (1.0 + fitted)) - 1.0))
            return lambda m, a, *_: sums_of(value_terms(m, end))
        readers += [Reader(len(KINDS), at_end(end)) for end in span]
    roots = ([(i, m) for i, m in enumerate(counts or ()) if isinstance(m, Root)]
             if exact and prior == "loo" else [])
    if roots:
        # the root keys' fitted gammas: each shape's own uncertainty, as α̂'s, the estimate's
        # spread over the shape's profile interval (the others held) ...
        def slope_terms(mu_f, alpha_f, own):
            # each term's first and second derivatives in ln μ̃ and its first in ln(1 + α̃),
            # both measures (forward differences of the slope and of the term), from the
            # pass's own terms and slopes (``own``) where it formed them
            lam_m = (1.0 - pi) * mu_f / pi
            if any(d is None for _, d in own):
                own = nb_both(lam_m, alpha_f, pi, slope=True)
            up = nb_both(lam_m * math.exp(ROOT_STEP), alpha_f, pi, slope=True)
            moved = nb_both(lam_m, (1.0 + alpha_f) * math.exp(ROOT_STEP) - 1.0, pi)
            out = []
            for (t0, d), (_, d1), (t1, _) in zip(own, up, moved):
                out += [d, (d1 - d) / ROOT_STEP, (t1 - t0) / ROOT_STEP]
            return tuple(out)
        # the spread, for a root whose ends move every unique's ln μ̃ and ln(1 + α̃) by at
        # most ROOT_LINEAR (a key of even categories, many records a category), by Taylor's
        # expansion: each end's change is Σ_j [d_j Δl + d2_j Δl²/2 + a_j Δr] over the uniques
        # (d, d2: each term's first and second derivatives in ln μ̃, a: its first in
        # ln(1 + α̃); Δl, Δr: the end's move of the two in the unique's category), so the
        # two ends' difference is Σ_j [d_j x + d2_j y + a_j z], x = Δl₁ − Δl₀,
        # y = (Δl₁² − Δl₀²)/2, z = Δr₁ − Δr₀ per category: one reading for all such roots and
        # both measures (the moves shift shares between categories, so the first order's
        # parts largely cancel and the second order is kept); the other roots' ends summed
        # whole
        moves = {i: mv for i, mv in ((i, root_moves(m, m.ends)) for i, m in roots)
                 if len(mv) == 2 and max(float(np.max(np.abs(x), initial=0.0))
                                         for end in mv for x in end) <= ROOT_LINEAR}
        near = [m for i, m in roots if i in moves]
        if near:
            coefs = [[mv[1][0] - mv[0][0], (mv[1][0] ** 2 - mv[0][0] ** 2) / 2.0,
                      mv[1][1] - mv[0][1]] for mv in (moves[i] for i, _ in roots if i in moves)]

            readers.append(Reader(3 * len(KINDS) * len(near),
                                  lambda m, a, start, stop, own: category_row(
                                      near, coefs, slope_terms(m, a, own), start, stop),
                                  own=True))

        def moved_sums(move):      # both measures' terms at the prior with roots moved
            move._factors()        # its factors per category, made before the threads read them
            return lambda m, a, start, stop: sums_of(value_terms(*move.at(m, a, start, stop)))
        readers += [Reader(len(KINDS), moved_sums(Moved([(m, a, b)])))
                    for i, m in roots if i not in moves for a, b in m.ends]
        # and Jeffreys' prior: every root moved to shape ½, rate 0
        readers.append(Reader(len(KINDS), moved_sums(Moved([(m, JEFFREYS, 0.0)
                                                            for _, m in roots]))))
    # both measures' sums over the uniques in one pass, kept for the other
    done = table.cached(
        f"_ll_pass_{model_key}_{prior}_{alpha!r}_{pi!r}_{exact}_{shared}_{skewed}_{span!r}",
        lambda: unique_pass(kept, pi, exact, bins=skewed, readers=readers,
                            shared=(lambda: SharedSums(n, counts)) if shared else None))
    which = KINDS.index(kind)
    own = done.sums[kind]
    extra["alpha"] = fitted
    value = own.value
    se_p = math.sqrt(own.variance)
    if shared:
        extra["se_shared"] = math.sqrt(own.shared)
    # the model choice's spread: the estimate under each forest one test away, weighted by the
    # chance that test goes the other way (gpurisk.models.forest.doubtful)
    spread = (math.sqrt(sum(w * (value_sum(*alt) - value) ** 2 for w, *alt in alts))
              if alts and bool(opt("choice_spread")) else 0.0)
    k, c = float(opt("se_factor")), float(opt("model_error"))
    jeffreys = None   # the estimate under Jeffreys' prior, where a root key's gamma is used
    if exact:         # interval=model: the model's own variance, no fitted factor
        k, c = 1.0, 0.0
        read = iter(done.read)
        if span is not None:     # model=eb: α̂'s profile interval was asked for
            # α̂'s own uncertainty: the estimate's spread over its profile interval
            at = [float(next(read)[which]) for _ in span]
            extra["alpha_interval"] = list(span)
            extra["se_alpha"] = abs(at[1] - at[0]) / 2.0
        if roots:
            parts = []
            if near:
                rows = next(read).reshape(len(near), 3 * len(KINDS))
                parts += [abs(float(row[3 * which:3 * which + 3].sum())) / 2.0 for row in rows]
            for i, m in roots:
                if i not in moves:
                    at = [float(next(read)[which]) for _ in m.ends]
                    parts.append(abs(at[1] - at[0]) / 2.0)
            # and the choice of the gamma over Jeffreys' prior, a coin flip between the two: the
            # root mean square distance to them, |Ê − Ê_jeffreys|/√2. Ê_jeffreys is the sum of
            # the terms at the fitted prior with every root moved to Jeffreys' ½ (shape ½, rate
            # 0: the prior root_prior=jeffreys builds)
            jeffreys = float(next(read)[which])
            extra["estimate_jeffreys"] = jeffreys
            parts.append(abs(value - jeffreys) / math.sqrt(2.0))
            extra["root_shapes"] = ", ".join(f"{table.keys[m.key]}: {m.shape:.3g}"
                                             for _, m in roots)
            extra["root_gammas"] = [[table.keys[m.key], m.shape] for _, m in roots]
            extra["se_root"] = math.sqrt(sum(p * p for p in parts))
        t_misfit = extra.get("misfit_T")
        if t_misfit is not None and abs(t_misfit) > risk_z() and \
                bool(opt("misfit_widen")):
            # the criterion still signals misfit: its estimate of the bias moves the bound on
            # the side it points to
            bias = misfit.bounded
            extra["misfit_bias"] = bias
            extra["misfit_bias_first_order"] = misfit.bias
            side = ("the upper bound is raised" if bias < 0 else "the lower end is lowered")
            extra["note"] = (f"the model still misfits where sample uniques are made (risk "
                             f"score T = {t_misfit:.2f}): the criterion puts the estimate "
                             f"{'low' if bias < 0 else 'high'} by {abs(bias):.3g} (each "
                             f"cell's share at most 1/e), so {side} by that much")
    extra["se_choice"] = spread
    extra["interval"] = interval
    # the misfit's bias moves the bound on the side it points to (B̂ < 0: the estimate is low,
    # so the upper bound rises by |B̂|), not the s.e.: the s.e. stays the model's
    bias = extra.get("misfit_bias", 0.0)
    lo_shift, hi_shift = max(bias, 0.0), max(-bias, 0.0)
    se = math.sqrt((k * se_p) ** 2 + extra.get("se_shared", 0.0) ** 2 + (c * value) ** 2
                   + spread ** 2 + extra.get("se_alpha", 0.0) ** 2 + extra.get("se_root", 0.0) ** 2)
    z = z_upper(level)
    z2 = z_upper(level / 2.0)
    # interval=model: the upper ends by Cornish-Fisher from the terms' third cumulant κ3 (a
    # sum of few skewed terms is not normal), never below the normal ones. The shift is
    # (z² − 1)/6 · Σ κ3/se², and each term lies in [0, 1], so |κ3_j| ≤ Var_j: the uniques of the
    # smallest variances, as many as together can move the upper ends by at most SKEW_TOL of
    # an s.e., are left out of Σ κ3 (:func:`skew_sum`, by bins of their variances; all of them
    # where the whole Σ Var can move them no more)
    gamma = 0.0
    if skewed and se > 0 and kind == "tau1":
        # I(F = 1)'s κ3 = t(1 − t)(1 − 2t) from the term itself: summed over every unique in the
        # pass that summed the terms (cheaper than sorting their variances to leave some out).
        # Divided by the s.e. one factor at a time: se³ underflows to 0 below se ≈ 1e-103 (τ̂1 of
        # uniques in cells of hundreds, each term near e^{-λ}), where Σ κ3/se is still a number
        gamma = own.kappa3 / se / se / se
        extra["skewness"] = gamma
    elif skewed and se > 0:
        kappa3 = skew_sum(kept, pi, exact, done.bins, done.bin_sums,
                          6.0 * SKEW_TOL * se ** 3 / (z2 * z2 - 1.0))
        if kappa3 is not None:
            gamma = kappa3 / se / se / se
            extra["skewness"] = gamma

    def up(zz):
        return value + se * max(zz, zz + (zz * zz - 1.0) * gamma / 6.0) + hi_shift
    extra |= {"se_poisson": se_p, "se_factor": k, "model_error": c,
              "lower": max(value - z * se - lo_shift, 0.0),
              "interval_lower": max(value - z2 * se - lo_shift, 0.0),
              "interval_upper": min(up(z2), float(n1)),
              "mean_lambda": float(mu.mean() / pi)}
    if fit is not None:
        extra |= {"iterations": fit.iterations, "discrepancy": fit.discrepancy,
                  "converged": bool(fit.converged), "K": fit.K, "sparse_fit": fit.sparse}
    if fit is not None and not fit.converged:
        extra["note"] = (f"IPF stopped after {fit.iterations} cycles with a margin "
                         f"discrepancy of {fit.discrepancy:.3g} records (tol {fit.tol:g})")
    # a root key's fitted gamma was chosen by a test that can go either way: the upper ends are
    # taken from the larger of the gamma's and Jeffreys' prior's estimates, the lower ends from
    # the smaller, at the gamma's spread, so the interval covers the gamma's spread about either
    # estimate (Jeffreys' own spread is not formed: it costs a second estimate whole)
    above = max(jeffreys - value, 0.0) if jeffreys is not None else 0.0
    below = max(value - jeffreys, 0.0) if jeffreys is not None else 0.0
    upper = min(up(z) + above, float(n1))
    if jeffreys is not None:
        extra |= {"interval_upper": min(up(z2) + above, float(n1)),
                  "interval_lower": max(extra["interval_lower"] - below, 0.0),
                  "lower": max(extra["lower"] - below, 0.0)}
    # uniques alone in a category of some key: the model can only guess that category's size and
    # how it spreads over the other keys, and no criterion flags it; said, with what was measured
    lone = lone_uniques(table)
    extra["lone_uniques"] = lone
    if lone > LONE_NOTE_SHARE * n1:
        held = LONE_HELD[kind]
        note = (f"{lone} of the {n1} sample uniques ({100.0 * lone / n1:.0f} %) are alone in a "
                "category of some key: the sample cannot show how large such a category is or how "
                "it spreads over the other keys, and the bound holds less often there (99 % bounds "
                f"held in {held[0]} of samples of random key sets of 14 real populations where "
                f"30-70 % of the uniques were such, {held[1]} where more were)")
        extra["note"] = note if not extra.get("note") else f"{extra['note']}; {note}"
    return Estimate(value, se, upper, extra)


def _pairs_text(table, pair) -> str | None:
    """The kept interactions as key names ("a x b, c x d"), None for main effects alone."""
    return ", ".join(f"{table.keys[a]} x {table.keys[b]}" for a, b in pair) or None
