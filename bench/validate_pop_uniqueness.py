"""ARX's population-uniqueness models against the truth on real populations (issue 18).

Each real file is a population; ``gpurisk.validate`` draws Bernoulli samples from it at 1, 5 and 10 %
and pairs the plugin measure ``pop_uniqueness`` (gpurisk-arx) with the true number of population
uniques N1 (``pop_uniques``). Every model is run on the same replicate samples (same seed): Pitman,
Zayatz, SNB and Dankar's rule (ARX's default), side by side with gpurisk's own estimate from τ̂1
(``tau1_hat``, the smoothed series of Camerlenghi et al.): a population unique is in a Bernoulli
sample with probability π and is then a sample unique, so E τ1 = π N1 and N̂1 = τ̂1/π.

Two scales are printed:
  1. N1, the number of population uniques: each model's N̂1 and τ̂1/π against the true N1;
  2. Pr(PU|SU) = τ1/n1: gpurisk's τ̂1/n1 against the true Pr(PU|SU) (``pr_pu_su``), and each ARX
     model's implied π N̂1/n1 (the same identity read the other way).
Bias = mean(estimate − truth) over replicates, relative to the mean truth; sd = standard deviation of
the error; "def" = replicates where the estimate was defined (a model that does not apply gives a
reason, not a number); "dankar=P" = replicates where Dankar's rule took Pitman; "tau1 reliable" =
share of replicates where τ̂1 was inside the range where it is proven (λ = (1−π)/π of order log n).

    PYTHONPATH=. python bench/validate_pop_uniqueness.py [--reps 5] [--fractions 0.01,0.05,0.1]

Needs plugins/gpurisk-arx installed (``pip install -e ./plugins/gpurisk-arx``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gpurisk  # noqa: E402

POPULATIONS = [
    ("FARS", "arx_genetic/fars_int.csv", ["iage", "isex", "irace", "ihispanic", "istatenum"]),
    ("adult", "uci_adult/adult_full_48842.csv", ["age", "sex", "race", "marital-status", "education"]),
    ("cup", "arx_genetic/cup_int.csv", ["AGE", "GENDER", "INCOME", "STATE"]),
    ("mach2019", "arx_genetic/mach2019_int.csv", ["age", "familysize", "gender", "married", "race",
                                                  "religion"]),
]
MODELS = ("pitman", "zayatz", "snb", "dankar")


def data_dir() -> Path:
    from gpurisk.testing.data import find_shared_data
    d = find_shared_data(ROOT)
    if d is None:
        sys.exit("the real data (shared/data) is not here; set GPURISK_SHARED_DATA")
    return d


def run_population(path, keys, fractions, reps, seed) -> pd.DataFrame:
    """One row per (fraction, replicate): the truths and every estimate."""
    out = None
    for model in MODELS:
        names = ["pop_uniqueness"] + (["tau1_hat", "pr_pu_su", "sample_uniques"] if out is None else [])
        v = gpurisk.validate(str(path), keys, fractions=fractions, replicates=reps, design="bernoulli",
                             measures=names, seed=seed, options={"pop_uniqueness": {"model": model}})
        r = v.replicates.pivot_table(index=["fraction", "replicate"], columns="measure", values="value",
                                     aggfunc="first", dropna=False)
        r = r.rename(columns={"pop_uniqueness": model})
        if out is None:      # whether each τ̂1 was inside its proven range (λ of order log n)
            t = v.replicates[v.replicates["measure"] == "tau1_hat"].set_index(["fraction", "replicate"])
            r["tau1_reliable"] = t["reliable"].astype(float)
        out = r if out is None else out.join(r[[model]])
    return out.reset_index()


def stats(est: pd.Series, truth: pd.Series) -> tuple[int, float, float, float]:
    ok = est.notna() & truth.notna() & np.isfinite(est.astype(float))
    err = (est[ok] - truth[ok]).astype(float)
    tm = float(truth[ok].mean()) if ok.any() else float("nan")
    if not ok.any():
        return 0, tm, float("nan"), float("nan")
    sd = float(err.std(ddof=1)) if ok.sum() > 1 else float("nan")
    return int(ok.sum()), tm, float(err.mean()), sd


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fractions", default="0.01,0.05,0.1")
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--only", default=None, help="comma-separated population names")
    a = ap.parse_args(argv)
    fractions = [float(x) for x in a.fractions.split(",")]
    d = data_dir()
    rows_n1, rows_pr = [], []
    for name, rel, keys in POPULATIONS:
        if a.only and name not in a.only.split(","):
            continue
        t0 = time.perf_counter()
        r = run_population(d / rel, keys, fractions, a.reps, a.seed)
        secs = time.perf_counter() - t0
        for frac, g in r.groupby("fraction"):
            N1, n1 = g["pop_uniques"], g["sample_uniques"]
            tau_n1 = g["tau1_hat"] / frac
            took_p = int((g["dankar"] == g["pitman"]).sum())
            for label, est in [*((m, g[m]) for m in MODELS), ("tau1_hat/pi", tau_n1)]:
                k, tm, bias, sd = stats(est, N1)
                rows_n1.append({"population": name, "pi": frac, "estimator": label, "def": k,
                                "N1 true": tm, "bias": bias, "bias %": 100 * bias / tm if tm else np.nan,
                                "sd": sd, "sd %": 100 * sd / tm if tm else np.nan,
                                "dankar=P": took_p if label == "dankar" else "",
                                "tau1 reliable": (f"{g['tau1_reliable'].mean():.0%}"
                                                  if label.startswith("tau1") else "")})
            truth = g["pr_pu_su"]
            for label, est in [("tau1_hat/n1", g["tau1_hat"] / n1),
                               *((m, frac * g[m] / n1) for m in MODELS)]:
                k, tm, bias, sd = stats(est, truth)
                rows_pr.append({"population": name, "pi": frac, "estimator": label, "def": k,
                                "Pr(PU|SU) true": tm, "bias": bias, "sd": sd})
        print(f"# {name}: keys {','.join(keys)}; {len(fractions)} fractions x {a.reps} replicates x "
              f"{len(MODELS)} validate runs in {secs:.1f} s", flush=True)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    print("\n## N1, the number of population uniques (estimate - truth)\n")
    print(pd.DataFrame(rows_n1).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print("\n## Pr(PU|SU) (estimate - truth); ARX models read as pi*N1_hat/n1\n")
    print(pd.DataFrame(rows_pr).to_string(index=False, float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
