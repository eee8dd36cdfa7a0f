"""tau1_ll: τ1, the number of sample uniques that are population uniques, by the log-linear model.

    τ̂1 = Σ_{j: f_j = 1} exp(−(1 − π) λ̂_j),      λ̂_j = μ̂_j / π

(Skinner & Shlomo 2008, the estimator of τ1 under the Poisson log-linear model: the expectation of
I(F_j = 1) given f_j = 1 when F_j − f_j ~ Poisson((1 − π) λ_j), summed over the sample uniques.)
μ̂ is the fit of a log-linear model of the sample counts (option ``model``: by default main effects
plus a forest of two-way interactions each kept by its Bayes factor, each tree rooted and a key's
shares given its parent's shrunk towards its own by an empirical-Bayes prior (``eb``, closed form;
``eb_smoothing=joint`` shrinks each pair's table towards independence instead); ``auto_cv`` the interactions held-out tests keep; ``independence``;
``two_way``, the paper's usual choice, fitted by IPF on the support cells so key spaces far beyond a
dense table work, which was 23-100 % low on real populations: it overfits sparse samples), with a
gamma cell effect around it whose variance is estimated by zero-truncated likelihood (option
``dispersion``; moments with the other models), and each
sample unique's λ taken from the other records' margins (option ``prior``; a root key's categories
from a gamma fitted to their sample counts where it is more even than Jeffreys' prior, option
``root_prior``; see :mod:`gpurisk.measures._ll_poisson`). s.e. (``interval=model``, the default since issue 43's seventh
stop): the model's own, as matches_ll's: the Poisson-gamma terms' variance (I(F = 1) given f = 1,
m = (1 − π) λ̂: e^{−m}(1 − e^{−m}) without dispersion), α̂'s profile spread and the covariance the
uniques share through the margins in quadrature, no fitted factor; ``upper`` = τ̂1 + z_{1−α} s.e.
by Cornish-Fisher from the terms' κ3 = t(1 − t)(1 − 2t) and moved up by the risk criterion's misfit
where it points low (at most n1; where a root key's gamma is used, the larger of the gamma's and
Jeffreys' prior's), ``lower`` in the extras. ``interval=calibrated``: the Poisson
s.e. times 1.5 with a 10 % relative model error and the model choice's spread in quadrature
(factors fitted on real populations: :mod:`gpurisk.measures._ll_poisson`). Not applicable (with the reason) where the fit cannot be formed; needs
π. n1 = 0 gives 0.
Skinner, C. and Shlomo, N. (2008) JASA 103, 989-1001.
"""
from __future__ import annotations

from gpurisk.hookspecs import hookimpl
from gpurisk.measures._ll_poisson import LoglinearPoisson, calibrated_options


class Tau1LL(LoglinearPoisson):
    name = "tau1_ll"
    description = ("Estimated number of sample uniques that are population uniques, tau1, from a "
                   "log-linear model of the sample counts (Poisson model)")
    reference = "Skinner & Shlomo (2008), JASA 103: tau1-hat = sum over f=1 of exp(-(1-pi) lambda-hat)"
    estimates = "tau1"
    kind = "tau1"
    options = calibrated_options("tau1")


@hookimpl
def gpurisk_register_measures():
    return [Tau1LL]
