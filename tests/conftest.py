"""Shared test fixtures: where the real data is, and how to run the CLI as a user would."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpurisk.testing.data import find_shared_data

ROOT = Path(__file__).resolve().parents[1]


DATA = find_shared_data(ROOT) or ROOT.parent / "shared" / "data"


def data_path(rel: str) -> Path:
    p = DATA / rel
    if not p.exists():
        pytest.skip(f"real data file {p} is not present")
    return p


def run_cli(*args: str, check: bool = False, env: dict | None = None, timeout: float = 300,
            cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m gpurisk ARGS`` in a real subprocess; returns the CompletedProcess."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("COLUMNS", "200")
    if env:
        e.update(env)
    proc = subprocess.run([sys.executable, "-m", "gpurisk", *map(str, args)], capture_output=True,
                          text=True, env=e, timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"gpurisk {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def arx_hierarchy_maps(path) -> list[dict]:
    """An ARX hierarchy CSV (``;``-separated, one row per value, one column per level) as one
    {value: label} dict per level above the values (read with the csv module: the tests' oracle)."""
    import csv
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh, delimiter=";") if r]
    return [{r[0]: r[lev] for r in rows} for lev in range(1, len(rows[0]))]


#: the memory of each worker of the tests' local Dask clusters
WORKER_MEMORY = "400MiB"


@pytest.fixture(scope="module")
def client():
    """A local Dask cluster for one test module: two worker processes of one thread each on the
    loopback, WORKER_MEMORY each (Arrow's default allocator keeps freed pages, which Dask counts as
    unmanaged memory: the system allocator instead)."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       memory_limit=WORKER_MEMORY, silence_logs=40,
                                       env={"ARROW_DEFAULT_MEMORY_POOL": "system"})
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def gpu_available() -> tuple[bool, str]:
    """(usable, reason): a CUDA device that cupy can see."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # pragma: no cover - depends on machine
        return False, f"cupy not importable ({type(exc).__name__})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # pragma: no cover
        return False, f"no CUDA device ({type(exc).__name__}: {exc})"
    return (n > 0), ("" if n > 0 else "no CUDA device")


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
