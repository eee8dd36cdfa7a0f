"""pandas versus Dask (2 worker processes) counting 8 keys on a partitioned Parquet dataset.

    python bench/bench_backends.py                 # 20 M and 100 M rows (pandas on 20 M only)
    python bench/bench_backends.py --rows 2e6      # a quick run
    python bench/bench_backends.py --pandas-max 1e8   # also pandas on 100 M (needs ~4 GB)

Data: 8 key columns with cardinalities 2, 100, 6, 17, 10, 50, 12, 5 (612 M possible cells), drawn
uniformly (seeded), stored as int8 in files of 1 M rows under /tmp (``--dir``). At 20 M rows about
19.7 M cells are occupied, at 100 M about 92 M: nearly every cell is unique, so the cell table is as
large as the input (the hard case for a distributed count).

Rows of the table:

- ``pandas build``: read the dataset into one pandas frame, ``build_table`` (FreqTable in process)
- ``dask build``: ``build_table(dir, backend="dask")``: the workers read and count partition-wise,
  the cell table comes back to the client as a FreqTable
- ``dask summary``: ``summarize(dir, backend="dask")``: the cells stay on the workers (range
  buckets), only frequencies of frequencies come back
- ``dask assess``: ``gpurisk.assess(dir, backend="dask")`` with the measures that read summaries
  (``Measure.reads = "summary"``): what a user runs; the client gets summaries only

``--layout onefile`` stores the same rows as ONE Parquet file of 1 M-row row groups (split into
partitions of about 64 MiB decoded by the lazy reader) instead of one file per 1 M rows.

Peak memory: RSS sampled every 50 ms, of each Dask worker process (peak per worker), and of this
process as the increase over its RSS at the start of the run (pandas; the client side of Dask). Cluster start-up is timed separately. Also printed: a data-movement
estimate for a 1-billion-row, 8-key count on one H100 (about 3 TB/s); no GPU timing is taken here
unless a CUDA device is usable, and the script says so.
"""
from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CARDS = (2, 100, 6, 17, 10, 50, 12, 5)
KEYS = [f"k{i}" for i in range(len(CARDS))]
ROWS_PER_FILE = 1_000_000


def make_dataset(root: Path, rows: int, seed: int = 0, layout: str = "files") -> Path:
    """``rows`` records (int8 keys) in files of ROWS_PER_FILE rows, or (``layout="onefile"``) in one
    file of ROWS_PER_FILE-row row groups; reused when already there."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = root / (f"keys8_{rows}" + ("_onefile" if layout == "onefile" else ""))
    done = d / "_complete"
    if done.exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    nfiles = math.ceil(rows / ROWS_PER_FILE)
    writer = None
    for i in range(nfiles):
        n = min(ROWS_PER_FILE, rows - i * ROWS_PER_FILE)
        chunk = pa.table({k: rng.integers(0, c, n, dtype=np.int8) for k, c in zip(KEYS, CARDS)})
        if layout == "onefile":
            writer = writer or pq.ParquetWriter(d / "all.parquet", chunk.schema)
            writer.write_table(chunk, row_group_size=ROWS_PER_FILE)
        else:
            pq.write_table(chunk, d / f"part-{i:05d}.parquet")
    if writer is not None:
        writer.close()
    done.touch()
    return d


class Peak:
    """Peak RSS of some processes, sampled in a thread; ``start`` holds their RSS at the start."""

    def __init__(self, pids: dict):
        import psutil
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.start = {name: p.memory_info().rss for name, p in self.procs.items()}
        self.peak = dict(self.start)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil
        while not self._stop.is_set():
            for name, p in self.procs.items():
                try:
                    self.peak[name] = max(self.peak[name], p.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def run_pandas(d: Path):
    from gpurisk.freq import build_table
    from gpurisk.io import read_table
    gc.collect()
    with Peak({"client": os.getpid()}) as pk:
        t0 = time.perf_counter()
        frame = read_table(d, columns=KEYS)
        t1 = time.perf_counter()
        table = build_table(frame, KEYS)
        fof = table.freq_of_freq()
        t2 = time.perf_counter()
    del frame
    return {"read_s": t1 - t0, "count_s": t2 - t1, "total_s": t2 - t0, "cells": table.sample_cells,
            "n1": fof.get(1, 0), "client_peak": pk.peak["client"] - pk.start["client"], "worker_peak": None,
            "table": table}


def run_dask(d: Path, client, what: str):
    from gpurisk.freq import build_table, summarize
    pids = client.run(os.getpid)
    gc.collect()
    with Peak({"client": os.getpid(), **pids}) as pk:
        t0 = time.perf_counter()
        if what == "build":
            table = build_table(str(d), KEYS, backend="dask")
            cells, n1 = table.sample_cells, table.n_r(1)
        elif what == "assess":
            import gpurisk
            from gpurisk.plugins import measure_registry
            names = [m for m, r in measure_registry().items() if r.cls.reads == "summary"]
            a = gpurisk.assess(str(d), KEYS, fraction=0.01, measures=names, backend="dask")
            cells, n1, table = a.table.sample_cells, a.table.n_r(1), None
        else:
            s = summarize(str(d), KEYS, backend="dask")
            cells, n1, table = s.cells, s.n_r(1), None
        t2 = time.perf_counter()
    workers = {a: v for a, v in pk.peak.items() if a != "client"}
    if client.run(os.getpid) != pids:
        raise RuntimeError("a Dask worker was restarted during the run")
    return {"read_s": None, "count_s": None, "total_s": t2 - t0, "cells": cells, "n1": n1,
            "client_peak": pk.peak["client"] - pk.start["client"], "worker_peak": max(workers.values()),
            "table": table}


def _warm(path):
    import pandas as pd

    import gpurisk.freq._dask  # noqa: F401
    return len(pd.read_parquet(path))


def h100_estimate(rows: int = 10**9, keys: int = 8, bw: float = 3.0e12):
    """(plan, bytes, seconds at ``bw``) for a ``rows``-row, ``keys``-key count of int8 keys.

    Device-memory traffic only, each array read or written once per pass:
    - lower bound: the keys must be read once (1 B per key per row);
    - fused encode + dense histogram: keys read, one 8 B atomic read-modify-write per row into a
      counter array of the 612 M-cell space (4 B per cell), read once for n_r;
    - sort-based, fused encode+pack: keys read, int64 ids written (8 B), an LSD radix sort over
      the 30 significant bits (4 passes of 8 bits, each reading and writing 8 B keys), one read for
      the run-length encoding, 12 B per occupied cell written;
    - gpurisk's cuDF path as written (unfused CuPy): per key read 1 B, write 8 B codes, pack reads
      16 B and writes 8 B; a sort of the int64 ids (8 B per pass), one read to run-length encode;
      each record's cell is located only when a record-level measure asks (not counted here).
    """
    space = math.prod(CARDS)
    passes = math.ceil(math.ceil(math.log2(space)) / 8)
    cells = space * (1 - math.exp(-rows / space))
    plans = [
        ("read the int8 keys once (lower bound)", keys * rows),
        ("fused encode + dense histogram (int32 counter per possible cell, 2.4 GB)",
         keys * rows + 8 * rows + 4 * space),
        (f"fused encode+pack to int64 ids, {passes}-pass radix sort, run-length encode",
         keys * rows + 8 * rows + passes * 2 * 8 * rows + 8 * rows + 12 * cells),
        ("gpurisk's cuDF path as written (unfused CuPy, sort of the ids, lazy record locator)",
         rows * (keys * (1 + 8 + 16 + 8) + passes * 2 * 8 + 8) + 12 * cells),
    ]
    return [(name, nbytes, nbytes / bw) for name, nbytes in plans]


def gpu_timing(rows: int):
    """A cuDF timing where a CUDA device is usable; otherwise None and the reason."""
    from gpurisk.backends import gpu_devices, require
    n, why = gpu_devices()
    if n == 0:
        return None, why
    try:
        require("cudf")
    except Exception as exc:
        return None, str(exc)
    import cudf
    import cupy
    from gpurisk.freq import build_table
    rng = cupy.random.default_rng(0)
    frame = cudf.DataFrame({k: rng.integers(0, c, rows, dtype=cupy.int8) for k, c in zip(KEYS, CARDS)})
    build_table(frame.head(1000), KEYS, backend="cudf")  # warm-up
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    t = build_table(frame, KEYS, backend="cudf")
    t.freq_of_freq()
    cupy.cuda.Device().synchronize()
    return time.perf_counter() - t0, f"{n} device(s)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="2e7,1e8", help="comma-separated dataset sizes")
    ap.add_argument("--pandas-max", type=float, default=2e7,
                    help="largest size run on pandas (pandas holds the whole input)")
    ap.add_argument("--gather-max", type=float, default=2e7,
                    help="largest size where the Dask run gathers the FreqTable (else summary only)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="2GiB")
    ap.add_argument("--dir", default="/tmp/gpurisk_bench_backends")
    ap.add_argument("--layout", default="files", choices=["files", "onefile"],
                    help="one Parquet file per 1 M rows, or one file of 1 M-row row groups")
    ap.add_argument("--png", default=str(ROOT / "bench" / "out" / "bench_backends.png"))
    args = ap.parse_args(argv)
    sizes = [int(float(x)) for x in args.rows.split(",")]
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)

    import distributed
    results = []
    for rows in sizes:
        t = time.perf_counter()
        d = make_dataset(root, rows, layout=args.layout)
        disk = sum(p.stat().st_size for p in d.glob("*.parquet"))
        print(f"dataset {rows:,} rows: {d} ({disk / 2**20:.0f} MiB on disk, "
              f"{rows * len(KEYS) / 2**20:.0f} MiB in memory as int8; ready in {time.perf_counter() - t:.1f} s)",
              flush=True)
        ref = None
        if rows <= args.pandas_max:
            r = run_pandas(d)
            ref = r.pop("table")
            results.append(("pandas build", rows, r))
            print(f"  pandas build   {r['total_s']:7.1f} s  (read {r['read_s']:.1f} s, count {r['count_s']:.1f} s)"
                  f"  peak +{r['client_peak'] / 2**20:,.0f} MiB", flush=True)
            gc.collect()
        else:
            print(f"  pandas not run at {rows:,} rows: it holds the whole input and its int64 ids and "
                  f"sort buffers (~{rows * 40 / 2**30:.0f} GB) in one process, on a machine shared with "
                  "other jobs (--pandas-max to force)", flush=True)
        t = time.perf_counter()
        cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=None,
                                           memory_limit=args.worker_memory, silence_logs=logging.ERROR)
        client = distributed.Client(cluster)
        start_s = time.perf_counter() - t
        client.run(_warm, str(next(d.glob("*.parquet"))))   # imports and a first read, untimed
        try:
            modes = (["build"] if rows <= args.gather_max else []) + ["summary", "assess"]
            for what in modes:
                r = run_dask(d, client, what)
                tb = r.pop("table")
                if ref is not None and tb is not None:
                    assert np.array_equal(ref.cell_id, tb.cell_id) and np.array_equal(ref.f, tb.f)
                if ref is not None:
                    assert r["cells"] == ref.sample_cells and r["n1"] == ref.n_r(1)
                r["start_s"] = start_s
                results.append((f"dask {what}", rows, r))
                print(f"  dask {what:8s} {r['total_s']:7.1f} s  peak per worker "
                      f"{r['worker_peak'] / 2**20:,.0f} MiB, client +{r['client_peak'] / 2**20:,.0f} MiB"
                      f"  (cluster start {start_s:.1f} s, not included)", flush=True)
                del tb
                gc.collect()
        finally:
            client.close()
            cluster.close()
        del ref
        gc.collect()

    print()
    print(f"{'run':14s} {'rows':>12s} {'time s':>8s} {'rows/s':>12s} {'cells':>12s} {'n1':>11s} "
          f"{'peak/worker MiB':>16s} {'client +MiB':>11s}")
    for name, rows, r in results:
        wp = "-" if r["worker_peak"] is None else f"{r['worker_peak'] / 2**20:,.0f}"
        print(f"{name:14s} {rows:>12,d} {r['total_s']:8.1f} {rows / r['total_s']:12,.0f} {r['cells']:12,d} "
              f"{r['n1']:11,d} {wp:>16s} {r['client_peak'] / 2**20:11,.0f}")

    print("\nOne H100 (about 3 TB/s HBM), a 1-billion-row, 8-key count (int8 keys, 612 M-cell space):")
    for name, nbytes, secs in h100_estimate():
        print(f"  {nbytes / 1e9:8.1f} GB  {secs * 1e3:8.1f} ms   {name}")
    print("  (device memory traffic only: moving 8 GB of keys from host memory over PCIe 5 x16, "
          f"~55 GB/s, takes ~{8e9 / 55e9 * 1e3:.0f} ms more)")
    secs, why = gpu_timing(min(sizes[0], 10**8))
    if secs is None:
        print(f"  GPU timing: none taken -- no usable GPU on this machine ({why}).")
    else:
        print(f"  GPU timing: cuDF build_table on {min(sizes[0], 10**8):,} rows: {secs * 1e3:.1f} ms ({why})")

    try:
        _plot(results, args.png)
        print(f"\nwrote {args.png}")
    except Exception as exc:  # matplotlib missing: the table is the result
        print(f"\nno PNG ({type(exc).__name__}: {exc})")


def _plot(results, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    Path(png).parent.mkdir(parents=True, exist_ok=True)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [f"{n}\n{rows / 1e6:.0f} M" for n, rows, _ in results]
    a1.bar(labels, [r["total_s"] for _, _, r in results], color="tab:blue")
    a1.set_ylabel("seconds")
    a1.set_title("8-key count, partitioned Parquet")
    mem = [(r["worker_peak"] if r["worker_peak"] is not None else r["client_peak"]) / 2**20
           for _, _, r in results]
    a2.bar(labels, mem, color="tab:orange")
    a2.set_ylabel("peak RSS, MiB")
    a2.set_title("peak memory (per Dask worker; pandas: process)", fontsize=9)
    for ax in (a1, a2):
        ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
