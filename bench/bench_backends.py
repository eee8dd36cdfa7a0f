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
- ``dask default`` (``--modes default``): ``gpurisk.assess(dir, fraction=0.01, backend="dask")``
  with no measure named (the default measures, ``indiv_risk`` among them, which reads buckets of
  cells): the client gets summaries and the bucket measures' small per-bucket results

``--layout onefile`` stores the same rows as ONE Parquet file of 1 M-row row groups (split into
partitions of about 64 MiB decoded by the lazy reader) instead of one file per 1 M rows.

``--keys 4,8`` runs the first 4 keys (20 400 possible cells) and all 8 on the same files; ``--layout
files,onefile`` both layouts. The table gives each run's wall time over the pandas backend's on the
same files and keys (``x pandas``), and a PNG the curves of time and peak memory against rows.

Peak memory: RSS sampled every 50 ms, of each Dask worker process (peak per worker), and of this
process as the increase over its RSS at the start of the run (pandas; the client side of Dask).
Cluster start-up is timed separately. GPU timings (cuDF, dask-cuda) are ``bench/bench_gpu.py``'s.

    python bench/bench_backends.py --rows 1e7,3e7,6e7 --keys 4,8 --layout files,onefile \\
        --pandas-max 6e7 --gather-max 0 --modes assess --worker-memory 1.5GiB   # the issue-16 study
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


def tied_register(rows: int, seed: int = 5):
    """A register of ``rows`` records over KEYS (uniform, fixed seed) with KEYS[1] tied to KEYS[0]
    (k1 = 37·k0 + U{0..7} mod 100: an interaction for a model choice to find) and a 1 % Bernoulli
    sample flag ``s``: the data of bench_scan_gpu.py and bench_scan_headline.py --synthetic."""
    import pandas as pd
    rng = np.random.default_rng(seed)
    cols = {k: rng.integers(0, c, rows).astype("int8") for k, c in zip(KEYS, CARDS)}
    tied = (cols[KEYS[0]].astype(np.int64) * 37 + rng.integers(0, 8, rows)) % CARDS[1]
    cols[KEYS[1]] = tied.astype("int8")
    frame = pd.DataFrame(cols)
    frame["s"] = rng.random(rows) < 0.01
    return frame


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


def run_pandas(d: Path, keys=KEYS):
    from gpurisk.freq import build_table
    from gpurisk.io import read_table
    gc.collect()
    with Peak({"client": os.getpid()}) as pk:
        t0 = time.perf_counter()
        frame = read_table(d, columns=keys)
        t1 = time.perf_counter()
        table = build_table(frame, keys)
        fof = table.freq_of_freq()
        t2 = time.perf_counter()
    del frame
    return {"read_s": t1 - t0, "count_s": t2 - t1, "total_s": t2 - t0, "cells": table.sample_cells,
            "n1": fof.get(1, 0), "client_peak": pk.peak["client"] - pk.start["client"], "worker_peak": None,
            "table": table}


def run_dask(d: Path, client, what: str, keys=KEYS):
    from gpurisk.freq import build_table, summarize
    pids = client.run(os.getpid)
    gc.collect()
    extra = {}
    with Peak({"client": os.getpid(), **pids}) as pk:
        t0 = time.perf_counter()
        if what == "build":
            table = build_table(str(d), keys, backend="dask")
            cells, n1 = table.sample_cells, table.n_r(1)
        elif what == "assess":
            import gpurisk
            from gpurisk.plugins import measure_registry
            names = [m for m, r in measure_registry().items() if r.cls.reads == "summary" and r.cls.default]
            a = gpurisk.assess(str(d), keys, fraction=0.01, measures=names, backend="dask")
            cells, n1, table = a.table.sample_cells, a.table.n_r(1), None
        elif what == "default":
            import gpurisk
            from gpurisk.freq.summary import SummaryTable
            a = gpurisk.assess(str(d), keys, fraction=0.01, backend="dask")
            cells, n1, table = a.table.sample_cells, a.table.n_r(1), None
            applied = sorted(m for m, r in a.measures.items() if r.value is not None)
            extra = {"gathered": not isinstance(a.table, SummaryTable), "applied": applied}
        else:
            s = summarize(str(d), keys, backend="dask")
            cells, n1, table = s.cells, s.n_r(1), None
        t2 = time.perf_counter()
    workers = {a: v for a, v in pk.peak.items() if a != "client"}
    if client.run(os.getpid) != pids:
        raise RuntimeError("a Dask worker was restarted during the run")
    return {"read_s": None, "count_s": None, "total_s": t2 - t0, "cells": cells, "n1": n1,
            "client_peak": pk.peak["client"] - pk.start["client"], "worker_peak": max(workers.values()),
            "table": table, **extra}


def _warm(path):
    """Imports and a first read on a worker, untimed: the first row group only (the whole of a
    one-file dataset would stay in the worker's memory and inflate its peak)."""
    import pyarrow.parquet as pq

    import gpurisk.freq._dask  # noqa: F401
    return pq.ParquetFile(path).read_row_group(0).num_rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="2e7,1e8", help="comma-separated dataset sizes")
    ap.add_argument("--keys", default="8", help="comma-separated key counts (the first k of the 8 columns)")
    ap.add_argument("--pandas-max", type=float, default=2e7,
                    help="largest size run on pandas (pandas holds the whole input)")
    ap.add_argument("--gather-max", type=float, default=2e7,
                    help="largest size where the Dask run gathers the FreqTable (else summary only)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-memory", default="2GiB")
    ap.add_argument("--dir", default="/tmp/gpurisk_bench_backends")
    ap.add_argument("--layout", default="files",
                    help="files (one Parquet file per 1 M rows), onefile (one file of 1 M-row row "
                         "groups), or both, comma-separated")
    ap.add_argument("--modes", default="build,summary,assess",
                    help="Dask rows to run: build, summary, assess, default (comma-separated)")
    ap.add_argument("--png", default=str(ROOT / "bench" / "out" / "bench_backends.png"))
    args = ap.parse_args(argv)
    sizes = [int(float(x)) for x in args.rows.split(",")]
    key_counts = [int(x) for x in args.keys.split(",")]
    layouts = [x.strip() for x in args.layout.split(",")]
    modes = [x.strip() for x in args.modes.split(",")]
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)

    import distributed
    results = []
    for layout in layouts:
        for rows in sizes:
            t = time.perf_counter()
            d = make_dataset(root, rows, layout=layout)
            disk = sum(p.stat().st_size for p in d.glob("*.parquet"))
            print(f"dataset {rows:,} rows, {layout}: {d} ({disk / 2**20:.0f} MiB on disk; ready in "
                  f"{time.perf_counter() - t:.1f} s)", flush=True)
            t = time.perf_counter()
            cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address=None,
                                               memory_limit=args.worker_memory, silence_logs=logging.ERROR)
            client = distributed.Client(cluster)
            start_s = time.perf_counter() - t
            client.run(_warm, str(next(d.glob("*.parquet"))))   # imports and a first read, untimed
            from gpurisk.plugins import measure_registry
            measure_registry()          # the client's imports of every measure module, untimed
            try:
                for nk in key_counts:
                    keys = KEYS[:nk]
                    tag = {"keys": nk, "layout": layout}
                    ref = None
                    if rows <= args.pandas_max:
                        r = run_pandas(d, keys)
                        ref = r.pop("table")
                        results.append(("pandas build", rows, {**r, **tag}))
                        print(f"  {nk} keys  pandas build   {r['total_s']:7.1f} s  (read {r['read_s']:.1f} s, "
                              f"count {r['count_s']:.1f} s)  peak +{r['client_peak'] / 2**20:,.0f} MiB", flush=True)
                        gc.collect()
                    for what in modes:
                        if what == "build" and rows > args.gather_max:
                            continue
                        r = run_dask(d, client, what, keys)
                        tb = r.pop("table")
                        if ref is not None and tb is not None:
                            assert np.array_equal(ref.cell_id, tb.cell_id) and np.array_equal(ref.f, tb.f)
                        if ref is not None:
                            assert r["cells"] == ref.sample_cells and r["n1"] == ref.n_r(1)
                        r["start_s"] = start_s
                        results.append((f"dask {what}", rows, {**r, **tag}))
                        print(f"  {nk} keys  dask {what:8s} {r['total_s']:7.1f} s  peak per worker "
                              f"{r['worker_peak'] / 2**20:,.0f} MiB, client +{r['client_peak'] / 2**20:,.0f} MiB"
                              f"  (cluster start {start_s:.1f} s, not included)", flush=True)
                        if "gathered" in r:
                            print(f"      cells brought to the client: {'yes' if r['gathered'] else 'no'}; "
                                  f"measures with a value: {', '.join(r['applied'])}", flush=True)
                        del tb
                        gc.collect()
                    del ref
                    gc.collect()
            finally:
                client.close()
                cluster.close()

    print()
    print(f"{'run':14s} {'layout':8s} {'keys':>4s} {'rows':>12s} {'time s':>8s} {'x pandas':>8s} {'rows/s':>12s} "
          f"{'cells':>12s} {'n1':>11s} {'peak/worker MiB':>16s} {'client +MiB':>11s}")
    base = {(r["layout"], r["keys"], rows): r["total_s"] for n, rows, r in results if n == "pandas build"}
    for name, rows, r in results:
        wp = "-" if r["worker_peak"] is None else f"{r['worker_peak'] / 2**20:,.0f}"
        b = base.get((r["layout"], r["keys"], rows))
        ratio = "-" if b is None else f"{r['total_s'] / b:.2f}"
        print(f"{name:14s} {r['layout']:8s} {r['keys']:>4d} {rows:>12,d} {r['total_s']:8.1f} {ratio:>8s} "
              f"{rows / r['total_s']:12,.0f} {r['cells']:12,d} {r['n1']:11,d} {wp:>16s} "
              f"{r['client_peak'] / 2**20:11,.0f}")
    print("(x pandas: wall time over the pandas backend's, which reads the same files and counts in "
          "one process; GPU numbers are bench/bench_gpu.py's)")
    try:
        _plot(results, args.png)
        print(f"\nwrote {args.png}")
    except Exception as exc:  # matplotlib missing: the table is the result
        print(f"\nno PNG ({type(exc).__name__}: {exc})")


def _plot(results, png):
    """Wall time and peak memory against rows: one panel per key count, a line per run and layout."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    Path(png).parent.mkdir(parents=True, exist_ok=True)
    kcs = sorted({r["keys"] for _, _, r in results})
    fig, axes = plt.subplots(2, len(kcs), figsize=(5.5 * len(kcs), 7), squeeze=False)
    for j, k in enumerate(kcs):
        lines = sorted({(n, r["layout"]) for n, _, r in results if r["keys"] == k})
        for n, lay in lines:
            pts = sorted((rows, r) for nn, rows, r in results if nn == n and r["layout"] == lay and r["keys"] == k)
            xs = [p[0] for p in pts]
            axes[0][j].plot(xs, [p[1]["total_s"] for p in pts], marker="o", label=f"{n} ({lay})")
            mem = [(p[1]["worker_peak"] if p[1]["worker_peak"] is not None else p[1]["client_peak"]) / 2**20
                   for p in pts]
            axes[1][j].plot(xs, mem, marker="o", label=f"{n} ({lay})")
        axes[0][j].set_title(f"{k} keys: wall time")
        axes[0][j].set_ylabel("seconds")
        axes[1][j].set_title(f"{k} keys: peak RSS (per Dask worker; pandas: the process)", fontsize=9)
        axes[1][j].set_ylabel("MiB")
        for ax in (axes[0][j], axes[1][j]):
            ax.set_xlabel("rows")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
