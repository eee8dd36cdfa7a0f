"""bench/sweep_keysets.py (issue 43): random key sets on the real populations, each estimate checked;
its checks fire on what they name, and a short sweep of real samples runs clean and says so."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, data_path


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import sweep_keysets
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return sweep_keysets


@pytest.mark.parametrize("rows, n1, found", [
    ({"matches_ll": [None, None, None, 3.0, None]}, 10, "no value and no reason"),
    ({"matches_ll": [None, None, None, 3.0, "withheld: why"]}, 10, None),
    ({"matches_ll": [2.0, float("nan"), 3.0, 3.0, None]}, 10, "s.e. nan"),
    ({"tau1_ll": [2.0, 0.5, 1.5, 3.0, None]}, 10, "below the estimate"),
    ({"matches_ll": [12.0, 0.5, 13.0, 3.0, None]}, 10, "outside [0, n1 = 10]"),
    ({"matches_ll": [float("inf"), 0.5, None, 3.0, None]}, 10, "value inf"),
    ({"pop_uniqueness": [40.0, 2.0, 44.0, 38.0, None], "pop_uniques": [38.0] + [None] * 4}, 10,
     None),                      # N̂1 may exceed n1; a truth is not checked as an estimate
])
def test_each_check_fires_on_what_it_names(rows, n1, found):
    got = _bench().problems(rows, n1)
    assert (got == []) if found is None else (len(got) == 1 and found in got[0])


def test_a_short_sweep_of_real_samples_runs_clean(tmp_path):
    """A dozen random cases of two real populations: nothing breaks, and each case's truth beside
    Ê is E = Σ 1/F over the sample uniques, recounted here from the case's seed with pandas."""
    import numpy as np
    import pandas as pd
    data_path("sdcmicro/testdata.csv")            # skips where the shared data is absent
    out = tmp_path / "cases.jsonl"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "sweep_keysets.py"), "--cases", "12",
                        "--only", "testdata,star", "--seed", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(cases) == 12 and {c["population"] for c in cases} <= {"testdata", "star"}
    frames = {"testdata": pd.read_csv(data_path("sdcmicro/testdata.csv")),
              "star": pd.read_csv(data_path("populations/star.csv.gz"))}
    for c in cases:
        assert not c.get("error") and c["problems"] == []
        frame = frames[c["population"]]
        cell = frame.groupby(c["keys"], dropna=False).ngroup().to_numpy()
        big_f = np.bincount(cell)[cell]
        insample = np.random.default_rng(c["seed"]).random(len(frame)) < c["pi"]
        f = np.bincount(cell[insample], minlength=cell.max() + 1)[cell[insample]]
        want = float(np.sum(1.0 / big_f[insample][f == 1]))
        assert c["n"] == int(insample.sum()) and c["n1"] == int((f == 1).sum())
        assert c["rows"]["matches_ll"][3] == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert p.stdout.startswith("12 cases, 0 raised, 0 with a broken estimate")
    assert "matches_ll: the one-sided 99 % upper bound holds the truth in" in p.stdout


def test_a_one_line_refusal_is_counted_apart_from_what_broke():
    cases = [{"population": "p", "keys": ["a"], "pi": 0.01, "seed": 1,
              "refused": "key column 'a' is missing in all 3 records"},
             {"population": "p", "keys": ["a"], "pi": 0.01, "seed": 2, "error": "ValueError: x"}]
    text = _bench().summary(cases, ["matches_ll"])
    assert text.startswith("2 cases, 1 raised, 0 with a broken estimate")
    assert "(1 refused with a one-line error, as designed: key column 'a' is missing" in text
    assert "seed 2: ValueError: x" in text and "seed 1:" not in text
