"""bench/bench_register_scan.py runs end to end on a small register: the whole CLI scan, the pandas
loop, and its check that every timed row equals the loop's E and τ1 (it exits non-zero on a
difference)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

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


def _gpu_usable() -> bool:
    try:
        import cupy
        import cudf  # noqa: F401
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def test_gpu_checks_script_says_when_there_is_no_gpu(tmp_path):
    """bench/gpu_checks.sh parses, and on a machine without a usable GPU says so and runs nothing
    (exit 0); the GPU steps themselves run only on a lent device."""
    import os
    import subprocess
    import sys

    import pytest
    script = ROOT / "bench" / "gpu_checks.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if _gpu_usable():
        pytest.skip("a GPU is usable here: the script would run the checks")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    out = tmp_path / "gpu"                         # named relative to where it is run from
    r = subprocess.run(["bash", str(script), "gpu"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0 and "no usable GPU here" in r.stdout and out.is_dir()
    assert not any(out.iterdir())                   # nothing was run
