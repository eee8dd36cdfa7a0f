"""Where one count's time goes: ``build_table_piece`` in its phases, on one GPU (cuDF) or, without
one, on pandas taking the GPU's path (``plan_first``: the plan from each key's distinct values, then
the codes against it).

    python bench/bench_count_phases.py              # 1e8 rows, 4 and 8 keys
    python bench/bench_count_phases.py --rows 1e7
    python bench/bench_count_phases.py --distinct range,hash   # the plan's two device paths

Data: the 8 int8 keys of ``bench_backends.py`` (uniform, fixed seed); the 4-key case takes the first
four. Each phase is synchronised with the device before its clock stops; the whole count runs twice
first (the second is the one to read). Phases: the plan (each key's distinct values, brought to the
host), ``encode_piece`` (codes and packed cell words), ``count_words``, ``finish``. On cuDF,
``--distinct`` names the ways the plan finds the integer keys' distinct values
(``gpurisk.freq.plan.DEVICE_DISTINCT``): "range", one min/max pass for all keys and a presence count
per key (on a strided probe first, the whole column only where the probe misses a value), against
"hash", cuDF's ``drop_duplicates`` per key (the first is the default); each is checked to give the
same plan.
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
sys.path.insert(0, str(ROOT / "bench"))

from bench_backends import CARDS, KEYS  # noqa: E402

from gpurisk.freq import partial as P  # noqa: E402
from gpurisk.freq import plan as PL  # noqa: E402
from gpurisk.freq.piece import build_table_piece, piece_plan  # noqa: E402


def engine():
    """(name, frame maker, array namespace, synchronise)."""
    try:
        import cudf
        import cupy
        return "cudf", cudf.DataFrame, cupy, lambda: cupy.cuda.Device().synchronize()
    except ImportError:
        return "pandas", pd.DataFrame, np, lambda: None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="1e8")
    ap.add_argument("--distinct", default="range",
                    help="comma-separated ways of finding the distinct values on cuDF: range, hash")
    a = ap.parse_args(argv)
    ways = [w for w in a.distinct.split(",") if w]
    if any(w not in ("range", "hash") for w in ways):
        ap.error("--distinct takes range and/or hash")
    rows = int(float(a.rows))
    name, frame, xp, sync = engine()
    rng = np.random.default_rng(0)
    data = frame({k: rng.integers(0, c, rows, dtype=np.int8) for k, c in zip(KEYS, CARDS)})

    def timed(label, fn):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        print(f"  {label:40s} {time.perf_counter() - t0:8.4f} s", flush=True)
        return out

    print(f"{name}{'' if name == 'cudf' else ' (the GPU path: plan from distinct values)'}, "
          f"{rows:,} rows")
    for k in (4, 8):
        keys = KEYS[:k]
        sub = data[keys]
        print(f"{k} keys")
        plans = {}
        for way in ways if name == "cudf" else ways[:1]:
            PL.DEVICE_DISTINCT = way
            tag = f", {way}" if name == "cudf" else ""
            for run in (1, 2):
                timed(f"whole count (run {run}{tag})",
                      lambda: build_table_piece(sub, keys, backend=name, xp=xp, plan_first=True))
            for run in (1, 2):
                plans[way], _, _ = timed(f"plan (distinct values{tag}, run {run})",
                                         lambda: piece_plan(sub, keys, plan_first=True))
        PL.DEVICE_DISTINCT = ways[0]
        plan = plans[ways[0]]
        if any(p.categories != plan.categories for p in plans.values()):
            sys.exit("the ways of finding the distinct values gave different plans")
        words, _, _ = timed("encode_piece (codes, cell words)",
                            lambda: P.encode_piece(plan, sub, "sample", None, None, xp))
        part = timed("count_words", lambda: P.count_words(xp, words, "sample", space=plan.space))
        timed("finish", lambda: P.finish(plan, part, backend=name))


if __name__ == "__main__":
    main()
