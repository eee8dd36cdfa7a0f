"""bench/n1_interval_loo.py: N̂1's model error chosen and scored leave-one-population-out. Its
rebuilt interval is the measure's own, and its rule picks what it says."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("gpurisk_arx")
    sys.path.insert(0, str(ROOT / "bench"))
    import n1_interval_loo
    return n1_interval_loo


def test_the_rebuilt_interval_is_the_measures_own(bench):
    """On real samples (sdcMicro's testdata and STAR, every key set, π = 5 and 10 %) the interval
    rebuilt from N̂1, its s.e. without the model error and the unseen pairs' part, at the measure's
    model error and level, is the one pop_uniqueness reported, to the person; the s.e. split is
    exact; some samples had an unseen pairs' part that moved the lower end."""
    from gpurisk_arx.loglinear_n1 import MODEL_ERROR
    d = bench.samples(["testdata", "star"], 3, [43], [0.05, 0.1])
    assert len(d) > 20 and (d["model_error"] == MODEL_ERROR).all()
    np.testing.assert_allclose(np.sqrt(d["se0"] ** 2 + (MODEL_ERROR * d["value"]) ** 2), d["se"],
                               rtol=1e-12)
    lo, hi = bench.interval(d, MODEL_ERROR, float(d["interval_level"].iloc[0]))
    np.testing.assert_array_equal(lo, d["interval_lower"])
    np.testing.assert_array_equal(hi, d["interval_upper"])
    plain = d.assign(open=0.0)
    lo0, _ = bench.interval(plain, MODEL_ERROR, float(d["interval_level"].iloc[0]))
    assert (lo0 >= lo).all() and (lo0 > lo).any()


def test_the_rule_takes_the_smallest_error_reaching_the_level(bench):
    """By hand: at c = 0 one sample of four is held, at 0.1 three, at 0.2 all four; at level 0.75
    the rule takes 0.1, at 0.8 it takes 0.2, and with one population left out it reads only the
    others' samples."""
    cover = {0.0: np.array([True, False, False, False]), 0.1: np.array([True, True, True, False]),
             0.2: np.array([True, True, True, True])}
    every = np.ones(4, dtype=bool)
    assert bench.choose(cover, every, 0.75) == 0.1
    assert bench.choose(cover, every, 0.8) == 0.2
    assert bench.choose(cover, np.array([True, False, False, False]), 0.9) == 0.0
    d = pd.DataFrame({"population": ["a", "a", "b", "b"], "keyset": "S", "fraction": 0.05})
    assert bench.cells_held(d, cover[0.1], every) == (1, 2)      # a: 2 of 2, b: 1 of 2
