"""Population-uniqueness estimators against the truth on real populations (issues 18 and 27).

Each real file is a population; its cells over a key set have sizes F_j and N1 = #{F_j = 1} population
uniques. A Bernoulli sample at π keeps each record independently, so a cell keeps f_j ~ Binomial(F_j, π)
records (drawn per cell, as ``gpurisk validate --by cells`` does); the sample's frequencies of
frequencies and N (the population's size) go to the plugin's fits (gpurisk_arx.uniqueness.estimate),
the same code ``pop_uniqueness`` runs. Estimators, all on the same samples:

  arx:dankar     ARX's decision rule with ARX's fits (rule=arx, model=dankar; ARX's default, the anchor)
  arx:pitman     ARX's Pitman (Newton from ARX's start, N → ∞ expectation)
  gp:pitman      gpurisk's rule: Pitman at its likelihood's maximum, E[N1 | sample]
  gp:pitman-fin  the same fit, the unconditional finite-N expectation N (θ+α)_{N−1}/(θ+1)_{N−1}
  gp:dankar      Dankar's decision rule over gpurisk's fits
  gp:snb         SNB with the root scan (π > 0.1 in Dankar's rule)
  gp:loglinear_eb       the log-linear Poisson–gamma model under Ê's forest (the default since issue
                 43: pairs kept by their evidence, rooted, shrunk by β)
  gp:loglinear_forest   main effects + a forest of held-out-tested pairs (the default before;
                 gp:loglinear the tempered main effects, the default before it; ll:* the same
                 family's variants, docs/arx.md)

Printed per (population, key set, π): the mean true N1, for each estimator the number of samples
with a value ("def"), bias and sd of N̂1 − N1 in % of N1, the share of samples within ±25 % of N1
("in25"), and for the estimators with an interval its coverage of N1 ("cover") and mean se / sd.

    python bench/validate_pop_uniqueness.py [--reps 50] [--fractions 0.01,0.05,0.1] [--only FARS]

Needs plugins/gpurisk-arx installed (``pip install -e ./plugins/gpurisk-arx``).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpurisk_arx import loglinear_n1 as LL  # noqa: E402
from gpurisk_arx import uniqueness as U  # noqa: E402
from gpurisk_arx.pitman_mle import bounds  # noqa: E402

ROW_EXTRA: dict = {}      # per-row extras of the last fit (the log-linear s.e. without model error)


POPULATIONS = [
    ("FARS", "arx_genetic/fars_int.csv", ["iage", "isex", "irace", "ihispanic", "istatenum"]),
    ("FARS-b", "arx_genetic/fars_int.csv", ["iage", "isex", "irace", "istatenum", "iinjury"]),
    ("adult", "uci_adult/adult_full_48842.csv", ["age", "sex", "race", "marital-status", "education"]),
    ("adult-b", "uci_adult/adult_full_48842.csv", ["age", "sex", "race", "occupation", "workclass"]),
    ("cup", "arx_genetic/cup_int.csv", ["AGE", "GENDER", "INCOME", "STATE"]),
    ("mach2019", "arx_genetic/mach2019_int.csv", ["age", "familysize", "gender", "married", "race",
                                                  "religion"]),
]
ESTIMATORS = {
    "arx:dankar": dict(rule="arx", model="dankar"),
    "arx:pitman": dict(rule="arx", model="pitman"),
    "gp:pitman": dict(rule="gpurisk", model="pitman"),
    "gp:pitman-fin": dict(rule="gpurisk", model="pitman", expectation="finite"),
    "gp:dankar": dict(rule="gpurisk", model="dankar"),
    "gp:snb": dict(rule="gpurisk", model="snb"),
    "gp:zayatz": dict(rule="gpurisk", model="zayatz"),
    "gp:loglinear": dict(loglinear="loglinear"),
    "gp:loglinear_eb": dict(loglinear="loglinear_eb"),
    "gp:loglinear_forest": dict(loglinear="loglinear_forest"),
    "gp:loglinear_forest-nochoice": dict(loglinear="loglinear_forest", choice_spread=False),
    "gp:loglinear_main": dict(loglinear="loglinear_main"),
    "gp:bethlehem": dict(loglinear="bethlehem"),
    "ll:main": dict(loglinear="main"),
    "ll:bethlehem": dict(loglinear="none"),
    "ll:main-poisson": dict(loglinear="main", dispersion="none"),
    "ll:main-cal": dict(loglinear="main", dispersion="calibrated"),
    "ll:bethlehem-cal": dict(loglinear="none", dispersion="calibrated"),
    "ll:tempered": dict(loglinear="tempered", dispersion="calibrated"),
    "ll:tempered-half": dict(loglinear="tempered", dispersion="calibrated", target="half"),
    "ll:forest": dict(loglinear="forest", dispersion="calibrated"),
    "ll:forest-t": dict(loglinear="forest_tempered", dispersion="calibrated"),
    "ll:forest-s": dict(loglinear="forest", dispersion="calibrated", kappa=0.5),
    "ll:forest-ts": dict(loglinear="forest_tempered", dispersion="calibrated", kappa=0.5),
    "ll:forest-s1": dict(loglinear="forest", dispersion="calibrated", kappa=0.1),
}


def data_dir() -> Path:
    from gpurisk.testing.data import find_shared_data
    d = find_shared_data(ROOT)
    if d is None:
        sys.exit("the real data (shared/data) is not here; set GPURISK_SHARED_DATA")
    return d


def cells(path: Path, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(F per population cell, the cells' category codes: one column per key)."""
    sep = ";" if "arx" in str(path) else ","
    df = pd.read_csv(path, sep=sep, usecols=keys, dtype=str, keep_default_na=False)
    g = df.groupby(keys, sort=False).size().reset_index(name="F")
    codes = np.column_stack([pd.factorize(g[k])[0] for k in keys])
    return g["F"].to_numpy(), codes


def run_one(kw: dict, sm, f, codes, pi: float):
    """(value, se, lower, upper, model) of one estimator on one sample."""
    if "loglinear" in kw:
        s = f > 0
        if kw["loglinear"] in LL.LL_MODELS:          # the measure's own fit
            r = LL.fit([codes[s, v] for v in range(codes.shape[1])], f[s], sm.N, kw["loglinear"],
                       choice_spread=kw.get("choice_spread", True))
            ROW_EXTRA["se_base"] = math.hypot(r.params.get("se_process", 0.0), r.params.get("se_fit", 0.0))
            return r.value, r.se, r.lower, r.upper, r.model
        from scipy.stats import norm
        r = LL.estimate([codes[s, v] for v in range(codes.shape[1])], f[s], sm.N,
                        margins=kw["loglinear"], dispersion=kw.get("dispersion", "moment"),
                        target=kw.get("target", "n2"), kappa=kw.get("kappa", 0.0))
        lo_cap, hi_cap = bounds(sm)
        v = min(max(r.value, lo_cap), hi_cap)
        se = math.sqrt(r.process_var + r.param_var + (LL.MODEL_ERROR * v) ** 2)
        z = norm.ppf(0.975)
        return v, se, max(v - z * se, lo_cap), min(v + z * se, hi_cap), "ll"
    fit, _ = U.estimate(sm, kw["model"], "sh3", pi, kw["rule"],
                        kw.get("expectation", "conditional"), 0.95)
    return fit.value, fit.se, fit.lower, fit.upper, fit.model


def run_cell(F: np.ndarray, codes: np.ndarray, pi: float, reps: int, rng, names) -> pd.DataFrame:
    """One row per (replicate, estimator): truth N1, estimate, interval."""
    N, N1 = float(F.sum()), int((F == 1).sum())
    rows = []
    for r in range(reps):
        f = rng.binomial(F, pi)
        sm = U.sample(np.bincount(f[f > 0], minlength=2), N)
        for name in names:
            kw = ESTIMATORS[name]
            t = time.perf_counter()
            ROW_EXTRA.clear()
            if sm.n1 == sm.n and kw.get("rule") != "arx":
                v = se = lo = hi = None            # not estimable (every sample record unique)
                model = "none"
            else:
                v, se, lo, hi, model = run_one(kw, sm, f, codes, pi)
            rows.append({**ROW_EXTRA, "rep": r, "estimator": name, "N1": N1, "value": v, "se": se,
                         "lower": lo, "upper": hi, "model": model,
                         "secs": time.perf_counter() - t, "n1": sm.n1, "n": sm.n})
    return pd.DataFrame(rows)


def summarise(d: pd.DataFrame) -> dict:
    v = d["value"].astype(float)
    ok = v.notna() & np.isfinite(v)
    N1 = float(d["N1"].iloc[0])
    err = v[ok] - N1
    out = {"def": f"{int(ok.sum())}/{len(d)}",
           "bias %": 100 * err.mean() / N1 if ok.any() else np.nan,
           "sd %": 100 * err.std(ddof=1) / N1 if ok.sum() > 1 else np.nan,
           "in25": float((err.abs() <= 0.25 * N1).mean()) if ok.any() else np.nan}
    has = d["upper"].notna() & ok
    if has.any():
        cov = (d.loc[has, "lower"].astype(float) <= N1) & (N1 <= d.loc[has, "upper"].astype(float))
        # a sample without a value counts as not covered
        out["cover"] = float(cov.sum() / len(d))
        sd = err.std(ddof=1)
        out["se/sd"] = float(d.loc[has, "se"].astype(float).mean() / sd) if sd > 0 else np.nan
    else:
        out["cover"], out["se/sd"] = np.nan, np.nan
    out["s/fit"] = float(d["secs"].mean())
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--fractions", default="0.01,0.05,0.1")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--only", default=None, help="comma-separated population names")
    ap.add_argument("--estimators", default=",".join(ESTIMATORS))
    ap.add_argument("--csv", default=None, help="write every replicate's row here")
    a = ap.parse_args(argv)
    fractions = [float(x) for x in a.fractions.split(",")]
    names = a.estimators.split(",")
    d = data_dir()
    rng = np.random.default_rng(a.seed)
    table, raw = [], []
    for name, rel, keys in POPULATIONS:
        if a.only and name not in a.only.split(","):
            continue
        F, codes = cells(d / rel, keys)
        for pi in fractions:
            t0 = time.perf_counter()
            r = run_cell(F, codes, pi, a.reps, rng, names)
            r["population"], r["pi"] = name, pi
            raw.append(r)
            for est, g in r.groupby("estimator", sort=False):
                table.append({"population": name, "pi": pi, "N": int(F.sum()), "N1": int((F == 1).sum()),
                              "estimator": est, **summarise(g)})
            print(f"# {name} ({','.join(keys)}) pi={pi}: {a.reps} samples x {len(names)} estimators "
                  f"in {time.perf_counter() - t0:.1f} s", flush=True)
    pd.set_option("display.width", 220)
    pd.set_option("display.max_rows", 1000)
    print()
    print(pd.DataFrame(table).to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    if a.csv:
        pd.concat(raw).to_csv(a.csv, index=False)


if __name__ == "__main__":
    main()
