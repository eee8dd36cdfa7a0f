"""matches_ll: E, the expected number of correct matches, by the log-linear model.

    E = Σ_{j: f_j = 1} 1/F_j       (an intruder matches each sample unique to one population record
                                    of its key cell chosen at random: it is right with chance 1/F_j)
    Ê = τ̂2 = Σ_{j: f_j = 1} [1 − exp(−(1 − π) λ̂_j)] / ((1 − π) λ̂_j),      λ̂_j = μ̂_j / π

(Skinner & Shlomo 2008, the estimator of τ2 = Σ I(f_j = 1)/F_j under the Poisson log-linear model:
E[1/F_j | f_j = 1] with F_j − 1 ~ Poisson((1 − π) λ_j).) E is Σ_{f=1} 1/F_j, the truth of
``match_prob_a`` times n1. μ̂ is the fit of a log-linear model of the sample counts (option
``model``: by default main effects plus a forest of two-way interactions, each kept by its Bayes
factor, each tree rooted and a key's shares given its parent's shrunk towards its own by an
empirical-Bayes prior (``eb``, closed form; ``eb_smoothing=joint`` shrinks each pair's table towards
independence instead); ``auto_cv``
the interactions held-out tests keep; ``independence``; ``two_way``, IPF on the support cells, which was 11-95 % low on real
populations), with a gamma cell effect whose variance is estimated by zero-truncated likelihood over the sampled
cells (option ``dispersion``; moments with the other models), and each sample unique's λ taken from the other records' margins with their
uncertainty (option ``prior``; a root key's categories from a gamma fitted to their sample counts
where it is more even than Jeffreys' prior, option ``root_prior``; :mod:`gpurisk.measures._ll_poisson`
gives the formulas). Chosen as
the headline on the validation of docs/validation.md: within ±10 % of E in 37-38 of 38 cells
(median |relative bias| 2-3 %), against 0 for θ̂·n1. s.e. (option ``interval=model``, the default
since issue 43's sixth stop): the Poisson-gamma terms' variance Σ [E(1/F²) − E(1/F)²] under the
fitted model, α̂'s spread over its profile interval and, where Skinner & Shlomo's risk score still
flags misfit, the criterion's bias estimate (each cell's share at most 1/e), in quadrature, nothing
fitted (``interval=calibrated``: the Poisson s.e. times 3.25 with a 6 % relative model error,
constants fitted on real populations); ``upper`` = Ê + z_{1−α} s.e. (at most n1; with the sum's
skewness, and where a root key's gamma is used the larger of the gamma's and Jeffreys' prior's
bounds), ``lower`` in the extras. With π = 1 (a census) Ê = n1. Needs π; n1 = 0 gives 0.
Skinner, C. and Shlomo, N. (2008) JASA 103, 989-1001.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measures._ll_poisson import LoglinearPoisson, calibrated_options


class MatchesLL(LoglinearPoisson):
    name = "matches_ll"
    description = ("Expected number of correct matches E = sum over sample uniques of 1/F_j (each "
                   "matched to a random population record of its cell), from a log-linear model")
    reference = ("Skinner & Shlomo (2008), JASA 103: tau2-hat = sum over f=1 of "
                 "[1 - exp(-(1-pi) lambda-hat)] / ((1-pi) lambda-hat)")
    estimates = "matches"
    kind = "inverse"
    options = calibrated_options("inverse")


@hookimpl
def gpurisk_register_measures():
    return [MatchesLL]
