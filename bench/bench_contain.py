"""What containing the measures costs: a scan of ARX's adult data (8 keys, every subset of size <= 4:
162 combinations, the 20 default measures, π = 0.1) with its measures

- plain: called one after the other in the calling thread (no containment: the obvious alternative);
- contained, no exit guard: the runner of gpurisk.core.contain (one reused worker thread per caller,
  stdout/stderr routed, the working directory restored, a time limit) with the wrappers of
  ``os._exit``/``os.kill``/... not installed;
- contained: the same with the exit guard (what every command runs).

Best of ``--repeat`` runs each; prints the scan's total and the time spent in measures (the scan's own
``timings["measures_s"]``), and the calls of a guarded function (``os.kill(pid, 0)``) per second
outside a measure, against the unwrapped function.

    python bench/bench_contain.py
    python bench/bench_contain.py --repeat 7 --max-size 3
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gpurisk  # noqa: E402
from gpurisk.core import contain, evaluate  # noqa: E402


def _plain(fns, timeout, stop=lambda exc: False):
    """run_contained's contract without containment: each call in this thread, in order."""
    out = []
    for fn in fns:
        try:
            out.append((True, fn(), None))
        except BaseException as exc:  # noqa: B036
            out.append((True, None, exc))
            if stop(exc):
                break
    return out


def _scan(df, keys, max_size):
    res = gpurisk.scan(df, keys=keys, max_size=max_size, fraction=0.1)
    return res.timings, res.results


def _best(df, keys, max_size, repeat):
    runs = [_scan(df, keys, max_size) for _ in range(repeat)]
    best = min(runs, key=lambda r: r[0]["total_s"])
    return best[0]["total_s"], min(r[0]["measures_s"] for r in runs), best[1]


def _calls_per_s(fn, n=200_000):
    pid = os.getpid()
    t0 = time.perf_counter()
    for _ in range(n):
        fn(pid, 0)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    shared = next((p / "shared" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
                  ROOT.parent / "shared")
    ap.add_argument("--data", default=str(shared / "data" / "arx" / "adult.csv"))
    ap.add_argument("--max-size", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    df = pd.read_csv(a.data, sep=";")
    keys = list(df.columns[:8])
    _scan(df.head(2000), keys, 2)                       # imports and one-off costs
    rows = []
    real_kill = os.kill
    real = evaluate.run_contained
    evaluate.run_contained = _plain
    rows.append(("plain (calling thread)", *_best(df, keys, a.max_size, a.repeat)))
    evaluate.run_contained = real
    guard_was = contain._GUARD_INSTALLED[0]
    contain._GUARD_INSTALLED[0] = True                  # the wrappers are not installed
    rows.append(("contained, no exit guard", *_best(df, keys, a.max_size, a.repeat)))
    contain._GUARD_INSTALLED[0] = guard_was
    rows.append(("contained (every command)", *_best(df, keys, a.max_size, a.repeat)))
    ref = rows[0][3]
    names = [c for c in ref.columns if not c.endswith("_reason") and ref[c].dtype.kind == "f"]
    for r in rows[1:]:
        pd.testing.assert_frame_equal(r[3][names], ref[names])   # the same numbers
    n = len(ref)
    measures = len(gpurisk.scan(df.head(50), keys=keys[:1], max_size=1, fraction=0.1).measures)
    print(f"scan of {Path(a.data).name}: {len(df)} records, {n} combinations, {measures} measures, "
          f"best of {a.repeat}")
    print(f"{'measures run':28s} {'total s':>8s} {'measures s':>11s} {'per measure call':>17s}")
    for name, total, meas, _ in rows:
        print(f"{name:28s} {total:8.3f} {meas:11.3f} {1e6 * meas / (n * measures):14.1f} µs")
    print(f"os.kill(pid, 0) outside a measure: {_calls_per_s(real_kill.__wrapped__ if hasattr(real_kill, '__wrapped__') else real_kill):,.0f}/s "
          f"unwrapped, {_calls_per_s(os.kill):,.0f}/s wrapped")


if __name__ == "__main__":
    main()
