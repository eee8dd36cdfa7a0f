"""A measure cannot end the run (issue 30): ``os._exit``, ``os.abort``, ``os.kill`` of its own
process, ``signal.raise_signal``, ``_thread.interrupt_main`` and ``sys.exit`` called from a measure
give that measure a not-applicable row naming what it called; every other measure, the command's
output and its exit code are as without it, in assess, scan, protect (a criterion measure fails its
criterion) and on Dask (a bucket measure's map on a worker: the workers live on). Calls from any
other thread are untouched (the CLI ends itself with ``os._exit``)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk import Measure, Result, plugins
from gpurisk.core import contain

from conftest import run_cli

TOYS_SRC = '''
import os, signal, sys, _thread
import gpurisk

def _make(name, call):
    class Exits(gpurisk.Measure):
        description = "ends the process: " + name
        def compute(self, table, ctx):
            call()
            return gpurisk.Result(value=1.0)
    Exits.name = name
    return Exits

EXITS = {
    "toy_os_exit": lambda: os._exit(3),
    "toy_abort": lambda: os.abort(),
    "toy_kill_self": lambda: os.kill(os.getpid(), signal.SIGKILL),
    "toy_kill_group": lambda: os.kill(0, signal.SIGTERM),
    "toy_killpg": lambda: os.killpg(os.getpgid(0), signal.SIGTERM),
    "toy_raise_signal": lambda: signal.raise_signal(signal.SIGTERM),
    "toy_interrupt_main": lambda: _thread.interrupt_main(),
    "toy_sys_exit": lambda: sys.exit(4),
    "toy_exit_builtin": lambda: exit(5),
}
CLASSES = [_make(n, c) for n, c in EXITS.items()]

class ExitsBelowTop(gpurisk.Measure):
    name = "toy_exit_below_top"
    description = "os._exit(3) on any table of more than one cell, else 0"
    def compute(self, table, ctx):
        if table.sample_cells > 1:
            os._exit(3)
        return gpurisk.Result(value=0.0)
CLASSES.append(ExitsBelowTop)

@gpurisk.hookimpl
def gpurisk_register_measures():
    return CLASSES
'''

EXIT_NAMES = ["toy_os_exit", "toy_abort", "toy_kill_self", "toy_kill_group", "toy_killpg",
              "toy_raise_signal", "toy_interrupt_main", "toy_sys_exit", "toy_exit_builtin"]


@pytest.fixture
def toys():
    ns: dict = {}
    exec(compile(TOYS_SRC, "toys", "exec"), ns)
    plugins.reset()

    class _P:
        gpurisk_register_measures = staticmethod(ns["gpurisk_register_measures"])

    plugins.register(_P(), name="exit-toys")
    yield
    plugins.reset()


@pytest.fixture
def plugin_dir(tmp_path):
    from _fake_plugin import install
    (tmp_path / "site").mkdir()
    return install(tmp_path / "site", "gpurisk-exit-toys", "exittoys", "gpurisk_exit_toys",
                   TOYS_SRC, "0.1")


def _frame(n=1500, seed=3):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"k": rng.integers(0, 200, n), "s": rng.integers(0, 3, n)})


def _n1(df):
    return int((df.value_counts() == 1).sum())


def test_every_exit_in_assess_is_that_measures_row(toys):
    df = _frame()
    a = gpurisk.assess(df, ["k", "s"], fraction=0.1, measures=EXIT_NAMES + ["sample_uniques"])
    m = a.measures
    assert m["sample_uniques"].value == _n1(df)
    for name in EXIT_NAMES:
        assert m[name].value is None and m[name].failed, name
    assert m["toy_os_exit"].reason.startswith("measure called os._exit(3), which would end")
    assert "os.abort()" in m["toy_abort"].reason
    assert f"os.kill({os.getpid()}, <Signals.SIGKILL: 9>)" in m["toy_kill_self"].reason
    assert "os.kill(0," in m["toy_kill_group"].reason
    assert "os.killpg(" in m["toy_killpg"].reason
    assert "signal.raise_signal(" in m["toy_raise_signal"].reason
    assert "_thread.interrupt_main()" in m["toy_interrupt_main"].reason
    assert m["toy_sys_exit"].reason == "measure raised SystemExit: 4"
    assert m["toy_exit_builtin"].reason == "measure raised SystemExit: 5"


def test_scan_rows_carry_the_reason_and_the_others_count(toys):
    df = _frame()
    r = gpurisk.scan(df, keys=["k", "s"], max_size=2, fraction=0.1,
                     measures=["toy_os_exit", "toy_kill_self", "sample_uniques"]).results
    assert len(r) == 3
    assert r["toy_os_exit"].isna().all() and r["toy_kill_self"].isna().all()
    assert r["toy_os_exit_reason"].str.startswith("measure called os._exit(3)").all()
    assert r.loc[r["size"] == 2, "sample_uniques"].item() == _n1(df)


@pytest.fixture
def tiny(tmp_path):
    """A six-record file and two hierarchies whose top node (2, 1) has one cell."""
    pd.DataFrame({"a": [1, 1, 2, 3, 4, 4], "b": list("xxxyyy")}).to_csv(tmp_path / "tiny.csv",
                                                                       index=False)
    (tmp_path / "ha.csv").write_text("1;lo;*\n2;lo;*\n3;hi;*\n4;hi;*\n")
    (tmp_path / "hb.csv").write_text("x;*\ny;*\n")
    return tmp_path


def test_protect_criterion_measure_that_exits_fails_its_criterion(toys, tiny):
    """Every node but the top one makes the measure call os._exit: those nodes fail the
    criterion (even with undefined=meets), the top node meets it and is the release."""
    from gpurisk.protect import protect
    h = {"a": str(tiny / "ha.csv"), "b": str(tiny / "hb.csv")}
    for undefined in ("fails", "meets"):
        r = protect(tiny / "tiny.csv", ["a", "b"], h, ["toy_exit_below_top<=1"],
                    undefined=undefined, loss="discernibility").result
        top = [i for i, lv in enumerate(r.levels.tolist()) if lv == [2, 1]][0]
        assert r.met[top, 0]
        assert not r.met[[i for i in range(len(r.levels)) if i != top], 0].any()


def test_other_threads_keep_the_real_calls(toys):
    """The guard is per thread: outside a measure the wrapped calls do what they did (here
    os.kill(pid, 0), which signals nothing, and os.kill of another process)."""
    gpurisk.assess(_frame(), ["k"], fraction=0.1, measures=["toy_os_exit"])   # installs the guard
    assert getattr(os._exit, "__wrapped__", None) is not None
    os.kill(os.getpid(), 0)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(child.pid, signal.SIGTERM)
    assert child.wait(timeout=10) == -signal.SIGTERM
    seen = []
    t = threading.Thread(target=lambda: seen.append(os.kill(os.getpid(), 0)))
    t.start()
    t.join()
    assert seen == [None]
    with contain.guard_exits():          # a thread marked as a measure's is refused
        with pytest.raises(contain.MeasureEscape):
            os.kill(os.getpid(), 0)
    os.kill(os.getpid(), 0)


def test_cli_assess_json_and_exit_0_in_a_real_process(tmp_path, plugin_dir):
    """The point is the process: before, os._exit(3) ended it with exit 3 and no output."""
    df = _frame(400)
    df.to_csv(tmp_path / "d.csv", index=False)
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k,s", "--fraction", "0.1", "--json",
                "--measures", "toy_os_exit,toy_abort,toy_kill_self,sample_uniques",
                env={"PYTHONPATH": str(plugin_dir)}, subprocess=True)
    assert p.returncode == 0, (p.returncode, p.stderr)
    doc = json.loads(p.stdout)
    assert doc["measures"]["sample_uniques"]["value"] == _n1(df)
    assert "os._exit(3)" in doc["measures"]["toy_os_exit"]["reason"]


def test_cli_scan_and_protect_in_process(tmp_path, plugin_dir):
    df = _frame(400)
    df.to_csv(tmp_path / "d.csv", index=False)
    env = {"PYTHONPATH": str(plugin_dir)}
    p = run_cli("scan", tmp_path / "d.csv", "--keys", "k,s", "--max-size", "2", "--fraction", "0.1",
                "--measures", "toy_os_exit,toy_raise_signal,sample_uniques", "--json",
                "--no-progress", env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["combinations"] == 3
    ha, hb = tmp_path / "ha.csv", tmp_path / "hb.csv"
    pd.DataFrame({"a": [1, 1, 2, 3, 4, 4], "b": list("xxxyyy")}).to_csv(tmp_path / "t.csv",
                                                                       index=False)
    ha.write_text("1;lo;*\n2;lo;*\n3;hi;*\n4;hi;*\n")
    hb.write_text("x;*\ny;*\n")
    p = run_cli("protect", tmp_path / "t.csv", "--keys", "a,b", "--hierarchy", f"a={ha}",
                "--hierarchy", f"b={hb}", "--criterion", "toy_exit_below_top<=1", "--loss",
                "discernibility", "-o", tmp_path / "p.csv", env=env)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert (pd.read_csv(tmp_path / "p.csv")["a"].astype(str) == "*").all()


class ExitMap(Measure):
    """A bucket measure whose map ends the worker process (os._exit) on its first bucket."""
    name = "toy_exit_map"
    description = "os._exit in map_bucket"
    reads = "buckets"

    def map_bucket(self, bucket, ctx):
        if bucket.index == 0:
            os._exit(7)
        return {"n": 1}

    def reduce_buckets(self, parts, table, ctx):
        return Result(value=float(len(parts)))


class KillMap(ExitMap):
    name = "toy_kill_map"

    def map_bucket(self, bucket, ctx):
        os.kill(os.getpid(), signal.SIGKILL)


class SysExitMap(ExitMap):
    name = "toy_sysexit_map"

    def map_bucket(self, bucket, ctx):
        sys.exit(2)


class CountMap(ExitMap):
    name = "toy_count_map"

    def map_bucket(self, bucket, ctx):
        return {"n": gpurisk.xp.scalar(bucket.f.sum())}

    def reduce_buckets(self, parts, table, ctx):
        return Result(value=float(sum(p["n"] for p in parts)))


def test_dask_workers_survive_a_map_that_exits(client):
    """On the session's cluster: the maps that exit fail their own measure; the other measure is
    right, and the same workers (same addresses and processes) serve the next run."""
    dd = pytest.importorskip("dask.dataframe")
    from gpurisk.freq.buckets import MapFailed
    from gpurisk.inputs import Inputs
    before = client.run(os.getpid)
    df = _frame(3000)
    inp = Inputs(dd.from_pandas(df, npartitions=3, sort=False), ["k", "s"], backend="dask")
    counted = inp.summarize(bucket_measures=[ExitMap, KillMap, SysExitMap, CountMap],
                            context=gpurisk.Context())
    ctx = gpurisk.Context(fraction=counted.fraction, fraction_source=counted.fraction_source)
    assert CountMap().compute(counted.table, ctx).value == len(df)
    with pytest.raises(MapFailed, match=r"map_bucket called os._exit\(7\)"):
        ExitMap().compute(counted.table, ctx)
    with pytest.raises(MapFailed, match=r"map_bucket called os.kill\("):
        KillMap().compute(counted.table, ctx)
    with pytest.raises(MapFailed, match="map_bucket raised SystemExit: 2"):
        SysExitMap().compute(counted.table, ctx)
    assert client.run(os.getpid) == before                   # no worker died or restarted


def test_cli_assess_and_scan_on_dask_with_a_measure_that_exits(tmp_path, plugin_dir, client,
                                                               dask_scheduler):
    """--backend dask on the session's cluster: the measure's row, exit 0, and the same worker
    processes before and after (before, os._exit(3) ended the run and the workers with it)."""
    df = _frame(600)
    df.to_csv(tmp_path / "d.csv", index=False)
    before = client.run(os.getpid)
    env = {"PYTHONPATH": str(plugin_dir)}
    dask = ["--backend", "dask", "--scheduler", dask_scheduler]
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k,s", "--fraction", "0.1", "--json",
                "--measures", "toy_os_exit,toy_kill_self,sample_uniques", *dask, env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["measures"]["sample_uniques"]["value"] == _n1(df)
    assert "os._exit(3)" in doc["measures"]["toy_os_exit"]["reason"]
    p = run_cli("scan", tmp_path / "d.csv", "--keys", "k,s", "--max-size", "2", "--fraction", "0.1",
                "--measures", "toy_os_exit,sample_uniques", "--json", "--no-progress", *dask, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["combinations"] == 3
    assert client.run(os.getpid) == before
