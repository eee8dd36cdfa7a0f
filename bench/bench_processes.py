"""What forked processes save a scan and validate (gpurisk.core.forked): the scan's costly measures
(Ê and τ̂1) and validate's replicates in their default processes (the CPUs usable, at most 8)
against everything in one process (``processes=0``).

- ``scan DATA``: ``gpurisk.scan`` of every combination of DATA's 8 keys (FARS, Adult: 255) at
  π = 1 %, the default measures, roll-ups in their default threads;
- ``validate``: ``gpurisk.validate`` of Adult over six keys (sex, age, race, marital-status,
  education, native-country), ``--replicates`` Bernoulli samples at each of π = 2, 5, 10 %, its
  default estimators (printed: with the installed plugins, as ``gpurisk validate`` runs them).

The two variants run in turn, best of ``--repeat``; every column of the two results is checked
equal, exactly (the scan's rows; validate's replicate rows, summary and warnings). CPU seconds
include the processes' (they end with the call). The machine's load average is printed beside the
table (a shared machine: compare numbers of the same run).

    python bench/bench_processes.py                     # scan fars, validate, best of 3
    python bench/bench_processes.py --scan fars,adult --replicates 50 --repeat 2
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


def tasks(scans, replicates: int) -> dict:
    """name -> {processes: run}, each run returning the frames compared."""
    saved = dict(os.environ)      # bench_scan_headline turns plugin autoloading off when imported:
    try:                          # not for this process's children (a test's later commands)
        from bench_scan_headline import data
    finally:
        os.environ.clear()
        os.environ.update(saved)
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scan", default="fars", help="comma-separated data sets to scan ('' none)")
    ap.add_argument("--replicates", type=int, default=20, help="validate's replicates a fraction "
                    "(0: no validate)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N")
    args = ap.parse_args(argv)
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
