"""One figure per question (issue 43): every measure that counts correct matches, re-identifications
or population uniques, against the truth counted from the population.

For each population of ``bench/validate_trust.py`` (all 14 by default) and key set, Bernoulli samples
of the *records* at π (the measures that need record-level data or design weights, Σ r1, DIS-SUDA
and Benedetti-Franconi's ``indiv_risk``, cannot run on validate's replicate counts), each assessed
with its design weight 1/π, and compared with the truth from the population:
E = Σ_{f=1} 1/F (the expected correct matches of an intruder who matches each sample unique to one
random population record of its cell) and N1 (people unique in the population). Printed per measure:
the cells where its mean is within ±10 % / ±25 % of the truth its scenario names, and its median
relative bias.

    python bench/figures_vs_truth.py --replicates 5 --fraction 0.05 --keysets M
"""
from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
import pandas as pd

import gpurisk
import validate_trust as VT

#: measure -> (how its value becomes the figure compared, the truth it is compared with)
FIGURES = {
    "matches_ll": ("value", "E"),
    "matches_hat": ("value", "E"),
    "r1": ("value", "E"),
    "dis_suda": ("value", "E"),
    # Benedetti-Franconi's expected re-identifications over every record: global risk × n
    "indiv_risk": ("times_n", "E"),
    "tau1_ll": ("value", "tau1"),
    "pop_uniqueness": ("value", "N1"),
}


def truths(pop: pd.DataFrame, s: pd.DataFrame, keys) -> dict:
    F = pop.groupby(keys, dropna=False).size().rename("F").reset_index()
    f = s.groupby(keys, dropna=False).size().rename("f").reset_index().merge(F, on=keys)
    u = f[f["f"] == 1]
    return {"E": float((1.0 / u["F"]).sum()), "tau1": float((u["F"] == 1).sum()),
            "N1": float((F["F"] == 1).sum())}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=5)
    ap.add_argument("--fraction", type=float, default=0.05)
    ap.add_argument("--keysets", default="M", help="of S, M, L")
    ap.add_argument("--only", default=None, help="comma-separated populations (default: all)")
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--measures", default=",".join(FIGURES))
    a = ap.parse_args(argv)
    data = VT.find_data()
    names = a.only.split(",") if a.only else list(VT.POPULATIONS)
    wanted = a.measures.split(",")
    rows = []
    rng = np.random.default_rng(a.seed)
    for name in names:
        path, sep, sets, _ = VT.POPULATIONS[name]
        pop = pd.read_csv(data / path, sep=sep)
        for si, keys in enumerate(sets):
            label = "SML"[si]
            if label not in a.keysets.split(","):
                continue
            for r in range(a.replicates):
                s = pop[rng.random(len(pop)) < a.fraction].copy()
                s["_w"] = 1.0 / a.fraction
                t = truths(pop, s, keys)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = gpurisk.assess(s, keys, fraction=a.fraction, weights="_w",
                                         measures=wanted, allow_high_cardinality=True,
                                         options={"indiv_risk": {"Fk": "fraction"}})
                for m in wanted:
                    x = res.measures.get(m)
                    v = math.nan if x is None or x.value is None else float(x.value)
                    how, truth = FIGURES[m]
                    if how == "times_n":
                        v *= len(s)
                    rows.append({"population": name, "keyset": label, "replicate": r,
                                 "measure": m, "value": v, "truth_name": truth,
                                 "truth": t[truth]})
        print(f"[{name} done]", flush=True)
    df = pd.DataFrame(rows)
    print(f"\n{df.groupby(['population', 'keyset']).ngroups} key sets, {a.replicates} samples each, "
          f"π = {a.fraction:g}, seed {a.seed}")
    print(f"{'measure':<16} {'vs':<5} {'cells':>5} {'±10 %':>6} {'±25 %':>6} {'median bias':>12} "
          f"{'given':>6}")
    for m in wanted:
        g = df[df["measure"] == m]
        cells = []
        for _, c in g.groupby(["population", "keyset"]):
            ok = np.isfinite(c["value"])
            if ok.sum() == 0 or c["truth"].mean() <= 0:
                continue
            cells.append((c["value"][ok].mean() - c["truth"][ok].mean()) / c["truth"][ok].mean())
        b = np.array(cells)
        given = float(np.isfinite(g["value"]).mean()) if len(g) else math.nan
        print(f"{m:<16} {g['truth_name'].iloc[0] if len(g) else '':<5} {b.size:>5} "
              f"{int((np.abs(b) <= 0.10).sum()):>6} {int((np.abs(b) <= 0.25).sum()):>6} "
              f"{100 * float(np.median(b)) if b.size else math.nan:>11.1f}% {given:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
