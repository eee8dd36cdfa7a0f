"""bench/bench_assess_headline.py's floor: the cheapest estimate of E that gives each sample unique a
term of its own. It is the number gpurisk's own matches_ll gives under main effects, the plug-in
prior and Poisson cells (computed there by other code), and a hand sum on a small table; and the
bench runs it and prints what an assess with nothing but the count and that floor could reach."""
from __future__ import annotations

import importlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import data_path

ROOT = Path(__file__).resolve().parents[1]


def bench_module(name: str):
    """The bench script ``name`` imported, this process's environment as it was before: the benches
    set GPURISK_DISABLE_PLUGIN_AUTOLOAD when imported, which the commands that later tests run in
    child processes would inherit (their third-party plugins not loaded)."""
    saved = dict(os.environ)
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def bench():
    return bench_module("bench_assess_headline")


def test_floor_by_hand(bench):
    """Four records of two keys, π = ½: cells (0, x) ×2, (0, y), (1, x): the two uniques' λ̂ are
    (n/π) (3/4)(1/4) and (n/π)(1/4)(3/4), m = (1 − π) λ̂, each term (1 − e^{−m})/m."""
    from gpurisk.freq.engine import build_table
    frame = pd.DataFrame({"a": ["0", "0", "0", "1"], "b": ["x", "x", "y", "x"]})
    table = build_table(frame, ["a", "b"])
    m = 0.5 * (4 / 0.5) * 0.75 * 0.25
    want = 2 * (1 - math.exp(-m)) / m
    assert bench.floor_estimate(table, 0.5, threads=1) == pytest.approx(want, rel=1e-14)


def test_floor_is_matches_ll_under_main_effects_plugin_poisson(bench):
    """On a real FARS sample (π = 1 %, four keys) the floor equals matches_ll with
    model=independence, prior=plugin, dispersion=none, in one thread or three."""
    from gpurisk.freq.engine import build_table
    from gpurisk.measure import Context
    from gpurisk.measures.matches_ll import MatchesLL
    frame = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    keys = list(frame.columns)[:4]
    sample = frame[np.random.default_rng(3).random(len(frame)) < 0.5][keys]
    table = build_table(sample, keys)
    options = {"loglinear_risk": {"model": "independence", "prior": "plugin",
                                  "dispersion": "none"}}
    want = MatchesLL().compute(table, Context(fraction=0.01, options=options)).value
    assert table.n_r(1) > 1000
    for threads in (1, 3):
        assert bench.floor_estimate(table, 0.01, threads=threads) == pytest.approx(want, rel=1e-12)


def test_the_bench_prints_the_floor(tmp_path):
    """The bench's floor step on a small register, beside the groupby and the count, and the line
    that says what an assess of count + floor could reach."""
    got = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_assess_headline.py"),
                          "--rows", "2e4", "--before", "none",
                          "--steps", "groupby,count,floor,headline"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    rows = [ln for ln in got.stdout.splitlines() if ln.strip().startswith("20,000 ")]
    assert [ln.split()[1] for ln in rows] == ["pandas", "count", "Ê,", "floor"]
    line = next(ln for ln in got.stdout.splitlines() if "count + floor:" in ln)
    assert "times as fast as the groupby" in line
    # Ê and τ̂1 against the floor of the same run (more than it: they read more of each unique)
    ratio = next(ln for ln in got.stdout.splitlines() if "times the floor" in ln)
    assert "(this)" in ratio and float(ratio.split(": ")[1].split()[0]) > 1.0


def test_scan_bench_floor_is_the_scans_own_plugin_estimate():
    """bench_scan_headline's floor row: per combination of Adult's 8 keys (all 255), the floor on
    the combination's table is the scan's own matches_ll under main effects, the plug-in prior and
    Poisson cells (so the row times that estimate on the tables the scan reads)."""
    import warnings

    import gpurisk
    bench_module("bench_assess_headline")         # the floor the scan bench imports when run
    bench_scan_headline = bench_module("bench_scan_headline")
    data_path("arx/adult.csv")
    frame, keys = bench_scan_headline.data("adult")
    got = bench_scan_headline.scanner("adult", 0.01)["floor"]()()
    options = {"loglinear_risk": {"model": "independence", "prior": "plugin",
                                  "dispersion": "none"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scan = gpurisk.scan(frame, keys=keys, measures=["matches_ll"], threads=0, fraction=0.01,
                            options=options).results
    assert len(got) == len(scan) == 255
    want = {tuple(k): v for k, v in zip(scan["keys"], scan["matches_ll"])}
    assert set(want) == set(got)
    assert sum(v > 0 for v in want.values()) > 200
    for combo, value in got.items():
        assert value == pytest.approx(want[combo], rel=1e-12, abs=1e-300), combo
