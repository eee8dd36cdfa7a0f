"""A third-party measure cannot break a run: raising, wrong type, NaN/inf without a reason, or running
past ``--measure-timeout`` each give a not-applicable row with the reason; the others still run."""
from __future__ import annotations

import json
import time
from importlib import metadata

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk import plugins

from conftest import run_cli

SLOW_SRC = '''
import time
import gpurisk

class Slow(gpurisk.Measure):
    name = "toy_slow"
    description = "sleeps"

    def compute(self, table, ctx):
        time.sleep(30)
        return gpurisk.Result(value=1.0)

class Boom(gpurisk.Measure):
    name = "toy_boom"
    description = "raises"

    def compute(self, table, ctx):
        raise RuntimeError("boom")

class Inf(gpurisk.Measure):
    name = "toy_inf"
    description = "infinite"

    def compute(self, table, ctx):
        return gpurisk.Result(value=float("inf"))

@gpurisk.hookimpl
def gpurisk_register_measures():
    return [Slow, Boom, Inf]
'''


@pytest.fixture
def fresh_registry():
    plugins.reset()
    yield
    plugins.reset()


class Sleepy(gpurisk.Measure):
    name = "sleepy"
    description = "sleeps past any limit"

    def compute(self, table, ctx):
        time.sleep(5)
        return gpurisk.Result(value=1.0)


class _P:
    @gpurisk.hookimpl
    def gpurisk_register_measures(self):
        return [Sleepy]


def test_measure_past_the_time_limit_is_reported_and_the_rest_run(fresh_registry):
    plugins.register(_P(), name="sleepy-plugin")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"k": rng.integers(0, 300, 2000), "s": rng.integers(0, 2, 2000)})
    t0 = time.perf_counter()
    a = gpurisk.assess(df, ["k", "s"], fraction=0.1, measures=["sleepy", "theta_hat", "sample_uniques"],
                       measure_timeout=0.3)
    assert time.perf_counter() - t0 < 3
    assert a.measures["sleepy"].value is None
    assert a.measures["sleepy"].reason == "exceeded the time limit of 0.3 s"
    ref = gpurisk.assess(df, ["k", "s"], fraction=0.1, measures=["theta_hat", "sample_uniques"])
    assert 0 < a.measures["theta_hat"].value == ref.measures["theta_hat"].value
    assert a.measures["sample_uniques"].value == ref.measures["sample_uniques"].value
    # scan: the same, on every combination's row
    r = gpurisk.scan(df, keys=["k", "s"], max_size=1, fraction=0.1, measures=["sleepy", "theta_hat"],
                     measure_timeout=0.2).results
    assert (r["sleepy_reason"] == "exceeded the time limit of 0.2 s").all()
    r0 = gpurisk.scan(df, keys=["k", "s"], max_size=1, fraction=0.1, measures=["theta_hat"]).results
    assert r["theta_hat"].equals(r0["theta_hat"]) and r["theta_hat"].notna().any()


def test_cli_third_party_plugin_isolated(tmp_path):
    from _fake_plugin import install
    install(tmp_path, "gpurisk-toy-slow", "toyslow", "gpurisk_toy_slow", SLOW_SRC, "0.7")
    pd.DataFrame({"k": np.r_[np.arange(30), np.arange(30) % 5]}).to_csv(tmp_path / "d.csv", index=False)
    env = {"PYTHONPATH": str(tmp_path)}
    t0 = time.perf_counter()
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k", "--fraction", "0.1", "--json",
                "--measures", "toy_slow,toy_boom,toy_inf,theta_hat", "--measure-timeout", "0.5",
                env=env, check=True, subprocess=True)      # a real process: it must exit
    assert time.perf_counter() - t0 < 20          # the 30 s sleep did not hold the process open
    m = json.loads(p.stdout)["measures"]
    assert m["toy_slow"]["reason"] == "exceeded the time limit of 0.5 s"
    assert m["toy_boom"]["reason"] == "measure raised RuntimeError: boom"
    assert m["toy_inf"]["reason"] == "measure returned inf without a reason"
    assert m["theta_hat"]["reason"].startswith("not estimable") and m["theta_hat"]["n1"] == 25  # ran: no pair here
    out = run_cli("plugins", env=env, check=True).stdout
    assert "gpurisk-toy-slow 0.7" in out
    # autoload off: the third-party measures are gone, the built-ins stay
    p = run_cli("assess", tmp_path / "d.csv", "--keys", "k", "--fraction", "0.1", "--json",
                "--measures", "toy_slow", env={**env, "GPURISK_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert p.returncode == 2 and "unknown measure(s) 'toy_slow'" in p.stderr


def test_plugins_lists_the_classic_plugin_with_its_version():
    try:
        ver = metadata.version("gpurisk-classic")
    except metadata.PackageNotFoundError:
        pytest.skip("gpurisk-classic is not installed")
    out = run_cli("plugins", check=True).stdout
    assert f"gpurisk-classic {ver}" in out
    rows = json.loads(run_cli("plugins", "--json", check=True).stdout)
    assert {"plugin": "classic", "package": "gpurisk-classic", "version": ver} in rows


class EditsZ(gpurisk.Measure):
    """A careless plugin: writes into the table's cached frequencies of frequencies."""
    name = "edits_z"
    description = "zeroes n1 in the cached Z and pops n1 from freq_of_freq"

    def compute(self, table, ctx):
        table.freq_of_freq().pop(1, None)      # a copy: changes nothing
        table.fof_vector()[1] = 0               # read-only: raises, reported on this row
        return gpurisk.Result(value=1.0)


class _PZ:
    @gpurisk.hookimpl
    def gpurisk_register_measures(self):
        return [EditsZ]


def test_a_measure_cannot_change_the_summaries_the_others_read(fresh_registry):
    plugins.register(_PZ(), name="edits-z-plugin")
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"k": rng.integers(0, 400, 3000), "s": rng.integers(0, 2, 3000)})
    # the independent count: cells holding one record
    n1 = int((df.value_counts() == 1).sum())
    a = gpurisk.assess(df, ["k", "s"], fraction=0.1,
                       measures=["edits_z", "sample_uniques", "theta_hat", "k_anonymity"])
    assert a.measures["edits_z"].value is None
    assert "read-only" in a.measures["edits_z"].reason
    assert a.measures["sample_uniques"].value == n1 > 0
    ref = gpurisk.assess(df, ["k", "s"], fraction=0.1, measures=["theta_hat", "k_anonymity"])
    assert a.measures["theta_hat"].value == ref.measures["theta_hat"].value
    assert a.measures["k_anonymity"].value == ref.measures["k_anonymity"].value
