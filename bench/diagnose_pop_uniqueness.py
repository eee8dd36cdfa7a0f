"""Does the log-linear N1 fail because of structural zeros? (issue 27, adult-b at π = 5 %)

The default ``pop_uniqueness`` (gpurisk_arx.loglinear_n1) sums P(F = 1 | f = 0) over every
combination of the sampled categories, impossible ones (structural zeros) included. This script fits
the same model on three key spaces, on the same samples as bench/validate_pop_uniqueness.py draws
(f_j ~ Binomial(F_j, π) per population cell, seed 27):

  all          every combination of the sampled categories (the default)
  sample-pairs the combinations whose every pair of categories some sample record has (what a
               release could use)
  pop-pairs    the combinations whose every pair of categories some *population* record has: the
               pair-level structural zeros removed as if known (an oracle, not available in practice)

for the default (β, α fitted to n2, n1: ``tempered``) and main effects (β = 1, α fitted to n1:
``main``), and prints bias and sd of N̂1 − N1 in % of N1 and the mean number of cells K. The cells are
enumerated (K ≤ ~10^7: the populations of bench/validate_pop_uniqueness.py).

``--deciles`` prints instead, for one sample, the empty cells by decile of s = Σ_v log p̂_v: the true
number of population uniques among them against the model's expectation, at the default's fitted
(β, α) and at β = 1 — where the model puts the uniques it predicts.

    python bench/diagnose_pop_uniqueness.py --only adult-b,adult --fractions 0.05,0.1 --reps 10
    python bench/diagnose_pop_uniqueness.py --only adult-b --fractions 0.05 --deciles
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_pop_uniqueness as V  # noqa: E402
from gpurisk_arx import loglinear_n1 as LL  # noqa: E402

SPACES = ("all", "sample-pairs", "pop-pairs")
MODELS = {"tempered": ("tempered", "calibrated"), "main": ("main", "calibrated")}


def support(kind: str, pop_codes: np.ndarray, F: np.ndarray, samp: np.ndarray):
    """A ``space`` for LL.estimate: the combinations of the sampled categories (``samp``: population
    codes of the sampled cells, one column per key) whose every pair of categories is held by the
    sample (``sample-pairs``) or the population (``pop-pairs``); s and a count of 1 per cell."""
    nk = samp.shape[1]
    ks = [int(pop_codes[:, v].max()) + 1 for v in range(nk)]
    held = samp if kind == "sample-pairs" else pop_codes[F > 0]

    def space(logs, idx):
        cats = [np.unique(samp[:, v]) for v in range(nk)]   # LL._log_probs's order (np.unique)
        cells = np.stack(np.meshgrid(*[np.arange(c.size, dtype=np.int32) for c in cats],
                                     indexing="ij"), -1).reshape(-1, nk)
        keep = np.ones(len(cells), bool)
        for u, v in itertools.combinations(range(nk), 2):
            seen = np.zeros((ks[u], ks[v]), bool)
            seen[held[:, u], held[:, v]] = True
            keep &= seen[cats[u][cells[:, u]], cats[v][cells[:, v]]]
        cells = cells[keep]
        s = np.zeros(len(cells))
        for v in range(nk):
            s += logs[v][cells[:, v]]
        return s, np.ones(len(cells))
    return space


def run(F, codes, pi, reps, rng):
    N, N1 = float(F.sum()), int((F == 1).sum())
    rows = []
    for r in range(reps):
        f = rng.binomial(F, pi)
        s = f > 0
        sc = [codes[s, v] for v in range(codes.shape[1])]
        for sp in SPACES:
            space = None if sp == "all" else support(sp, codes, F, codes[s])
            for m, (margins, disp) in MODELS.items():
                e = LL.estimate(sc, f[s], N, margins, disp, space=space)
                rows.append({"space": sp, "model": m, "err": 100 * (e.value - N1) / N1, "K": e.K,
                             "beta": e.beta})
    d = pd.DataFrame(rows)
    return d.groupby(["space", "model"], sort=False).agg(
        bias=("err", "mean"), sd=("err", "std"), K=("K", "mean"), beta=("beta", "mean")).reset_index()


def deciles(F, codes, pi, rng):
    N = float(F.sum())
    f = rng.binomial(F, pi)
    s = f > 0
    nk = codes.shape[1]
    sc = [codes[s, v] for v in range(nk)]
    n = float(f.sum())
    cats = [np.unique(c) for c in sc]
    logs, _ = LL._log_probs(sc, f[s].astype(float), n)
    shape = [c.size for c in cats]
    S = np.zeros(shape)
    for v in range(nk):
        S = S + logs[v].reshape([-1 if w == v else 1 for w in range(nk)])
    S = S.ravel()
    inside = np.all([np.isin(codes[:, v], cats[v]) for v in range(nk)], axis=0)
    lin = np.ravel_multi_index([np.searchsorted(cats[v], codes[inside, v]) for v in range(nk)], shape)
    Ft, ft = np.zeros(S.size), np.zeros(S.size)
    Ft[lin], ft[lin] = F[inside], f[inside]
    e = LL.estimate(sc, f[s], N, "tempered", "calibrated")
    n1 = int((f == 1).sum())
    edges = np.quantile(S, np.linspace(0, 1, 11))
    dec = np.clip(np.searchsorted(edges, S, side="right") - 1, 0, 9)
    empty = ft == 0
    out = pd.DataFrame({"decile": range(10),
                        "empty cells": np.bincount(dec[empty], minlength=10),
                        "true F=1": np.bincount(dec[empty & (Ft == 1)], minlength=10)})
    for beta in (e.beta, 1.0):
        lam = np.exp(LL._log_lambda(beta, S, np.ones(S.size), N) + beta * S)
        a = e.alpha if beta == e.beta else LL.calibrated_alpha(lam, np.ones(S.size), pi, n1)
        p0 = LL.prob_one(lam, 0, a, pi)
        out[f"model β={beta:.2f} α={a:.3g}"] = np.bincount(dec[empty], weights=p0[empty], minlength=10)
    print(f"N1 = {int((F == 1).sum())}; of them in empty cells of the key space: "
          f"{int(((Ft == 1) & empty).sum())}; the default's N̂1 = {e.value:.0f}")
    print(out.to_string(index=False, float_format=lambda x: f"{x:.0f}"))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--fractions", default="0.05,0.1")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--only", default="adult-b,adult")
    ap.add_argument("--deciles", action="store_true")
    a = ap.parse_args(argv)
    d = V.data_dir()
    rng = np.random.default_rng(a.seed)
    table = []
    for name, rel, keys in V.POPULATIONS:
        if name not in a.only.split(","):
            continue
        F, codes = V.cells(d / rel, keys)
        for pi in (float(x) for x in a.fractions.split(",")):
            if a.deciles:
                print(f"# {name} ({','.join(keys)}) pi={pi}")
                deciles(F, codes, pi, rng)
                continue
            r = run(F, codes, pi, a.reps, rng)
            r.insert(0, "pi", pi)
            r.insert(0, "population", name)
            table.append(r)
            print(f"# {name} pi={pi} done", flush=True)
    if table:
        pd.set_option("display.width", 200)
        print(pd.concat(table).to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    main()
