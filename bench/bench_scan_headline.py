"""What Ê (matches_ll) and τ̂1 (tau1_ll) cost a scan, before and after making them cheap.

A scan runs ``matches_ll`` and ``tau1_ll`` for every combination by default (the ranking is by Ê).
For FARS (8 keys, every one of the 255 combinations, π = 1 %) and Adult (8 keys, all 255, π = 1 %)
this times ``gpurisk.scan`` (one thread: ``threads=0``; no output file) with

- ``default``: the default measures, with this version's log-linear code;
- ``default, before``: the same with the code it replaced (kept below as the obvious alternative:
  Ei by ``scipy.special.expi``, the cells' codes by ``FreqTable.cell_codes`` (integer
  division), the dispersion's sums over copies of the sampled cells);
- ``without Ê, τ̂1``: the default measures minus matches_ll and tau1_ll.

and checks that the rows of ``default`` and ``default, before`` agree: every column equal, except the
matches_ll s.e. columns (the variance of 1/F takes Ei from ``shichi`` on [1, 40]), whose largest
relative difference is printed (it must be at most 1e-12). Best of ``--repeat`` runs; the machine's
load average is printed beside the table (a shared machine: compare numbers of the same run).

    python bench/bench_scan_headline.py                 # FARS and Adult, best of 5
    python bench/bench_scan_headline.py --repeat 3 --datasets fars
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GPURISK_DISABLE_PLUGIN_AUTOLOAD", "1")

import gpurisk  # noqa: E402
import gpurisk.measures._ll_poisson as LL  # noqa: E402
from gpurisk.scan.runner import SCAN_HEADLINE, _measure_names  # noqa: E402
from gpurisk.xp import scalar, to_host  # noqa: E402


# --- the code this version replaced (gpurisk.measures._ll_poisson before the change) ---------------
def old_inverse_terms(m):
    m = np.asarray(m, dtype=np.float64)
    small = m < 1e-6
    big = m > 600.0
    mid = ~small & ~big
    e1 = np.empty_like(m)
    e2 = np.empty_like(m)
    e1[small] = 1.0 - m[small] / 2.0 + m[small] ** 2 / 6.0
    e2[small] = 1.0 - 3.0 * m[small] / 4.0
    mm = m[~small]
    e1[~small] = -np.expm1(-mm) / mm
    if mid.any():
        from scipy.special import expi
        x = m[mid]
        e2[mid] = np.exp(-x) * (expi(x) - LL._EULER - np.log(x)) / x
    if big.any():
        x = m[big]
        e2[big] = sum(math.factorial(k) / x**k for k in range(8)) / (x * x)
    return e1, np.maximum(e2 - e1 * e1, 0.0)


def old_dispersion_moment(table, mu_all, sum_mu2) -> float:
    f = np.asarray(to_host(table.f), dtype=np.float64)
    s = f > 0
    fs, ms = f[s], np.asarray(mu_all, dtype=np.float64)[s]
    num = float(np.sum(fs * fs) - 2.0 * np.sum(fs * ms) + sum_mu2 - fs.sum())
    return max(num / sum_mu2, 0.0) if sum_mu2 > 0 else 0.0


def old_means(table, model, tol, max_iter, max_cells):
    assert model == "independence"
    su = table.f == 1
    all_codes = table.cell_codes()
    xp, n = table.xp, float(table.n)
    w = table.f.astype(xp.float64)
    mu_all = xp.full(all_codes[0].shape[0], n, dtype=xp.float64)
    sum_mu2 = n * n
    for c, k in zip(all_codes, table.cards):
        p = xp.bincount(c, weights=w, minlength=int(k)) / n
        mu_all *= p[c]
        sum_mu2 *= float(scalar((p * p).sum()))
    mu_all = np.asarray(to_host(mu_all), dtype=np.float64)
    alpha = old_dispersion_moment(table, mu_all, sum_mu2)
    return mu_all[np.asarray(to_host(su))], None, alpha


@contextmanager
def before():
    """The module's functions swapped for the old ones (compute() looks them up at each call)."""
    saved = {k: getattr(LL, k) for k in ("inverse_terms", "dispersion_moment", "_means")}
    LL.inverse_terms, LL.dispersion_moment, LL._means = old_inverse_terms, old_dispersion_moment, old_means
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(LL, k, v)


# --- data and timing --------------------------------------------------------------------------------
def data(name: str) -> tuple[pd.DataFrame, list[str]]:
    from gpurisk.testing.data import find_shared_data
    d = find_shared_data(ROOT)
    if d is None:
        raise SystemExit("real data not found (../shared/data, or set GPURISK_SHARED_DATA)")
    if name == "fars":
        df = pd.read_csv(d / "arx_genetic" / "fars_int.csv", sep=";")
        return df, list(df.columns)
    df = pd.read_csv(d / "arx" / "adult.csv", sep=";")
    return df, ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
                "occupation"]


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def rounds(variants: dict, repeat: int) -> dict:
    """name -> (last result, best wall s, median wall s, best CPU s); the variants run in turn
    (round robin, the order rotated each round) so that a change of load hits them alike."""
    names = list(variants)
    runs: dict = {k: [] for k in names}
    for r in range(repeat):
        for k in names[r % len(names):] + names[:r % len(names)]:
            runs[k].append(timed(variants[k]))
    return {k: (v[-1][0], min(x[1] for x in v), float(np.median([x[1] for x in v])),
                min(x[2] for x in v)) for k, v in runs.items()}


def max_rel(a: pd.Series, b: pd.Series) -> float:
    a, b = a.astype(float).to_numpy(), b.astype(float).to_numpy()
    both = np.isfinite(a) & np.isfinite(b)
    assert (np.isfinite(a) == np.isfinite(b)).all()
    d = np.abs(a[both] - b[both]) / np.maximum(np.abs(b[both]), 1e-300)
    return float(d.max()) if d.size else 0.0


def bench(name: str, repeat: int, fraction: float) -> tuple[list, float]:
    df, keys = data(name)
    names = _measure_names(None)
    without = [m for m in names if m not in SCAN_HEADLINE]
    run = lambda ms: gpurisk.scan(df, keys=keys, fraction=fraction, measures=ms, threads=0)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(names)                                            # warm: imports, scipy
        def old_code():
            with before():
                return run(names)
        got = rounds({"new": lambda: run(names), "old": old_code, "without": lambda: run(without)},
                     repeat)
    new, old = got["new"][0], got["old"][0]
    a, b = new.results, old.results
    se_cols = [c for c in a.columns if c.startswith("matches_ll_") and c != "matches_ll_reason"]
    same = [c for c in a.columns if c not in se_cols]
    pd.testing.assert_frame_equal(a[same], b[same], check_exact=True)      # everything else: equal
    rel = max(max_rel(a[c], b[c]) for c in se_cols)
    assert rel <= 1e-12, rel
    n_eq = sum(int((a[c].astype(float).fillna(-1) == b[c].astype(float).fillna(-1)).sum()) for c in se_cols)
    combos = len(a)
    rows = [(name, combos, "default, before") + got["old"][1:],
            (name, combos, "default (this version)") + got["new"][1:],
            (name, combos, "without matches_ll, tau1_ll") + got["without"][1:]]
    print(f"[{name}] rows equal except matches_ll's s.e. and upper columns: {n_eq} of "
          f"{combos * len(se_cols)} values bit-identical there, largest relative difference {rel:.2e}",
          flush=True)
    return rows, rel


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="fars,adult")
    ap.add_argument("--repeat", type=int, default=5, help="best of N")
    ap.add_argument("--fraction", type=float, default=0.01, help="sampling fraction π")
    args = ap.parse_args(argv)
    print("default measures:", ", ".join(_measure_names(None)))
    rows = []
    for name in args.datasets.split(","):
        rows += bench(name, args.repeat, args.fraction)[0]
    load = os.getloadavg()
    hdr = (f"{'data':6s} {'combos':>6s} {'measures':28s} {'best s':>7s} {'median s':>8s} "
           f"{'CPU s':>6s} {'x without':>9s}")
    print(f"\nscan, one thread, π = {args.fraction:g}; wall: best and median of {args.repeat} (the "
          f"variants in turn), CPU: best; 'x without': best wall over the scan without Ê, τ̂1; load "
          f"average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(hdr + "\n" + "-" * len(hdr))
    for name in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == name]
        wo = mine[-1][3]
        for _, combos, lab, w, med, cpu in mine:
            print(f"{name:6s} {combos:>6d} {lab:28s} {w:>7.2f} {med:>8.2f} {cpu:>6.2f} {w / wo:>9.2f}")


if __name__ == "__main__":
    main()
