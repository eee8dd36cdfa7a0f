"""What forked processes save a scan and validate (gpurisk.core.forked): the scan's costly measures
(Ê and τ̂1) and validate's replicates in their default processes (the CPUs usable, at most 8)
against everything in one process (``processes=0``).

- ``scan DATA``: ``gpurisk.scan`` of every combination of DATA's 8 keys (FARS, Adult: 255) at
  π = 1 %, the default measures, roll-ups in their default threads;
- ``validate``: ``gpurisk.validate`` of Adult over six keys (sex, age, race, marital-status,
  education, native-country), ``--replicates`` Bernoulli samples at each of π = 2, 5, 10 %, its
  default estimators (printed: with the installed plugins, as ``gpurisk validate`` runs them).

``--breakeven DATA``: instead, the scans of subsets of DATA's keys (15 to 255 combinations) at
π = 1 %, in one process, in two forced (``processes=2``) and by the default's rule, beside the
bound on their cells the rule reads (:func:`gpurisk.scan.processes.cells_bound`, against
:data:`gpurisk.core.forked.MIN_CELLS`): where the processes start to pay.

The two variants run in turn, best of ``--repeat``; every column of the two results is checked
equal, exactly (the scan's rows; validate's replicate rows, summary and warnings). CPU seconds
include the processes' (they end with the call). The machine's load average is printed beside the
table (a shared machine: compare numbers of the same run).

    python bench/bench_processes.py                     # scan fars, validate, best of 3
    python bench/bench_processes.py --scan fars,adult --replicates 50 --repeat 2
    python bench/bench_processes.py --breakeven adult,fars --repeat 3
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

import gpurisk  # noqa: E402

ADULT_KEYS = ["sex", "age", "race", "marital-status", "education", "native-country"]


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(fn):
    w, c = time.perf_counter(), cpu_seconds()
    out = fn()
    return out, time.perf_counter() - w, cpu_seconds() - c


def _data():
    """bench_scan_headline's data sets (it turns plugin autoloading off when imported: not for
    this process's children, a test's later commands)."""
    saved = dict(os.environ)
    try:
        from bench_scan_headline import data
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return data


def tasks(scans, replicates: int) -> dict:
    """name -> {processes: run}, each run returning the frames compared."""
    data = _data()
    out = {}
    for name in scans:
        df, keys = data(name)
        out[f"scan {name}"] = {
            p: (lambda p=p, df=df, keys=keys:
                [gpurisk.scan(df, keys=keys, fraction=0.01, processes=p).to_frame()])
            for p in (0, None)}
    if replicates:
        adult = pd.read_csv(ROOT.parent / "shared" / "data" / "arx" / "adult.csv", sep=";",
                            dtype=str)

        def val(p):
            v = gpurisk.validate(adult, ADULT_KEYS, replicates=replicates, processes=p, seed=7)
            return [v.replicates, v.summary, pd.DataFrame({"warning": v.warnings})]
        out[f"validate {replicates} x 3"] = {p: (lambda p=p: val(p)) for p in (0, None)}
    return out


#: (smallest size, largest size, the first how many of the data set's keys)
BREAKEVEN_PLANS = [(2, 2, 6), (2, 3, 6), (3, 3, 7), (2, 4, 6), (2, 4, 7), (4, 4, 8), (1, 8, 8)]


def breakeven(names, repeat: int) -> list:
    """The scans of ``BREAKEVEN_PLANS`` on each data set: one process, two, and the default."""
    import itertools

    from gpurisk.core.forked import MIN_CELLS, how_many
    from gpurisk.freq import build_table
    from gpurisk.scan.processes import cells_bound
    data = _data()
    rows = []
    for name in names:
        df, keys = data(name)
        for lo, hi, pool in BREAKEVEN_PLANS:
            combos = [c for s in range(lo, hi + 1) for c in itertools.combinations(keys[:pool], s)]
            bound = cells_bound(build_table(df, keys[:pool]), combos)     # as the scan's own
            runs = {p: (lambda p=p: [gpurisk.scan(df, keys=keys[:pool], min_size=lo, max_size=hi,
                                                  fraction=0.01, processes=p).to_frame()])
                    for p in (0, 2, None)}
            runs[0]()
            best = {p: float("inf") for p in runs}
            got = {}
            for r in range(repeat):
                for p in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                    got[p], wall, _ = timed(runs[p])
                    best[p] = min(best[p], wall)
            for p in (2, None):
                pd.testing.assert_frame_equal(got[0][0], got[p][0], check_exact=True)
            rows.append((f"{name} {pool} keys, sizes {lo}-{hi}", len(combos), bound,
                         how_many(None, len(combos), bound), best[0], best[2], best[None]))
            print(f"[{rows[-1][0]}] every column equal in one process, two and the default, "
                  "exactly", flush=True)
    hdr = (f"{'scan':26s} {'combos':>6s} {'cells bound':>11s} {'default':>7s} {'one s':>6s} "
           f"{'two s':>6s} {'default s':>9s} {'one/two':>7s}")
    print(f"\nbest of {repeat}; MIN_CELLS = {MIN_CELLS}; 'default': the processes the rule "
          f"starts; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(hdr + "\n" + "-" * len(hdr))
    for name, n, bound, count, one, two, default in rows:
        print(f"{name:26s} {n:>6d} {bound:>11d} {count:>7d} {one:>6.3f} {two:>6.3f} "
              f"{default:>9.3f} {one / two:>7.2f}")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scan", default="fars", help="comma-separated data sets to scan ('' none)")
    ap.add_argument("--replicates", type=int, default=20, help="validate's replicates a fraction "
                    "(0: no validate)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N")
    ap.add_argument("--breakeven", default="", help="comma-separated data sets: the scans of "
                    "subsets of their keys instead (where the processes start to pay)")
    args = ap.parse_args(argv)
    if args.breakeven:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return breakeven(args.breakeven.split(","), args.repeat)
    from gpurisk.core.forked import how_many
    from gpurisk.plugins import measure_registry
    from gpurisk.validation.runner import _measure_names
    measure_registry()          # the plugins installed, before bench_scan_headline turns them off
    if args.replicates:
        print("validate's estimators and truths:", ", ".join(_measure_names(None)[0]))
    count = how_many(None, 1000)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, runs in tasks([s for s in args.scan.split(",") if s], args.replicates).items():
            runs[0]()                                            # warm: imports, scipy
            best = {p: (None, float("inf"), float("inf")) for p in runs}
            for r in range(args.repeat):
                for p in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
                    got, wall, cpu = timed(runs[p])
                    best[p] = (got, min(best[p][1], wall), min(best[p][2], cpu))
            for a, b in zip(best[0][0], best[None][0]):
                pd.testing.assert_frame_equal(a, b, check_exact=True)
            print(f"[{name}] every column equal with and without the processes, exactly",
                  flush=True)
            rows.append((name, best[0][1], best[0][2], best[None][1], best[None][2]))
    load = os.getloadavg()
    hdr = (f"{'task':22s} {'one process s':>13s} {'CPU s':>6s} {f'{count} processes s':>15s} "
           f"{'CPU s':>6s} {'speed-up':>8s}")
    print(f"\nbest of {args.repeat}, wall and CPU (the processes' included); load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(hdr + "\n" + "-" * len(hdr))
    for name, w0, c0, w1, c1 in rows:
        print(f"{name:22s} {w0:>13.2f} {c0:>6.2f} {w1:>15.2f} {c1:>6.2f} {w0 / w1:>8.2f}")
    return rows


if __name__ == "__main__":
    main()
