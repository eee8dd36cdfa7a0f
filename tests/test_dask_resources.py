"""Dask runs that cannot end are stopped before or during the work, in one line (issue 30): more
local workers than cores refused, a worker memory limit too small to hold a partition refused, and a
cluster whose workers all stay paused (memory above Dask's pause threshold) for GPURISK_DASK_STALL
seconds stops the count with a message naming the limit."""
from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk import backends

from conftest import run_cli

pytest.importorskip("distributed")


def test_more_local_workers_than_cores_is_one_line(tmp_path):
    cores = os.cpu_count() or 1
    pd.DataFrame({"k": [1, 2, 2]}).to_csv(tmp_path / "d.csv", index=False)
    t0 = time.perf_counter()
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k", "--fraction", "0.5",
                "--backend", "dask", "--workers", str(cores * 100))
    assert time.perf_counter() - t0 < 30
    assert p.returncode == 2, p.stderr
    [line] = p.stderr.strip().splitlines()
    assert f"--workers {cores * 100} is more than this machine's {cores} cores" in line


@pytest.mark.parametrize("limit", ["64MiB", "100MiB", "200MiB"])
def test_memory_limit_too_small_for_a_worker_is_refused(limit):
    with pytest.raises(gpurisk.BadInput, match=f"'{limit}' is below 256 MiB"):
        backends.memory_limit_bytes(limit)


def test_stall_seconds_from_the_environment(monkeypatch):
    monkeypatch.setenv("GPURISK_DASK_STALL", "nan")
    with pytest.raises(gpurisk.BadInput, match="GPURISK_DASK_STALL='nan'"):
        backends._stall_seconds()
    monkeypatch.setenv("GPURISK_DASK_STALL", "2.5")
    assert backends._stall_seconds() == 2.5
    monkeypatch.delenv("GPURISK_DASK_STALL")
    assert backends._stall_seconds() == backends.STALL_SECONDS


def _pause(dask_scheduler):
    """Mark every worker paused on the scheduler, as Dask does when a worker's memory passes its
    pause threshold: the scheduler then gives it no task."""
    for addr in list(dask_scheduler.workers):
        dask_scheduler.handle_worker_status_change("paused", worker=addr, stimulus_id="test-pause")


def test_paused_workers_stop_the_count_in_one_line(monkeypatch):
    """Workers that can run nothing: the count stops after the stall limit, not never."""
    import logging

    import distributed
    monkeypatch.setenv("GPURISK_DASK_STALL", "2")
    df = pd.DataFrame({"a": np.arange(2000) % 37, "b": np.arange(2000) % 11})
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None, memory_limit="400MiB",
                                  silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        ok = gpurisk.assess(df, ["a", "b"], fraction=0.1, backend="dask", measures=["sample_uniques"])
        assert ok.table.sample_cells == 37 * 11 and ok.measures["sample_uniques"].value == 0
        client.run_on_scheduler(_pause)
        t0 = time.perf_counter()
        with pytest.raises(gpurisk.BadInput, match="all 1 Dask workers stayed paused .* for 2 s"):
            gpurisk.assess(df, ["a", "b"], fraction=0.1, backend="dask", measures=["sample_uniques"])
        assert time.perf_counter() - t0 < 20
        assert client.status in ("closing", "closed")     # the stuck client is not used again


def test_scheduler_address_of_a_stuck_cluster_is_one_line(tmp_path):
    """``--scheduler`` naming a real scheduler on 127.0.0.1 (started here, as a remote cluster
    would be: gpurisk did not start it and only knows its address) whose workers are all paused:
    the command ends with the one stall line, exit 2, within 20 s, and the cluster lives on."""
    import logging

    import distributed
    rng = np.random.default_rng(4)
    pd.DataFrame({"a": rng.integers(0, 40, 3000), "b": rng.integers(0, 9, 3000)}).to_csv(
        tmp_path / "d.csv", index=False)
    args = ["assess", tmp_path / "d.csv", "--keys", "a,b", "--fraction", "0.1", "--backend", "dask",
            "--measures", "sample_uniques", "--json"]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None, memory_limit="400MiB",
                                  silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster, set_as_default=False) as admin:
        address = cluster.scheduler_address
        ok = run_cli(*args, "--scheduler", address, env={"GPURISK_DASK_STALL": "2"})
        assert ok.returncode == 0, ok.stderr                       # the cluster works
        admin.run_on_scheduler(_pause)
        t0 = time.perf_counter()
        p = run_cli(*args, "--scheduler", address, env={"GPURISK_DASK_STALL": "2"})
        took = time.perf_counter() - t0
        assert p.returncode == 2, (p.returncode, p.stderr)
        [line] = p.stderr.strip().splitlines()
        assert line.startswith("gpurisk: error: all 2 Dask workers stayed paused"), line
        assert "for 2 s, so the run cannot go on" in line and "GPURISK_DASK_STALL" in line
        assert took < 20, took
        assert p.stdout == ""
        assert len(admin.scheduler_info()["workers"]) == 2          # a remote cluster is not closed


def test_a_local_cluster_has_a_worker_per_usable_cpu(monkeypatch):
    """docs/environment.md: without --workers, one worker per CPU this process may use (its
    affinity and a CPU quota: usable_cpus), at most LOCAL_WORKERS_MAX; the cluster is started with
    that many (its class stood in for, so nothing starts)."""
    import distributed

    from gpurisk.backends import cluster
    from gpurisk.freq import schedule
    for cpus, want in ((1, 1), (3, 3), (64, cluster.LOCAL_WORKERS_MAX)):
        monkeypatch.setattr(schedule, "usable_cpus", lambda cpus=cpus: cpus)
        assert cluster.default_local_workers() == want
    asked = {}

    class Started(Exception):
        pass

    def local_cluster(**kw):
        asked.update(kw)
        raise Started

    monkeypatch.setattr(schedule, "usable_cpus", lambda: 1)
    monkeypatch.setattr(distributed, "LocalCluster", local_cluster)
    monkeypatch.setattr(cluster, "_LOCAL", {})
    with pytest.raises(Started):
        cluster._local_client(False, None, None)
    assert asked["n_workers"] == 1 and asked["threads_per_worker"] == 1
