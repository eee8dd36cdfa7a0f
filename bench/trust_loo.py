"""Leave-one-population-out scoring of the estimators of E and τ1 (issue 43).

Reads the per-replicate CSV that ``bench/validate_trust.py --replicates-csv FILE`` writes (every
estimator on the same samples) and prints, per estimator, the issue's targets over every cell
(population, key set, π):

- Ê: |relative bias| ≤ 10 % (share of cells) and ≤ 20 % (all?); the one-sided 99 % upper bound
  (the measure's ``upper``) holding E in ≥ 98 % of the samples (share of cells); s.e./sd in
  [0.7, 1.5] (share of cells); the coverage of the two-sided 99 % interval ± 2.576 s.e.;
- τ̂1: within ±20 % (relative bias) (share of cells).

Then the leave-one-population-out choice: for each population, the estimator of E (among those
named by ``--candidates``) with the most cells within ±10 % on the *other* populations (ties: the
smaller median |bias|) is scored on the population left out, and the held-out scores are pooled.
Nothing here is fitted: a candidate's own constants are fixed in its code (see each one's module).

    python bench/trust_loo.py /tmp/vt.csv
    python bench/trust_loo.py /tmp/vt43.csv /tmp/vt44.csv     # two seeds' samples pooled
    python bench/trust_loo.py /tmp/vt.csv --candidates matches_ll,matches_ll@risk
"""
from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd

Z99 = 2.5758293035489004


def cell_stats(g: pd.DataFrame, est: str, truth: str) -> dict:
    e = g[est].to_numpy(float)
    t = g[truth].to_numpy(float)
    ok = np.isfinite(e) & np.isfinite(t)
    e, t = e[ok], t[ok]
    if e.size < 3:
        return {}
    err = e - t
    mt = float(t.mean())
    sd = float(err.std(ddof=1))
    out = {"truth": mt, "bias": float(err.mean()),
           "rel_bias": float(err.mean() / mt) if mt > 0 else math.nan,
           "mc": sd / (mt * math.sqrt(e.size)) if mt > 0 else math.nan, "samples": int(e.size)}
    if f"{est}_se" in g:
        se = g[f"{est}_se"].to_numpy(float)[ok]
        out["se_sd"] = float(np.mean(se) / sd) if sd > 0 else math.nan
        out["cover2"] = float(np.mean(np.abs(err) <= Z99 * se + 1e-9))
    if f"{est}_upper" in g:
        up = g[f"{est}_upper"].to_numpy(float)[ok]
        out["upper"] = float(np.mean(t <= up + 1e-9))
    return out


def table(df: pd.DataFrame, est: str, truth: str) -> pd.DataFrame:
    rows = []
    for (p, k, fr), g in df.groupby(["population", "keyset", "fraction"]):
        s = cell_stats(g, est, truth)
        if s:
            rows.append({"population": p, "keyset": "SML"[int(k)] if str(k).isdigit() else k,
                         "fraction": fr} | s)
    return pd.DataFrame(rows)


#: the proposed allowance where the truth is small (issue 43's "±1 person where N1 ≤ 4" carried
#: over): E within ±10 % or ±0.1 expected match (10 % of one match), τ1 within ±20 % or ±1 person
FLOOR = {"matches": 0.1, "tau1": 1.0}


def within(t: pd.DataFrame, limit: float, floor: float) -> int:
    """Cells whose mean error is within ``limit`` of the truth or ``floor`` in absolute terms."""
    err = t["bias"].abs()
    return int((err <= np.maximum(limit * t["truth"], floor) + 1e-12).sum())


def summary(t: pd.DataFrame, limit: float, floor: float | None = None) -> dict:
    b = t["rel_bias"].abs()
    out = {"cells": len(t), f"within {limit:.0%}": int((b <= limit).sum()),
           "within 20%": int((b <= 0.2).sum())}
    if floor is not None:
        out[f"within {limit:.0%} or ±{floor:g}"] = within(t, limit, floor)
    out |= {"median |bias|": float(b.median()),
           "worst": (float(t["rel_bias"].iloc[int(b.fillna(-1).to_numpy().argmax())])
                     if len(t) else math.nan)}
    if "upper" in t:
        out["upper ≥ 98 %"] = int((t["upper"] >= 0.98).sum())
    if "se_sd" in t:
        out["s.e./sd in 0.7-1.5"] = int(t["se_sd"].between(0.7, 1.5).sum())
        out["median s.e./sd"] = float(t["se_sd"].median())
    return out


def fmt(d: dict) -> str:
    return ", ".join(f"{k} {v:.1%}" if "bias" in k or k == "worst" else
                     (f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}") for k, v in d.items())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+",
                    help="replicate CSVs of validate_trust.py (several: their samples pooled, e.g. "
                         "one run per seed)")
    ap.add_argument("--candidates", default=None,
                    help="estimators of E to choose among leave-one-population-out (default: every "
                         "matches_ll column)")
    ap.add_argument("--min-truth", type=float, default=0.0,
                    help="leave out cells whose mean E is below this (0: every cell)")
    ap.add_argument("--cells", action="store_true", help="print every cell")
    a = ap.parse_args(argv)
    df = pd.concat([pd.read_csv(f) for f in a.csv], ignore_index=True)
    cols = [c for c in df.columns if not c.endswith(("_se", "_upper", "_shown", "_reliable"))]
    e_est = [c for c in cols if c.startswith("matches_ll")]
    t_est = [c for c in cols if c.startswith("tau1_ll")]
    cand = a.candidates.split(",") if a.candidates else e_est
    print(f"{', '.join(a.csv)}: {df['population'].nunique()} populations, "
          f"{df.groupby(['population', 'keyset', 'fraction']).ngroups} cells, "
          f"{int(df.groupby(['population', 'keyset', 'fraction']).size().median())} samples a cell")
    tabs = {}
    for est in e_est:
        t = table(df, est, "matches")
        t = t[t["truth"] >= a.min_truth]
        tabs[est] = t
        print(f"E  {est:<28} {fmt(summary(t, 0.10, FLOOR['matches']))}")
        if a.cells:
            print(t.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    # matches_hat (θ̂·n1), the ranking's figure, against E too
    for est in ("matches_hat",):
        if est in df:
            t = table(df, est, "matches")
            t = t[t["truth"] >= a.min_truth]
            print(f"E  {est:<28} {fmt(summary(t, 0.10))}")
    for est in t_est:
        t = table(df, est, "tau1")
        print(f"τ1 {est:<28} {fmt(summary(t, 0.20, FLOOR['tau1']))}")
    if len(cand) > 1:
        held = []
        for p in sorted(df["population"].unique()):
            def key(est):
                o = tabs[est][tabs[est]["population"] != p]
                b = o["rel_bias"].abs()
                return (-(b <= 0.10).sum(), float(b.median()))
            best = min(cand, key=key)
            h = tabs[best][tabs[best]["population"] == p].assign(chosen=best)
            held.append(h)
            print(f"  left out {p:<13} chosen on the others: {best}")
        h = pd.concat(held, ignore_index=True)
        print(f"E  leave-one-population-out      {fmt(summary(h, 0.10, FLOOR['matches']))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
