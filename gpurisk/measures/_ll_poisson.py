"""Shared by tau1_ll and matches_ll: the log-linear Poisson model of Skinner & Shlomo (2008).

This module is the measures' class (their options and the Result); the statistics are under
:mod:`gpurisk.models`: the estimate with its interval in :mod:`gpurisk.models.loglinear_risk`, a
table's fits in :mod:`gpurisk.models.table_fits` (``dispersion_moment``), each sample unique's prior
in :mod:`gpurisk.models.prior` (``loo_prior``, ``shared_variance``), its terms in
:mod:`gpurisk.models.terms` (``nb_terms``, ``inverse_square``, ``inverse_cube``,
``third_cumulants``), and what both measures read of them in one pass over the uniques in
:mod:`gpurisk.models.unique_sums` (``unique_pass``, ``skew_sum``), the functions named below
without a module.

Model (Skinner & Shlomo 2008, section 2): the population counts are independent, F_j ~ Poisson(λ_j);
Bernoulli sampling with probability π gives f_j ~ Poisson(π λ_j) and, independently,
F_j − f_j ~ Poisson((1 − π) λ_j). So given a sample unique (f_j = 1), F_j = 1 + X_j with
X_j ~ Poisson(m_j), m_j = (1 − π) λ_j, and

    E[I(F_j = 1) | f_j = 1] = exp(−m_j)                        (the term of τ1)
    E[1/F_j | f_j = 1]      = (1 − exp(−m_j)) / m_j             (the term of τ2 = E)

The model of the sample counts (option ``model``): ``eb`` (the default since issue 43) is main effects
plus a forest of two-way interactions, each kept by its Bayes factor over independence and shrunk
by an empirical-Bayes prior (:mod:`gpurisk.models.eb_forest`; option ``eb_smoothing``: ``rooted``,
the default, each tree rooted and a child's categories given its parent's shrunk towards the
child's shares, or ``joint``, each pair's table shrunk towards independence), with α̂ by zero-truncated
likelihood (``dispersion=auto``: :mod:`gpurisk.models.dispersion`); ``auto_cv`` (the default before) is
main effects plus
the two-way interactions whose held-out log-likelihood gain in random halves of the sample passes a
z test (:mod:`gpurisk.models.model_choice`), kept by decreasing gain while they form a forest
(:mod:`gpurisk.models.forest`: a decomposable model, closed form; ``max_interactions`` caps them,
for ``eb`` too);
``independence`` main effects only, μ̂_j = n Π_v f_v(x_jv)/n; ``two_way`` all two-way interactions
(:mod:`gpurisk.models.loglinear`, IPF on the cells where every fitted margin is positive, never a
dense K-cell array). With ``dispersion=moment`` (``auto`` for every model but ``eb``) a cell's λ_j varies around the model by a
gamma factor of variance α, estimated by moments over every cell (:func:`dispersion_moment`: the
negative-binomial smoothing of Rinott & Shlomo 2006 with a moment α). Only the sample uniques'
cells are read.

How a sample unique's λ_j is taken from the fit (option ``prior``). ``plugin`` is Skinner &
Shlomo's λ̂_j = μ̂_j/π. But the unique's own record is in every margin μ̂_j is fitted from, which
pulls μ̂_j up where those margins are small: on three-key sets Ê ran 10-17 % low. ``loo`` (the
default) gives each sample unique the prior the other n − 1 records give its cell: with c_v the
sample count of its category of each fitted margin v (a key's own, or the kept pair's joint one;
its own record included) and s_v = c_v − 1 + 1/2 (Jeffreys' prior for a Poisson mean, so a margin
the record is alone in still counts), the prior mean on the sample scale and its relative variance
(each margin's posterior Gamma(s_v), independent, times the gamma cell effect; matched by its first
two moments to one gamma, :func:`loo_prior`) are

    μ̃_j = (n − 1) Π_v s_v/(n − 1),      α̃_j = (1 + α̂) Π_v (1 + 1/s_v) − 1,

and the terms are those of :func:`nb_terms` at λ̃_j = μ̃_j/π with α̃_j. With ``two_way`` the plug-in
is used (its margins are not in closed form). ``root_prior=eb`` (model=eb, rooted) replaces
Jeffreys' ½ of a root key by a gamma fitted to that key's category counts where the gamma is more
even than Jeffreys' prior and describes the categories seen once (:mod:`gpurisk.models.root_prior`:
s = c − 1 + a, the share s/((b + 1)(n − 1))); the shape's profile spread and the choice's,
|Ê − Ê_jeffreys|/√2, enter the s.e., and the upper ends are taken from the larger of the two
priors' estimates, the lower ends from the smaller. The default since issue 43's stop 62
(``root_prior=jeffreys`` keeps ½ for every root key): on 14 real populations × 3 key sets ×
π = 1, 5, 10 %, 200 samples a cell, Ê was within ±10 % of E in 99 of 126 cells against Jeffreys'
95, its bound held in 114 (115 with Jeffreys' prior, and with stop 62's costlier union of the two
priors' intervals), and leave one population out the choice picked it in every fold
(docs/validation.md).
``arc_target=neighbours`` (model=eb, rooted) shrinks an arc's child shares given a numeric parent
category towards the shares of its neighbouring categories (the nearest k on each side, k chosen
with β by the records' leave-one-out likelihood, k = 0 the global shares) instead of the child's
overall shares (:mod:`gpurisk.models.neighbours`). Not the default.

Which defaults: on 5 real populations × 3 key sets × π = 1, 5, 10 % (docs/validation.md,
bench/validate_trust.py, 200 samples a cell) over the 38 cells with median n2 ≥ 10, Ê was within
±10 % of E in 24 cells with main effects and the plug-in (worst +28 %), 32 with ``auto_cv`` without
the test and the plug-in (worst −18 %), and in 37-38 with ``auto_cv`` and ``loo`` (worst −11 %, three
seeds). On 16 key sets not used to choose anything it was within ±10 % in 23 of 32 cells (main
effects and the plug-in: 22), and far off where a key set needs more than one interaction (FARS
race, hispanic, state, injury, sex: +37 to +89 %). The two-way model overfits samples this sparse
(Ê 11-95 % low). ``risk`` chooses the forest by a form of Skinner & Shlomo's own
criterion, a risk-weighted over-dispersion score in a forward selection
(:mod:`gpurisk.models.risk_choice`); ``cv_risk`` starts that selection from ``auto_cv``'s forest.
On 14 real populations (docs/validation.md, issue 43) neither beat ``auto_cv`` (82 of 126 cells
within ±10 %: ``risk`` 79, ``cv_risk`` 82), so neither is the default. On the same cells ``eb`` with
``truncated`` is within ±10 % in 91 (82 with ``auto_cv``), within ±20 % in 102 (99), and the
leave-one-population-out choice among ``auto_cv``, ``eb`` and the two α̂ picks it for every one of
the 14 populations left out: it became the default (docs/validation.md). Its rooted smoothing
(``eb_smoothing=rooted``, issue 43's fifth stop) has Ê within ±10 % in 97 of the 126 cells against
93 for the joint one (100 samples a cell), τ̂1 within ±20 % in 78 against 74, and the
leave-one-population-out choice between the two picks it for all 14. Its s.e. keeps the
calibrated factors below (fitted under ``auto_cv``) and has no model-choice spread (the shrinkage,
not a test, handles a pair the sample cannot tell).

Variance. The Poisson terms, given λ: the cells are independent given λ, so
Var(τ1 | f) = Σ_{f_j=1} e^{−m_j}(1 − e^{−m_j}) and Var(τ2 | f) = Σ_{f_j=1} [E(1/F_j²) − E(1/F_j)²] with

    E[1/(1 + X)²] = e^{−m} (Ei(m) − γ − ln m) / m               (Σ_k m^k / (k! (k+1)²) summed)

That is the spread of the true τ1, E around their model expectations, not the error of λ̂ nor the
model's bias, nor the model choice's spread. The s.e. reported is therefore
sqrt((k · s.e._Poisson)² + (c · estimate)² + se_choice²), k = ``se_factor`` and c = ``model_error`` (a relative
model error) calibrated per measure on that study (SE_CALIBRATION: 3.25 and 0.06 for E, 1.5 and
0.10 for τ1), plus, with ``model=auto_cv``, the model choice's spread (``se_choice``, option
``choice_spread``): Σ_m w_m (T_m − T)² over the forests m one held-out test away from the kept one,
T_m the estimate under m and w_m the chance that test goes the other way
(:func:`gpurisk.models.forest.doubtful`); ``se_poisson`` keeps the Poisson part. With ``interval=model`` nothing is fitted: k = 1, c = 0, the variance of 1/F is the Poisson-gamma
one (:func:`inverse_square`), the choice's spread is over bootstrap selections (``risk``,
``cv_risk``), and where the risk criterion at the kept forest still signals misfit (|T_h| > 1.96)
its bias estimate B̂_h moves the bound on the side it points to, with a note (option
``misfit_widen``: B̂_h < 0, the estimate low, raises the upper bound and the interval's upper end
by |B̂_h|; B̂_h > 0 lowers the lower ones), while the s.e. stays the model's. With the leave-one-out
prior the uniques' terms also covary through the margins they share (a unique's category share
is unknown to every unique in that category): :func:`shared_variance` adds, by the delta method,
Σ_margins Σ_categories rv_g [(Σ_g d_j)² − Σ_g d_j²], d_j each term's slope in ln μ
(:func:`nb_terms`), rv_g the share's relative variance the prior gives (``se_shared``, beside
``se_poisson`` in quadrature; option ``shared_margins``). A sum of few skewed terms is not normal:
the upper bound and the interval's upper end are Cornish-Fisher's, value + s.e. (z + (z² − 1) γ/6),
γ = Σ κ3_j / s.e.³ from each term's third cumulant (:func:`third_cumulants`, E[1/F³] by
:func:`inverse_cube`), never below the normal ones (``skewness``; option ``skew_bound``); the
uniques of the smallest variances that together can move the ends by at most SKEW_TOL of an s.e.
(|κ3_j| ≤ Var_j: each term lies in [0, 1]) are left out of E's Σ κ3, whole bins of variances of a
quarter of an octave at a time (:func:`skew_sum`); τ1's
κ3 = t(1 − t)(1 − 2t) is summed over every unique (cheaper than choosing which). Under ``eb``
α̂ is uncertain too, which the per-cell variance (α taken as known) leaves out: the estimate is
recomputed at the ends of α̂'s one-s.e. profile-likelihood interval (the zero-truncated likelihood
within ½ of its maximum: :func:`gpurisk.models.dispersion.alpha_profile`) and half their difference,
``se_alpha``, enters in quadrature. The misfit's widening holds each cell's share of B̂_h within
±1/e (:class:`gpurisk.models.risk_choice.Score`: a cell's term can be off by no more), where the
first-order share of one cell can be far larger (``misfit_bias_first_order`` keeps that sum). On the
14 populations of docs/validation.md that interval's s.e./sd is within 0.7-1.5 in 111 cells against
the calibrated one's 25 and its bound holds in 117 (calibrated: 98): it is matches_ll's default
since issue 43's sixth stop, and tau1_ll's since its seventh (INTERVAL_DEFAULT: τ̂1's bound holds in
111 cells against the calibrated one's 113, its s.e./sd within 0.7-1.5 in 104 against 37, and no
factor is fitted). ``upper`` = estimate + z_{1−α} s.e. (Cornish-Fisher's
under ``interval=model``; + |B̂_h| where the misfit points low); ``interval_lower`` and
``interval_upper`` the two-sided 1 − α interval (made the same way), clipped to [0, n1].
Skinner, C. and Shlomo, N. (2008) Assessing identification risk in survey microdata using log-linear
models. J. Amer. Statist. Assoc. 103, 989-1001.
"""
from __future__ import annotations

from dataclasses import replace

from gpurisk.measure import Context, Measure, Result
from gpurisk.models.loglinear import MAX_ITER, TOL
from gpurisk.models.loglinear_risk import DISPERSIONS, PRIORS, estimate
from gpurisk.models.model_choice import Z_CHOICE
from gpurisk.models.table_fits import ARC_TARGETS, MODELS, ROOT_PRIORS, SMOOTHINGS
from gpurisk.options import Option

#: how the s.e. is formed (option ``interval``)
INTERVALS = ("calibrated", "model")
#: each measure's default interval (issue 43's sixth stop; docs/validation.md, 14 populations, 126
#: cells, 100 samples a cell). Ê's is the model's own (no fitted factor; the margins' covariance;
#: the upper ends for the sum's skewness; the misfit's bias, bounded cell by cell, moving the bound
#: it points to): its 99 % bound held E in ≥ 98 % of the samples in 117 cells (calibrated: 98),
#: with s.e./sd within 0.7-1.5 in 111 (25).
#: τ̂1's is the model's too since issue 43's seventh stop (the study re-run on 9f7e769): its bound
#: held τ1 in ≥ 98 % of the samples in 111 cells against the calibrated one's 113, with s.e./sd
#: within 0.7-1.5 in 104 against 37 (median 1.08 against 1.76), and it fits no factor to these
#: populations (the calibrated one's × 1.5 and 10 % were); the cells it loses are where τ̂1 is
#: biased low (FARS's and STAR's small key sets at 1 %: −26 % and −38 %)
INTERVAL_DEFAULT = {"inverse": "model", "tau1": "model"}
SHARED = "loglinear_risk"      # option namespace read by tau1_ll and matches_ll
#: the s.e.'s calibration (module docstring), one pair per measure: (se_factor, model_error) of
#: matches_ll and tau1_ll. Chosen on 5 real populations × 3 key sets × π = 1, 5, 10 %, 400 samples a
#: cell (``bench/validate_trust.py --seed 23`` and ``--seed 22``, each ``--replicates 200 --variants
#: raw_se,raw_poisson --replicates-csv``, then ``bench/calibrate_ll_se.py`` on both) as the pair with the
#: narrowest intervals whose two-sided 99 % interval ± 2.576 s.e. covers the truth in ≥ 98 % of the
#: samples of every one of the 38 cells with median n2 ≥ 10. Checked on new samples (seed 24) and
#: with one population left out at a time: docs/validation.md.
SE_CALIBRATION = {"inverse": (3.25, 0.06), "tau1": (1.5, 0.10)}
SE_FACTOR, MODEL_ERROR = SE_CALIBRATION["inverse"]


class LoglinearPoisson(Measure):
    """Base of tau1_ll and matches_ll: the fit, the terms, the Result."""

    needs = frozenset({"fraction"})
    default = False            # fits a log-linear model: run when named
    reads = "cells"
    shared_options = SHARED
    options = {
        "model": Option(str, "eb", choices=MODELS,
                        help="log-linear model of the sample counts: auto_cv = main effects plus "
                             "the two-way interactions whose held-out log-likelihood gains in "
                             "split halves pass a z test, kept while they form a forest (closed "
                             "form); eb = main effects plus a forest of interactions each kept by "
                             "its evidence (a Bayes factor above the BIC price) and shrunk towards "
                             "independence by an empirical-Bayes Dirichlet prior (closed form); "
                             "risk = main effects plus the forest of interactions a forward "
                             "selection on Skinner & Shlomo's risk-weighted over-dispersion score "
                             "adds; cv_risk = the held-out tests' forest, then pairs added by that "
                             "criterion while it signals misfit; independence = "
                             "main effects only (closed form); two_way = main effects and all "
                             "two-way interactions (IPF; Skinner & Shlomo's usual choice, which "
                             "overfits sparse samples)"),
        "eb_smoothing": Option(str, "rooted", choices=SMOOTHINGS,
                               help="model=eb: rooted = each tree of kept pairs rooted at the key "
                                    "that predicts the records best, a child's categories given "
                                    "its parent's shrunk towards the child's shares by a Dirichlet "
                                    "prior whose strength is fitted leave-one-out; joint = each "
                                    "kept pair's table shrunk towards independence (the default "
                                    "before)"),
        "root_prior": Option(str, "eb", choices=ROOT_PRIORS,
                             help="model=eb, eb_smoothing=rooted: a sample unique's category of a "
                                  "root key from the other records under jeffreys = Jeffreys' "
                                  "prior (c - 1/2 records); eb = the key's categories' sizes as a "
                                  "gamma fitted to their sample counts (zero-truncated negative "
                                  "binomial), where its shape is above Jeffreys' 1/2 and it "
                                  "describes the categories seen once, the shape's uncertainty "
                                  "and the choice's added to the s.e., the upper ends taken "
                                  "from the larger of the gamma's and Jeffreys' estimates"),
        "arc_target": Option(str, "global", choices=ARC_TARGETS,
                             help="model=eb, eb_smoothing=rooted: a child key's shares given its "
                                  "parent's category shrunk towards global = the child's overall "
                                  "shares; neighbours = for a numeric parent, the child's shares "
                                  "among the parent's nearest categories (its own left out), "
                                  "where the records' leave-one-out likelihood prefers them"),
        "dispersion": Option(str, "auto", choices=DISPERSIONS,
                             help="auto = truncated with model=eb, moment with the others; "
                                  "moment = a gamma-distributed cell effect around the model, its "
                                  "variance by moments (negative binomial); truncated = that "
                                  "variance by zero-truncated maximum likelihood over the sampled "
                                  "cells (model=auto_cv or eb); none = Poisson"),
        "prior": Option(str, "loo", choices=PRIORS,
                        help="loo = each sample unique's λ from the margins of the other n - 1 "
                             "records with their uncertainty (a gamma prior per cell); plugin = the "
                             "fitted λ-hat itself (Skinner & Shlomo's plug-in; two_way always)"),
        "se_factor": Option(float, SE_FACTOR, min=1.0,
                            help="multiplies the Poisson terms' s.e. (which takes λ̂ as known)"),
        "model_error": Option(float, MODEL_ERROR, min=0.0,
                              help="relative model error added to the s.e.: se² = (se_factor · "
                                   "Poisson s.e.)² + (model_error · estimate)²"),
        "cv_splits": Option(int, 1, min=1,
                            help="model=auto_cv: random two-fold splits of the sample whose held-out "
                                 "log-likelihoods are summed"),
        "cv_seed": Option(int, 0, min=0, help="model=auto_cv: seed of the random splits"),
        "max_interactions": Option(int, None, min=1,
                                   help="model=auto_cv or eb: at most this many two-way interactions "
                                        "(default: no limit but the forest's, one fewer than the "
                                        "keys), kept in order of held-out gain (auto_cv) or "
                                        "Bayes factor (eb) while they pass the test and form no "
                                        "cycle (closed form)"),
        "choice_spread": Option(bool, True,
                                help="model=auto_cv: add to the s.e. the estimate's spread over "
                                     "the models one held-out test away, each weighted by the "
                                     "chance that test goes the other way"),
        "interval": Option(str, "calibrated", choices=INTERVALS,
                           help="calibrated = the Poisson s.e. times se_factor plus a relative "
                                "model_error (constants fitted on real populations); model = the "
                                "Poisson-gamma model's own variance plus the spread of the model "
                                "choice (over bootstrap samples with model=risk or cv_risk; over "
                                "the forests one held-out test away with auto_cv), with eb the "
                                "estimate's spread over α̂'s profile-likelihood interval and the "
                                "covariance the uniques share through the margins "
                                "(shared_margins); where the risk criterion still signals misfit "
                                "(Skinner & Shlomo's score, |T| > 1.96; misfit_widen) the bound "
                                "on the side its bias points to moves by it"),
        "alpha_spread": Option(bool, True,
                               help="model=eb, interval=model: add the estimate's spread over α̂'s "
                                    "profile-likelihood interval (α̂'s own uncertainty)"),
        "misfit_widen": Option(bool, True,
                               help="interval=model (auto_cv, eb, risk, cv_risk): where the risk "
                                    "criterion flags misfit (|T| > 1.96), move the bound on the side "
                                    "its estimate of the bias points to by that bias (estimate low: "
                                    "the upper bound rises), each cell's share at most 1/e (the most "
                                    "a cell's term can be off); the s.e. stays the model's"),
        "skew_bound": Option(bool, True,
                             help="interval=model: the upper bound and the interval's upper end by "
                                  "Cornish-Fisher from the terms' third cumulant (a sum of few "
                                  "skewed terms), never below the normal ones"),
        "shared_margins": Option(bool, True,
                                 help="interval=model, prior=loo: add the covariance the sample "
                                      "uniques' terms share through the margins' shares (the "
                                      "delta method)"),
        "choice_boot": Option(int, 10, min=0,
                              help="model=risk, interval=model: bootstrap samples over which the "
                                   "model choice is repeated"),
        "cv_z": Option(float, Z_CHOICE, min=0.0,
                       help="model=auto_cv: an interaction is kept when its held-out gain exceeds "
                            "cv_z times its standard error (0: any positive gain)"),
        "tol": Option(float, TOL, min=0.0, min_open=True, help="IPF tolerance, in records"),
        "max_iter": Option(int, MAX_ITER, min=1, help="IPF iteration limit"),
        "max_cells": Option(float, 1e30, min=1.0,
                            help="largest table K fitted (the fit runs on the support cells when "
                                 "they are sparse, so K itself may be far beyond memory)"),
    }
    #: what the subclass sums: "tau1" (I(F = 1)) or "inverse" (1/F)
    kind = "tau1"

    def opt(self, ctx: Context, key: str):
        return ctx.option(self.name, key, ctx.option(SHARED, key, self.options.get(key)))

    def compute(self, table, ctx: Context) -> Result:
        got = estimate(table, float(ctx.fraction), self.kind, lambda key: self.opt(ctx, key),
                       ctx.alpha, self.name)
        if got.reason is not None:
            return Result.not_applicable(got.reason, **got.extra)
        return Result(value=got.value, se=got.se, upper=got.upper, extra=got.extra)


def calibrated_options(kind: str) -> dict:
    """LoglinearPoisson's options with the s.e. calibration of ``kind`` (SE_CALIBRATION) as the
    defaults of se_factor and model_error and ``kind``'s default interval (INTERVAL_DEFAULT) (a
    value set in the shared namespace applies to both measures)."""
    k, c = SE_CALIBRATION[kind]
    out = dict(LoglinearPoisson.options.specs)
    out["se_factor"] = replace(out["se_factor"], default=k)
    out["model_error"] = replace(out["model_error"], default=c)
    out["interval"] = replace(out["interval"], default=INTERVAL_DEFAULT[kind])
    return out
