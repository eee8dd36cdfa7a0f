"""Calibrate the s.e. of matches_ll and tau1_ll (issue 27): se² = (k · Poisson s.e.)² + (c · value)²
+ (the model choice's spread)².

Reads the per-replicate CSV of ``bench/validate_trust.py`` run with the ``raw_se`` variant (the
default model with se_factor 1 and model_error 0, so its s.e. column is the Poisson s.e. alone):

    python bench/validate_trust.py --replicates 200 --rank-replicates 0 --no-theta --seed 23 \\
        --variants raw_se,raw_poisson --replicates-csv bench/out/vt23.csv
    python bench/calibrate_ll_se.py bench/out/vt23.csv

For each of E (matches_ll) and τ1 (tau1_ll), over the cells with median n2 ≥ 10 (the issue's target
cells), it prints the (k, c) on a grid with the narrowest mean interval (relative half-width over
z) whose two-sided 99 % interval ± 2.576 s.e. covers the truth in ≥ 98 % of every cell's samples,
the coverage of the measure's current defaults, and the same choice made on four populations and
tried on the fifth (leave one population out), cell by cell.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

from gpurisk.measures._ll_poisson import SE_CALIBRATION

Z = 2.5758293035489004           # two-sided 99 %
KS = np.round(np.arange(1.0, 5.001, 0.25), 2)
CS = np.round(np.arange(0.0, 0.2001, 0.01), 2)
WHAT = {"E": ("matches", "matches_ll", "inverse"), "tau1": ("tau1", "tau1_ll", "tau1")}


def cells(d: pd.DataFrame, truth: str, est: str) -> list:
    """Per target cell: (key, truth, estimate, Poisson s.e., the model choice's spread). With the
    ``raw_poisson`` variant the spread is sqrt(raw_se² − raw_poisson²), else 0 (raw_se taken as
    the Poisson s.e.)."""
    out = []
    for key, x in d.groupby(["population", "keyset", "fraction"]):
        if np.median(x["n2"]) >= 10:
            raw = x[f"{est}@raw_se_se"].to_numpy(float)
            if f"{est}@raw_poisson_se" in x:
                sp = x[f"{est}@raw_poisson_se"].to_numpy(float)
                spread = np.sqrt(np.maximum(raw ** 2 - sp ** 2, 0.0))
            else:
                sp, spread = raw, np.zeros_like(raw)
            out.append((key, x[truth].to_numpy(float), x[est].to_numpy(float), sp, spread))
    return out


def _se(k, c, v, sp, spread):
    return np.sqrt((k * sp) ** 2 + (c * v) ** 2 + spread ** 2)


def coverage(k, c, sel) -> np.ndarray:
    return np.array([np.mean(np.abs(v - t) <= Z * _se(k, c, v, sp, sd) + 1e-12)
                     for _, t, v, sp, sd in sel])


def width(k, c, sel) -> float:
    return float(np.mean([np.mean(_se(k, c, v, sp, sd) / np.maximum(v, 1e-9))
                          for _, _, v, sp, sd in sel]))


TARGET = 0.98


def best(sel):
    good = [(width(k, c, sel), k, c) for k in KS for c in CS if coverage(k, c, sel).min() >= TARGET]
    return min(good) if good else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+",
                    help="validate_trust.py --replicates-csv output(s) (with --variants raw_se); "
                         "several (other seeds) are pooled cell by cell")
    ap.add_argument("--target", type=float, default=0.98,
                    help="the coverage every cell must reach (default 0.98, the issue's)")
    a = ap.parse_args(argv)
    global TARGET
    TARGET = a.target
    d = pd.concat([pd.read_csv(p) for p in a.csv], ignore_index=True)
    if "matches_ll@raw_se_se" not in d:
        sys.exit("the CSV has no raw_se columns: rerun validate_trust.py with --variants raw_se")
    for what, (truth, est, kind) in WHAT.items():
        sel = cells(d, truth, est)
        k0, c0 = SE_CALIBRATION[kind]
        cov0 = coverage(k0, c0, sel)
        b = best(sel)
        print(f"\n{what} ({est}): {len(sel)} cells with median n2 ≥ 10")
        print(f"  defaults k = {k0}, c = {c0}: covered ≥ 98 % in {int(np.sum(cov0 >= 0.98))}, "
              f"lowest {cov0.min():.3f}, mean relative s.e. {width(k0, c0, sel):.4f}")
        if b is None:
            print("  no (k, c) on the grid covers every cell")
            continue
        print(f"  narrowest covering every cell: k = {b[1]}, c = {b[2]}, mean relative s.e. {b[0]:.4f}")
        print(f"  {'held out':<10} {'k':>5} {'c':>5} {'cells':>5} {'≥ 98 %':>6} {'lowest':>7}")
        for pop in sorted({s[0][0] for s in sel}):
            fit = best([s for s in sel if s[0][0] != pop])
            test = [s for s in sel if s[0][0] == pop]
            if fit is None:
                print(f"  {pop:<10} no (k, c) covers the other populations' cells")
                continue
            cv = coverage(fit[1], fit[2], test)
            print(f"  {pop:<10} {fit[1]:>5} {fit[2]:>5} {len(test):>5} {int(np.sum(cv >= 0.98)):>6} "
                  f"{cv.min():>7.3f}")


if __name__ == "__main__":
    main()
