"""Camerlenghi, Favaro, Naulet & Panero, Figure 1: NMSE of τ̂1 against the sampling fraction.

Uniform cell probabilities over C = 3·10^6 cells, a population of N̄ = 10^6 drawn once per repetition
(multinomial, as one bincount of uniform cell draws), samples by binomial thinning of the population
counts (Bernoulli sampling: each unit kept with probability π = 1/(1+λ)), λ = (N̄ − n)/n as in
gpurisk's tau1_hat, 100 repetitions. NMSE = mean((τ̂1 − τ1)²/n²) (MSE of τ̂1/n; Orlitsky, Suresh &
Wu 2016). Curves: Binomial and Poisson smoothing (the paper's two), plus the unsmoothed series (the
obvious alternative, which the paper says is useless for λ ≥ 1). The estimator is gpurisk's own code
(gpurisk.measures.tau1_hat.series_for + _tau1_series.evaluate), the same the measure runs.

Also timed, in the same run: drawing one repetition's samples by thinning counts against the
record-level way (permute the N̄ population records, keep the first n, bincount their cells).

    python bench/bench_tau1_fig1.py                 # full size (minutes)
    python bench/bench_tau1_fig1.py --quick         # small sizes, seconds
    python bench/bench_tau1_fig1.py --fractions 0.01,0.02,0.03   # the λ of real releases (33-99)
Writes bench/out/tau1_fig1.png and bench/out/tau1_fig1.csv.
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from gpurisk.measures import _tau1_series as ser
from gpurisk.measures.tau1_hat import series_for

OUT = Path(__file__).resolve().parent / "out"
METHODS = ("binomial", "poisson", "none")
LABEL = {"binomial": "Binomial smoothing", "poisson": "Poisson smoothing", "none": "unsmoothed series"}


def one_repetition(rng, C, Nbar, fractions):
    """{(fraction, method): (squared normalised error, n, τ1, τ̂1)} for one population."""
    F = np.bincount(rng.integers(0, C, Nbar), minlength=C)
    F = F[F > 0]                                            # empty cells never enter a sample
    out = {}
    for p in fractions:
        f = rng.binomial(F, p)
        n = int(f.sum())
        lam = (Nbar - n) / n
        Z = np.bincount(f)
        tau1 = int(((f == 1) & (F == 1)).sum())
        for m in METHODS:
            s = series_for(lam, n, Z.size - 1, smoothing=m)
            est, _ = ser.evaluate(s, Z)
            est = float(est)
            out[(p, m)] = (((est - tau1) / n) ** 2 if math.isfinite(est) else math.inf, n, tau1, est)
    return out


def time_sampling(rng, C, Nbar, p, repeat=3):
    F_cells = rng.integers(0, C, Nbar)                      # the population's records (cell of each)
    F = np.bincount(F_cells, minlength=C)
    Fp = F[F > 0]
    t_thin, t_rec = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f = rng.binomial(Fp, p)
        Zt = np.bincount(f)
        t_thin.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        n = int(round(p * Nbar))
        chosen = rng.permutation(Nbar)[:n]
        fr = np.bincount(F_cells[chosen], minlength=C)
        Zr = np.bincount(fr[fr > 0])
        t_rec.append(time.perf_counter() - t0)
    return min(t_thin), min(t_rec), Zt, Zr


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=float, default=3e6)
    ap.add_argument("--population", type=float, default=1e6)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--fractions", default="0.05,0.075,0.1,0.15,0.2,0.3,0.4,0.5")
    ap.add_argument("--seed", type=int, default=2019)
    ap.add_argument("--quick", action="store_true", help="C = 3e4, N = 1e4, 10 repetitions")
    a = ap.parse_args(argv)
    C, Nbar, reps = int(a.cells), int(a.population), a.reps
    if a.quick:
        C, Nbar, reps = 30_000, 10_000, 10
    fractions = [float(x) for x in a.fractions.split(",")]
    rng = np.random.default_rng(a.seed)

    t0 = time.perf_counter()
    acc = {}
    for _ in range(reps):
        for key, v in one_repetition(rng, C, Nbar, fractions).items():
            acc.setdefault(key, []).append(v)
    elapsed = time.perf_counter() - t0

    print(f"Figure 1 study: C = {C:,} cells (uniform), population N = {Nbar:,}, {reps} repetitions, "
          f"{len(fractions)} fractions: {elapsed:.1f} s")
    head = (f"{'π':>6} {'λ':>7} {'mean n':>9} {'ln n':>6} {'mean τ1':>9} "
            + " ".join(f"{'NMSE ' + m:>15}" for m in METHODS) + " "
            + " ".join(f"{'bias% ' + m[:4]:>10}" for m in METHODS) + "  λ ≤ ln n")
    print(head)
    rows = []
    for p in fractions:
        ns = np.array([v[1] for v in acc[(p, "binomial")]], float)
        lam = (Nbar - ns.mean()) / ns.mean()
        nm = {m: float(np.mean([v[0] for v in acc[(p, m)]])) for m in METHODS}
        tau = float(np.mean([v[2] for v in acc[(p, "binomial")]]))
        bias = {m: 100 * float(np.mean([v[3] - v[2] for v in acc[(p, m)]])) / tau for m in METHODS}
        within = lam <= math.log(ns.mean())                 # the range of the paper's guarantee
        rows.append((p, lam, ns.mean(), tau, nm, bias))
        print(f"{p:>6g} {lam:>7.2f} {ns.mean():>9.0f} {math.log(ns.mean()):>6.2f} {tau:>9.0f} "
              + " ".join(f"{nm[m]:>15.3e}" for m in METHODS) + " "
            + " ".join(f"{bias[m]:>10.2f}" for m in METHODS) + f"  {'yes' if within else 'no'}")

    p_t = fractions[len(fractions) // 2]
    t_thin, t_rec, Zt, Zr = time_sampling(rng, C, Nbar, p_t)
    print(f"\none sample at π = {p_t:g}: thinning counts {t_thin * 1e3:.1f} ms, record-level "
          f"(permute + bincount) {t_rec * 1e3:.1f} ms ({t_rec / t_thin:.1f}x); "
          f"n1 = {Zt[1]} vs {Zr[1]} (same distribution, different draws)")

    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "tau1_fig1.csv", "w") as fh:
        fh.write("fraction,lambda,mean_n,mean_tau1," + ",".join(f"nmse_{m}" for m in METHODS) + ","
                 + ",".join(f"bias_pct_{m}" for m in METHODS) + "\n")
        for p, lam, n, tau, nm, bias in rows:
            fh.write(f"{p},{lam},{n},{tau}," + ",".join(repr(nm[m]) for m in METHODS) + ","
                     + ",".join(repr(bias[m]) for m in METHODS) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no PNG")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    x = [r[0] for r in rows]
    for m, style in zip(METHODS, ("o-", "s-", "x:")):
        ax.plot(x, [r[4][m] for r in rows], style, label=LABEL[m])
    ln = math.log(np.mean([r[2] for r in rows]))
    ax.axvline(1 / (1 + ln), color="grey", lw=0.8, ls="--")
    ax.text(1 / (1 + ln), 0.02, " π = 1/(1+ln n)", fontsize=7, color="grey",
            transform=ax.get_xaxis_transform())
    ax.set_yscale("log")
    ax.set_xlabel("sampling fraction 1/(1+λ)")
    ax.set_ylabel(r"NMSE = mean$((\hat\tau_1 - \tau_1)^2 / n^2)$")
    ax.set_title(rf"$\hat\tau_1$, uniform cells: C = {C:.0e}, N = {Nbar:.0e}, {reps} reps", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "tau1_fig1.png", dpi=110)
    print(f"wrote {OUT / 'tau1_fig1.png'} and {OUT / 'tau1_fig1.csv'}")


if __name__ == "__main__":
    main()
