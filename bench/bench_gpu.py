"""One GPU (cuDF/CuPy) and dask-cuda against pandas and CPU Dask, on the same rows, in one run.

    python bench/bench_gpu.py                               # 1e7 and 1e8 rows, 4 and 8 keys
    python bench/bench_gpu.py --rows 1e7 --keys 8 --quick   # a smoke run
    python bench/bench_gpu.py --rows 1e7,1e8,5e8 --dask-cuda 1e8 --dask-cpu 1e8 --out results/

Data: the 8 int8 key columns of ``bench_backends.py`` (cardinalities 2, 100, 6, 17, 10, 50, 12, 5;
612 M possible cells), drawn uniformly on the host with a fixed seed, so every engine counts the very
same records; the 4-key case takes the first four (20 400 cells, all occupied).

Rows of the table (every one checked against pandas where pandas ran: cells, n1, and for assess
every summary measure's value to 1e-12):

- ``pandas build``: ``build_table`` of an in-memory pandas frame (+ frequencies of frequencies)
- ``cudf build``: the same on a cuDF frame already on the GPU (the host-to-device copy is timed
  apart, ``h2d``); every kernel synchronised before the clock stops
- ``* assess``: ``gpurisk.assess`` with every built-in measure that reads summaries, what a user runs
- ``cudf record counts``: each record's cell count (the lazy record locator), as record-level
  measures use it
- ``pandas file assess``, ``cudf file assess``: the same rows as one Parquet file of 1 M-row row
  groups, read and counted in this process (the baseline of the Dask rows, which read that file)
- ``dask-cuda assess``: the same Parquet file, read and counted by a
  ``LocalCUDACluster`` (one worker per GPU, RMM async pool, cuDF spilling); ``dask-cpu assess``: the
  same file on a CPU ``LocalCluster`` with one single-threaded worker per core

GPU memory is the device's used memory read by NVML every 20 ms (CUDA context included, about
0.5 GiB); host memory is this process's RSS increase (psutil). With no usable GPU the script says
so and runs the CPU rows only. Writes ``bench_gpu.json`` and ``bench_gpu.png`` under ``--out``.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_backends import CARDS, KEYS, Peak  # noqa: E402


class GpuPeak:
    """Peak device memory in use (NVML), sampled in a thread; None where NVML is unavailable."""

    def __init__(self):
        self.peak = self.start = None
        self._stop = threading.Event()
        try:
            import pynvml
            pynvml.nvmlInit()
            self._h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._nv = pynvml
            self.start = self.peak = self._used()
        except Exception:
            self._h = None

    def _used(self):
        return self._nv.nvmlDeviceGetMemoryInfo(self._h).used

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._used())
            time.sleep(0.02)

    def __enter__(self):
        if self._h is not None:
            self._t = threading.Thread(target=self._run, daemon=True)
            self._t.start()
        return self

    def __exit__(self, *exc):
        if self._h is not None:
            self._stop.set()
            self._t.join()
            self.peak = max(self.peak, self._used())


def summary_measures():
    from gpurisk.plugins import measure_registry
    return sorted(m for m, r in measure_registry().items() if r.cls.reads == "summary" and r.cls.default)


def host_data(rows: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {k: rng.integers(0, c, rows, dtype=np.int8) for k, c in zip(KEYS, CARDS)}


def sync():
    try:
        import cupy
        cupy.cuda.Device().synchronize()
    except Exception:
        pass


def timed(fn, gpu=False):
    """(seconds, result, host RSS increase, device peak) of ``fn()``."""
    gc.collect()
    sync()
    with Peak({"p": os.getpid()}) as pk, GpuPeak() as gp:
        t0 = time.perf_counter()
        out = fn()
        sync()
        secs = time.perf_counter() - t0
    return secs, out, pk.peak["p"] - pk.start["p"], (gp.peak if gpu else None)


def values(assessment) -> dict:
    out = {}
    for name, r in assessment.measures.items():
        d = r.to_dict()
        out[name] = {k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return out


def same_values(a: dict, b: dict, where: str):
    assert a.keys() == b.keys(), (where, sorted(set(a) ^ set(b)))
    for m in a:
        for k, v in a[m].items():
            w = b[m].get(k)
            ok = (v == w) or (isinstance(v, float) and w is not None and
                              (np.isnan(v) and np.isnan(w) or abs(v - w) <= 1e-12 * max(1.0, abs(v))))
            assert ok, f"{where}: {m}.{k} {v!r} != {w!r}"


def gpu_usable() -> str | None:
    """None when cuDF can run here, else the reason."""
    from gpurisk.backends import gpu_devices, require
    n, why = gpu_devices()
    if n == 0:
        return why
    try:
        require("cudf")
    except Exception as exc:
        return str(exc)
    return None


def write_parquet(cols: dict, keys, path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    pq.write_table(pa.table({k: cols[k] for k in keys}), tmp, row_group_size=1_000_000)
    tmp.rename(path)
    return path


def run(args):
    import pandas as pd

    import gpurisk
    from gpurisk.freq import build_table
    names = summary_measures()
    why_no_gpu = gpu_usable()
    if why_no_gpu:
        print(f"no GPU rows: {why_no_gpu}", flush=True)
    else:
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(0)
        print(f"GPU: {props['name'].decode()}, {props['totalGlobalMem'] / 2**30:.0f} GiB; "
              f"CPU cores: {os.cpu_count()}", flush=True)
    sizes = [int(float(x)) for x in args.rows.split(",")]
    nkeys = [int(x) for x in args.keys.split(",")]
    results = []

    def add(engine, rows, k, secs, cells, n1, host, dev, **extra):
        r = {"engine": engine, "rows": rows, "keys": k, "seconds": secs, "rows_per_s": rows / secs,
             "cells": cells, "n1": n1, "host_peak_mib": host / 2**20,
             "gpu_peak_mib": None if dev is None else dev / 2**20, **extra}
        results.append(r)
        g = "" if dev is None else f"  GPU peak {dev / 2**20:,.0f} MiB"
        print(f"  {engine:20s} {rows:>13,d} rows {k} keys {secs:8.3f} s  {rows / secs:14,.0f} rows/s"
              f"  cells {cells:,}  n1 {n1:,}  host +{host / 2**20:,.0f} MiB{g}", flush=True)

    workdir = Path(args.dir)
    workdir.mkdir(parents=True, exist_ok=True)
    for rows in sizes:
        t = time.perf_counter()
        cols = host_data(rows)
        print(f"data: {rows:,} rows drawn in {time.perf_counter() - t:.1f} s", flush=True)
        for k in nkeys:
            keys = KEYS[:k]
            ref = ref_vals = None
            if rows <= args.pandas_max:
                frame = pd.DataFrame({c: cols[c] for c in keys})
                secs, tab, host, _ = timed(lambda: build_table(frame, keys))
                fof = tab.freq_of_freq()
                ref = (tab.sample_cells, fof.get(1, 0))
                add("pandas build", rows, k, secs, *ref, host, None)
                del tab
                secs, a, host, _ = timed(lambda: gpurisk.assess(frame, keys, fraction=0.01, measures=names))
                ref_vals = values(a)
                add("pandas assess", rows, k, secs, a.table.sample_cells, a.table.n_r(1), host, None)
                if not args.quick:
                    secs, rc, host, _ = timed(lambda: build_table(frame, keys).record_counts())
                    add("pandas record counts", rows, k, secs, *ref, host, None)
                    ref_rc = np.asarray(rc)
                    del rc
                del a, frame
            if not why_no_gpu:
                import cudf
                import cupy
                t0 = time.perf_counter()
                g = cudf.DataFrame({c: cupy.asarray(cols[c]) for c in keys})
                sync()
                h2d = time.perf_counter() - t0
                build_table(g.head(1000), keys, backend="cudf").freq_of_freq()   # warm-up: kernels compile
                secs, tab, host, dev = timed(lambda: (lambda t: (t, t.freq_of_freq()))(
                    build_table(g, keys, backend="cudf")), gpu=True)
                tab, fof = tab
                got = (tab.sample_cells, fof.get(1, 0))
                if ref is not None:
                    assert got == ref, ("cudf build", got, ref)
                add("cudf build", rows, k, secs, *got, host, dev, h2d_s=h2d)
                del tab
                secs, a, host, dev = timed(lambda: gpurisk.assess(g, keys, fraction=0.01, measures=names,
                                                                  backend="cudf"), gpu=True)
                if ref_vals is not None:
                    same_values(ref_vals, values(a), f"cudf assess {rows} x {k}")
                add("cudf assess", rows, k, secs, a.table.sample_cells, a.table.n_r(1), host, dev)
                del a
                if not args.quick:
                    secs, rc, host, dev = timed(lambda: build_table(g, keys, backend="cudf").record_counts(),
                                                gpu=True)
                    if rows <= args.pandas_max:
                        from gpurisk.xp import to_host
                        assert np.array_equal(to_host(rc), ref_rc), "cudf record counts differ from pandas"
                    add("cudf record counts", rows, k, secs, *got, host, dev)
                    del rc
                del g
                gc.collect()
            if rows <= max(args.dask_cuda, args.dask_cpu):
                path = write_parquet(cols, keys, workdir / f"k{k}_{rows}.parquet")

                def file_assess(label, backend, on_gpu, **extra):
                    """One warm-up, then the timed assess of the Parquet file, checked against pandas."""
                    gpurisk.assess(str(path), keys, fraction=0.01, measures=names, backend=backend)
                    secs, a, host, dev = timed(lambda: gpurisk.assess(
                        str(path), keys, fraction=0.01, measures=names, backend=backend), gpu=on_gpu)
                    if ref_vals is not None:
                        same_values(ref_vals, values(a), f"{label} {rows} x {k}")
                    add(label, rows, k, secs, a.table.sample_cells, a.table.n_r(1), host, dev, **extra)

                for engine, on in (("pandas", True), ("cudf", not why_no_gpu)):   # the same file, one process
                    if on and (engine == "cudf" or rows <= args.pandas_max):
                        file_assess(f"{engine} file assess", engine, engine == "cudf")
                for engine, limit, on in (("dask-cpu", args.dask_cpu, True),
                                          ("dask-cuda", args.dask_cuda, not why_no_gpu)):
                    if not on or rows > limit:
                        continue
                    client = start_cluster(engine)
                    try:
                        file_assess(f"{engine} assess", "dask-cudf" if engine == "dask-cuda" else "dask",
                                    engine == "dask-cuda", workers=len(client.scheduler_info()["workers"]))
                    finally:
                        client.close()
                        client.cluster.close() if getattr(client, "cluster", None) else None
                        from gpurisk.backends import _close_local
                        _close_local()
        del cols
        gc.collect()
    return results


def start_cluster(engine):
    """A local cluster set as the default client (gpurisk's counts use the active client)."""
    import distributed
    if engine == "dask-cuda":
        from dask_cuda import LocalCUDACluster
        cluster = LocalCUDACluster(silence_logs=logging.CRITICAL, dashboard_address=None, rmm_async=True,
                                   rmm_allocator_external_lib_list=["cupy"], enable_cudf_spill=True)
    else:
        cluster = distributed.LocalCluster(n_workers=os.cpu_count(), threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=None,
                                           silence_logs=logging.CRITICAL)
    return distributed.Client(cluster)


def table(results):
    print()
    print(f"{'engine':22s} {'rows':>13s} {'keys':>4s} {'seconds':>9s} {'rows/s':>15s} {'cells':>12s} "
          f"{'n1':>12s} {'host +MiB':>10s} {'GPU MiB':>9s}")
    for r in results:
        gm = "-" if r["gpu_peak_mib"] is None else f"{r['gpu_peak_mib']:,.0f}"
        print(f"{r['engine']:22s} {r['rows']:>13,d} {r['keys']:>4d} {r['seconds']:9.3f} {r['rows_per_s']:15,.0f} "
              f"{r['cells']:12,d} {r['n1']:12,d} {r['host_peak_mib']:10,.0f} {gm:>9s}")
    by = {(r["engine"], r["rows"], r["keys"]): r["seconds"] for r in results}
    print("\nspeed-up of the GPU over pandas (same rows, same keys):")
    for (e, rows, k), s in sorted(by.items()):
        if e.startswith("cudf") or e.startswith("dask-cuda"):
            what = e.split(" ", 1)[1]
            base = by.get(("pandas " + ("file assess" if e.startswith("dask") else what), rows, k))
            if base:
                print(f"  {e:20s} {rows:>13,d} rows {k} keys: {base / s:6.1f}x")


def plot(results, png: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, k in zip(axes, sorted({r["keys"] for r in results})):
        for e in sorted({r["engine"] for r in results}):
            pts = sorted((r["rows"], r["rows_per_s"]) for r in results if r["engine"] == e and r["keys"] == k)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=e)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("rows")
        ax.set_title(f"{k} keys")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("rows per second")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1e7,1e8", help="comma-separated sizes")
    ap.add_argument("--keys", default="4,8", help="comma-separated key counts (first k of the 8)")
    ap.add_argument("--pandas-max", type=float, default=1e8, help="largest size run on pandas")
    ap.add_argument("--dask-cuda", type=float, default=0, help="largest size run on dask-cuda (0: none)")
    ap.add_argument("--dask-cpu", type=float, default=0, help="largest size run on CPU Dask (0: none)")
    ap.add_argument("--quick", action="store_true", help="skip the record-count rows")
    ap.add_argument("--dir", default="/tmp/gpurisk_bench_gpu", help="where the Parquet files go")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"), help="folder for the JSON and PNG")
    args = ap.parse_args(argv)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    results = run(args)
    table(results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_gpu.json").write_text(json.dumps(results, indent=1))
    try:
        plot(results, out / "bench_gpu.png")
        print(f"\nwrote {out / 'bench_gpu.json'} and {out / 'bench_gpu.png'}")
    except Exception as exc:
        print(f"\nwrote {out / 'bench_gpu.json'}; no PNG ({type(exc).__name__}: {exc})")


if __name__ == "__main__":
    main()
