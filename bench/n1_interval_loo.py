"""N̂1's relative model error chosen and scored leave-one-population-out (issue 43).

The log-linear N̂1 (``pop_uniqueness``, gpurisk-arx's ``loglinear_n1``) adds a relative model
error (``MODEL_ERROR`` · N̂1)² to its s.e., which neither the process variance nor the fit's sees.
This script draws Bernoulli samples of every population of bench/validate_trust.py (its three key
sets each, π = 5 and 10 %), runs ``pop_uniqueness`` as a user would (``gpurisk.assess`` at
π = n/N) and keeps each sample's N̂1, its s.e. without the model error, the part of its empty
cells in combinations holding an unseen pair of a kept interaction, and the true N1. Then, for
each model error c on a grid, it rebuilds the measure's two-sided interval at ``--level``
(:func:`interval`, by ``loglinear_n1.interval_ends`` as ``fit`` does: N̂1 · exp(± z s.e./N̂1), the
lower end also that of N̂1 without the unseen pairs' part, ends rounded outward to whole people)
and counts how often it holds N1.

The rule (:func:`choose`): the smallest c on the grid at which the intervals hold N1 in at least
``--level`` of the samples, pooled over the cells with N1 > 0: the interval's nominal level, no
more. Leave one population out: the rule is applied to the other populations' samples and the
chosen c scored on the one left out (cells whose interval held N1 in ≥ 90 % of its samples, and
the pooled coverage); then the rule on all of them gives the constant.

    python bench/n1_interval_loo.py --replicates 40 --seeds 43,44 --csv /tmp/n1.csv
    python bench/n1_interval_loo.py --from-csv /tmp/n1.csv
"""
from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_trust import POPULATIONS, find_data, load  # noqa: E402

GRID = (0.0, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.4)


def samples(names, replicates: int, seeds, fractions) -> pd.DataFrame:
    """One row per sample: population, key set, π, N1, N̂1, its s.e. without the model error
    (``se0``), the unseen pairs' part, the sample's own bounds on N1 and the measure's interval
    at the default level (to check :func:`interval` against)."""
    import gpurisk
    rows, t0 = [], time.perf_counter()
    for name in names:
        path, sep, sets, _ = POPULATIONS[name]
        data = find_data()
        if data is None or not (data / path).exists():
            print(f"skipped {name}: {path} not found under shared/data")
            continue
        frame = load(data / path, sep)
        for ks, keys in enumerate(sets):
            n1_true = int((frame.groupby(keys, dropna=False).size() == 1).sum())
            for frac in fractions:
                for seed in seeds:
                    rng = np.random.default_rng([seed, ks, int(round(frac * 1000))])
                    for r in range(replicates):
                        s = frame[rng.random(len(frame)) < frac]
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            m = gpurisk.assess(s, keys, fraction=len(s) / len(frame),
                                               measures=["pop_uniqueness"]).measures["pop_uniqueness"]
                        e = m.extra
                        p = f"{e.get('model')}_"
                        if m.value is None or m.se is None or f"{p}model_error" not in e:
                            continue      # no value, or n1 = 0 (a model-free interval: no s.e.)
                        c = e[f"{p}model_error"]
                        se0 = math.sqrt(max(m.se ** 2 - (c * m.value) ** 2, 0.0))
                        rows.append({"population": name, "keyset": "SML"[ks], "fraction": frac,
                                     "seed": seed, "replicate": r, "N1": n1_true,
                                     "value": m.value, "se": m.se, "se0": se0, "model_error": c,
                                     "open": e.get(f"{p}unseen_pairs_part", 0.0),
                                     "n": len(s), "N": len(frame), "n1": e["n1"],
                                     "interval_lower": e["interval_lower"],
                                     "interval_upper": e["interval_upper"],
                                     "interval_level": e["interval_level"]})
        print(f"[{name}: done at {time.perf_counter() - t0:.0f} s]", flush=True)
    return pd.DataFrame(rows)


def interval(d: pd.DataFrame, c: float, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The measure's two-sided interval at ``level`` with model error ``c``
    (``gpurisk_arx.loglinear_n1.interval_ends``, what ``fit`` reports), for every row of
    :func:`samples`."""
    from gpurisk_arx.loglinear_n1 import interval_ends
    from gpurisk_arx.uniqueness import sample
    from scipy.stats import norm
    z = float(norm.ppf(0.5 + level / 2.0))
    lo, hi = np.empty(len(d)), np.empty(len(d))
    for i, r in enumerate(d.itertuples()):
        rest = int(r.n - r.n1)          # only n1, n and N matter to the bounds: the sample's
        Z = np.zeros(max(2, rest + 1), dtype=np.int64)   # other records as one class
        Z[1] = int(r.n1)
        if rest >= 2:
            Z[rest] = 1
        se = math.sqrt(r.se0 ** 2 + (c * r.value) ** 2)
        lo[i], hi[i] = interval_ends(r.value, se, z, r.open, sample(Z, r.N))
    return lo, hi


def coverage(d: pd.DataFrame, grid, level: float) -> dict:
    """Per model error on ``grid``: whether each row's interval holds N1."""
    out = {}
    for c in grid:
        lo, hi = interval(d, c, level)
        out[c] = (lo <= d["N1"].to_numpy()) & (d["N1"].to_numpy() <= hi)
    return out


def choose(cover: dict, mask: np.ndarray, level: float) -> float:
    """The smallest model error whose intervals hold N1 in ≥ ``level`` of the rows in ``mask``
    (the grid's largest where none does)."""
    grid = sorted(cover)
    return next((c for c in grid if cover[c][mask].mean() >= level), grid[-1])


def cells_held(d: pd.DataFrame, held: np.ndarray, mask: np.ndarray) -> tuple[int, int]:
    """(cells whose interval held N1 in ≥ 90 % of their samples, cells), over the rows in ``mask``."""
    key = (d["population"] + ":" + d["keyset"] + ":" + d["fraction"].astype(str)).to_numpy()
    share = pd.Series(held[mask]).groupby(key[mask]).mean()
    return int((share >= 0.9).sum()), int(share.size)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicates", type=int, default=40, help="samples a cell per seed")
    ap.add_argument("--seeds", default="43,44")
    ap.add_argument("--fractions", default="0.05,0.1")
    ap.add_argument("--only", default=None, help="populations, comma-separated (default: all)")
    ap.add_argument("--level", type=float, default=0.95, help="the interval's level and the rule's")
    ap.add_argument("--csv", default=None, help="write the samples' rows here")
    ap.add_argument("--from-csv", default=None, help="read the samples' rows from here instead")
    a = ap.parse_args(argv)
    if a.from_csv:
        d = pd.read_csv(a.from_csv)
    else:
        names = a.only.split(",") if a.only else list(POPULATIONS)
        d = samples(names, a.replicates, [int(s) for s in a.seeds.split(",")],
                    [float(x) for x in a.fractions.split(",")])
        if a.csv:
            d.to_csv(a.csv, index=False)
    d = d[d["N1"] > 0].reset_index(drop=True)
    cover = coverage(d, GRID, a.level)
    every = np.ones(len(d), dtype=bool)
    print(f"{len(d)} samples, {cells_held(d, cover[GRID[0]], every)[1]} cells with N1 > 0; the "
          f"two-sided {a.level:.0%} interval with model error c:")
    print(f"{'c':>6} {'cells held ≥ 90 %':>18} {'pooled coverage':>16}")
    for c in GRID:
        k, n = cells_held(d, cover[c], every)
        print(f"{c:>6g} {f'{k} of {n}':>18} {cover[c].mean():>16.3f}")
    print(f"\nleave one population out: c = the smallest whose intervals hold N1 in ≥ {a.level:.0%} "
          "of the other populations' samples")
    pops = d["population"].to_numpy()
    got, total, held = 0, 0, []
    for p in sorted(set(pops)):
        out = pops == p
        c = choose(cover, ~out, a.level)
        k, n = cells_held(d, cover[c], out)
        got, total = got + k, total + n
        held.append(cover[c][out])
        print(f"  {p:<13} c = {c:<6g} held out: {k} of {n} cells ≥ 90 %, pooled {cover[c][out].mean():.3f}")
    print(f"  held out, all: {got} of {total} cells, pooled {np.concatenate(held).mean():.3f}")
    print(f"the rule on every population: c = {choose(cover, every, a.level):g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
