"""Benchmark of a register scan (issue 40): the whole CLI against the loop an office writes.

A synthetic register (skewed categorical keys of 2-120 categories, one tied pair: ``k1`` is a
function of ``k0``, as region is of municipality; a seeded 1 % sample flag) is written once to one
Parquet file. For each (rows, pool size, max size) and each backend asked for:

- gpurisk: ``gpurisk scan REG.parquet --keys k0,...,k15 --max-size 3 --sample-flag s -o OUT``, the
  whole command in a subprocess (reading the Parquet file included), with its default measures: on
  a register the exact E and τ1 lead (issue 40). Its peak resident memory (psutil, sampled every
  20 ms, in GiB) is reported for the process and its children together (``peak_gb``), for the process
  alone (``client_gb``: the client, and a local cluster's scheduler) and for its largest child
  (``worker_gb``: a Dask worker; 0 on pandas).
- the loop: per combination ``frame.groupby(keys)["s"].agg(["size", "sum"])`` (F and f), then
  E = Σ_{f=1} 1/F and τ1 = #{f = 1, F = 1}, on the frame already in memory (reading it not
  charged). Only ``--loop-combos`` combinations are timed, spread over the sizes, and the total is
  extrapolated per size: the table says so.
- every row the loop timed is checked equal (E to 1e-9 relative, τ1 exactly) to gpurisk's, and every
  row of each later backend's scan equal to the first backend's (counts exactly, floats to 1e-9
  relative): dask-cuda against cuDF, Dask against pandas.

Backends: ``pandas`` (default), ``dask`` (2 local workers of ``--worker-memory`` each,
``--cells-on-workers``), ``cudf`` and ``dask-cudf`` (only where a GPU is present; dask-cuda's one
worker per GPU, ``--cells-on-workers``). ``--backends-at 4=cudf`` runs other backends for one max
size; the loop times each size once per register, whatever the max sizes. Prints a table and
writes bench/out/bench_register_scan.png (time against combinations).

    python bench/bench_register_scan.py --rows 2000000
    python bench/bench_register_scan.py --rows 2000000,20000000 --pool 16 --max-size 3
    python bench/bench_register_scan.py --rows 20000000 --backends pandas,dask
    python bench/bench_register_scan.py --rows 100000000 --pool 20 --max-size 3,4 \
        --backends cudf,dask-cudf --backends-at 4=cudf --loop-combos 1
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


def register(rows: int, pool: int, seed: int = 40) -> pd.DataFrame:
    """``pool`` skewed keys (probabilities ~ 1/rank^1.1; cardinalities cycling 2-120), ``k1`` a
    function of ``k0`` (the tied pair), and a 1 % sample flag ``s``."""
    rng = np.random.default_rng(seed)
    cards = [120, 12, 2, 100, 6, 17, 10, 50, 5, 80, 3, 25, 9, 40, 4, 60, 7, 30, 15, 8][:pool]
    cols = {}
    for i, c in enumerate(cards):
        if i == 1:                                   # tied to k0: k0's category folded into 12
            cols["k1"] = (cols["k0"] % 12).astype(np.int8)
            continue
        p = 1.0 / np.arange(1, c + 1) ** 1.1
        cols[f"k{i}"] = choice(rng, p / p.sum(), rows).astype(np.int8 if c < 128 else np.int16)
    cols["s"] = rng.random(rows) < 0.01
    return pd.DataFrame(cols)


def choice(rng: np.random.Generator, p: np.ndarray, rows: int) -> np.ndarray:
    """``rng.choice(len(p), size=rows, p=p)``, the same draws bit for bit (numpy's own steps: the
    normalised cumulative sum, one uniform per row, ``searchsorted(side="right")``), with the
    search over the rows split across threads (numpy releases the GIL there): 100 M rows of a
    20-key register are otherwise minutes of one core."""
    from concurrent.futures import ThreadPoolExecutor
    cdf = np.asarray(p, dtype=np.float64).cumsum()
    cdf /= cdf[-1]
    u = rng.random(rows)
    out = np.empty(rows, np.int64)
    step = 1 << 22

    def part(i: int) -> None:
        out[i:i + step] = cdf.searchsorted(u[i:i + step], side="right")

    with ThreadPoolExecutor() as ex:
        list(ex.map(part, range(0, rows, step)))
    return out


def combos(pool: int, max_size: int) -> list[tuple[str, ...]]:
    keys = [f"k{i}" for i in range(pool)]
    return [c for s in range(1, max_size + 1) for c in itertools.combinations(keys, s)]


def loop_one(df: pd.DataFrame, keys) -> tuple[float, int]:
    g = df.groupby(list(keys), observed=True)["s"].agg(["size", "sum"])
    F, f = g["size"].to_numpy(), g["sum"].to_numpy()
    su = f == 1
    return float(np.sum(1.0 / F[su])), int(np.sum(F[su] == 1))


def time_loop(df, all_combos, per_size: int, seed: int = 1, timed: dict | None = None):
    """(extrapolated seconds, {combo: (E, τ1)}) over ``per_size`` combinations of each size.
    ``timed`` ({size: (seconds per combination, {combo: (E, τ1)})}, filled here) keeps a size's
    timing for the next call on the same frame: a larger max size re-times only its new sizes (the
    picks of a size depend on the size alone)."""
    rng = np.random.default_rng(seed)
    timed = {} if timed is None else timed
    by_size: dict[int, list] = {}
    for c in all_combos:
        by_size.setdefault(len(c), []).append(c)
    total, got = 0.0, {}
    for size, cs in sorted(by_size.items()):
        pick = [cs[i] for i in sorted(rng.choice(len(cs), size=min(per_size, len(cs)), replace=False))]
        if size not in timed:
            t0 = time.perf_counter()
            res = {c: loop_one(df, c) for c in pick}
            timed[size] = ((time.perf_counter() - t0) / len(pick), res)
        per, res = timed[size]
        got.update(res)
        total += per * len(cs)
    return total, got


def peak_rss(proc: subprocess.Popen) -> tuple[int, int, int, int]:
    """(return code, peak RSS in bytes of ``proc`` and its children together, of ``proc`` alone —
    the client, with a local cluster's scheduler —, of its largest child process — a Dask worker
    or nanny, 0 where there is none), sampled every 20 ms."""
    import psutil
    peak = client = child = 0
    p = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            own = p.memory_info().rss
            kids = [c.memory_info().rss for c in p.children(recursive=True)]
        except psutil.Error:
            time.sleep(0.02)
            continue
        peak = max(peak, own + sum(kids))
        client = max(client, own)
        child = max([child] + kids)
        time.sleep(0.02)
    return proc.returncode, peak, client, child


def run_gpurisk(path: Path, pool: int, max_size: int, backend: str, out: Path, args) -> dict:
    keys = ",".join(f"k{i}" for i in range(pool))
    cmd = [sys.executable, "-m", "gpurisk", "scan", str(path), "--keys", keys, "--max-size",
           str(max_size), "--sample-flag", "s", "-o", str(out), "--overwrite", "--json",
           "--no-progress", "--backend", backend]
    if backend == "dask":
        cmd += ["--workers", "2", "--memory-limit", args.worker_memory, "--cells-on-workers"]
    elif backend == "dask-cudf":                # one worker per GPU, dask-cuda's default
        cmd += ["--cells-on-workers"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    box = {}
    reader = threading.Thread(target=lambda: box.update(out=proc.communicate()))
    reader.start()
    rc, peak, client, child = peak_rss(proc)
    reader.join()
    wall = time.perf_counter() - t0
    stdout, stderr = box["out"]
    if rc != 0:
        raise SystemExit(f"gpurisk scan failed ({backend}): {stderr.strip().splitlines()[-1:]}")
    return {"wall": wall, "peak": peak, "client": client, "child": child,
            "summary": json.loads(stdout)}


def check(out: Path, oracle: dict) -> int:
    """Rows of gpurisk's scan that equal the loop's (E to 1e-9 relative, τ1 exactly); raises on a
    difference."""
    rows = pd.read_parquet(out, columns=["keys", "matches", "tau1"])
    by = {tuple(k): (m, t) for k, m, t in zip(rows["keys"], rows["matches"], rows["tau1"])}
    for c, (e, t) in oracle.items():
        m, tt = by[tuple(c)]
        if not (math.isclose(m, e, rel_tol=1e-9) and int(tt) == t):
            raise SystemExit(f"row {c} differs: gpurisk E={m}, tau1={tt}; loop E={e}, tau1={t}")
    return len(oracle)


def same_rows(out: Path, first: Path) -> int:
    """Every row of scan ``out`` equals scan ``first``'s (another backend's run of the same
    combinations): the same combinations, counts equal, floats to 1e-9 relative; the number of rows,
    or SystemExit naming the first difference."""
    a, b = pd.read_parquet(out), pd.read_parquet(first)
    a = a.assign(keys=a["keys"].map(tuple)).set_index("keys").sort_index()
    b = b.assign(keys=b["keys"].map(tuple)).set_index("keys").sort_index()
    if list(a.index) != list(b.index):
        raise SystemExit(f"{out.name} and {first.name} scanned different combinations")
    for col in [c for c in b.columns if c in a.columns and c not in ("order", "warnings")]:
        x, y = a[col], b[col]
        if pd.api.types.is_float_dtype(y):
            ok = np.isclose(x.to_numpy(float), y.to_numpy(float), rtol=1e-9, atol=0, equal_nan=True)
        else:
            ok = ((x.astype(str) == y.astype(str)) | (x.isna() & y.isna())).to_numpy()
        if not ok.all():
            k = a.index[~ok][0]
            raise SystemExit(f"{out.name} differs from {first.name} in {col} at {k}: {x[k]!r} != {y[k]!r}")
    return len(a)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="2000000", help="comma-separated register sizes")
    ap.add_argument("--pool", default="16", help="comma-separated pool sizes (16, 20)")
    ap.add_argument("--max-size", default="3", help="comma-separated largest combination sizes")
    ap.add_argument("--backends", default="pandas", help="pandas,dask,cudf,dask-cudf")
    ap.add_argument("--loop-combos", type=int, default=6, help="combinations the loop times per size")
    ap.add_argument("--worker-memory", default="3GB", help="memory of each Dask worker")
    ap.add_argument("--backends-at", default="",
                    help="other backends for a max size, e.g. 4=cudf or 4=pandas+dask")
    ap.add_argument("--keep", default=None,
                    help="a folder to keep each register's Parquet file in (reg_ROWS_POOL.parquet)")
    ap.add_argument("--png", default=str(OUT / "bench_register_scan.png"))
    args = ap.parse_args(argv)
    at = {int(k): v.split("+") for k, v in (x.split("=") for x in args.backends_at.split(",") if x)}
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_register_") as tmp:
        for rows in [int(float(r)) for r in args.rows.split(",")]:
            for pool in [int(p) for p in args.pool.split(",")]:
                t0 = time.perf_counter()
                df = register(rows, pool)
                path = Path(args.keep or tmp) / f"reg_{rows}_{pool}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                df.to_parquet(path, index=False, row_group_size=1_000_000)
                print(f"{rows:>11,} rows  pool {pool}: register made and written in "
                      f"{time.perf_counter() - t0:.1f} s", flush=True)
                timed: dict = {}
                for max_size in [int(m) for m in args.max_size.split(",")]:
                    cs = combos(pool, max_size)
                    loop_s, oracle = time_loop(df, cs, args.loop_combos, timed=timed)
                    first = None
                    for b, backend in enumerate(at.get(max_size, args.backends.split(","))):
                        out = Path(tmp) / f"scan_{b}_{backend}.parquet"
                        g = run_gpurisk(path, pool, max_size, backend, out, args)
                        checked = check(out, oracle)
                        same = "" if first is None else f", all {same_rows(out, first)} rows equal to the first backend's"
                        first = first or out
                        row = {"rows": rows, "pool": pool, "max_size": max_size, "combos": len(cs),
                               "backend": backend, "gpurisk_s": g["wall"], "loop_s": loop_s,
                               "speedup": loop_s / g["wall"], "peak_gb": g["peak"] / 2**30,
                               "client_gb": g["client"] / 2**30, "worker_gb": g["child"] / 2**30,
                               "ms_per_combo_per_M": 1e3 * g["wall"] / len(cs) / (rows / 1e6),
                               "rank_by": g["summary"]["rank_by"], "checked": checked}
                        results.append(row)
                        print(f"{rows:>11,} rows  pool {pool}  <= {max_size} keys  {len(cs):>5} combos  "
                              f"{backend:<9} gpurisk {g['wall']:7.1f} s  loop {loop_s:8.1f} s "
                              f"(extrapolated from {len(oracle)})  {loop_s / g['wall']:5.1f}x  "
                              f"peak {g['peak'] / 2**30:5.2f} GiB (client {g['client'] / 2**30:.2f}, "
                              f"largest child {g['child'] / 2**30:.2f})  "
                              f"{row['ms_per_combo_per_M']:.2f} ms/combo/M rows  "
                              f"{checked} rows equal to the loop{same}", flush=True)
                del df
    table = pd.DataFrame(results)
    print()
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (rows, backend), g in table.groupby(["rows", "backend"]):
        ax.plot(g["combos"], g["gpurisk_s"], "o-", label=f"gpurisk {backend}, {rows / 1e6:g} M rows")
    for rows, g in table.drop_duplicates(["rows", "pool", "max_size"]).groupby("rows"):
        ax.plot(g["combos"], g["loop_s"], "x--", label=f"pandas loop, {rows / 1e6:g} M rows")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("combinations")
    ax.set_ylabel("seconds (whole CLI; loop extrapolated)")
    ax.set_title("register scan, 1 % flagged")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
