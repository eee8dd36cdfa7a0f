"""Key sets nobody chose: does any estimate break, and how far do the bounds hold?

Issue 43's study (bench/validate_trust.py) scores three fixed key sets a population; an office
picks its own. This sweep draws key sets at random from each population's columns (those with at
most ``--max-levels`` distinct values; 1 to ``--max-keys`` keys), a sampling fraction from
``--fractions`` and one Bernoulli sample of the records, case after case until ``--cases`` cases or
``--seconds`` have passed. Each estimator of ``--measures`` runs as a user runs it
(``gpurisk.assess`` of the sample at fraction π) and its truth is counted from the population
(``assess`` of the population with the sample flagged). Every estimate is checked for

- an exception (its type and message; a one-line refusal, ``BadInput``, is counted apart),
- an estimate with neither a value nor a reason,
- an s.e. that is not a number or below 0, an upper bound below the estimate,
- Ê or τ̂1 outside [0, n1].

Then, per estimator, the share of samples whose one-sided 99 % upper bound holds the truth and the
median relative error (estimate / truth − 1), by the truth's size, by π, and by the share of the
sample uniques that hold, in some key, a category no other sample record has (where the model can
only guess how that category spreads over the other keys). One sample a case: these shares pool
the cases; no case's own coverage is measured (the study's cells do that). Exit status 1 where any
case broke.

    python bench/sweep_keysets.py --cases 300 --seed 1
    python bench/sweep_keysets.py --seconds 600 --fractions 0.002,0.01,0.03,0.1,0.3,0.7 --out c.jsonl
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
import warnings

import numpy as np
import pandas as pd

import gpurisk
from gpurisk.errors import BadInput
from gpurisk.models import lone_uniques
from validate_trust import POPULATIONS, find_data

#: the estimators checked by default (each measure's ``estimates`` names its truth)
MEASURES = ("matches_ll", "tau1_ll")
#: Ê and τ̂1 lie in [0, n1]
IN_N1 = ("matches_ll", "tau1_ll")
BANDS = (0.0, 1.0, 10.0, 100.0, math.inf)
#: the share of sample uniques holding a category no other sample record has, in bands
RARE_BANDS = (0.0, 0.1, 0.3, 0.7, 1.0)
#: the sample flag's column in the population frame given to assess for the truths
FLAG = "_sweep_in_sample"


def problems(rows: dict, n1: int) -> list[str]:
    """What is wrong with one case's estimates (``rows``: measure ↦ value, se, upper, truth, reason)."""
    out = []
    for m, (x, se, up, truth, why) in rows.items():
        if truth is None and m not in IN_N1:
            continue                           # a truth itself, or a measure without one
        if x is None:
            if not why:
                out.append(f"{m}: no value and no reason")
            continue
        if not math.isfinite(x):
            out.append(f"{m}: value {x}")
        elif m in IN_N1 and not -1e-9 <= x <= n1 + 1e-9:
            out.append(f"{m}: {x:.4g} outside [0, n1 = {n1}]")
        if se is not None and not (math.isfinite(se) and se >= 0):
            out.append(f"{m}: s.e. {se}")
        if up is not None and up < x - 1e-9 * max(1.0, abs(x)):
            out.append(f"{m}: upper bound {up:.6g} below the estimate {x:.6g}")
    return out


def one_case(frame, keys, pi, seed, measures) -> dict:
    """One Bernoulli sample of ``frame``'s records at ``pi``: each estimate of ``measures`` as a
    user gets it (``gpurisk.assess`` of the sample at fraction π), its truth (``assess`` of the
    population with the sample flagged: the counted value of the quantity it estimates), what is
    wrong, and the share of the sample uniques holding, in some key, a category no other sample
    record has (``rare``: :func:`gpurisk.models.lone_uniques` over n1)."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    truths = {m: reg[m].cls.estimates for m in measures if reg[m].cls.estimates in reg}
    insample = np.random.default_rng(seed).random(len(frame)) < pi
    sample = frame.loc[insample, keys].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = gpurisk.assess(sample, keys=keys, fraction=pi, measures=list(measures),
                             allow_high_cardinality=True)
        register = frame[keys].assign(**{FLAG: insample})
        true = gpurisk.assess(register, keys=keys, sample_flag=FLAG,
                              measures=sorted(set(truths.values())), allow_high_cardinality=True)

    def num(x):
        return None if x is None or pd.isna(x) else float(x)
    rows = {}
    for m in measures:
        r = est.measures[m]
        t = true.measures[truths[m]].value if m in truths else None
        rows[m] = [num(r.value), num(r.se), num(r.upper), num(t),
                   None if not r.reason else str(r.reason)]
    n1 = int(est.table.n_r(1))
    return {"n": int(est.table.n), "n1": n1, "rows": rows, "problems": problems(rows, n1),
            "rare": lone_uniques(est.table) / n1 if n1 else 0.0}


def summary(cases: list[dict], measures) -> str:
    """The table: per estimator, bound coverage and median relative error by truth band and π."""
    lines = []
    broke = [c for c in cases if c.get("error") or c.get("problems")]
    lines.append(f"{len(cases)} cases, {sum(1 for c in cases if c.get('error'))} raised, "
                 f"{sum(1 for c in cases if c.get('problems'))} with a broken estimate")
    refused = [c for c in cases if c.get("refused")]
    if refused:
        lines.append(f"  ({len(refused)} refused with a one-line error, as designed: "
                     f"{refused[0]['refused']})")
    for c in broke[:20]:
        what = c.get("error") or "; ".join(c["problems"])
        lines.append(f"  {c['population']} {','.join(c['keys'])} π={c['pi']:g} seed {c['seed']}: "
                     f"{what}")
    recs = []
    for c in cases:
        for m, (x, _, up, truth, _) in c.get("rows", {}).items():
            if m in measures and truth is not None and x is not None and up is not None:
                recs.append((m, c["pi"], truth, x, up, c.get("rare", 0.0)))
    if not recs:
        return "\n".join(lines)
    d = pd.DataFrame(recs, columns=["measure", "pi", "truth", "estimate", "upper", "rare"])
    d["holds"] = d.upper >= d.truth - 1e-9 * np.maximum(1.0, d.truth.abs())
    d["rel"] = np.where(d.truth > 0, d.estimate / d.truth.where(d.truth > 0, 1.0) - 1.0, np.nan)
    d["band"] = pd.cut(d.truth, list(BANDS), right=False,
                       labels=[f"[{a:g}, {b:g})" for a, b in zip(BANDS[:-1], BANDS[1:])])
    for m, g in d.groupby("measure"):
        lines.append(f"\n{m}: the one-sided 99 % upper bound holds the truth in "
                     f"{g.holds.mean():.1%} of {len(g)} samples")
        lines.append(f"  {'truth':<14}{'samples':>8}{'bound holds':>13}{'median rel. error':>19}")
        for band, b in g.groupby("band", observed=True):
            med = b.rel.median()
            lines.append(f"  {str(band):<14}{len(b):>8}{b.holds.mean():>13.1%}"
                         f"{'' if pd.isna(med) else format(med, '+.1%'):>19}")
        lines.append(f"  {'π':<14}{'samples':>8}{'bound holds':>13}  (truth ≥ 1)")
        for pi, b in g[g.truth >= 1].groupby("pi"):
            lines.append(f"  {pi:<14g}{len(b):>8}{b.holds.mean():>13.1%}")
        lines.append(f"  {'rare share':<14}{'samples':>8}{'bound holds':>13}"
                     f"{'median rel. error':>19}  (truth ≥ 1; the share of uniques holding a "
                     "category no other sample record has)")
        big = g[g.truth >= 1]
        rb = pd.cut(big.rare, list(RARE_BANDS), include_lowest=True,
                    labels=[f"[{a:g}, {b:g}]" if a == 0 else f"({a:g}, {b:g}]"
                            for a, b in zip(RARE_BANDS[:-1], RARE_BANDS[1:])])
        for band, b in big.groupby(rb, observed=True):
            lines.append(f"  {str(band):<14}{len(b):>8}{b.holds.mean():>13.1%}"
                         f"{b.rel.median():>+19.1%}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=300, help="stop after this many cases")
    ap.add_argument("--seconds", type=float, default=math.inf, help="or after this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fractions", default="0.01,0.05,0.1")
    ap.add_argument("--max-keys", type=int, default=9)
    ap.add_argument("--max-levels", type=int, default=500,
                    help="columns with more distinct values are not drawn as keys")
    ap.add_argument("--only", default=None, help="comma-separated populations (default: all)")
    ap.add_argument("--measures", default=",".join(MEASURES),
                    help="estimators checked (pop_uniqueness needs the gpurisk-arx plugin)")
    ap.add_argument("--out", default=None, help="write every case to this JSONL file")
    a = ap.parse_args(argv)
    data = find_data()
    if data is None:
        print("no shared data found", file=sys.stderr)
        return 2
    names = a.only.split(",") if a.only else list(POPULATIONS)
    frames = {}
    for name in names:
        if name not in POPULATIONS:
            print(f"unknown population {name!r}: one of {', '.join(POPULATIONS)}", file=sys.stderr)
            return 2
        path, sep, _, _ = POPULATIONS[name]
        if (data / path).exists():
            frames[name] = pd.read_csv(data / path, sep=sep)
    fractions = [float(x) for x in a.fractions.split(",")]
    measures = [m for m in a.measures.split(",") if m]
    rng = random.Random(a.seed)
    columns = {name: [c for c in f.columns if f[c].nunique(dropna=False) <= a.max_levels]
               for name, f in frames.items()}
    out = open(a.out, "w") if a.out else None
    cases, end = [], time.monotonic() + a.seconds
    while len(cases) < a.cases and time.monotonic() < end:
        name = rng.choice(sorted(frames))
        cols = columns[name]
        keys = rng.sample(cols, rng.randint(1, min(a.max_keys, len(cols))))
        case = {"population": name, "keys": keys, "pi": rng.choice(fractions),
                "seed": rng.randrange(10 ** 6)}
        t = time.perf_counter()
        try:
            case |= one_case(frames[name], keys, case["pi"], case["seed"], measures)
        except BadInput as exc:           # a one-line refusal, as designed (a key missing in
            case["refused"] = str(exc)[:300]      # every sample record, an empty sample)
        except Exception as exc:          # noqa: BLE001  (what broke is the finding)
            case["error"] = f"{type(exc).__name__}: {exc}"[:300]
        case["seconds"] = round(time.perf_counter() - t, 3)
        cases.append(case)
        if out:
            out.write(json.dumps(case) + "\n")
            out.flush()
    if out:
        out.close()
    print(summary(cases, measures))
    secs = [c["seconds"] for c in cases]
    print(f"\n{len(cases)} cases in {sum(secs):.0f} s; the slowest {max(secs, default=0):.2f} s")
    return 1 if any(c.get("error") or c.get("problems") for c in cases) else 0


if __name__ == "__main__":
    sys.exit(main())
