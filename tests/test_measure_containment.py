"""A measure cannot reach the run around it (issue 30): its print() does not reach stdout (a
``--json`` document still parses), its os.chdir does not move a relative ``-o``, a value beyond the
float range gives its row a reason (assess and scan), and a measure that hangs is cut off by a
default time limit."""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk import plugins
from gpurisk.core import contain
from gpurisk.core.settings import DEFAULT_MEASURE_TIMEOUT, Run
from gpurisk.scan import read_scan

from conftest import run_cli

TOYS_SRC = '''
import os, sys, time
import gpurisk

class Loud(gpurisk.Measure):
    name = "toy_loud"
    description = "prints to stdout and stderr"

    def compute(self, table, ctx):
        print("{\\"not\\": json")
        print("loud on stderr", file=sys.stderr)
        sys.stdout.flush()
        return gpurisk.Result(value=float(table.n))

class Wander(gpurisk.Measure):
    name = "toy_chdir"
    description = "changes the working directory"

    def compute(self, table, ctx):
        os.chdir(os.environ.get("TOY_CHDIR_TO", "/"))
        return gpurisk.Result(value=1.0)

class Huge(gpurisk.Measure):
    name = "toy_huge"
    description = "an integer beyond the float range"

    def compute(self, table, ctx):
        return gpurisk.Result(value=10**400)

class HugeSe(gpurisk.Measure):
    name = "toy_bigse"
    description = "a finite value, an se beyond the float range"

    def compute(self, table, ctx):
        return gpurisk.Result(value=1.0, se=-10**400)

class Where(gpurisk.Measure):
    name = "toy_where"
    description = "the working directory it runs in, as an extra"

    def compute(self, table, ctx):
        return gpurisk.Result(value=1.0, extra={"cwd": os.getcwd()})

class Sleeps(gpurisk.Measure):
    name = "toy_sleeps"
    description = "sleeps long"

    def compute(self, table, ctx):
        time.sleep(60)
        return gpurisk.Result(value=1.0)

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [Loud, Wander, Huge, HugeSe, Where, Sleeps]
'''


@pytest.fixture
def toys(tmp_path, monkeypatch):
    """The toy measures registered in this process (plugins.register), the registry reset after."""
    ns: dict = {}
    exec(compile(TOYS_SRC, "toys", "exec"), ns)
    plugins.reset()

    class _P:
        gpurisk_register_measures = staticmethod(ns["gpurisk_register_measures"])

    plugins.register(_P(), name="toys")
    away = tmp_path / "elsewhere"
    away.mkdir()
    monkeypatch.setenv("TOY_CHDIR_TO", str(away))
    yield away
    plugins.reset()


@pytest.fixture
def plugin_dir(tmp_path):
    """The toy measures as an installed third-party plugin (an entry point) for CLI runs."""
    from _fake_plugin import install
    (tmp_path / "site").mkdir()
    return install(tmp_path / "site", "gpurisk-toys", "toys", "gpurisk_toys", TOYS_SRC, "0.1")


def _frame(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"k": rng.integers(0, 300, n), "s": rng.integers(0, 2, n)})


def test_print_in_a_measure_reaches_neither_stdout_nor_stderr(toys, capfd):
    df = _frame()
    a = gpurisk.assess(df, ["k", "s"], fraction=0.1, measures=["toy_loud", "sample_uniques"])
    out, err = capfd.readouterr()
    assert "json" not in out and "loud" not in err
    assert a.measures["toy_loud"].value == len(df)           # it ran
    assert a.measures["sample_uniques"].value == int((df.value_counts() == 1).sum())
    # the streams are handed back: this thread's print still reaches stdout
    assert not isinstance(sys.stdout, contain._Router) or contain._QUIET   # (a sleeper of another test)
    print("after")
    assert capfd.readouterr().out == "after\n"


def test_cli_json_parses_with_a_printing_measure_in_a_real_process(tmp_path, plugin_dir):
    df = _frame(500)
    df.to_csv(tmp_path / "d.csv", index=False)
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k,s", "--fraction", "0.1", "--json",
                "--measures", "toy_loud,sample_uniques", env={"PYTHONPATH": str(plugin_dir)},
                check=True, subprocess=True)
    doc = json.loads(p.stdout)                       # the print did not get in
    assert doc["measures"]["toy_loud"]["value"] == 500
    assert doc["measures"]["sample_uniques"]["value"] == int((df.value_counts() == 1).sum())
    assert "loud" not in p.stderr


def test_scan_json_parses_with_a_printing_measure(tmp_path, plugin_dir):
    df = _frame(500)
    df.to_csv(tmp_path / "d.csv", index=False)
    p = run_cli("scan", tmp_path / "d.csv", "--keys", "k,s", "--max-size", "2", "--fraction", "0.1",
                "--json", "--measures", "toy_loud,theta_hat", "--no-progress",
                env={"PYTHONPATH": str(plugin_dir)}, check=True)
    doc = json.loads(p.stdout)
    assert doc["combinations"] == 3


def test_chdir_in_a_measure_is_undone_for_the_next_measure_and_the_caller(toys):
    here = os.getcwd()
    a = gpurisk.assess(_frame(), ["k", "s"], fraction=0.1, measures=["toy_chdir", "toy_where"])
    assert os.getcwd() == here
    assert a.measures["toy_chdir"].value == 1.0          # it ran (and moved)
    assert a.measures["toy_where"].extra["cwd"] == here   # the next measure ran where we are


def test_chdir_in_a_measure_does_not_move_a_relative_output(tmp_path, plugin_dir):
    away = tmp_path / "away"
    away.mkdir()
    df = _frame(400)
    df.to_csv(tmp_path / "d.csv", index=False)
    env = {"PYTHONPATH": str(plugin_dir), "TOY_CHDIR_TO": str(away)}
    # scan: the rows stream to part files after each batch of measures
    run_cli("scan", "d.csv", "--keys", "k,s", "--max-size", "2", "--fraction", "0.1",
            "--measures", "toy_chdir,sample_uniques", "-o", "rel.parquet", "--batch-rows", "1",
            "--no-progress", env=env, cwd=tmp_path, check=True)
    assert not any(away.iterdir())
    rows = read_scan(tmp_path / "rel.parquet")
    assert len(rows) == 3 and (rows["toy_chdir"] == 1.0).all()
    # assess: the results file is written after the measures
    run_cli("assess", "d.csv", "--keys", "k,s", "--fraction", "0.1", "--measures", "toy_chdir",
            "-o", "res.json", env=env, cwd=tmp_path, check=True)
    assert (tmp_path / "res.json").is_file() and not any(away.iterdir())


def test_a_value_beyond_the_float_range_is_not_applicable_in_assess_and_scan(toys):
    df = _frame()
    names = ["toy_huge", "toy_bigse", "sample_uniques"]
    a = gpurisk.assess(df, ["k", "s"], fraction=0.1, measures=names)
    assert a.measures["toy_huge"].value is None
    assert a.measures["toy_huge"].reason == "measure returned an integer beyond the float range"
    assert a.measures["toy_bigse"].value is None
    assert a.measures["toy_bigse"].reason == \
        "measure returned an integer beyond the float range as se"
    n1 = int((df.value_counts() == 1).sum())
    assert a.measures["sample_uniques"].value == n1
    r = gpurisk.scan(df, keys=["k", "s"], max_size=2, fraction=0.1, measures=names).results
    assert len(r) == 3
    assert r["toy_huge"].isna().all() and r["toy_bigse"].isna().all()
    assert (r["toy_huge_reason"] == "measure returned an integer beyond the float range").all()
    assert r.loc[r["size"] == 2, "sample_uniques"].item() == n1
    # an integer a float holds is still a value
    big = 2 ** 1000
    assert gpurisk.core.evaluate._beyond_float(gpurisk.Result(value=big)).value == big


def test_cli_assess_json_with_a_huge_value(tmp_path, plugin_dir):
    _frame(300).to_csv(tmp_path / "d.csv", index=False)
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k,s", "--fraction", "0.1", "--json",
                "--measures", "toy_huge", env={"PYTHONPATH": str(plugin_dir)}, check=True)
    m = json.loads(p.stdout)["measures"]["toy_huge"]
    assert m["value"] is None and "beyond the float range" in m["reason"]


def test_the_default_time_limit(toys):
    assert DEFAULT_MEASURE_TIMEOUT == 600.0
    assert Run().measure_timeout == DEFAULT_MEASURE_TIMEOUT
    assert Run(measure_timeout=None).measure_timeout == DEFAULT_MEASURE_TIMEOUT
    from gpurisk.core.evaluate import check_timeout
    assert check_timeout(None) == DEFAULT_MEASURE_TIMEOUT
    out = run_cli("assess", "--help", check=True).stdout
    assert "--measure-timeout" in out and "default: 600" in out.replace("\n", " ").replace("  ", " ")


def test_a_hanging_measure_is_cut_off_in_a_scan_and_the_others_run(toys, monkeypatch):
    # the default limit, made short: no --measure-timeout given at all
    monkeypatch.setattr("gpurisk.core.settings.DEFAULT_MEASURE_TIMEOUT", 0.3)
    df = _frame()
    t0 = time.perf_counter()
    r = gpurisk.assess(df, ["k", "s"], fraction=0.1,
                       measures=["sample_uniques", "toy_sleeps", "toy_where", "theta_hat"])
    assert time.perf_counter() - t0 < 5
    m = r.measures
    assert m["toy_sleeps"].reason == "exceeded the time limit of 0.3 s"
    n1 = int((df.value_counts() == 1).sum())
    assert m["sample_uniques"].value == n1 and m["toy_where"].value == 1.0   # before and after it
    ref = gpurisk.assess(df, ["k", "s"], fraction=0.1, measures=["theta_hat"])
    assert m["theta_hat"].value == ref.measures["theta_hat"].value
    assert not isinstance(sys.stdout, contain._Router) or contain._QUIET   # only while it sleeps


def test_badinput_from_a_measure_still_stops_the_run():
    class Refuses(gpurisk.Measure):
        name = "toy_refuses"
        description = "refuses its input"

        def compute(self, table, ctx):
            raise gpurisk.BadInput("toy_refuses: cannot run here")

    class _P:
        @gpurisk.hookimpl
        def gpurisk_register_measures(self):
            return [Refuses]

    plugins.reset()
    try:
        plugins.register(_P(), name="refuses")
        with pytest.raises(gpurisk.BadInput, match="cannot run here"):
            gpurisk.assess(_frame(), ["k", "s"], fraction=0.1,
                           measures=["toy_refuses", "sample_uniques"])
    finally:
        plugins.reset()


def test_run_contained_orders_stops_and_times_out():
    calls = []

    def slow():
        time.sleep(2)
        calls.append("slow")

    fns = [lambda: 1, lambda: 1 / 0, slow, lambda: 4]
    out = contain.run_contained(fns, 0.2)
    assert [o[0] for o in out] == [True, True, False, True]
    assert out[0][1] == 1 and isinstance(out[1][2], ZeroDivisionError) and out[3][1] == 4
    out = contain.run_contained([lambda: 1, lambda: 1 / 0, lambda: 3], 5,
                                stop=lambda e: isinstance(e, ZeroDivisionError))
    assert len(out) == 2                      # stopped at the exception: the third never ran


def test_measures_in_several_threads_stay_quiet_and_the_streams_come_back(capfd):
    import threading

    def loud(i):
        def fn():
            for _ in range(50):
                print("noise", i)
                time.sleep(0.001)
            return i
        return fn

    results = {}

    def caller(i):
        results[i] = [o[1] for o in contain.run_contained([loud(i), loud(i + 10)], 30)]

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == {i: [i, i + 10] for i in range(4)}
    out, err = capfd.readouterr()
    assert "noise" not in out and "noise" not in err
    # the routers are gone, unless a measure of an earlier test still sleeps past its limit
    for stream in (sys.stdout, sys.stderr):
        assert not isinstance(stream, contain._Router) or contain._QUIET
    print("after")                                   # this thread's output still gets through
    assert capfd.readouterr().out == "after\n"
