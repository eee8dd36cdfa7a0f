"""Benchmark of ``gpurisk scan`` against building the finest table alone and a loop of pandas groupbys.

For each data set (a synthetic register, FARS, Adult; each a register with a seeded 10 % sample flag)
and every subset of its 8 keys of size <= 4 (162 combinations), with every file-level measure:

- build: ``gpurisk.build_table`` over all 8 keys (what the scan does once);
- scan:  ``gpurisk.scan(..., output=DIR)`` end to end (read nothing: the frame is in memory; build,
         roll-ups, measures, Parquet rows), with its default roll-up threads (the CPUs this process
         may use, at most 4) and again with ``threads=0`` (everything in one thread);
- groupby loop: per combination ``frame.groupby(keys)["s"].agg(["size", "sum"])`` (F and f), then the
         same measures on those counts. On large data only ``--groupby-combos`` combinations are timed
         (spread over the sizes) and the total is extrapolated per size: said so in the table.

- dask (``--dask-workers``, default 2 local worker processes of one thread; 0 skips it): the same
         scan with ``backend="dask"`` reading the register from a Parquet directory (1 M rows a file),
         with every default measure that reads summaries only, so that no cell reaches the client
         (each combination's summaries are reduced on the workers); beside it the pandas scan with the
         same measures (checked equal, row for row), and the Dask scan that gathers the finest table
         (the same measures without ``cells_on_workers``, the default). The client's peak RSS above
         its level before the scan is sampled every 10 ms (psutil) for both Dask scans.

Targets (issue #4): scan <= 3 x build and >= 30 x faster than the groupby loop on the 10 M-row register.
Before timing, one small scan (20 000 rows) runs so that one-off costs (importing scipy for tau1_hat,
pyarrow's Parquet writer) are not charged to the first data set. Prints a table (wall and CPU
seconds) and writes bench/out/bench_scan.png.

    python bench/bench_scan.py                       # 10 M rows + FARS + Adult
    python bench/bench_scan.py --rows 1000000 --datasets synthetic
"""
from __future__ import annotations

import argparse
import itertools
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# gpurisk's own measures only: a third-party plugin installed in the environment would change the work
os.environ.setdefault("GPURISK_DISABLE_PLUGIN_AUTOLOAD", "1")

import gpurisk  # noqa: E402
from gpurisk.workflows.assess import run_measures  # noqa: E402
from gpurisk.measure import Context  # noqa: E402
from gpurisk.scan.runner import SCAN_DEFAULT_OPTIONS, _measure_names, default_threads  # noqa: E402

CARDS = [2, 100, 6, 17, 10, 50, 12, 5]


def find_data() -> Path:
    from gpurisk.testing.data import find_shared_data
    data = find_shared_data(ROOT)
    if data is None:
        raise SystemExit("real data not found (../shared/data, or set GPURISK_SHARED_DATA)")
    return data


def synthetic(rows: int, seed: int = 1) -> tuple[pd.DataFrame, list[str]]:
    """8 skewed categorical keys (probabilities ~ 1/rank^1.1) and a 10 % Bernoulli sample flag."""
    rng = np.random.default_rng(seed)
    cols = {}
    for i, c in enumerate(CARDS):
        p = 1.0 / np.arange(1, c + 1) ** 1.1
        cols[f"k{i}"] = rng.choice(c, size=rows, p=p / p.sum()).astype(np.int16)
    cols["s"] = rng.random(rows) < 0.1
    return pd.DataFrame(cols), [f"k{i}" for i in range(len(CARDS))]


def real(name: str) -> tuple[pd.DataFrame, list[str]]:
    data = find_data()
    if name == "fars":
        df = pd.read_csv(data / "arx_genetic" / "fars_int.csv", sep=";")
        keys = list(df.columns)
    else:
        df = pd.read_csv(data / "arx" / "adult.csv", sep=";")
        keys = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
                "occupation"]
    df["s"] = np.random.default_rng(7).random(len(df)) < 0.1
    return df, keys


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def groupby_one(df: pd.DataFrame, keys, names, opts, pi, cards, seed=0):
    g = df.groupby(list(keys), observed=True, sort=False)["s"].agg(["size", "sum"])
    F = g["size"].to_numpy(np.int64)
    f = g["sum"].to_numpy(np.int64)
    cats = [list(range(cards[k])) for k in keys]      # measures read only the cardinalities
    t = gpurisk.FreqTable(tuple(keys), cats, np.arange(F.size), f, F)
    ctx = Context(fraction=pi, fraction_source="n/N", seed=seed, options=opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_measures(t, ctx, names)


def bench(name: str, df: pd.DataFrame, keys: list[str], max_size: int, gb_combos: int | None,
          repeat: int) -> dict:
    names = _measure_names(None)
    opts = {m: dict(v) for m, v in SCAN_DEFAULT_OPTIONS.items()}
    combos = [c for r in range(1, max_size + 1) for c in itertools.combinations(keys, r)]
    best = lambda runs: min(runs, key=lambda x: x[1])  # noqa: E731
    b = best([timed(lambda: gpurisk.build_table(df, sorted(keys), sample_flag="s")) for _ in range(repeat)])
    table = b[0]
    pi = table.n / table.N
    tmp = Path(tempfile.mkdtemp(prefix="bench_scan_"))
    scans = {}
    for threads in (None, 0):
        runs = []
        for i in range(repeat):
            out = tmp / f"scan{threads}_{i}.parquet"
            runs.append(timed(lambda: gpurisk.scan(df, keys=keys, max_size=max_size, sample_flag="s",
                                                   output=out, threads=threads)))
        scans[threads] = best(runs)
        assert len(scans[threads][0].results) == len(combos)
    s, s1 = scans[None], scans[0]
    res = s[0]
    cols = [c for c in res.results.columns if c not in ("warnings",)]
    pd.testing.assert_frame_equal(res.results[cols], s1[0].results[cols])   # threads change nothing
    shutil.rmtree(tmp, ignore_errors=True)
    # the groupby loop: all combinations, or a spread-out subset extrapolated per size
    if gb_combos is None or gb_combos >= len(combos):
        chosen = combos
    else:
        chosen = []
        for r in range(1, max_size + 1):
            sized = [c for c in combos if len(c) == r]
            k = max(1, round(gb_combos * len(sized) / len(combos)))
            chosen += [sized[int(j)] for j in np.linspace(0, len(sized) - 1, k)]
    per_size: dict[int, list[tuple[float, float]]] = {}
    cards = {k: int(df[k].nunique(dropna=False)) for k in keys}
    for c in chosen:
        _, w, cpu = timed(lambda: groupby_one(df, c, names, opts, pi, cards))
        per_size.setdefault(len(c), []).append((w, cpu))
    count = {r: sum(1 for c in combos if len(c) == r) for r in per_size}
    gb_w = sum(np.mean([x[0] for x in v]) * count[r] for r, v in per_size.items())
    gb_c = sum(np.mean([x[1] for x in v]) * count[r] for r, v in per_size.items())
    # the cost of theta_hat_dis per combination at the scan default K and at the assess default
    tabs = [gpurisk.freq.lattice.rollup(table, list(c)) for c in combos[-10:]]
    from gpurisk.measures.theta_hat_dis import ThetaHatDIS
    dis = {}
    for K in (SCAN_DEFAULT_OPTIONS["theta_hat_dis"]["K"], 200_000):
        ctx = Context(fraction=pi, options={"theta_hat_dis": {"K": K}})
        _, w, _ = timed(lambda: [ThetaHatDIS().compute(t, ctx) for t in tabs])
        dis[K] = w / len(tabs)
    return {"data": name, "rows": len(df), "cells": int(table.cell_id.size), "combos": len(combos),
            "build_w": b[1], "build_c": b[2], "scan_w": s[1], "scan_c": s[2],
            "scan1_w": s1[1], "scan1_c": s1[2], "threads": default_threads(),
            "gb_w": gb_w, "gb_c": gb_c, "gb_timed": len(chosen), "timings": res.timings,
            "rollups": res.rollups, "cells_read": res.cells_read,
            "cube_elements": res.cube_elements, "dis": dis}


class PeakRSS:
    """The peak resident memory of this process above its level at the start, sampled in a thread."""

    def __init__(self, every: float = 0.01):
        import threading

        import psutil
        self.proc, self.every = psutil.Process(), every
        self.base = self.peak = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            self._stop.wait(self.every)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def above(self) -> float:
        return (self.peak - self.base) / 2**20


def bench_dask(name: str, df: pd.DataFrame, keys: list[str], max_size: int, workers: int,
               memory_limit: str, repeat: int) -> dict:
    """pandas vs Dask scans of the summary-only measures; the client's peak memory on Dask."""
    import distributed
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    names = [m for m in _measure_names(None) if reg[m].cls.reads == "summary"]
    tmp = Path(tempfile.mkdtemp(prefix="bench_scan_dask_"))
    data = tmp / "register"
    data.mkdir()
    step = 1_000_000
    for i, lo in enumerate(range(0, len(df), step)):
        pq.write_table(pa.Table.from_pandas(df.iloc[lo:lo + step], preserve_index=False),
                       data / f"part.{i:04d}.parquet")
    best = lambda runs: min(runs, key=lambda x: x[1])  # noqa: E731
    opts = dict(keys=keys, max_size=max_size, sample_flag="s", measures=names)
    pd_run = best([timed(lambda: gpurisk.scan(df, **opts)) for _ in range(repeat)])
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       memory_limit=memory_limit, dashboard_address=None,
                                       silence_logs=40)
    client = distributed.Client(cluster)
    try:
        gpurisk.scan(str(data), backend="dask", keys=keys[:2], max_size=1, sample_flag="s",
                     measures=names, cells_on_workers=True)      # warm the workers (imports)
        runs = []
        for _ in range(repeat):
            with PeakRSS() as mem:
                out = timed(lambda: gpurisk.scan(str(data), backend="dask", cells_on_workers=True,
                                                 **opts))
            runs.append(out + (mem.above,))
        dk = best(runs)
        with PeakRSS() as gmem:
            _, g_w, _ = timed(lambda: gpurisk.scan(str(data), backend="dask", **opts))  # gathered
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(tmp, ignore_errors=True)
    pd.testing.assert_frame_equal(dk[0].results, pd_run[0].results)     # the same rows
    return {"data": name, "rows": len(df), "measures": len(names), "workers": workers,
            "memory_limit": memory_limit, "pandas_w": pd_run[1], "dask_w": dk[1], "dask_c": dk[2],
            "dask_mem": max(r[3] for r in runs), "gather_w": g_w, "gather_mem": gmem.above}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows of the synthetic register")
    ap.add_argument("--datasets", default="synthetic,fars,adult")
    ap.add_argument("--max-size", type=int, default=4)
    ap.add_argument("--groupby-combos", type=int, default=16,
                    help="combinations timed in the groupby loop on the synthetic data (extrapolated)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N for build and scan")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--dask-workers", type=int, default=2,
                    help="local Dask workers for the Dask scan row (0: no Dask row)")
    ap.add_argument("--dask-memory", default="2GiB", help="memory limit per Dask worker")
    ap.add_argument("--skip-pandas", action="store_true",
                    help="only the Dask rows (no build, pandas scan, groupby loop)")
    args = ap.parse_args(argv)
    print("measures per combination:", ", ".join(_measure_names(None)))
    print(f"roll-up threads by default: {default_threads()} (CPUs usable: {len(os.sched_getaffinity(0))})")
    warm, wkeys = synthetic(20_000, seed=2)
    with tempfile.TemporaryDirectory() as d:
        gpurisk.scan(warm, keys=wkeys, max_size=2, sample_flag="s", output=Path(d) / "warm")
    rows, drows = [], []
    for name in args.datasets.split(","):
        if name == "synthetic":
            df, keys = synthetic(args.rows)
            gb = args.groupby_combos
        else:
            df, keys = real(name)
            gb = None
        print(f"[{name}] {len(df):,} rows, {len(keys)} keys ...", flush=True)
        if not args.skip_pandas:
            rows.append(bench(name, df, keys, args.max_size, gb, args.repeat))
        if args.dask_workers:
            drows.append(bench_dask(name, df, keys, args.max_size, args.dask_workers,
                                    args.dask_memory, args.repeat))
        del df
    if drows:
        gbs = {r["data"]: r["gb_w"] for r in rows}
        hdr = (f"{'data':10s} {'rows':>11s} {'pandas s':>9s} {'dask s':>8s} {'dask/pandas':>11s} "
               f"{'groupby/dask':>12s} {'client MiB':>10s} {'gathered s':>10s} {'gathered MiB':>12s}")
        print("\nscan of the summary-only measures, pandas vs Dask "
              f"({drows[0]['workers']} local workers of one thread, {drows[0]['memory_limit']} each; "
              "client MiB: peak RSS of the client above its level before the scan)")
        print(hdr + "\n" + "-" * len(hdr))
        for r in drows:
            gb = gbs.get(r["data"])
            gbr = f"{gb / r['dask_w']:>12.1f}" if gb else f"{'-':>12s}"
            print(f"{r['data']:10s} {r['rows']:>11,d} {r['pandas_w']:>9.2f} {r['dask_w']:>8.2f} "
                  f"{r['dask_w'] / r['pandas_w']:>11.2f} {gbr} {r['dask_mem']:>10.0f} "
                  f"{r['gather_w']:>10.2f} {r['gather_mem']:>12.0f}")
        print(f"({drows[0]['measures']} measures reading summaries; 'gathered': the same Dask scan "
              "without cells_on_workers (the default), which brings the finest table to the client)")
    if not rows:
        return
    hdr = (f"{'data':10s} {'rows':>11s} {'cells':>9s} {'combos':>6s} {'build s':>8s} {'scan s':>8s} "
           f"{'scan/build':>10s} {'groupby s':>10s} {'groupby/scan':>12s}  notes")
    print("\n" + hdr + "\n" + "-" * len(hdr))
    for r in rows:
        note = ("groupby timed on all combinations" if r["gb_timed"] == r["combos"] else
                f"groupby timed on {r['gb_timed']} combinations, extrapolated per size")
        for kind, b, s, g, lab in (
                ("wall", r["build_w"], r["scan_w"], r["gb_w"], f"scan with {r['threads']} roll-up threads; " + note),
                ("cpu", r["build_c"], r["scan_c"], r["gb_c"], ""),
                ("wall-1t", r["build_w"], r["scan1_w"], r["gb_w"], "scan with threads=0 (one thread)"),
                ("cpu-1t", r["build_c"], r["scan1_c"], r["gb_c"], "")):
            print(f"{r['data'] + ' ' + kind:10s} {r['rows']:>11,d} {r['cells']:>9,d} {r['combos']:>6d} "
                  f"{b:>8.2f} {s:>8.2f} {s / b:>10.2f} {g:>10.2f} {g / s:>12.1f}  {lab}")
    print()
    for r in rows:
        t = r["timings"]
        print(f"{r['data']}: scan breakdown (wall s) build {t['build_s']:.2f}, roll-ups {t['rollup_s']:.2f} "
              f"({r['rollups']} roll-ups reading {r['cells_read']:,} cells of sparse tables and summing "
              f"{r['cube_elements']:,} cube elements), measures+rows "
              f"{t['measures_s']:.2f}; theta_hat_dis per combination: "
              + ", ".join(f"K={k}: {v * 1000:.1f} ms" for k, v in r["dis"].items()))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(rows))
    series = (("build finest table", "build_w"), ("scan (162 combos)", "scan_w"),
              ("scan, one thread", "scan1_w"), ("pandas groupby loop", "gb_w"))
    for j, (lab, key) in enumerate(series):
        ax.bar(x + (j - 1.5) * 0.2, [r[key] for r in rows], 0.2, label=lab)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['data']}\n{r['rows']:,} rows" for r in rows])
    ax.set_yscale("log")
    ax.set_ylabel("seconds (wall, log scale)")
    ax.set_title(f"gpurisk scan: every subset of 8 keys up to size 4, {len(_measure_names(None))} measures")
    ax.legend()
    fig.savefig(out / "bench_scan.png", dpi=110, bbox_inches="tight")
    print(f"\nplot: {out / 'bench_scan.png'}")


if __name__ == "__main__":
    main()
