"""Skinner & Elliot (2002) Table 1 on a real population: θ, θ̂, θ̂ − θ and v̂^½ over every systematic
sample at π = 0.02, 0.05, 0.10, printed next to the paper's census numbers (SPEC §8).

Population: the largest real file under ../shared/data by rows, ARX's FARS extract
(arx_genetic/fars_int.csv, 100 937 records). The paper sorted its census by geography within strata
and enumerated all L = 1/π systematic samples; here the file is sorted (stably) by state
(``istatenum``) and all L samples are enumerated by ``gpurisk.validate(design="systematic:istatenum")``.
Two key sets: all 8 FARS columns, and 6 demographic-like ones (age, race, sex, hispanic, state,
injury), closer to the paper's six census keys.

The obvious alternative is timed in the same run: one ``gpurisk.assess(sample, population=...)``
per enumerated sample (the records re-read and re-counted each time) against validate's one
encoding of the population plus one bincount per batch of samples.

    python bench/bench_table1.py            # writes bench/out/table1.csv and bench/out/table1.png
"""
from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import gpurisk

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
FRACTIONS = (0.02, 0.05, 0.10)
#: Skinner & Elliot (2002) Table 1: census of 450 000, six keys, stratified systematic samples
PAPER = {
    ("true", "mean"): (0.0426, 0.1047, 0.1985), ("true", "sd"): (0.0012, 0.0051, 0.0027),
    ("estimate", "mean"): (0.0429, 0.1055, 0.1990), ("estimate", "sd"): (0.0020, 0.0058, 0.0045),
    ("error", "mean"): (0.0004, 0.0008, 0.0005), ("error", "sd"): (0.0025, 0.0051, 0.0061),
    ("se", "mean"): (0.0028, 0.0052, 0.0072), ("se", "sd"): (0.0002, 0.0004, 0.0002),
}
NAMES = {"true": "θ", "estimate": "θ̂", "error": "θ̂ − θ", "se": "v̂^½"}
KEYSETS = {
    "8 keys": ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic", "istatenum", "iinjury"],
    "6 keys": ["iage", "irace", "isex", "ihispanic", "istatenum", "iinjury"],
}


def find_data() -> Path:
    from gpurisk.testing.data import find_shared_data
    data = find_shared_data(ROOT)
    if data is None:
        raise SystemExit("real data not found: put shared/data beside the repository or set "
                         "GPURISK_SHARED_DATA")
    return data


def print_table1(v, label):
    t = v.table1("theta_hat")
    print(f"\n{label}: N = {v.info['N']}, {v.info['cells']} population cells, samples per π "
          + ", ".join(f"{f:g}: {r}" for f, r in v.info["replicates"].items()))
    print(f"{'':>10} {'':>5} " + " ".join(f"{'π = ' + format(f, 'g'):>17}" for f in FRACTIONS))
    print(f"{'':>10} {'':>5} " + " ".join(f"{'gpurisk':>8} {'paper':>8}" for _ in FRACTIONS))
    for (q, stat), paper in PAPER.items():
        ours = t.loc[(q, stat)].to_numpy()
        print(f"{NAMES[q]:>10} {stat:>5} " + " ".join(f"{o:>8.4f} {p:>8.4f}" for o, p in zip(ours, paper)))
    s = v.summary[v.summary["measure"] == "theta_hat"]
    bias_ratio = (s["error_mean"].abs() / s["error_sd"]).to_numpy()
    se_ratio = (s["se_mean"] / s["error_sd"]).to_numpy()
    cv = (s["estimate_sd"] / s["estimate_mean"]).to_numpy()
    paper_bias = [abs(PAPER[("error", "mean")][i]) / PAPER[("error", "sd")][i] for i in range(3)]
    paper_se = [PAPER[("se", "mean")][i] / PAPER[("error", "sd")][i] for i in range(3)]
    print(f"{'|bias|/sd(θ̂−θ)':>16} " + " ".join(f"{o:>8.3f} {p:>8.3f}" for o, p in zip(bias_ratio, paper_bias)))
    print(f"{'v̂^½ / sd(θ̂−θ)':>16} " + " ".join(f"{o:>8.3f} {p:>8.3f}" for o, p in zip(se_ratio, paper_se)))
    print(f"{'cv(θ̂)':>16} " + " ".join(f"{o:>8.3f} {p:>8.3f}" for o, p in zip(cv, (0.058, 0.048, 0.031))))
    tau = v.summary[v.summary["measure"] == "tau1_hat"]
    if len(tau):
        print("τ̂1 vs τ1:   " + "; ".join(
            f"π={r.fraction:g}: τ1 {r.true_mean:.0f}, τ̂1 {r.estimate_mean:.0f} "
            f"(sd {r.estimate_sd:.0f}), NMSE {r.nmse:.2e}, reliable {r.reliable_share:.0%}"
            for r in tau.itertuples()))
    return bias_ratio, se_ratio


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--population", default=None, help="default: ../shared/data/arx_genetic/fars_int.csv")
    ap.add_argument("--skip-alternative", action="store_true")
    a = ap.parse_args(argv)
    path = Path(a.population) if a.population else find_data() / "arx_genetic" / "fars_int.csv"
    pop = gpurisk.read_table(path)
    print(f"population {path.name}: {len(pop)} records, sorted by istatenum for systematic sampling")
    OUT.mkdir(parents=True, exist_ok=True)
    frames = []
    for label, keys in KEYSETS.items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = gpurisk.validate(pop, keys, fractions=FRACTIONS, design="systematic:istatenum",
                                 measures=["theta_hat", "tau1_hat"])
        t_val = time.perf_counter() - t0
        print_table1(v, label)
        print(f"validate: {sum(v.info['replicates'].values())} samples in {t_val:.1f} s")
        for w in v.warnings:
            print(f"  warning: {w}")
        frames.append(v.summary.assign(keyset=label))
        if label == "8 keys":
            v.plot(OUT / "table1.png")
            if not a.skip_alternative:
                t0 = time.perf_counter()
                order = np.argsort(pop["istatenum"].to_numpy(), kind="stable")
                th = []
                for f in FRACTIONS:
                    L = round(1 / f)
                    for s in range(L):
                        sample = pop.iloc[np.sort(order[s::L])]
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            res = gpurisk.assess(sample, keys, population=pop, fraction=f,
                                                 measures=["theta", "theta_hat", "tau1", "tau1_hat"])
                        th.append(res.measures["theta_hat"].value)
                t_alt = time.perf_counter() - t0
                mine = v.replicates[v.replicates["measure"] == "theta_hat"]["value"].to_numpy()
                same = np.allclose(np.sort(th), np.sort(mine), rtol=1e-12)
                print(f"alternative, assess per sample (records re-read): {len(th)} samples in "
                      f"{t_alt:.1f} s ({t_alt / t_val:.1f}x validate); same θ̂ values: {same}")
    pd.concat(frames).to_csv(OUT / "table1.csv", index=False)
    print(f"\nwrote {OUT / 'table1.csv'} and {OUT / 'table1.png'}")


if __name__ == "__main__":
    main()
