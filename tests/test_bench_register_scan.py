"""bench/bench_register_scan.py runs end to end on a small register: the whole CLI scan, the pandas
loop, and its check that every timed row equals the loop's E and τ1 (it exits non-zero on a
difference)."""
from __future__ import annotations

import importlib.util

from conftest import ROOT


def test_register_bench_runs_and_checks_its_rows(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_register_scan",
                                                  ROOT / "bench" / "bench_register_scan.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    png = tmp_path / "b.png"
    bench.main(["--rows", "30000", "--pool", "6", "--max-size", "2", "--loop-combos", "2",
                "--png", str(png)])
    out = capsys.readouterr().out
    assert "21 combos" in out and "rows equal to the loop" in out and png.exists()
    assert "client" in out and "largest child 0.00" in out    # pandas: one process, no workers
    # the register's tie: k1 is a function of k0
    reg = bench.register(1000, 6)
    assert reg.groupby("k0")["k1"].nunique().max() == 1 and 0.0 < reg["s"].mean() < 0.05


def test_register_draws_equal_numpys_choice():
    """The bench's threaded draw is ``Generator.choice`` bit for bit (the registers measured before
    it stay the same registers)."""
    import numpy as np
    spec = importlib.util.spec_from_file_location("bench_register_scan",
                                                  ROOT / "bench" / "bench_register_scan.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    p = 1.0 / np.arange(1, 121) ** 1.1
    p /= p.sum()
    rows = (1 << 22) + 12345                        # more than one thread's slice
    want = np.random.default_rng(7).choice(120, size=rows, p=p)
    rng = np.random.default_rng(7)
    assert np.array_equal(bench.choice(rng, p, rows), want)
    after = np.random.default_rng(7)
    after.choice(120, size=rows, p=p)
    assert rng.random() == after.random()           # the generator is left where choice leaves it
