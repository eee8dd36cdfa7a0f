"""A Dask worker killed (SIGKILL) while a scan counts on a local cluster: the scheduler re-runs the
lost partitions on the surviving worker and the scan's result equals the pandas one. Same seed, same
numbers on pandas and Dask for the seeded Monte Carlo measure."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pandas as pd
import pytest

import gpurisk

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

NPART, ROWS = 8, 400


def _data(i):
    rng = np.random.default_rng(i)
    return pd.DataFrame({"a": rng.integers(0, 30, ROWS), "b": rng.integers(0, 4, ROWS),
                         "c": rng.integers(0, 3, ROWS)})


def _part(i):
    time.sleep(0.2)                        # slow partitions: the kill lands mid-count
    return _data(i)


def _with_a_worker_killed(client, run):
    """``run()``'s value, one of the client's workers SIGKILLed 0.6 s after it started (checked to
    have happened while it ran)."""
    victim = sorted(client.run(os.getpid).values())[0]
    killed = []

    def kill_later():
        time.sleep(0.6)
        os.kill(victim, signal.SIGKILL)
        killed.append(time.perf_counter())

    th = threading.Thread(target=kill_later)
    t0 = time.perf_counter()
    th.start()
    got = run()
    t_done = time.perf_counter()
    th.join()
    assert len(killed) == 1 and t0 < killed[0] < t_done   # killed while it was running
    return got


def test_worker_killed_during_a_scan_is_recovered(tmp_path):
    frame = pd.concat([_data(i) for i in range(NPART)], ignore_index=True)
    ref = gpurisk.scan(frame, keys=["a", "b", "c"], fraction=0.1,
                       measures=["sample_uniques", "theta_hat"]).results
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        ddf = dd.from_map(_part, list(range(NPART)))
        got = _with_a_worker_killed(client, lambda: gpurisk.scan(
            ddf, keys=["a", "b", "c"], fraction=0.1, backend="dask",
            measures=["sample_uniques", "theta_hat"]).results)
    cols = ["combo", "n", "cells", "n1", "n2", "sample_uniques", "theta_hat"]
    pd.testing.assert_frame_equal(got[cols].reset_index(drop=True), ref[cols].reset_index(drop=True))


def test_worker_killed_while_summaries_reduce_on_the_cluster():
    """The summary path (cells kept on the workers, only frequencies of frequencies come back): a
    worker SIGKILLed mid-run loses its partitions and buckets; the scheduler re-runs them on the
    other worker and every summary measure equals pandas'."""
    frame = pd.concat([_data(i) for i in range(NPART)], ignore_index=True)
    names = ["sample_uniques", "theta_hat", "tau1_hat", "k_anonymity", "matches_hat"]
    ref = gpurisk.assess(frame, ["a", "b", "c"], fraction=0.1, measures=names)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, host="127.0.0.1") as cluster, \
            distributed.Client(cluster) as client:
        ddf = dd.from_map(_part, list(range(NPART)))
        got = _with_a_worker_killed(client, lambda: gpurisk.assess(
            ddf, ["a", "b", "c"], fraction=0.1, backend="dask", measures=names))
    from gpurisk.freq.summary import SummaryTable
    assert isinstance(got.table, SummaryTable)          # the cells stayed on the workers
    for m in names:
        a, b = ref.measures[m].to_dict(), got.measures[m].to_dict()
        assert a == b, m


def test_same_seed_same_numbers_on_pandas_and_dask():
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"a": rng.integers(0, 600, 3000), "b": rng.integers(0, 5, 3000)})
    kw = dict(fraction=0.05, measures=["theta_hat_dis", "theta_hat"], seed=17,
              options={"theta_hat_dis": {"K": 20_000}})
    p = gpurisk.assess(df, ["a", "b"], **kw)
    d = gpurisk.assess(dd.from_pandas(df, npartitions=4), ["a", "b"], backend="dask", **kw)
    assert 0 < p.measures["theta_hat_dis"].value == d.measures["theta_hat_dis"].value
    assert p.measures["theta_hat"].value == d.measures["theta_hat"].value
    other = gpurisk.assess(df, ["a", "b"], **{**kw, "seed": 18})
    assert other.measures["theta_hat_dis"].value != p.measures["theta_hat_dis"].value


def test_killed_worker_gives_one_clear_line(monkeypatch, capsys):
    """When the scheduler gives up (a task killed 3 workers), the CLI says so in one line, exit 1."""
    from distributed.scheduler import KilledWorker

    import sys
    from gpurisk.cli import main
    mod = sys.modules["gpurisk.workflows.assess"]

    def boom(*a, **k):
        raise KilledWorker("count-part-3", "tcp://127.0.0.1:1", 3)

    from gpurisk import backends
    from gpurisk.backends import cluster as clusters
    monkeypatch.setattr(mod, "assess_with", boom)      # what `gpurisk assess` calls
    monkeypatch.setattr(backends.config, "memory_limit", None)   # the option below sets it
    monkeypatch.setattr(clusters, "_LOCAL", {})   # no cluster of an earlier test is asked
    monkeypatch.delenv("GPURISK_DEBUG", raising=False)   # else the traceback, as asked
    with pytest.raises(SystemExit) as e:
        main(["assess", "example:adult", "--keys", "age,sex", "--memory-limit", "1.5GiB"])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpurisk: error: Dask workers died")
    assert "each worker is limited to 1.50 GiB" in err[0] and "--memory-limit" in err[0]


def test_worker_memory_note_reads_the_running_cluster(monkeypatch):
    """The limit named in that line is read from the local cluster gpurisk started (here 2 workers
    of 300 MiB); with none running, from the setting."""
    from gpurisk import backends
    from gpurisk.backends import cluster as clusters
    monkeypatch.setattr(backends.config, "memory_limit", None)
    monkeypatch.delenv(backends.ENV_MEMORY_LIMIT, raising=False)
    monkeypatch.setattr(clusters, "_LOCAL", {})
    assert backends.worker_memory_note() == ""
    monkeypatch.setenv(backends.ENV_MEMORY_LIMIT, "512MiB")
    assert backends.worker_memory_note() == "each worker is limited to 0.50 GiB"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None, memory_limit="300MiB") as cluster, \
            distributed.Client(cluster) as client:
        monkeypatch.setitem(clusters._LOCAL, ("test",), client)
        assert backends.worker_memory_note() == "each worker is limited to 0.29 GiB (2 workers)"


@pytest.mark.slow
@pytest.mark.parametrize("ours", [None, "131072"])
def test_local_workers_keep_glibc_malloc_defaults(monkeypatch, ours):
    """The local cluster gpurisk starts leaves out the MALLOC_TRIM_THRESHOLD_=65536 that Dask's
    nannies set by default (it turns off glibc's sliding mmap threshold: every array above
    128 KiB is mapped and faulted in afresh), unless this process sets the variable itself, which
    the workers then inherit; its workers run TrimWhenFull. The setting asked of Dask is unchanged
    after the start."""
    import dask

    from gpurisk.backends import cluster as clusters
    from gpurisk.backends import malloc
    key = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    before = dask.config.get(key, None)
    if ours is None:
        monkeypatch.delenv(malloc.MALLOC_TRIM, raising=False)
    else:
        monkeypatch.setenv(malloc.MALLOC_TRIM, ours)
    monkeypatch.setattr(clusters, "_LOCAL", {})
    client = clusters._local_client(False, 1, "1GiB")
    try:
        got = set(client.run(os.environ.get, malloc.MALLOC_TRIM).values())
        plugins = client.run(lambda dask_worker: sorted(dask_worker.plugins))
    finally:
        clusters._close_local()
    assert got == {ours}
    assert all(malloc.TrimWhenFull.name in names for names in plugins.values()), plugins
    assert dask.config.get(key, None) == before


class _Worker:
    def __init__(self, limit):
        self.memory_manager = type("M", (), {"memory_limit": limit})()


@pytest.mark.parametrize("limit,rss,trims", [(1000, 700, 1), (1000, 500, 0), (None, 10**12, 0)])
def test_trim_when_full_trims_only_above_the_target(monkeypatch, limit, rss, trims):
    """After a task (a transition out of "executing") the plugin calls malloc_trim(0) only where
    the worker's resident memory is above Dask's target fraction (0.6) of its limit; a worker with
    no limit is never trimmed; other transitions never trim."""
    import dask

    from gpurisk.backends import malloc
    calls = []
    monkeypatch.setattr(malloc, "_libc", lambda: calls.append)
    monkeypatch.setattr(malloc, "_rss", lambda: rss)
    plugin = malloc.TrimWhenFull()
    with dask.config.set({malloc.TARGET_KEY: 0.6}):
        plugin.setup(_Worker(limit))
    plugin.transition("k", "waiting", "ready")
    plugin.transition("k", "ready", "executing")
    assert calls == []
    plugin.transition("k", "executing", "memory")
    assert calls == [0] * trims and plugin.trimmed == trims


def test_trim_when_full_finds_malloc_trim_here():
    """On this Linux (glibc) the C library's malloc_trim is found and runs (returns 0 or 1)."""
    from gpurisk.backends import malloc
    trim = malloc._libc()
    if trim is None:
        pytest.skip("no glibc malloc_trim on this system")
    assert trim(0) in (0, 1)
