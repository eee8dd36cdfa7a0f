"""Where does matches_ll's bias come from? (issue 27, item 3) Dense tables, a few samples a cell.

For each (population, key set, π) of bench/validate_trust.py's S and M key sets, Bernoulli samples;
per sample the true E = Σ_{f=1} 1/F and Ê = Σ_{f=1} E[1/F | f = 1] under the main-effects model
with a gamma cell effect (:func:`gpurisk.models.terms.nb_terms`), with α from

- ``mom``: the moment estimator matches_ll uses; ``pois``: α = 0;
- ``ml``: negative-binomial maximum likelihood over every cell of the (dense) table;
- ``zt``: zero-truncated NB likelihood over the observed cells only;
- ``n1``: the α whose model reproduces the number of sample uniques, Σ_j P(f_j = 1) = n1;
- ``oracle``: the α that would make Ê equal E (median over samples; "—" when none does),

and, with ``--pairs``, Ê under main effects plus one two-way margin (a decomposable model: closed
form) for every pair of keys, and for the pair that leaves the least moment dispersion. Prints the
relative bias of Ê (mean over samples) per variant. Tables are dense (K cells): for the S and M
key sets only.

    python bench/ll_bias_causes.py --reps 5 --only mach2019,fars
    python bench/ll_bias_causes.py --reps 4 --only fars,mach2019 --pairs
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq, minimize_scalar
from scipy.special import gammaln

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_trust import POPULATIONS, find_data  # noqa: E402

from gpurisk.models.terms import nb_terms  # noqa: E402


def e_hat(mu_su, alpha, pi):
    return float(nb_terms((1 - pi) * mu_su / pi, alpha, pi, "inverse")[0].sum())


def nb_p(mu, a, k):
    """P(f = k) for k = 0 or 1 under NB(mean μ, variance μ + a μ²)."""
    if a <= 1e-12:
        return np.exp(-mu) * (mu if k else 1.0)
    return (mu if k else 1.0) * np.exp(-(1 / a + k) * np.log1p(a * mu))


def nb_ll(f, mu, a):
    r = 1 / a
    return float(np.sum(gammaln(f + r) - gammaln(r) - gammaln(f + 1) + r * np.log(r / (r + mu))
                        + f * np.log(np.maximum(mu, 1e-300) / (r + mu))))


def root(g, lo=1e-9, hi=1e4):
    try:
        return brentq(g, lo, hi) if g(lo) * g(hi) < 0 else math.nan
    except (ValueError, RuntimeError):
        return math.nan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="fars,adult,cup,mach2019")
    ap.add_argument("--keysets", default="S,M")
    ap.add_argument("--pairs", action="store_true", help="also main effects + one two-way margin")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    data = find_data()
    for pop in a.only.split(","):
        path, sep, sets, _ = POPULATIONS[pop]
        d = pd.read_csv(data / path, sep=sep)
        for label in a.keysets.split(","):
            keys = sets["SML".index(label)]
            codes = [pd.factorize(d[k])[0] for k in keys]
            cards = [int(c.max()) + 1 for c in codes]
            cid = np.ravel_multi_index(codes, cards)
            K = int(np.prod(cards))
            F = np.bincount(cid, minlength=K)
            grid = np.unravel_index(np.arange(K), cards)
            pairs = list(itertools.combinations(range(len(keys)), 2)) if a.pairs else []
            for pi in (0.01, 0.05, 0.1):
                rng = np.random.default_rng(a.seed)
                acc: dict[str, list] = {}
                for _ in range(a.reps):
                    m = rng.random(len(d)) < pi
                    n = int(m.sum())
                    f = np.bincount(cid[m], minlength=K).astype(float)
                    su = f == 1
                    E = float(np.sum(1.0 / F[su]))
                    marg = [np.bincount(c[m], minlength=k) / n for c, k in zip(codes, cards)]

                    def means(pair=None):
                        mu = np.full(K, float(n))
                        for v in range(len(keys)):
                            if pair is None or v not in pair:
                                mu = mu * marg[v][grid[v]]
                        if pair is not None:
                            i, j = pair
                            pij = np.bincount(codes[i][m] * cards[j] + codes[j][m],
                                              minlength=cards[i] * cards[j]) / n
                            mu = mu * pij[grid[i] * cards[j] + grid[j]]
                        return mu, max(float(np.sum((f - mu) ** 2 - f) / np.sum(mu ** 2)), 0.0)

                    mu, a_mom = means()
                    obs = f > 0
                    a_ml = math.exp(minimize_scalar(lambda la: -nb_ll(f, mu, math.exp(la)),
                                                    bounds=(-12, 8), method="bounded").x)
                    a_zt = math.exp(minimize_scalar(
                        lambda la: -(nb_ll(f[obs], mu[obs], math.exp(la))
                                     - float(np.sum(np.log1p(-nb_p(mu[obs], math.exp(la), 0))))),
                        bounds=(-12, 8), method="bounded").x)
                    a_n1 = root(lambda x: float(nb_p(mu, x, 1).sum()) - float(su.sum()))
                    a_or = root(lambda x: e_hat(mu[su], x, pi) - E)
                    row = {"mom": e_hat(mu[su], a_mom, pi), "pois": e_hat(mu[su], 0.0, pi),
                           "ml": e_hat(mu[su], a_ml, pi), "zt": e_hat(mu[su], a_zt, pi),
                           "n1": e_hat(mu[su], a_n1, pi) if a_n1 == a_n1 else math.nan}
                    fits = {p: means(p) for p in pairs}
                    for p, (mp, ap_) in fits.items():
                        row["+" + "×".join(keys[v] for v in p)] = e_hat(mp[su], ap_, pi)
                    if fits:
                        p = min(fits, key=lambda q: fits[q][1])
                        row["least-α pair"] = e_hat(fits[p][0][su], fits[p][1], pi)
                    for k, v in row.items():
                        acc.setdefault(k, []).append(v - E)
                    for k, v in (("E", E), ("a_mom", a_mom), ("a_ml", a_ml), ("a_oracle", a_or)):
                        acc.setdefault(k, []).append(v)
                Em = float(np.mean(acc.pop("E")))
                alphas = {k: float(np.nanmedian(acc.pop(k))) for k in ("a_mom", "a_ml", "a_oracle")}
                bias = " ".join(f"{k} {100 * np.nanmean(v) / Em:+.1f}" for k, v in acc.items())
                print(f"{pop:9} {label} π={pi:<5} E={Em:8.1f}  bias % of Ê: {bias}  | α median: "
                      + " ".join(f"{k[2:]} {v:.3g}" for k, v in alphas.items()), flush=True)


if __name__ == "__main__":
    main()
