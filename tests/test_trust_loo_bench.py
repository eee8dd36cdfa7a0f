"""bench/trust_loo.py, which scores the estimators of E and τ1 on issue 43's targets from the
replicate CSVs of bench/validate_trust.py: its counts on three cells made by hand, and several CSVs
(one run per seed) pooled."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    import trust_loo
    return trust_loo


#: per cell: the truths E and τ1, the two estimates alternating sample by sample, Ê's s.e. as a
#: multiple of its errors' sd, Ê's upper bound on the two alternating samples
CELLS = {
    # Ê 5 % high, s.e./sd 1, bound always above: within 10 %; τ̂1 +12.5 %: within 20 %
    ("p", 0, 0.01): dict(E=10.0, e=(10.3, 10.7), se_sd=1.0, up=(11.0, 11.0), t=4.0, th=(4.4, 4.6)),
    # Ê +15 % (0.15 over, above the ±0.1 floor), s.e./sd 3, bound below E in half the samples;
    # τ̂1 +37.5 % (1.5 over, above the ±1 floor)
    ("q", 1, 0.05): dict(E=1.0, e=(1.10, 1.20), se_sd=3.0, up=(1.0, 0.9), t=4.0, th=(5.5, 5.5)),
    # Ê +25 % but 0.05 over (within the ±0.1 floor); τ̂1 +140 % but 0.7 over (within ±1)
    ("q", 2, 0.10): dict(E=0.2, e=(0.24, 0.26), se_sd=1.0, up=(0.3, 0.3), t=0.5, th=(1.2, 1.2)),
}


def replicates(first: int, count: int) -> pd.DataFrame:
    rows = []
    for (pop, ks, fr), c in CELLS.items():
        err = np.array([c["e"][i % 2] - c["E"] for i in range(10)])
        se = c["se_sd"] * float(err.std(ddof=1))         # over the 10 samples of both files
        for r in range(first, first + count):
            rows.append({"population": pop, "keyset": ks, "fraction": fr, "replicate": r % 5,
                         "matches": c["E"], "matches_ll": c["e"][r % 2], "matches_ll_se": se,
                         "matches_ll_upper": c["up"][r % 2], "tau1": c["t"],
                         "tau1_ll": c["th"][r % 2]})
    return pd.DataFrame(rows)


def test_counts_on_cells_made_by_hand(bench, tmp_path, capsys):
    """Two files of five samples a cell each (the same replicate numbers, as two seeds' runs
    have), pooled: Ê within ±10 % in one cell, ±20 % in two, ±10 % or ±0.1 in two; the bound held
    in ≥ 98 % of samples in two; s.e./sd within 0.7-1.5 in two; τ̂1 within ±20 % in one, ±20 %
    or ±1 in two."""
    a, b = tmp_path / "s43.csv", tmp_path / "s44.csv"
    replicates(0, 5).to_csv(a, index=False)
    replicates(5, 5).to_csv(b, index=False)
    assert bench.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "3 cells, 10 samples a cell" in out
    e_line = next(x for x in out.splitlines() if x.startswith("E  matches_ll "))
    assert ("cells 3, within 10% 1, within 20% 2, within 10% or ±0.1 2, median |bias| 15.0%, "
            "worst 25.0%, upper ≥ 98 % 2, s.e./sd in 0.7-1.5 2") in e_line
    t_line = next(x for x in out.splitlines() if x.startswith("τ1 tau1_ll "))
    assert "cells 3, within 20% 1, within 20% or ±1 2" in t_line
    # one file alone: its own five samples a cell
    assert bench.main([str(a)]) == 0
    assert "3 cells, 5 samples a cell" in capsys.readouterr().out


def test_the_bound_and_the_spread_are_read_per_sample(bench):
    """The per-cell table: the bound's share of samples holding E and s.e./sd as built."""
    t = bench.table(pd.concat([replicates(0, 5), replicates(5, 5)]), "matches_ll", "matches")
    t = t.set_index(["population", "keyset"])
    assert t.loc[("p", "S"), "upper"] == 1.0 and t.loc[("q", "M"), "upper"] == 0.5
    assert t.loc[("q", "M"), "se_sd"] == pytest.approx(3.0)
    assert t.loc[("q", "M"), "rel_bias"] == pytest.approx(0.15)
