"""Validate record-level risk on real files used as populations (SPEC §5).

Each real file is the population; Bernoulli samples are drawn from it (a sample flag, as `validate`
does). For the sample-unique records, the model's expected number of correct identifications
Σ r1u (p̂ from the two-way log-linear model, N = population size) is compared with the truth known
from the population: a sample unique whose population cell count is F_j gives a correct match with
probability 1/F_j, so the true expected number is Σ_SU 1/F_j, and the number with F_j = 1 is the
number of certain correct matches.

    PYTHONPATH=. python bench/validate_record_risk.py [--reps 5]
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

from gpurisk.freq.engine import build_table  # noqa: E402
from gpurisk.models.record_risk import build_model  # noqa: E402

CASES = [
    # (name, file, sep, keys, pi)
    ("FARS", "arx_genetic/fars_int.csv", ";", ["iage", "isex", "irace", "ihispanic", "istatenum"], 0.05),
    ("FARS", "arx_genetic/fars_int.csv", ";", ["iage", "isex", "irace", "ihispanic", "iinjury"], 0.05),
    ("adult", "uci_adult/adult_full_48842.csv", ",",
     ["age", "sex", "race", "marital-status", "education"], 0.10),
    ("adult", "uci_adult/adult_full_48842.csv", ",",
     ["age", "sex", "race", "marital-status", "relationship", "workclass"], 0.10),
]


def data_dir() -> Path:
    from gpurisk.testing.data import find_shared_data
    data = find_shared_data(ROOT)
    if data is None:
        raise SystemExit("real data not found: set GPURISK_SHARED_DATA")
    return data


def one(frame: pd.DataFrame, keys, pi: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    reg = frame[keys].copy()
    reg["_s"] = rng.random(len(reg)) < pi
    t0 = time.perf_counter()
    table = build_table(reg, keys, sample_flag="_s")
    model = build_model(table, ("r1", "r1u", "r2", "b1"))
    su = np.flatnonzero(table.f == 1)
    p = model.p_cell[su]
    r = model.risks(p)
    F = table.F[su]
    return {"n": table.n, "N": table.N, "K": model.fit.K, "SU": su.size,
            "iter": model.fit.iterations, "sec": time.perf_counter() - t0,
            "true_sum_1/F": float((1.0 / F).sum()), "true_F=1": int((F == 1).sum()),
            **{f"sum_{m}": float(v.sum()) for m, v in r.items()},
            # calibration: true vs predicted among the riskiest decile of sample uniques (by r1u)
            "top10%_true": float((1.0 / F)[np.argsort(-r["r1u"])[: max(1, su.size // 10)]].sum()),
            "top10%_r1u": float(np.sort(r["r1u"])[::-1][: max(1, su.size // 10)].sum())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    base = data_dir()
    rows = []
    for name, rel, sep, keys, pi in CASES:
        frame = pd.read_csv(base / rel, sep=sep, usecols=keys)
        res = pd.DataFrame([one(frame, keys, pi, seed) for seed in range(args.reps)])
        m = res.mean(numeric_only=True)
        rows.append({"data": name, "keys": ",".join(keys), "pi": pi, "N": int(m["N"]), "n": round(m["n"]),
                     "K": int(m["K"]), "SU": round(m["SU"], 1), "ipf_iter": round(m["iter"], 1),
                     "true Σ1/F": round(m["true_sum_1/F"], 1), "true #F=1": round(m["true_F=1"], 1),
                     "Σr1u": round(m["sum_r1u"], 1), "Σr1": round(m["sum_r1"], 1),
                     "Σr2": round(m["sum_r2"], 1), "Σb1": round(m["sum_b1"], 1),
                     "ratio Σr1u/true": round(m["sum_r1u"] / m["true_sum_1/F"], 3),
                     "top10% true": round(m["top10%_true"], 1), "top10% Σr1u": round(m["top10%_r1u"], 1),
                     "sec": round(m["sec"], 2)})
    out = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(f"means over {args.reps} Bernoulli samples (seeds 0..{args.reps - 1})")
        print(out.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
