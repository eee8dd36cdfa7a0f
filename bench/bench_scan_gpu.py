"""A whole scan on one GPU (cuDF) against pandas, with and without the headline's Ê and τ̂1.

    python bench/bench_scan_gpu.py                      # 1e7 rows, best of 2
    python bench/bench_scan_gpu.py --rows 1e7,3e7 --repeat 2

Data: a register of ``--rows`` records over the 8 int8 keys of ``bench_backends.py`` (cardinalities
2, 100, 6, 17, 10, 50, 12, 5), drawn on the host with a fixed seed, the second key tied to the first
(k2 = 37·k1 + U{0..7} mod 100: an interaction for the model choice to find), and a 1 % Bernoulli
sample flag, so the sample holds about rows/100 records. Every one of the 255 combinations is
scanned (``gpurisk.scan(..., sample_flag=..., threads=0)``) four ways: pandas and cuDF (the frame
already on the device), each with the default measures and with the default measures minus
``matches_ll`` and ``tau1_ll`` (whose model choice runs on the host: its cost is the difference).
The cuDF rows are checked against the pandas rows (every column; floats to 1e-12 relative). Without
cuDF the pandas rows alone run. Prints the table; ``--json`` writes it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_backends import KEYS, tied_register  # noqa: E402

import gpurisk  # noqa: E402
from gpurisk.scan.runner import SCAN_HEADLINE, _measure_names  # noqa: E402


def same_rows(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The columns where b differs from a (floats beyond 1e-12 relative)."""
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    bad = []
    for c in a.columns:
        if a[c].dtype.kind == "f":
            if not np.allclose(a[c].to_numpy(), b[c].to_numpy(), rtol=1e-12, atol=0,
                               equal_nan=True):
                bad.append(c)
        elif a[c].astype(str).tolist() != b[c].astype(str).tolist():
            bad.append(c)
    return bad


def bench(rows: int, repeat: int) -> list[dict]:
    frame = tied_register(rows)
    names = _measure_names(None)
    without = [m for m in names if m not in SCAN_HEADLINE]
    frames = {"pandas": frame}
    try:
        import cudf
        frames["cudf"] = cudf.from_pandas(frame)
    except ImportError as exc:
        print(f"no cuDF here ({exc}): the pandas rows only", flush=True)
    out, results = [], {}
    for engine, df in frames.items():
        for what, ms in (("default", names), ("without Ê, τ̂1", without)):
            best = None
            for _ in range(repeat):
                t0 = time.perf_counter()
                res = gpurisk.scan(df, keys=KEYS, sample_flag="s", measures=ms, threads=0,
                                   backend=engine)
                secs = time.perf_counter() - t0
                best = secs if best is None else min(best, secs)
            results[(engine, what)] = res.results
            out.append({"rows": rows, "n": int(frame["s"].sum()), "engine": engine,
                        "measures": what, "combinations": len(res.results), "seconds": best})
            print(f"  {engine:7s} {what:15s} {rows:>12,} rows  {best:8.2f} s", flush=True)
    if "cudf" in frames:
        bad = same_rows(results[("pandas", "default")], results[("cudf", "default")])
        print("  cuDF rows equal the pandas rows:", "yes" if not bad else f"NO ({bad})", flush=True)
        if bad:
            raise SystemExit(1)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="1e7", help="comma-separated register sizes")
    ap.add_argument("--repeat", type=int, default=2, help="best of N")
    ap.add_argument("--json", default=None, help="write the table here")
    a = ap.parse_args(argv)
    table = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rows in [int(float(r)) for r in a.rows.split(",")]:
            table += bench(rows, a.repeat)
    print(f"\n{'rows':>12} {'sample':>9} {'engine':7} {'measures':15} {'combos':>6} {'seconds':>8}")
    for r in table:
        print(f"{r['rows']:>12,} {r['n']:>9,} {r['engine']:7} {r['measures']:15} "
              f"{r['combinations']:>6} {r['seconds']:>8.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
