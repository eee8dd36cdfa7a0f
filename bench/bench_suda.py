"""SUDA / DIS-SUDA (issue 17): gpurisk's lattice walk versus a pure pandas implementation of the same
definition, in one run, in records per second.

    python bench/bench_suda.py                          # 100 k, 1 M, 10 M records (about 2 min)
    python bench/bench_suda.py --sizes 1e5,1e6          # a quicker run
    python bench/bench_suda.py --pandas-max 1e6         # pandas up to 1 M only (its 10 M run: ~50 s)
    python bench/bench_suda.py --xp cupy                # the search on CuPy arrays (needs a GPU)
    python bench/bench_suda.py --no-command             # skip the timing of the whole command

Data (issue 17): 6 independent uniform keys of 2, 5, 10, 20, 50 and 100 categories (10 M possible
cells), seeded. sdcMicro 5.8.1's ``suda2`` took 53.0 s on 1 M such records (issue 17); the target is
20x faster, under 2.7 s for the whole ``gpurisk suda`` command (read CSV, count, search, per-record
Parquet) on the 2-core machine of the project.

Rows of the table, per size:

- ``gpurisk``: count the frame (``build_table``), the MSU search (``gpurisk.models.suda``: a walk up
  the lattice of key subsets, levels 1..M) and every per-record column (suda, dis_suda, msu_min,
  msu_count, contrib_<key>), brought to the host. ``--xp cupy`` counts and searches on CuPy arrays
  (the one-piece engine with ``xp=cupy``, as the cuDF backend runs it, without needing cuDF).
- ``pandas``: ``tests/_suda_oracle.pandas_suda``: one ``DataFrame.duplicated(subset=S, keep=False)``
  per key subset S, the minimality test and the scores as pandas Series operations (no Python loop
  over records) -- what a user would write. Its results are compared with gpurisk's (max abs diff).

``command``: ``gpurisk suda FILE.csv --keys ... -o OUT.parquet`` as a subprocess on the 1 M-record CSV
(wall time, including Python start-up). Timings are best of ``--repeat`` runs.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

CARDS = (2, 5, 10, 20, 50, 100)
KEYS = [f"k{c}" for c in CARDS]
SDCMICRO_1M_S = 53.0       # issue 17: sdcMicro 5.8.1 suda2 on 1 M x 6 uniform keys


def make_frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({k: rng.integers(0, c, n).astype(np.int8) for k, c in zip(KEYS, CARDS)})


def run_gpurisk(df: pd.DataFrame, xp_name: str, max_msu=None, scoring="elliot"):
    from gpurisk.models import suda_table as st
    from gpurisk.xp import to_host
    if xp_name == "cupy":
        import cupy
        from gpurisk.freq.piece import build_table_piece
        table = build_table_piece(df, KEYS, xp=cupy, backend="cupy", plan_first=True)
    else:
        from gpurisk.freq.engine import build_table
        table = build_table(df, KEYS)
    cols = st.record_columns(table, max_msu, scoring)
    return {k: to_host(v) for k, v in cols.items()}


def best(fn, repeat: int):
    out, ts = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return min(ts), out


def time_command(csv: Path, out: Path, repeat: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "gpurisk", "suda", str(csv), "--keys", ",".join(KEYS), "-o", str(out)]
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        ts.append(time.perf_counter() - t)
    return min(ts)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e5,1e6,1e7", help="record counts, comma-separated")
    ap.add_argument("--pandas-max", type=float, default=1e7,
                    help="largest size the pandas implementation runs on")
    ap.add_argument("--xp", choices=("numpy", "cupy"), default="numpy",
                    help="array namespace of gpurisk's count and search")
    ap.add_argument("--backend", choices=("pandas", "cudf"), default=None,
                    help="alias: cudf means --xp cupy (the search on CuPy arrays)")
    ap.add_argument("--max-msu", type=int, default=None)
    ap.add_argument("--scoring", choices=("elliot", "ihsn"), default="elliot")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-command", action="store_true", help="skip timing the whole command")
    ap.add_argument("--dir", default="/tmp/gpurisk_bench_suda", help="where the CSV is written")
    a = ap.parse_args(argv)
    xp_name = "cupy" if a.backend == "cudf" else a.xp
    sizes = [int(float(s)) for s in a.sizes.split(",") if s.strip()]
    from _suda_oracle import pandas_suda

    print(f"SUDA, 6 uniform keys {CARDS}, scoring {a.scoring}, max_msu {a.max_msu or 'M'}; "
          f"gpurisk on {xp_name}; best of {a.repeat}; cores: {os.cpu_count()}")
    if xp_name == "cupy":
        run_gpurisk(make_frame(10_000), "cupy")          # warm-up: CUDA context, kernels
    print(f"{'records':>10} {'impl':>8} {'seconds':>9} {'records/s':>12} {'speed-up':>9}  check")
    for n in sizes:
        df = make_frame(n)
        tg, got = best(lambda: run_gpurisk(df, xp_name, a.max_msu, a.scoring), a.repeat)
        print(f"{n:>10,} {'gpurisk':>8} {tg:>9.3f} {n / tg:>12,.0f} {'':>9}", flush=True)
        if n <= a.pandas_max:
            tp, ref = best(lambda: pandas_suda(df, KEYS, a.max_msu, a.scoring), 1)
            diff = max(float(np.max(np.abs(got[c] - ref[c].to_numpy()))) for c in ref.columns)
            print(f"{n:>10,} {'pandas':>8} {tp:>9.3f} {n / tp:>12,.0f} {tp / tg:>8.1f}x  "
                  f"max |gpurisk - pandas| = {diff:.2g}", flush=True)
        del df, got
    if not a.no_command:
        d = Path(a.dir)
        d.mkdir(parents=True, exist_ok=True)
        csv = d / "uniform_1m.csv"
        if not csv.exists():
            make_frame(1_000_000).to_csv(csv, index=False)
        tc = time_command(csv, d / "suda.parquet", a.repeat)
        print(f"\nwhole command on 1,000,000 records (CSV in, Parquet out, numpy): {tc:.2f} s "
              f"(target < {SDCMICRO_1M_S / 20:.2f} s; sdcMicro 5.8.1 suda2: {SDCMICRO_1M_S} s, "
              f"{SDCMICRO_1M_S / tc:.0f}x)")


if __name__ == "__main__":
    main()
