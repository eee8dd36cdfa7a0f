"""Counting engine benchmark (issue 2): frequency table and per-record counts vs pandas groupby.

    python bench/bench_count.py [--rows 20000000] [--repeat 3] [--out bench/out]

Prints a table and writes bench/out/bench_count.png. Targets on a 2-core machine: table of 20 M rows
x 8 integer keys (cardinalities 2,100,6,17,10,50,12,5) in <= 1.5 s and >= 8x faster than
``df.groupby(keys).size()``; each record's cell count in <= 3 s; peak extra memory within 2x the key
columns as int64; ``assess`` on the loaded FARS frame (8 keys) in <= 30 ms.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

import gpurisk
import gpurisk.testing.synth as synth
from gpurisk.freq.engine import build_table

CARDS = (2, 100, 6, 17, 10, 50, 12, 5)
ROOT = Path(__file__).resolve().parents[1]


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def peak_mem(fn):
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def find_fars():
    from gpurisk.testing.data import find_shared_data
    data = find_shared_data(ROOT)
    path = data / "arx_genetic" / "fars_int.csv" if data else None
    return path if path is not None and path.exists() else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    a = ap.parse_args()
    rows = []
    print(f"generating {a.rows:,} rows x {len(CARDS)} keys (int64) ...", flush=True)
    df = synth.register(a.rows, CARDS, seed=1)
    keys = list(df.columns)
    key_bytes = a.rows * len(keys) * 8

    t_table, table = best(lambda: build_table(df, keys), a.repeat)
    print(f"cells {table.sample_cells:,}, uniques n1 = {table.n_r(1):,}", flush=True)
    t_gb, gb = best(lambda: df.groupby(keys, sort=False).size(), max(1, a.repeat - 1))
    assert np.array_equal(np.sort(gb.to_numpy()), np.sort(table.f)), "groupby disagrees"
    rows.append(("frequency table", t_table, t_gb, 1.5))

    t_rec, rc = best(lambda: build_table(df, keys).record_counts(), a.repeat)
    t_gbr, gbr = best(lambda: df.groupby(keys, sort=False)[keys[0]].transform("size"), 1)
    assert np.array_equal(rc, gbr.to_numpy()), "per-record counts disagree"
    rows.append(("each record's cell count", t_rec, t_gbr, 3.0))

    peak = peak_mem(lambda: build_table(df, keys).record_counts())

    fars = find_fars()
    if fars is not None:
        fr = pd.read_csv(fars, sep=";")
        fkeys = list(fr.columns)
        t_fars, _ = best(lambda: gpurisk.assess(fr, fkeys, fraction=0.01), 20)
        t_fgb, _ = best(lambda: fr.groupby(fkeys).size(), 5)
        rows.append(("assess FARS (8 keys, all measures)", t_fars, t_fgb, 0.030))

    print()
    print(f"{'task':40s} {'gpurisk s':>10s} {'pandas s':>10s} {'speed-up':>9s} {'target s':>9s}")
    for name, t, tp, target in rows:
        print(f"{name:40s} {t:10.3f} {tp:10.3f} {tp / t:8.1f}x {target:9.3f}")
    print(f"\npeak extra memory (tracemalloc) table + per-record counts: {peak / 2**30:.2f} GiB "
          f"= {peak / key_bytes:.2f} x the key columns as int64 ({key_bytes / 2**30:.2f} GiB)")
    print(f"machine: {os.cpu_count()} cores, numpy {np.__version__}, pandas {pd.__version__}, "
          f"load average {os.getloadavg()[0]:.2f}")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    Path(a.out).mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = [r[0] for r in rows]
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r[1] for r in rows], 0.4, label="gpurisk")
    ax.barh(y + 0.2, [r[2] for r in rows], 0.4, label="pandas groupby")
    ax.set_yticks(y, names)
    ax.set_xscale("log")
    ax.set_xlabel("seconds (log)")
    ax.legend()
    ax.set_title(f"counting, {a.rows:,} rows x 8 keys")
    fig.tight_layout()
    fig.savefig(Path(a.out) / "bench_count.png", dpi=120)
    print(f"wrote {Path(a.out) / 'bench_count.png'}")


if __name__ == "__main__":
    sys.exit(main())
