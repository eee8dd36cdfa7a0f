"""The estimated headline of a scan on Dask: Ê and τ̂1 fitted on the workers, against the finest
table brought to the client, and against pandas (issue 40: the finest table never on the client;
issue 43: Dask prints the same headline as pandas).

A sample (no population, π given) is scanned by the CLI, one child process per run, three ways:

- ``pandas``: ``gpurisk scan F --keys ... --max-size M --fraction P --output D``;
- ``dask, brought here``: the same with ``--backend dask --workers W --memory-limit L --cells-here``
  (the rule before stop 57: the finest table gathered to the client, rolled up and
  every combination fitted there);
- ``dask, kept``: ``--backend dask ...`` (the default): each combination's table built on a worker
  from its merged cells and Ê and τ̂1 fitted there (``gpurisk/freq/subsets.py``, ``table_measures``).

Wall seconds (best of ``--repeat``), the client process's peak resident memory (psutil, sampled every
20 ms: the child alone, not its workers), the rank column, and whether every column of every row
equals the pandas scan's bit for bit (the script exits 1 where one does not). The load average is
printed beside the table (a shared machine: compare numbers of one run).

    python bench/bench_scan_dask_headline.py --synthetic 2e6
    python bench/bench_scan_dask_headline.py --data reg_20000000_16.parquet \\
        --keys k0,k1,k2,k3,k4,k5,k6,k7,k8,k9,k10,k11,k12,k13,k14,k15 --max-size 3 --fraction 0.01

``--synthetic N``: N records of bench_backends' tied register (8 int8 keys of 2-100 categories,
k1 tied to k0), every record in the sample, written to a temporary Parquet file.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

#: (label, extra CLI arguments); the first is the reference the others are checked against
WAYS = (("pandas", []),
        ("dask, brought here", ["--backend", "dask", "--cells-here"]),
        ("dask, kept", ["--backend", "dask"]))


def run_cli(args: list[str]) -> tuple[float, int]:
    """(wall seconds, peak resident bytes of the process alone) of ``python -m gpurisk <args>`` in
    a child process (bench_register_scan's :func:`peak_rss`, its output read by a thread of its
    own); a failure raises with the child's last lines."""
    from bench_register_scan import peak_rss
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gpurisk", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    box: dict = {}
    reader = threading.Thread(target=lambda: box.update(out=proc.communicate()))
    reader.start()
    rc, _, client, _ = peak_rss(proc)
    reader.join()
    wall = time.perf_counter() - t0
    out, err = box["out"]
    if rc:
        raise SystemExit(f"gpurisk {' '.join(args[:2])} failed ({rc}): "
                         + "\n".join((err or out).splitlines()[-5:]))
    return wall, client


def same_rows(a, b) -> bool:
    """Every column of every row equal, floats bit for bit (NaN equal to NaN)."""
    import numpy as np
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return False
    for c in a.columns:
        x, y = a[c], b[c]
        if x.dtype.kind == "f":
            if not np.array_equal(x.to_numpy(), y.to_numpy(), equal_nan=True):
                return False
        elif x.astype(str).tolist() != y.astype(str).tolist():
            return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="a sample file (Parquet or CSV)")
    ap.add_argument("--synthetic", type=float, help="records of a synthetic sample instead")
    ap.add_argument("--keys", help="keys (default: the synthetic sample's eight)")
    ap.add_argument("--max-size", type=int, default=3)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="3GB")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args(argv)
    if (a.data is None) == (a.synthetic is None):
        ap.error("give one of --data and --synthetic")
    from gpurisk.scan import read_scan
    with tempfile.TemporaryDirectory(prefix="gpurisk-bench-") as tmp:
        tmp = Path(tmp)
        if a.synthetic is not None:
            from bench_backends import KEYS, tied_register
            data = tmp / "sample.parquet"
            tied_register(int(a.synthetic)).drop(columns="s").to_parquet(data, index=False)
            keys = a.keys or ",".join(KEYS)
        else:
            data, keys = Path(a.data), a.keys
            if not keys:
                ap.error("--data needs --keys")
        base = ["scan", str(data), "--keys", keys, "--max-size", str(a.max_size),
                "--fraction", str(a.fraction), "--no-progress"]
        dask = ["--workers", str(a.workers), "--memory-limit", a.memory_limit]
        rows, ref, ok = [], None, True
        for label, extra in WAYS:
            best, peak, res = None, 0, None
            for r in range(max(1, a.repeat)):
                out = tmp / f"scan-{len(rows)}-{r}"
                wall, rss = run_cli(base + extra + (dask if "dask" in extra else [])
                                    + ["--output", str(out)])
                best = wall if best is None else min(best, wall)
                peak = max(peak, rss)
                res = read_scan(out)
            frame = res.results
            if ref is None:
                ref = frame
            same = same_rows(ref, frame)
            ok &= same
            rows.append((label, best, peak / 2**20, res.rank_by, len(frame), same))
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\ngpurisk scan of {data.name if a.data else f'{int(a.synthetic):,} synthetic records'}"
          f" x {len(keys.split(','))} keys, <= {a.max_size} keys, pi = {a.fraction}; Dask: "
          f"{a.workers} workers of {a.memory_limit}; wall best of {a.repeat}; "
          f"load average {load} on {os.cpu_count()} CPUs")
    print(f"{'way':<20} {'wall s':>8} {'client MB':>10} {'ranked by':<12} {'rows':>6}  rows equal to pandas'")
    print("-" * 82)
    for label, wall, mb, rank, n, same in rows:
        print(f"{label:<20} {wall:8.2f} {mb:10.0f} {rank:<12} {n:6d}  {'yes' if same else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
