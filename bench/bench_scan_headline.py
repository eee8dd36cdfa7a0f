"""What Ê (matches_ll) and τ̂1 (tau1_ll) cost a scan: the default model against main effects.

A scan runs ``matches_ll`` and ``tau1_ll`` for every combination by default (the ranking is by Ê).
For FARS (8 keys, every one of the 255 combinations, π = 1 %) and Adult (8 keys, all 255, π = 1 %)
this times ``gpurisk.scan`` (one thread: ``threads=0``; no output file) with

- ``default``: the default measures and options: Ê and τ̂1 with ``model=auto_cv`` (main effects plus
  the interactions split-sample tests keep: every pair of keys scored on held-out halves) and
  ``prior=loo``;
- ``main effects, plug-in``: the same with ``model=independence, prior=plugin`` (the default before
  issue 27's third stop; the obvious cheaper alternative, closed form);
- ``without Ê, τ̂1``: the default measures minus matches_ll and tau1_ll.

and checks that every column other than matches_ll's and tau1_ll's is equal in the first two. Best
of ``--repeat`` runs; the machine's load average is printed beside the table (a shared machine:
compare numbers of the same run).

    python bench/bench_scan_headline.py                 # FARS and Adult, best of 5
    python bench/bench_scan_headline.py --repeat 3 --datasets fars
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GPURISK_DISABLE_PLUGIN_AUTOLOAD", "1")

import gpurisk  # noqa: E402
from gpurisk.scan.runner import SCAN_HEADLINE, _measure_names  # noqa: E402

MAIN_PLUGIN = {"loglinear_risk": {"model": "independence", "prior": "plugin"}}


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


def bench(name: str, repeat: int, fraction: float) -> list:
    df, keys = data(name)
    names = _measure_names(None)
    without = [m for m in names if m not in SCAN_HEADLINE]

    def run(ms, options=None):
        return gpurisk.scan(df, keys=keys, fraction=fraction, measures=ms, threads=0, options=options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(names)                                            # warm: imports, scipy
        got = rounds({"new": lambda: run(names), "main": lambda: run(names, MAIN_PLUGIN),
                      "without": lambda: run(without)}, repeat)
    a, b = got["new"][0].results, got["main"][0].results
    same = [c for c in a.columns if not c.startswith(tuple(SCAN_HEADLINE))]
    pd.testing.assert_frame_equal(a[same], b[same], check_exact=True)
    combos = len(a)
    picked = int(got["new"][0].results["matches_ll"].notna().sum())
    print(f"[{name}] {combos} combinations, Ê given in {picked}; other columns equal", flush=True)
    return [(name, combos, "default (auto_cv, loo)") + got["new"][1:],
            (name, combos, "main effects, plug-in") + got["main"][1:],
            (name, combos, "without matches_ll, tau1_ll") + got["without"][1:]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="fars,adult")
    ap.add_argument("--repeat", type=int, default=5, help="best of N")
    ap.add_argument("--fraction", type=float, default=0.01, help="sampling fraction π")
    args = ap.parse_args(argv)
    print("default measures:", ", ".join(_measure_names(None)))
    rows = []
    for name in args.datasets.split(","):
        rows += bench(name, args.repeat, args.fraction)
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
