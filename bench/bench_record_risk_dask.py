"""record-risk on Dask against the pandas backend, on bench_backends' registers (one Parquet file).

Each run computes every sample-unique record's risks (Skinner's r1, r1u, r2, b1) and writes them:
pandas to one Parquet file from one process; Dask (local workers) writes one file per partition from
the workers, the records never gathered. Prints wall time, the client's and each worker's peak
memory (psutil, over the process's start), rows written, and checks that both outputs hold the same
rows.

    python bench/bench_record_risk_dask.py [--rows 1e7,3e7] [--keys 4] [--workers 2]
                                           [--worker-memory 1.5GiB]
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_backends import KEYS, Peak, make_dataset  # noqa: E402


def run(d: Path, keys, out: Path, client=None):
    import gpurisk
    pids = {} if client is None else client.run(os.getpid)
    gc.collect()
    with Peak({"client": os.getpid(), **pids}) as pk:
        t0 = time.perf_counter()
        doc = gpurisk.record_risk(str(d), keys, fraction=0.01, methods=["r1", "r1u", "r2", "b1"],
                                  output=out, backend="pandas" if client is None else "dask")
        t = time.perf_counter() - t0
    workers = [v for a, v in pk.peak.items() if a != "client"]   # absolute: the limit is
    return {"s": t, "rows": doc["output"]["rows"], "client": pk.peak["client"] - pk.start["client"],
            "worker": max(workers) if workers else None, "table3": doc["table3"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1e7,3e7")
    ap.add_argument("--keys", default="4")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="1.5GiB")
    ap.add_argument("--dir", default="/tmp/gpurisk_bench_backends")
    a = ap.parse_args(argv)
    import distributed
    rows_out = []
    tmp = Path(tempfile.mkdtemp(prefix="gpurisk_rr_"))
    try:
        for rows in [int(float(x)) for x in a.rows.split(",")]:
            d = make_dataset(Path(a.dir), rows, layout="onefile")
            for nk in [int(x) for x in a.keys.split(",")]:
                keys = KEYS[:nk]
                p = run(d, keys, tmp / "pandas.parquet")
                cluster = distributed.LocalCluster(n_workers=a.workers, threads_per_worker=1,
                                                   processes=True, host="127.0.0.1",
                                                   dashboard_address=None,
                                                   memory_limit=a.worker_memory,
                                                   silence_logs=logging.ERROR)
                client = distributed.Client(cluster)
                try:
                    q = run(d, keys, tmp / "dask.parquet", client)
                finally:
                    client.close()
                    cluster.close()
                ra = pd.read_parquet(tmp / "pandas.parquet")
                rb = pd.read_parquet(tmp / "dask.parquet")
                same = len(ra) == len(rb) and all(
                    np.array_equal(ra[c].to_numpy(), rb[c].to_numpy(), equal_nan=True)
                    for c in ra.columns) and p["table3"] == q["table3"]
                rows_out.append((rows, nk, p, q, same))
                print(f"{rows:>12,} rows {nk} keys: pandas {p['s']:.1f} s (+{p['client'] / 2**20:,.0f} "
                      f"MiB), dask {q['s']:.1f} s (client +{q['client'] / 2**20:,.0f} MiB, worker "
                      f"peak {q['worker'] / 2**20:,.0f} MiB), {p['rows']:,} rows, same: {same}",
                      flush=True)
                shutil.rmtree(tmp / "dask.parquet", ignore_errors=True)
                (tmp / "pandas.parquet").unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"{'rows':>12} {'keys':>4} {'pandas s':>9} {'dask s':>7} {'x':>5} {'pandas +MiB':>11} "
          f"{'client +MiB':>11} {'worker MiB':>10} {'rows out':>11} same")
    for rows, nk, p, q, same in rows_out:
        print(f"{rows:>12,} {nk:>4} {p['s']:>9.1f} {q['s']:>7.1f} {q['s'] / p['s']:>5.2f} "
              f"{p['client'] / 2**20:>11,.0f} {q['client'] / 2**20:>11,.0f} "
              f"{q['worker'] / 2**20:>10,.0f} {p['rows']:>11,} {same}")


if __name__ == "__main__":
    main()
