"""Issue 27: a scan ranks by Ê (matches_ll), the log-linear estimate of the expected correct matches
E = Σ_{f=1} 1/F, and that ranking finds the riskiest combinations on real populations.

- The scan's rank column is, combination by combination, the value ``gpurisk assess`` reports for
  matches_ll on the same keys (the scan rolls each table up from the finest one; assess counts it
  from the records).
- On real populations (FARS, MACH 2019, UCI Adult: a 1 % Bernoulli sample flagged in the full file),
  the scan's top 10 among every combination of 1-3 keys of a pool of six catches the attainable
  true E and τ1, both computed here with pandas from the records (groupby counts), at the targets
  of issue 27 (≥ 97 % of E, ≥ 95 % of τ1); bench/validate_trust.py measures it over many samples.
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import gpurisk

from conftest import data_path


@pytest.mark.parametrize("interval", ["calibrated", "model"])
def test_scan_rank_column_equals_assess_matches_ll(interval):
    """Ê, its s.e. and bound are the same in a scan's row and in an assess of the same keys; with
    interval=model too, whose misfit criterion a scan computes with the keys in another order."""
    path = data_path("sdcmicro/testdata.csv")
    df = pd.read_csv(path)
    keys = ["urbrur", "roof", "walls", "water", "sex", "age"]
    opts = {"loglinear_risk": {"interval": interval}}
    res = gpurisk.scan(df, keys, max_size=4, fraction=0.05, options=opts)
    assert res.rank_by == "matches_ll"
    rows = res.results
    assert rows["matches_ll"].notna().all()
    top = res.top(6)
    picks = list(top.itertuples()) + list(rows.sample(6, random_state=1).itertuples())
    for r in picks:
        a = gpurisk.assess(df, list(r.keys), fraction=0.05, measures=["matches_ll"],
                           options=opts)
        m = a.measures["matches_ll"]
        assert r.matches_ll == pytest.approx(m.value, rel=1e-10), r.keys
        assert r.matches_ll_se == pytest.approx(m.se, rel=1e-10)
        assert r.matches_ll_upper == pytest.approx(m.upper, rel=1e-10)
    # θ̂·n1 is kept beside it (a lower estimate of E on average, not sample by sample)
    assert rows["matches_hat"].notna().any()


POOLS = {
    "fars": ("arx_genetic/fars_int.csv", ";",
             ["iage", "isex", "irace", "istatenum", "ihispanic", "iinjury"]),
    "mach2019": ("arx_genetic/mach2019_int.csv", ";",
                 ["age", "gender", "race", "religion", "married", "familysize"]),
    "adult": ("uci_adult/adult_full_48842.csv", ",",
              ["age", "sex", "race", "marital-status", "education", "native-country"]),
}


def _truth(pop: pd.DataFrame, flag: np.ndarray, keys) -> tuple[float, float]:
    """(E, τ1) of one combination from the records: F by groupby over the population, f over the
    flagged sample; E = Σ_{f=1} 1/F, τ1 = #{f = 1, F = 1}."""
    cell = pop.groupby(keys, dropna=False).ngroup().to_numpy()
    F = np.bincount(cell)
    f = np.bincount(cell[flag], minlength=F.size)
    su = f == 1
    return float(np.sum(1.0 / F[su])), float(np.sum(F[su] == 1))


def _shares(pop, pool, seed):
    """The top-10 shares of the attainable E and τ1 of one 1 % sample, by the scan's ranking and by
    θ̂·n1 (the former default)."""
    flag = np.random.default_rng(seed).random(len(pop)) < 0.01
    res = gpurisk.scan(pop.assign(s=flag), pool, max_size=3, sample_flag="s",
                       measures=["matches_ll", "matches_hat"])
    assert res.rank_by == "matches"      # the truth, counted from the register, ranks (issue 40)
    rows = res.results
    truth = {frozenset(k): _truth(pop, flag, list(k))
             for s in (1, 2, 3) for k in itertools.combinations(pool, s)}
    E = np.array([truth[frozenset(k)][0] for k in rows["keys"]])
    tau = np.array([truth[frozenset(k)][1] for k in rows["keys"]])
    out = {}
    for by in ("matches_ll", "matches_hat"):
        pos = rows.set_index("order").index.get_indexer(res.top(10, by)["order"].to_numpy())
        out[by] = (E[pos].sum() / np.sort(E)[::-1][:10].sum(),
                   tau[pos].sum() / np.sort(tau)[::-1][:10].sum())
    return out


@pytest.mark.parametrize("name", list(POOLS))
def test_scan_ranking_catches_the_true_risk_on_real_populations(name):
    path, sep, pool = POOLS[name]
    pop = pd.read_csv(data_path(path), sep=sep)
    got = [_shares(pop, pool, seed) for seed in (27, 28, 29)]
    e = np.mean([g["matches_ll"][0] for g in got])
    t = np.mean([g["matches_ll"][1] for g in got])
    if name != "adult":
        assert e >= 0.97, (name, e)                     # issue 27's targets, over three samples
        assert t >= 0.95, (name, t)
    else:
        # UCI Adult is the hard case, near both targets (20 samples of bench/validate_trust.py,
        # seed 22: mean 97.9 % of E, least 94.9 %; 96.0 % of τ1, least 90.5 %): three samples do
        # not pin the mean to a percent, so here the ranking must come near the targets and beat
        # θ̂·n1's (89.5 % of E and 82.3 % of τ1 on average there) by a clear margin
        old_e = np.mean([g["matches_hat"][0] for g in got])
        old_t = np.mean([g["matches_hat"][1] for g in got])
        assert e >= 0.95 and e >= old_e + 0.02, (e, old_e)
        assert t >= 0.93 and t >= old_t + 0.05, (t, old_t)
    # never worse than the former default on E, sample by sample
    assert all(g["matches_ll"][0] >= g["matches_hat"][0] - 0.01 for g in got), got
