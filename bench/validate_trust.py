"""Can an office trust the estimates? θ̂, its bounds, τ̂1 and the scan's ranking on real populations.

Issue 21's study, rerunnable: for each real population available (the microdata in ../shared/data,
and any a user names with --population), three key sets (small, medium, large), Bernoulli samples at
π = 1, 5 and 10 %, R replicates each, drawn and counted by ``gpurisk.validate`` (the validation
machinery every estimator is judged with: the same samples for every key set of a population, since
its draws depend on the seed, π and N only). Printed:

1. θ̂ against θ, per (population, key set, π): median n2; the share of samples where θ̂ is not
   estimable (no sample pairs); bias/sd (mean(θ̂ − θ) / sd(θ̂ − θ), over the samples where θ̂ is
   reported); v̂^½/sd (mean estimated s.e. over the s.d. of θ̂ − θ); the coverage of the 99 % upper
   bounds, Pr(θ ≤ bound): the Wald bound θ̂ + z v̂^½ and the log-scale bound θ̂·exp(z v̂^½/θ̂), both
   from eq. 7 (n2 = 0 gives θ̂ = 1, v̂ from eq. 9), and the bound the measure itself reports
   (its default; over the samples where it reports one); the largest bound seen and how many fall
   outside [0, 1]. Then the coverage pooled by median n2 (< 10, 10–19, ≥ 20).
2. τ̂1 against τ1, per cell and grouped by λ: mean τ1, relative bias mean(τ̂1 − τ1)/mean(τ1), NMSE
   mean((τ̂1 − τ1)²/n²), the shares of τ̂1 < 0 and > n1 (the estimator's own value, also where the
   measure withholds it), the share marked reliable and, among those, the relative bias and NMSE.
3. The ranking: every combination of 1–3 keys of a pool of six (per population), π =
   ``--rank-fraction`` (1 %),
   --rank-replicates samples. Each sample's combinations are ranked by the scan's default
   (``gpurisk.scan.runner.rank_column`` / ``top_combinations``, exactly what ``gpurisk scan`` of
   the sample file alone prints: the truths the study counts are not handed to it), by θ̂, by
   θ̂·n1, by θ̂'s upper bound and by τ̂1, and compared with the truth τ1 (the number of sample
   uniques that are population uniques): Spearman's rank correlation, and the share of the
   attainable τ1 caught by the top 10 (Σ τ1 of the top 10 by the ranking over Σ τ1 of the 10
   largest τ1), mean and range over the samples; the same against the truth E
   ("vs E"). The row "true E (oracle)" ranks by each sample's true E, which no estimator knows: what
   a ranking by E can reach knowing which records the sample drew. The row "expected E (oracle)"
   ranks by each combination's E averaged over the other samples of the study (its expected E
   under the design, which Ê estimates): what a ranking by E reaches without that luck. Also how
   often the top combination has n2 = 0.
4. Estimators of E and of τ1 (issue 27) against their truths, per cell (4a, 4b).
5. With ``--n1-replicates R`` (needs the gpurisk-arx plugin): population uniques N̂1
   (``pop_uniqueness``: the default, the tempered main effects, Dankar's rule over gpurisk's fits,
   ARX's rule) against N1, per cell: bias, sd, s.e./sd, the share within ±25 % and the coverage of
   the 95 % interval (bench/_trust_n1.py).

Sections 3-5 print each mean's Monte Carlo s.e. beside it (``± MC``: the sd over the samples / √R,
for a bias relative to the mean truth), so that a cell at a target's edge can be told from one
that misses it; the summaries count the misses by more than 2 Monte Carlo s.e.

    python bench/validate_trust.py                       # five populations, 20 replicates (seconds)
    python bench/validate_trust.py --replicates 200 --rank-replicates 100   # the issue's size
    python bench/validate_trust.py --population my.csv:age,sex,region --replicates 50
    python bench/validate_trust.py --only fars --json out.json
    python bench/validate_trust.py --replicates 20 --no-theta --rank-replicates 0 --n1-replicates 40

Issue 27's check on key sets nothing was designed or calibrated on (docs/validation.md), D being
../shared/data:

    python bench/validate_trust.py --replicates 200 --rank-replicates 0 --no-theta --seed 31 \
      --variants main_plugin,main_loo,z0,raw_se \
      --population "D/uci_adult/adult_full_48842.csv:education,sex,race,workclass;age,occupation,sex;native-country,education,marital-status,workclass,occupation" \
      --population "D/arx_genetic/fars_int.csv:iage,ideathmon,isex;irace,ihispanic,istatenum,iinjury,isex;iage,ideathday,istatenum" \
      --population "D/arx_genetic/cup_int.csv:AGE,STATE,NGIFTALL;GENDER,INCOME,MINRAMNT,NGIFTALL" \
      --population "D/arx_genetic/mach2019_int.csv:age,religion,familysize;gender,race,married,Q1A,Q2A,Q3A" \
      --population "D/sdcmicro/free1.csv:REGION,SEX,AGE;SEX,AGE,MARSTAT,EDUC1"

Writes bench/out/validate_trust.json (every number printed) unless --json names another file.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import _trust_n1
import gpurisk
from gpurisk.measures._util import z_upper
from gpurisk.measures.theta_hat import theta_hat as theta_hat_eq7

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
FRACTIONS = (0.01, 0.05, 0.10)
RANK_FRACTION = 0.05
ALPHA = 0.01

#: name: (file under shared/data, separator, three key sets small -> large, ranking pool of six)
POPULATIONS = {
    "fars": ("arx_genetic/fars_int.csv", ";",
             [["iage", "isex", "irace"], ["iage", "isex", "irace", "istatenum"],
              ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic", "istatenum", "iinjury"]],
             ["iage", "isex", "irace", "istatenum", "ihispanic", "iinjury"]),
    "adult": ("uci_adult/adult_full_48842.csv", ",",
              [["age", "sex", "race"], ["age", "sex", "race", "marital-status"],
               ["age", "sex", "race", "marital-status", "education", "native-country", "workclass",
                "occupation"]],
              ["age", "sex", "race", "marital-status", "education", "native-country"]),
    "cup": ("arx_genetic/cup_int.csv", ";",
            [["AGE", "GENDER", "INCOME"], ["AGE", "GENDER", "INCOME", "STATE"],
             ["AGE", "GENDER", "INCOME", "STATE", "NGIFTALL"]],
            ["AGE", "GENDER", "INCOME", "STATE", "NGIFTALL", "MINRAMNT"]),
    "mach2019": ("arx_genetic/mach2019_int.csv", ";",
                 [["age", "gender", "race"], ["age", "gender", "race", "religion", "married"],
                  ["age", "gender", "race", "religion", "married", "familysize", "Q1A", "Q2A"]],
                 ["age", "gender", "race", "religion", "married", "familysize"]),
    "testdata": ("sdcmicro/testdata.csv", ",",
                 [["urbrur", "water", "sex"], ["urbrur", "water", "sex", "age"],
                  ["urbrur", "roof", "walls", "water", "sex", "age"]],
                 ["urbrur", "roof", "walls", "water", "sex", "age"]),
    # the development populations of ../shared/data/populations (README there): three key sets each,
    # small -> large, from the README's natural key variables, chosen before any estimate was seen
    "gss_abortion": ("populations/gss_abortion.csv.gz", ",",
                     [["year", "sex", "race"], ["year", "age", "sex", "race"],
                      ["year", "age", "race", "sex", "hispaniccat", "educ", "partyid"]],
                     ["year", "age", "race", "sex", "educ", "partyid"]),
    "vietnam": ("populations/VietNamI.csv.gz", ",",
                [["age", "sex", "married"], ["age", "sex", "married", "educ"],
                 ["age", "sex", "married", "educ", "illness", "commune"]],
                ["age", "sex", "married", "educ", "illness", "commune"]),
    "star": ("populations/star.csv.gz", ",",
             [["gr", "sx", "eth"], ["sch", "gr", "sx", "eth"],
              ["sch", "gr", "sx", "eth", "birthq", "ses", "cltype"]],
             ["sch", "gr", "sx", "eth", "birthq", "ses"]),
    "labsup": ("populations/labsup.csv.gz", ",",
               [["age", "black", "hispan"], ["age", "kids", "black", "hispan", "educ"],
                ["age", "agefstm", "kids", "black", "hispan", "educ", "weeks"]],
               ["age", "agefstm", "kids", "black", "educ", "weeks"]),
    "gssvocab": ("populations/GSSvocab.csv.gz", ",",
                 [["year", "gender", "nativeBorn"], ["year", "gender", "age"],
                  ["year", "gender", "nativeBorn", "age", "educ"]],
                 ["year", "gender", "nativeBorn", "age", "educ", "vocab"]),
    "happiness": ("populations/happiness.csv.gz", ",",
                  [["year", "female", "black"], ["year", "female", "black", "region", "educ"],
                   ["year", "workstat", "educ", "region", "reg16", "income", "female", "black",
                    "prestige"]],
                  ["year", "workstat", "educ", "region", "income", "female"]),
    "covid": ("populations/covid_testing.csv.gz", ",",
              [["gender", "age"], ["gender", "age", "clinic_name"],
               ["gender", "age", "clinic_name", "demo_group", "payor_group", "patient_class",
                "pan_day"]],
              ["gender", "age", "clinic_name", "demo_group", "payor_group", "pan_day"]),
    "wvs": ("populations/wvs_immig.csv.gz", ",",
            [["country", "s020"], ["country", "s020", "e143"], ["country", "s020", "s002", "e143"]],
            ["country", "s020", "s002", "e143", "s003"]),
    "mortgages": ("populations/mortgages.csv.gz", ",",
                  [["bpl", "qob"], ["bpl", "qob", "nonwhite"],
                   ["bpl", "qob", "nonwhite", "vet_wwko", "home_ownership"]],
                  ["bpl", "qob", "nonwhite", "vet_wwko", "home_ownership"]),
}
#: the development populations (issue 43)
DEVELOPMENT = ("gss_abortion", "vietnam", "star", "labsup", "gssvocab", "happiness", "covid", "wvs",
               "mortgages")
#: run unless --only names others (testdata, 4 580 records, gives samples of 46 at π = 1 %: the
#: rare-pair case of issue 21)
DEFAULT = ("fars", "adult", "cup", "mach2019", "testdata")
ESTIMATORS = ["theta_hat", "tau1_hat", "theta", "tau1", "matches", "matches_ll", "tau1_ll"]
#: the log-linear estimators' variants run beside the default (suffix: options of loglinear_risk;
#: the two-way IPF stopped after 300 cycles: from sparse samples it converges sublinearly, 100 s a fit)
LL_VARIANTS = {"two_way": {"model": "two_way", "dispersion": "none", "max_iter": 300},
               "indep_poisson": {"model": "independence", "dispersion": "none"},
               # the default before issue 27's third stop: main effects, plug-in λ̂
               "main_plugin": {"model": "independence", "prior": "plugin"},
               # the second stop's auto_cv: any positive held-out gain, plug-in λ̂
               "auto_cv_plugin": {"model": "auto_cv", "prior": "plugin", "cv_z": 0.0,
                                  "max_interactions": 1},
               "main_loo": {"model": "independence"},
               # issue 43: the forest chosen by Skinner & Shlomo's risk-weighted criterion
               "risk": {"model": "risk"},
               # ... started from the held-out tests' forest
               "cv_risk": {"model": "cv_risk"},
               # the interval from the model alone (no fitted factor): the default's model, and cv_risk
               "model_iv": {"interval": "model"},
               "cv_risk_model": {"model": "cv_risk", "interval": "model"},
               # issue 43: the forest of smoothed pairs, each kept by its Bayes factor (models/eb_forest),
               # α̂ by zero-truncated likelihood (models/dispersion) or by moments; and the held-out
               # tests' forest with the truncated α̂
               "eb": {"model": "eb", "dispersion": "truncated"},
               # the default before issue 43's eb: the held-out tests' forest, α̂ by moments
               "auto_cv": {"model": "auto_cv"},
               "eb_moment": {"model": "eb", "dispersion": "moment"},
               # eb's default before its rooted smoothing: each kept pair's table shrunk towards
               # independence (eb_smoothing=joint)
               "eb_joint": {"model": "eb", "dispersion": "truncated", "eb_smoothing": "joint"},
               # eb's interval from the model alone: the Poisson-gamma variance plus α̂'s spread over
               # its profile-likelihood interval, no fitted factor
               # (with the risk criterion's bias where it flags misfit), and without that widening
               "eb_model": {"model": "eb", "dispersion": "truncated", "interval": "model"},
               "eb_model_plain": {"model": "eb", "dispersion": "truncated", "interval": "model",
                                  "misfit_widen": False},
               # ... and without α̂'s spread either: the Poisson-gamma variance alone
               "eb_model_cells": {"model": "eb", "dispersion": "truncated", "interval": "model",
                                  "misfit_widen": False, "alpha_spread": False},
               # each root key's categories under its fitted gamma where that is more even than
               # Jeffreys' prior (gpurisk.models.root_prior), its shape's spread in the s.e. (the
               # default since issue 43's stop 62), and Jeffreys' ½ for every root key (before)
               "root_eb": {"root_prior": "eb"},
               "root_jeffreys": {"root_prior": "jeffreys"},
               # a numeric parent's child shares shrunk towards its neighbouring categories' where
               # the records prefer them (gpurisk.models.neighbours), with the default root prior
               # (eb since stop 62: "near" and "near_root_eb" are now the same)
               "near": {"arc_target": "neighbours"},
               "near_root_eb": {"arc_target": "neighbours", "root_prior": "eb"},
               "truncated": {"model": "auto_cv", "dispersion": "truncated"},
               "z0": {"cv_z": 0.0},
               "z1": {"cv_z": 1.0},
               "one_pair": {"max_interactions": 1},
               "auto_cv3": {"model": "auto_cv", "cv_splits": 3},
               # the default's Poisson s.e. alone (se_factor 1, no model error): for recalibrating
               "raw_se": {"se_factor": 1.0, "model_error": 0.0},
               # ... and without the model choice's spread: the Poisson s.e. alone
               "raw_poisson": {"se_factor": 1.0, "model_error": 0.0, "choice_spread": False}}
#: options of the base run: Benedetti-Franconi's F̂_k from the sampling fraction (not the population)
BASE_OPTIONS = {"indiv_risk": {"Fk": "fraction"}}
Z99 = 2.5758293035489004     # two-sided 99 %


def find_data() -> Path | None:
    from gpurisk.testing.data import find_shared_data
    return find_shared_data(ROOT)


def load(path, sep) -> pd.DataFrame:
    """The population as a frame (read once for all its key sets), or its path for gpurisk to read."""
    return str(path) if sep is None else pd.read_csv(path, sep=sep)


def measures() -> list[str]:
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    extra = [m for m in ("matches_hat",) if m in reg]       # the ranking measure (issue 21)
    return ESTIMATORS + extra


#: the variants run (--variants; the two-way fits of the large key sets take minutes each)
RUN_VARIANTS = ["indep_poisson"]


def replicates(frame, keys, fractions, R, seed, variants=True) -> pd.DataFrame:
    """One row per (fraction, replicate): every measure's value, s.e., upper bound, reliable; the
    log-linear variants' columns carry the suffix ``@variant`` (the same samples: same seed)."""
    df = _replicates(frame, keys, fractions, R, seed, measures(), BASE_OPTIONS)
    if variants:
        for tag, opts in LL_VARIANTS.items():
            if tag not in RUN_VARIANTS:
                continue
            d = _replicates(frame, keys, fractions, R, seed, ["matches_ll", "tau1_ll"],
                            {"loglinear_risk": opts})
            cols = [c for c in d.columns if c.startswith(("matches_ll", "tau1_ll"))]
            d = d[["fraction", "replicate"] + cols].rename(
                columns={c: c.replace("_ll", f"_ll@{tag}", 1) for c in cols})
            df = df.merge(d, on=["fraction", "replicate"])
    return df


def _replicates(frame, keys, fractions, R, seed, names, options) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = gpurisk.validate(frame, keys, fractions=fractions, replicates=R, design="bernoulli",
                             measures=names, seed=seed, alpha=ALPHA, options=options,
                             allow_high_cardinality=True)
    reps = v.replicates
    base = reps.drop_duplicates(["fraction", "replicate"])[
        ["fraction", "replicate", "n", "n1", "n2", "n3"]].set_index(["fraction", "replicate"])
    out = [base]
    for col in ("value", "shown", "se", "upper", "reliable"):
        if col not in reps:
            continue
        w = reps.pivot(index=["fraction", "replicate"], columns="measure", values=col)
        w.columns = [m if col == "value" else f"{m}_{col}" for m in w.columns]
        out.append(w)
    df = pd.concat(out, axis=1).reset_index()
    df["N"] = v.info["N"]
    return df


# --- 1. θ̂ -----------------------------------------------------------------------------------------
def theta_cell(df: pd.DataFrame) -> dict:
    z = z_upper(ALPHA)
    pi = df["fraction"].to_numpy(float)
    n1, n2, n3 = (df[c].to_numpy(float) for c in ("n1", "n2", "n3"))
    raw = np.array([theta_hat_eq7(a, b, c, p) for a, b, c, p in zip(n1, n2, n3, pi)])
    th, v = raw[:, 0], raw[:, 1]
    se = np.sqrt(v)
    theta = df["theta"].to_numpy(float)
    ok = np.isfinite(th) & np.isfinite(theta)
    wald = th + z * se
    with np.errstate(divide="ignore", invalid="ignore"):
        logb = np.minimum(np.where(th > 0, th * np.exp(z * se / th), 0.0), 1.0)
    shown = df["theta_hat_shown"].to_numpy(float) if "theta_hat_shown" in df else df["theta_hat"].to_numpy(float)
    rep = np.isfinite(shown) & np.isfinite(theta)          # θ̂ reported by the measure
    err = shown[rep] - theta[rep]
    sd = float(np.std(err, ddof=1)) if err.size > 2 else math.nan
    mse = df["theta_hat_se"].to_numpy(float)[rep]
    up = df["theta_hat_upper"].to_numpy(float)
    has_up = np.isfinite(up) & np.isfinite(theta)
    return {
        "median_n2": float(np.median(n2)), "samples": int(len(df)),
        "not_estimable": float(np.mean(~np.isfinite(shown))),
        "n2_zero": float(np.mean(n2 == 0)),
        "theta_mean": float(np.nanmean(theta)),
        "bias_over_sd": float(np.mean(err) / sd) if sd > 0 else math.nan,
        "se_over_sd": float(np.mean(mse) / sd) if sd > 0 else math.nan,
        "cover_wald": float(np.mean(theta[ok] <= wald[ok] + 1e-12)) if ok.any() else math.nan,
        "cover_log": float(np.mean(theta[ok] <= logb[ok] + 1e-12)) if ok.any() else math.nan,
        "cover_default": float(np.mean(theta[has_up] <= up[has_up] + 1e-12)) if has_up.any() else math.nan,
        "default_given": float(np.mean(has_up)),
        "wald_max": float(np.nanmax(wald)) if ok.any() else math.nan,
        "wald_above_1": int(np.sum(wald[ok] > 1 + 1e-12)),
        "default_max": float(np.nanmax(up)) if has_up.any() else math.nan,
        "default_outside_01": int(np.sum((up[has_up] > 1 + 1e-12) | (up[has_up] < -1e-12))),
    }


# --- 2. τ̂1 ----------------------------------------------------------------------------------------
def tau_cell(df: pd.DataFrame) -> dict:
    est = df["tau1_hat"].to_numpy(float)
    tau = df["tau1"].to_numpy(float)
    n = df["n"].to_numpy(float)
    n1 = df["n1"].to_numpy(float)
    N = df["N"].to_numpy(float)
    ok = np.isfinite(est) & np.isfinite(tau)
    lam = float(np.mean((N - n) / n))
    err = est[ok] - tau[ok]
    mt = float(np.mean(tau[ok])) if ok.any() else math.nan
    rel = df.get("tau1_hat_reliable")
    relm = (rel.fillna(False).astype(bool).to_numpy() & ok) if rel is not None else np.zeros(len(df), bool)
    shown = df["tau1_hat_shown"].to_numpy(float) if "tau1_hat_shown" in df else est
    se = df["tau1_hat_se"].to_numpy(float) if "tau1_hat_se" in df else np.full(len(df), np.nan)
    sd = float(np.std(err, ddof=1)) if err.size > 2 else math.nan
    out = {
        "lambda": lam, "log_n": float(np.mean(np.log(n))), "tau1_mean": mt,
        "rel_bias": float(np.mean(err) / mt) if mt > 0 else math.nan,
        "nmse": float(np.mean((err / n[ok]) ** 2)) if ok.any() else math.nan,
        "sd": sd,
        "se_over_sd": float(np.nanmean(se[ok]) / sd) if sd > 0 and np.isfinite(se[ok]).any() else math.nan,
        "negative": float(np.mean(est[ok] < 0)), "above_n1": float(np.mean(est[ok] > n1[ok])),
        "shown_outside": int(np.sum(np.isfinite(shown) & ((shown < 0) | (shown > n1 + 1e-9)))),
        "reliable": float(np.mean(relm)),
    }
    if relm.any():
        e = est[relm] - tau[relm]
        t = float(np.mean(tau[relm]))
        out["reliable_rel_bias"] = float(np.mean(e) / t) if t > 0 else math.nan
        out["reliable_nmse"] = float(np.mean((e / n[relm]) ** 2))
    return out


# --- 4. E and τ1: every estimator --------------------------------------------------------------------
def e_estimators(df: pd.DataFrame) -> dict:
    """name -> (estimates, s.e. or None) of E = Σ_{f=1} 1/F for every estimator in ``df``."""
    out = {}
    for c in df.columns:
        if c.startswith("matches_ll") and not c.endswith(("_se", "_upper", "_shown", "_reliable")):
            out[c] = (df[c].to_numpy(float), df[f"{c}_se"].to_numpy(float))
    if "matches_hat" in df:
        out["matches_hat (θ̂·n1)"] = (df["matches_hat"].to_numpy(float),
                                     df["matches_hat_se"].to_numpy(float))
    if "indiv_risk" in df:   # Benedetti-Franconi: expected re-identifications over every record
        out["indiv_risk·n (B-F)"] = (df["indiv_risk"].to_numpy(float) * df["n"].to_numpy(float), None)
    return out


def t_estimators(df: pd.DataFrame) -> dict:
    out = {}
    for c in df.columns:
        if c.startswith("tau1_ll") and not c.endswith(("_se", "_upper", "_shown", "_reliable")):
            out[c] = (df[c].to_numpy(float), df[f"{c}_se"].to_numpy(float))
    out["tau1_hat"] = (df["tau1_hat"].to_numpy(float), df["tau1_hat_se"].to_numpy(float))
    return out


def estimator_stats(est, se, truth) -> dict:
    """Relative bias, relative sd, s.e./sd and the two-sided 99 % interval's coverage."""
    ok = np.isfinite(est) & np.isfinite(truth)
    if ok.sum() < 3:
        return {"rel_bias": math.nan, "rel_bias_mc": math.nan, "rel_sd": math.nan,
                "se_over_sd": math.nan, "cover99": math.nan, "given": float(ok.mean())}
    e, t = est[ok], truth[ok]
    err = e - t
    mt = float(np.mean(t))
    sd = float(np.std(err, ddof=1))
    out = {"rel_bias": float(np.mean(err) / mt) if mt > 0 else math.nan,
           # the Monte Carlo s.e. of rel_bias: how far the study's own finite number of samples
           # can move it (sd / √R over the mean truth)
           "rel_bias_mc": sd / (mt * math.sqrt(e.size)) if mt > 0 else math.nan,
           "rel_sd": sd / mt if mt > 0 else math.nan, "given": float(ok.mean()),
           "max_rel_err": float(np.max(np.abs(err) / np.maximum(t, 1e-300))) if mt > 0 else math.nan}
    if se is not None:
        s = se[ok]
        good = np.isfinite(s)
        out["se_over_sd"] = float(np.mean(s[good]) / sd) if sd > 0 and good.any() else math.nan
        out["cover99"] = float(np.mean(np.abs(err[good]) <= Z99 * s[good] + 1e-9)) if good.any() else math.nan
    else:
        out["se_over_sd"] = out["cover99"] = math.nan
    return out


def et_cell(df: pd.DataFrame) -> dict:
    E = df["matches"].to_numpy(float)
    tau = df["tau1"].to_numpy(float)
    out = {"median_n2": float(np.median(df["n2"])), "E_mean": float(np.mean(E)),
           "tau1_mean": float(np.mean(tau)), "n1_mean": float(np.mean(df["n1"])), "E": {}, "tau1": {}}
    for name, (est, se) in e_estimators(df).items():
        out["E"][name] = estimator_stats(est, se, E)
    for name, (est, se) in t_estimators(df).items():
        out["tau1"][name] = estimator_stats(est, se, tau)
    rel = df.get("tau1_hat_reliable")
    if rel is not None:
        relm = rel.fillna(False).astype(bool).to_numpy()
        est = df["tau1_hat"].to_numpy(float)
        out["tau1_hat_reliable"] = float(relm.mean())
        if relm.any():
            out["tau1_hat_reliable_max_rel_err"] = float(np.max(np.abs(est[relm] - tau[relm])
                                                                / np.maximum(tau[relm], 1)))
            mean_tau = float(np.mean(tau[relm]))      # 0: a relative bias is not defined
            out["tau1_hat_reliable_rel_bias"] = (float(np.mean(est[relm] - tau[relm])) / mean_tau
                                                 if mean_tau > 0 else math.nan)
    return out


# --- 3. ranking -------------------------------------------------------------------------------------
def expected_e(rows: pd.DataFrame) -> np.ndarray:
    """Each row's combination's E averaged over the study's other samples (leave-one-out, so a
    sample's own E is not in its score): the combination's expected E under the design, what an
    estimator of E aims at. NaN where the combination has a single sample."""
    tot = rows.groupby("order")["matches"].agg(["sum", "count"])
    own = rows["matches"].to_numpy(float)
    cnt = rows["order"].map(tot["count"]).to_numpy(float)
    rest = rows["order"].map(tot["sum"]).to_numpy(float) - own
    return np.where(cnt > 1, rest / np.maximum(cnt - 1, 1), np.nan)


def ranking(frame, pool, R, seed, sizes=(1, 2, 3), fraction=None) -> dict:
    from scipy.stats import spearmanr

    from gpurisk.scan.runner import rank_column, top_combinations
    combos = [list(c) for s in sizes for c in itertools.combinations(pool, s)]
    per = []
    for i, keys in enumerate(combos):
        d = replicates(frame, keys, [fraction or RANK_FRACTION], R, seed, variants=False)
        d["order"], d["size"], d["keys"] = i, len(keys), [keys] * len(d)
        per.append(d)
    allrows = pd.concat(per, ignore_index=True)
    allrows["expected_E"] = expected_e(allrows)
    res: dict[str, list] = {}
    top_n2_zero = []
    default_name = None
    for r, g in allrows.groupby("replicate"):
        g = g.reset_index(drop=True)
        tau = g["tau1"].to_numpy(float)
        E = g["matches"].to_numpy(float)
        if not (tau > 0).any():
            continue
        # the columns a scan of the sample file alone carries for these measures (not the truths
        # the study counts from the population: with them the scan ranks by the exact E), then the
        # scan's own ranking
        truths = [c for c in g.columns if c.split("_")[0] in ("matches", "tau1", "theta")
                  and c.split("_")[1:2] in ([], ["shown"], ["se"], ["upper"], ["reliable"])]
        scan_rows = g.drop(columns=truths).rename(columns={"theta_hat_shown": "theta_hat_view"})
        scan_rows = scan_rows.assign(theta_hat=g.get("theta_hat_shown", g["theta_hat"]))
        if "matches_hat" in g:
            scan_rows["matches_hat"] = g.get("matches_hat_shown", g["matches_hat"])
        default_name = rank_column(scan_rows)
        full = top_combinations(scan_rows, len(scan_rows))
        place = {o: k for k, o in enumerate(full["order"].to_numpy())}
        pos = -np.array([place[o] for o in g["order"].to_numpy()], float)   # higher = riskier
        th = g["theta_hat"].to_numpy(float)
        scores = {"default": pos,
                  "theta_hat": th,
                  "theta_hat*n1": th * g["n1"].to_numpy(float),     # none where θ̂ is not estimable
                  "theta_hat upper": g["theta_hat_upper"].to_numpy(float),
                  "tau1_hat": g["tau1_hat"].to_numpy(float),
                  "matches_ll": g["matches_ll"].to_numpy(float),
                  "tau1_ll": g["tau1_ll"].to_numpy(float),
                  "n1": g["n1"].to_numpy(float),
                  # not an estimator: what a ranking reaches knowing each sample's true E (the
                  # reference for the shares above; its E share is 100 % by construction)
                  "true E (oracle)": E,
                  # not an estimator either: each combination's expected E, with no knowledge of
                  # which records this sample drew (the other samples' mean E)
                  "expected E (oracle)": g["expected_E"].to_numpy(float)}
        for truth_name, truth in (("tau1", tau), ("E", E)):
            best = np.sort(truth)[::-1][:10].sum()
            for name, sc in scores.items():
                fin = np.isfinite(sc)
                low = (sc[fin].min() - 1.0) if fin.any() else 0.0
                s = np.where(fin, sc, low)                  # no value: last, as a scan ranks it
                rho = spearmanr(s, truth).statistic
                top = np.argsort(-s, kind="stable")[:10]
                key = name if truth_name == "tau1" else f"{name} vs E"
                res.setdefault(key, []).append((rho, truth[top].sum() / best))
        first = int(np.argmax(pos))
        top_n2_zero.append(int(g["n2"].iloc[first] == 0))
    out = {"default_rank_by": default_name, "combinations": len(combos), "fraction": fraction or RANK_FRACTION,
           "samples": len(top_n2_zero), "top_has_n2_zero": float(np.mean(top_n2_zero)) if top_n2_zero else math.nan}
    for name, vals in res.items():
        a = np.array(vals, float)
        out[name] = {"spearman_mean": float(np.nanmean(a[:, 0])), "spearman_min": float(np.nanmin(a[:, 0])),
                     "spearman_max": float(np.nanmax(a[:, 0])),
                     "top10_mean": float(np.mean(a[:, 1])), "top10_min": float(np.min(a[:, 1])),
                     # the Monte Carlo s.e. of top10_mean (sd over the samples / √R)
                     "top10_mc": (float(np.std(a[:, 1], ddof=1) / math.sqrt(len(a)))
                                  if len(a) > 1 else math.nan),
                     "top10_each": [float(x) for x in a[:, 1]]}
    return out


# --- printing ---------------------------------------------------------------------------------------
def print_et(rows):
    for what, truth in (("E", "E = Σ_{f=1} 1/F (expected correct matches)"),
                        ("tau1", "τ1 = #{f = 1, F = 1}")):
        print(f"\n4{'a' if what == 'E' else 'b'}. Estimators of {truth}: relative bias, relative sd, "
              "s.e./sd, coverage of ± 2.576 s.e. (two-sided 99 %)")
        print(f"{'population':<9} {'keys':<4} {'π':>5} {'med n2':>6} {'truth':>8} {'estimator':<28} "
              f"{'rel bias %':>10} {'± MC':>5} {'rel sd %':>8} {'ŝe/sd':>6} {'cover %':>7} {'given %':>7}")
        for r in rows:
            for name, x in r[what].items():
                print(f"{r['population']:<9} {r['keyset']:<4} {r['fraction']:>5g} "
                      f"{f(r['median_n2']):>6} {f(r[what + '_mean' if what == 'E' else 'tau1_mean']):>8} "
                      f"{name:<28.28} {pct(x['rel_bias']):>10} {pct(x.get('rel_bias_mc', math.nan)):>5} "
                      f"{pct(x['rel_sd']):>8} "
                      f"{f(x['se_over_sd'], 2):>6} {pct(x.get('cover99', math.nan)):>7} "
                      f"{pct(x['given']):>7}")
        names = sorted({k for r in rows for k in r[what]})
        print("   summary over the cells with median n2 ≥ 10 (the issue's target: |rel bias| ≤ 10 %, "
              "coverage ≥ 98 %):")
        for name in names:
            g = [r[what][name] for r in rows if r["median_n2"] >= 10 and name in r[what]]
            if not g:
                continue
            rb = np.array([x["rel_bias"] for x in g], float)
            mc = np.array([x.get("rel_bias_mc", math.nan) for x in g], float)
            cv = np.array([x.get("cover99", math.nan) for x in g], float)
            # a miss the study's own sampling cannot explain: beyond 10 % by more than 2 MC s.e.
            clear = int(np.sum(np.abs(rb) - 0.1 > 2.0 * mc))
            print(f"     {name:<28} {len(g):>3} cells: |rel bias| ≤ 10 % in {int(np.sum(np.abs(rb) <= 0.1))} "
                  f"(beyond 10 % by more than 2 Monte Carlo s.e.: {clear}), "
                  f"median |rel bias| {pct(float(np.nanmedian(np.abs(rb))))} %, worst "
                  f"{pct(float(rb[np.nanargmax(np.abs(rb))]) if np.isfinite(rb).any() else math.nan)} %; "
                  f"coverage ≥ 98 % in {int(np.sum(cv >= 0.98))}, median "
                  f"{pct(float(np.nanmedian(cv)) if np.isfinite(cv).any() else math.nan)} %")
    rel = [r for r in rows if r.get("tau1_hat_reliable", 0) > 0]
    print(f"   tau1_hat marked reliable in {len(rel)} cells; largest per-sample relative error there: "
          f"{pct(max([r['tau1_hat_reliable_max_rel_err'] for r in rel], default=math.nan))} %; "
          f"largest |rel bias| among the reliable samples of a cell: "
          f"{pct(_nanmax([abs(r['tau1_hat_reliable_rel_bias']) for r in rel]))} %")


def _nanmax(values) -> float:
    """The largest of ``values`` that is a number (NaN where none is)."""
    got = [v for v in values if math.isfinite(v)]
    return max(got) if got else math.nan


def f(v, d=3):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if isinstance(v, float):
        if abs(v) >= 1e4:
            return f"{v:.3g}"
        return f"{v:.{d}g}"
    return str(v)


def pct(v):
    return "—" if v is None or not math.isfinite(v) else f"{100 * v:.1f}"


def print_theta(rows):
    print("\n1. θ̂ against θ (99 % upper bounds; coverage = % of samples with θ ≤ bound)")
    hdr = (f"{'population':<9} {'keys':<4} {'π':>5} {'med n2':>7} {'n2=0 %':>7} {'n.e. %':>7} "
           f"{'θ mean':>8} {'bias/sd':>8} {'v̂½/sd':>7} {'Wald %':>7} {'log %':>7} "
           f"{'default %':>9} {'max Wald':>9} {'max shown':>9} {'shown∉[0,1]':>11}")
    print(hdr)
    for r in rows:
        print(f"{r['population']:<9} {r['keyset']:<4} {r['fraction']:>5g} {f(r['median_n2']):>7} "
              f"{pct(r['n2_zero']):>7} {pct(r['not_estimable']):>7} {f(r['theta_mean']):>8} "
              f"{f(r['bias_over_sd'], 2):>8} {f(r['se_over_sd'], 3):>7} {pct(r['cover_wald']):>7} "
              f"{pct(r['cover_log']):>7} {pct(r['cover_default']):>9} {f(r['wald_max']):>9} "
              f"{f(r['default_max']):>9} {r['default_outside_01']:>11}")
    print("   n2=0: samples with no sample pair; n.e.: θ̂ not reported (not estimable); bias/sd and "
          "v̂½/sd over the samples where θ̂ is reported; default = the bound theta_hat reports")
    bad = [r for r in rows if np.isfinite(r["bias_over_sd"]) and not (
        abs(r["bias_over_sd"]) < 0.25 and 0.8 <= r["se_over_sd"] <= 1.2)]
    print(f"   cells failing |bias| < 0.25 sd or 0.8 ≤ v̂½/sd ≤ 1.2: {len(bad)} of "
          f"{sum(np.isfinite(r['bias_over_sd']) for r in rows)}")
    print("   coverage pooled by median n2:")
    for lo, hi in ((0, 10), (10, 20), (20, math.inf)):
        g = [r for r in rows if lo <= r["median_n2"] < hi]
        if not g:
            continue
        w = np.array([r["samples"] for r in g], float)
        cov = {k: float(np.nansum([r[k] * s for r, s in zip(g, w)]) / w.sum())
               for k in ("cover_wald", "cover_log")}
        wd = np.array([r["samples"] * r["default_given"] for r in g])
        cd = float(np.nansum([r["cover_default"] * s for r, s in zip(g, wd)]) / wd.sum()) if wd.sum() else math.nan
        label = f"{lo}–{hi - 1:g}" if math.isfinite(hi) else f"≥ {lo}"
        print(f"     median n2 {label:<6} ({len(g):>2} cells): Wald {pct(cov['cover_wald'])} %, "
              f"log {pct(cov['cover_log'])} %, default {pct(cd)} %")


def print_tau(rows):
    print("\n2. τ̂1 against τ1 (the estimator's own value, also where the measure withholds it)")
    print(f"{'population':<9} {'keys':<4} {'π':>5} {'λ':>5} {'ln n':>5} {'τ1 mean':>8} {'rel bias':>9} "
          f"{'NMSE':>9} {'sd':>9} {'ŝe/sd':>6} {'<0 %':>6} {'>n1 %':>6} {'shown∉[0,n1]':>12} "
          f"{'reliable %':>10} {'rel. bias | reliable':>20} {'NMSE | reliable':>15}")
    for r in rows:
        print(f"{r['population']:<9} {r['keyset']:<4} {r['fraction']:>5g} {f(r['lambda']):>5} "
              f"{f(r['log_n']):>5} {f(r['tau1_mean']):>8} {pct(r['rel_bias']):>8}% {f(r['nmse']):>9} "
              f"{f(r['sd']):>9} {f(r['se_over_sd'], 2):>6} {pct(r['negative']):>6} "
              f"{pct(r['above_n1']):>6} {r['shown_outside']:>12} {pct(r['reliable']):>10} "
              f"{pct(r.get('reliable_rel_bias', math.nan)):>19}% {f(r.get('reliable_nmse', math.nan)):>15}")
    print("   by λ (one group per π):")
    for frac in sorted({r["fraction"] for r in rows}, reverse=True):
        g = [r for r in rows if r["fraction"] == frac]
        lam = float(np.mean([r["lambda"] for r in g]))
        rb = [r["rel_bias"] for r in g if np.isfinite(r["rel_bias"])]
        print(f"     λ ≈ {lam:>3.0f}: {len(g)} cells; |rel bias| median {pct(float(np.median(np.abs(rb))) if rb else math.nan)} %, "
              f"range {pct(min(rb) if rb else math.nan)}..{pct(max(rb) if rb else math.nan)} %; NMSE median "
              f"{f(float(np.median([r['nmse'] for r in g])))}, max {f(max(r['nmse'] for r in g))}; "
              f"cells with |rel bias| < 25 % and NMSE < 0.1: "
              f"{sum(abs(r['rel_bias']) < 0.25 and r['nmse'] < 0.1 for r in g if np.isfinite(r['rel_bias']))}; "
              f"reliable share {pct(float(np.mean([r['reliable'] for r in g])))} %")
    flagged = [r for r in rows if r["reliable"] > 0]
    badflag = [r for r in flagged if not (abs(r.get("reliable_rel_bias", math.inf)) < 0.25
                                          and r.get("reliable_nmse", math.inf) < 0.1)]
    print(f"   cells with any sample marked reliable: {len(flagged)}; of those failing |rel bias| < 25 % "
          f"or NMSE < 0.1 among the reliable samples: {len(badflag)}")


def print_rank(results):
    fr = next(iter(results.values()))["fraction"] if results else RANK_FRACTION
    print(f"\n3. Ranking the combinations of 1–3 keys of a pool of six, π = {fr:g}, "
          "against the truth τ1 and the truth E")
    print(f"{'population':<9} {'ranking':<22} {'Spearman mean':>13} {'range':>13} "
          f"{'top-10 share %':>14} {'± MC':>5} {'min %':>6}")
    names = ("default", "theta_hat", "theta_hat*n1", "theta_hat upper", "tau1_hat", "matches_ll",
             "tau1_ll", "n1", "true E (oracle)", "expected E (oracle)")
    for pop, r in results.items():
        for name in names + tuple(f"{x} vs E" for x in names):
            if name not in r:
                continue
            x = r[name]
            label = (f"default ({r['default_rank_by']})" + name[7:]) if name.startswith("default") else name
            print(f"{pop:<9} {label:<22.28} {f(x['spearman_mean'], 2):>13} "
                  f"{f(x['spearman_min'], 2) + '..' + f(x['spearman_max'], 2):>13} "
                  f"{pct(x['top10_mean']):>14} {pct(x.get('top10_mc', math.nan)):>5} "
                  f"{pct(x['top10_min']):>6}")
        print(f"{pop:<9} {r['combinations']} combinations, {r['samples']} samples; the default's top "
              f"combination has n2 = 0 in {pct(r['top_has_n2_zero'])} % of them")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=20,
                    help="samples per (population, key set, π) (the issue: 200)")
    ap.add_argument("--rank-replicates", type=int, default=5,
                    help="samples per population for the ranking (the issue: 100); 0 skips it")
    ap.add_argument("--only", default=None,
                    help=f"comma-separated populations of {', '.join(POPULATIONS)}, or all "
                         f"(default: {', '.join(DEFAULT)})")
    ap.add_argument("--population", action="append", default=[], metavar="FILE:K1,K2,...[;K1,...]",
                    help="another population file with its key sets (';' between sets); the first "
                         "set's keys are also its ranking pool (repeatable)")
    ap.add_argument("--fractions", default=",".join(map(str, FRACTIONS)))
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--rank-fraction", type=float, default=0.01,
                    help="π of the ranking study (the issue's target is at 1 %%)")
    ap.add_argument("--no-theta", action="store_true", help="skip sections 1-2 (θ̂, τ̂1 alone)")
    ap.add_argument("--variants", default=",".join(RUN_VARIANTS),
                    help=f"log-linear variants run beside the default, of {', '.join(LL_VARIANTS)} "
                         "('' for none)")
    ap.add_argument("--keysets", default=None,
                    help="which key sets of each population, e.g. S,M (default: all)")
    ap.add_argument("--n1-replicates", type=int, default=0,
                    help="samples per (key set, π) for section 5, N̂1 against N1 (needs the "
                         "gpurisk-arx plugin; 0 skips it; issue 27's study: 40)")
    ap.add_argument("--n1-estimators", default=None,
                    help=f"section 5's estimators, comma-separated, of {', '.join(_trust_n1.N1_ESTIMATORS)} "
                         "(default: all)")
    ap.add_argument("--replicates-csv", default=None,
                    help="also write every replicate's numbers (for recalibrating) to this CSV")
    ap.add_argument("--json", default=str(OUT / "validate_trust.json"), help="write every number here")
    a = ap.parse_args(argv)
    RUN_VARIANTS[:] = [v for v in a.variants.split(",") if v]
    if a.n1_estimators:
        keep = a.n1_estimators.split(",")
        for k in list(_trust_n1.N1_ESTIMATORS):
            if k not in keep:
                del _trust_n1.N1_ESTIMATORS[k]
    for v in RUN_VARIANTS:
        if v not in LL_VARIANTS:
            raise SystemExit(f"unknown variant {v!r}: one of {', '.join(LL_VARIANTS)}")
    fractions = [float(x) for x in a.fractions.split(",")]
    pops = {}
    data = find_data()
    names = a.only.split(",") if a.only else (list(DEFAULT) if not a.population else [])
    if names == ["all"]:            # every population: the five and the development ones
        names = list(POPULATIONS)
    for name in names:
        if name not in POPULATIONS:
            raise SystemExit(f"unknown population {name!r}: one of {', '.join(POPULATIONS)}")
        path, sep, sets, pool = POPULATIONS[name]
        if data is None or not (data / path).exists():
            print(f"skipped {name}: {path} not found under shared/data")
            continue
        pops[name] = (data / path, sep, sets, pool)
    for spec in a.population:
        path, _, keys = spec.partition(":")
        sets = [s.split(",") for s in keys.split(";") if s]
        if not sets:
            raise SystemExit(f"--population {spec!r}: name its key sets, FILE:K1,K2;K1,K2,K3")
        pops[Path(path).stem] = (Path(path), None, sets, sets[-1])
    if a.n1_replicates > 0 and (why := _trust_n1.available()):
        raise SystemExit(f"--n1-replicates: {why}")
    t0 = time.perf_counter()
    theta_rows, tau_rows, et_rows, rank, allreps, n1_rows = [], [], [], {}, [], []
    for name, (path, sep, sets, pool) in pops.items():
        frame = load(path, sep)
        for si, keys in enumerate(sets):
            label = "SML"[si] if len(sets) == 3 else str(si + 1)
            if a.keysets and label not in a.keysets.split(","):
                continue
            df = replicates(frame, keys, fractions, a.replicates, a.seed)
            for frac, g in df.groupby("fraction"):
                tag = {"population": name, "keyset": "SML"[si] if len(sets) == 3 else str(si + 1),
                       "keys": keys, "fraction": float(frac)}
                theta_rows.append(tag | theta_cell(g))
                tau_rows.append(tag | tau_cell(g))
                et_rows.append(tag | et_cell(g))
            if a.replicates_csv:
                allreps.append(df.assign(population=name, keyset=si))
            if a.n1_replicates > 0:
                n1_rows += _trust_n1.n1_rows(
                    _trust_n1.n1_replicates(frame, keys, fractions, a.n1_replicates, a.seed),
                    {"population": name, "keyset": label, "keys": keys})
        if a.rank_replicates > 0:
            rank[name] = ranking(frame, pool, a.rank_replicates, a.seed, fraction=a.rank_fraction)
        print(f"[{name}: done at {time.perf_counter() - t0:.0f} s]", flush=True)
    print(f"\nissue 21 validation: {', '.join(pops)}; {a.replicates} Bernoulli samples per "
          f"(key set, π); seed {a.seed}")
    for name, (path, sep, sets, pool) in pops.items():
        print(f"  {name}: " + "; ".join(f"{'SML'[i] if len(sets) == 3 else i + 1} = {','.join(k)}"
                                       for i, k in enumerate(sets)))
    if not a.no_theta:
        print_theta(theta_rows)
        print_tau(tau_rows)
    print_et(et_rows)
    if a.replicates_csv and allreps:
        pd.concat(allreps, ignore_index=True).to_csv(a.replicates_csv, index=False)
    if rank:
        print_rank(rank)
    _trust_n1.print_n1(n1_rows)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"theta": theta_rows, "tau1": tau_rows, "ranking": rank,
                                            "estimators": et_rows, "n1": n1_rows,
                                            "n1_replicates": a.n1_replicates,
                                            "replicates": a.replicates,
                                            "rank_replicates": a.rank_replicates, "seed": a.seed},
                                           indent=1, default=str))


if __name__ == "__main__":
    main()
