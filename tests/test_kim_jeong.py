"""Kim & Jeong (2007): uniques by subset (Table 2), components of risk (eqs. 6-10), Bethlehem flag."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.workflows.assess import run_measures
from gpurisk.measure import Context

from conftest import data_path

# A hand-made population of ten persons; the sample (flag) holds persons 1, 3, 4, 5, 8, 10.
POP = pd.DataFrame({
    "gender":  ["M", "F", "M", "F", "M", "F", "M", "F", "M", "F"],
    "age":     [30, 30, 30, 41, 41, 30, 55, 55, 30, 41],
    "rel":     ["head", "spouse", "child", "head", "head", "spouse", "head", "spouse", "head", "child"],
    "marital": ["married", "married", "single", "widowed", "married", "married", "married",
                "married", "married", "single"],
    "s":       [True, False, True, True, True, False, False, True, False, True],
})
# Population uniques per subset, counted by hand from the ten rows above, e.g. (age, rel):
# 30-head {1,9}, 30-spouse {2,6}, 30-child {3}, 41-head {4,5}, 41-child {10}, 55-head {7},
# 55-spouse {8} -> persons 3, 10, 7, 8 are unique: 4.
HAND_N1 = {
    ("gender",): 0, ("age",): 0, ("rel",): 0, ("marital",): 1,
    ("gender", "age"): 3, ("gender", "rel"): 3, ("gender", "marital"): 3,
    ("age", "rel"): 4, ("age", "marital"): 4, ("rel", "marital"): 1,
    ("gender", "age", "rel"): 6, ("gender", "age", "marital"): 6, ("gender", "rel", "marital"): 3,
    ("age", "rel", "marital"): 6, ("gender", "age", "rel", "marital"): 6,
}
# Sample uniques (persons 1, 3, 4, 5, 8, 10), by hand: marital: married {1,5,8}, single {3,10},
# widowed {4} -> 1; (age, rel): 30-head {1}, 30-child {3}, 41-head {4,5}, 55-spouse {8},
# 41-child {10} -> 4; all four keys: six distinct cells -> 6.
HAND_n1 = {("gender",): 0, ("marital",): 1, ("age",): 1, ("rel",): 1, ("age", "rel"): 4,
           ("gender", "age", "rel", "marital"): 6}


def test_uniques_by_subset_on_hand_made_population():
    keys = ["gender", "age", "rel", "marital"]
    res = gpurisk.scan(POP, keys=keys, max_size=4, sample_flag="s",
                       measures=["pop_uniques", "sample_uniques", "pr_pu"])
    df = res.results
    assert len(df) == 15
    got = {tuple(k): v for k, v in zip(df["keys"], df["pop_uniques"])}
    assert got == {k: float(v) for k, v in HAND_N1.items()}
    assert (df["N1"] == df["pop_uniques"]).all()
    n1 = {tuple(k): v for k, v in zip(df["keys"], df["sample_uniques"])}
    for k, v in HAND_n1.items():
        assert n1[k] == v, k
    np.testing.assert_allclose(df["pr_pu"], df["pop_uniques"] / 10)


def test_population_uniques_are_cumulative_over_subsets_on_fars():
    """Kim & Jeong: 'the unique counts are cumulative' — a superset never has fewer uniques."""
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    keys = ["iage", "irace", "isex", "ihispanic", "istatenum", "iinjury"]
    df["s"] = np.random.default_rng(4).random(len(df)) < 0.1
    res = gpurisk.scan(df, keys=keys, max_size=4, sample_flag="s", measures=["pop_uniques"])
    n1 = {frozenset(k): v for k, v in zip(res.results["keys"], res.results["pop_uniques"])}
    pairs = 0
    for a, b in itertools.combinations(n1, 2):
        if a < b:
            assert n1[b] >= n1[a]
            pairs += 1
        elif b < a:
            assert n1[a] >= n1[b]
            pairs += 1
    assert pairs > 100
    # and each count equals a direct pandas count of population-unique persons
    for k in [("iage", "istatenum"), ("irace", "isex", "ihispanic", "iinjury")]:
        sizes = df.groupby(list(k)).size()
        assert n1[frozenset(k)] == int((sizes == 1).sum())


def _paper_table(N, N1, pi):
    """A population of N with N1 unique persons (the rest in pairs, one class of 3 if N - N1 is odd)."""
    rest = N - N1
    F = np.concatenate([np.ones(N1, np.int64), np.full(rest // 2, 2, np.int64)])
    if rest % 2:
        F[-1] = 3
    f = np.zeros(F.size, np.int64)
    f[: int(round(pi * N1))] = 1
    t = gpurisk.FreqTable(("k",), [list(range(F.size))], np.arange(F.size), f, F)
    assert t.N == N
    return t


def _run(table, pi, options):
    ctx = Context(fraction=pi, fraction_source="given", options=options)
    return run_measures(table, ctx, ["pr_pu", "risk_fishing", "risk_fishing_subsample",
                                     "risk_response", "bethlehem_flag"])


def test_components_of_risk_reproduce_kim_jeong_section_4():
    # 2005 census of Choongchung: N = 1,798,397 and 9,664 population uniques ("0.54 percent").
    t = _paper_table(1_798_397, 9_664, 0.02)
    r = _run(t, 0.02, {"kim_jeong": {"p_f2": 0.1, "subsampling_rate": 0.2}})
    assert round(100 * r["pr_pu"].value, 2) == 0.54
    # eq. 7, a 10 % census sample held by the intruder, the release a 20 % subsample of it:
    # "0.1 x 0.2 x 0.0054 ~ 0.00011"
    assert round(r["risk_fishing_subsample"].value, 5) == 0.00011
    # eq. 6 with the same files treated as independent: 0.02 x 0.1 x Pr(PU)
    assert r["risk_fishing"].value == pytest.approx(0.02 * 0.1 * 9_664 / 1_798_397, rel=1e-12)
    # eq. 8 with the paper's 0.2 for the response-knowledge case: "0.2 x 0.0055 ~ 0.0011"
    r8 = _run(t, 0.02, {"risk_response": {"p_f2": 0.2}})
    assert round(r8["risk_response"].value, 4) == 0.0011
    # eq. 9, a 100 % intruder file (the default p_f2 = 1): "the risk is 0.54 percent"
    r9 = _run(t, 0.02, {})
    assert round(100 * r9["risk_response"].value, 2) == 0.54
    # the subsampling rate defaults to pi / P(A in F2): 0.02 / 0.1 = 0.2, the same number
    rd = _run(t, 0.02, {"kim_jeong": {"p_f2": 0.1}})
    assert rd["risk_fishing_subsample"].value == pytest.approx(r["risk_fishing_subsample"].value)
    # Bethlehem et al.'s 0.1 %: "much higher than Bethlehem, et al's threshold"
    assert r["bethlehem_flag"].value == 1.0


def test_components_after_grouping_reproduce_kim_jeong():
    # after grouping: 501 uniques, "around 0.028 percent of the total population"
    t = _paper_table(1_798_397, 501, 0.02)
    r = _run(t, 0.02, {"kim_jeong": {"p_f2": 0.1, "subsampling_rate": 0.2}})
    assert round(100 * r["pr_pu"].value, 3) == 0.028
    assert round(r["risk_fishing_subsample"].value, 7) == 0.0000056     # "0.0000056"
    assert round(r["risk_response"].value, 6) == 0.000028               # "0.000028" (P(A in F2) = 0.1)
    assert r["bethlehem_flag"].value == 0.0                             # "much lower than ... 0.1 percent"
    # the second grouping, 495 uniques, is "around 0.028 percent" as well
    assert round(100 * 495 / 1_798_397, 3) == 0.028


def test_risk_broad_matches_simulation_of_the_papers_events():
    """eq. 10: simulate F1 (Bernoulli pi) and F2 (Bernoulli p_f2), score 1/C for every person in
    both files who is unique in F1, and compare the mean score with the mean of the measure."""
    rng = np.random.default_rng(11)
    sizes = rng.choice([1, 1, 1, 2, 2, 3, 4, 7], size=300)
    cls = np.repeat(np.arange(sizes.size), sizes)              # class of each person
    N, pi, p2 = cls.size, 0.3, 0.6
    pop = pd.DataFrame({"c": cls})
    sims, meas = [], []
    for _ in range(400):
        in1 = rng.random(N) < pi
        in2 = rng.random(N) < p2
        f = np.bincount(cls[in1], minlength=sizes.size)
        score = (in1 & in2 & (f[cls] == 1)) / sizes[cls]
        sims.append(score.sum() / N)
        if in1.any():
            res = gpurisk.assess(pop.assign(s=in1), ["c"], sample_flag="s", measures=["risk_broad"],
                                 options={"risk_broad": {"p_f2": p2}})
            meas.append(res.measures["risk_broad"].value)
    sims, meas = np.array(sims), np.array(meas)
    closed = p2 * pi * np.sum((1 - pi) ** (sizes - 1)) / N   # E under Bernoulli sampling
    se = math.sqrt(sims.var() / sims.size + meas.var() / meas.size)
    assert abs(sims.mean() - meas.mean()) < 4 * se
    assert abs(meas.mean() - closed) < 4 * meas.std() / math.sqrt(meas.size)


def test_risk_broad_hand_value():
    # cells (f, F): (1, 1), (1, 4), (2, 5), (0, 2): sample uniques weigh 1/1 + 1/4; N = 12
    t = gpurisk.FreqTable(("k",), [[0, 1, 2, 3]], np.arange(4), np.array([1, 1, 2, 0]),
                          np.array([1, 4, 5, 2]))
    r = run_measures(t, Context(fraction=4 / 12), ["risk_broad", "pop_uniques", "sample_uniques"])
    assert r["risk_broad"].value == pytest.approx(1.25 / 12)
    assert r["pop_uniques"].value == 1.0 and r["sample_uniques"].value == 2.0


def test_kim_jeong_options_are_checked():
    t = _paper_table(1000, 10, 0.1)
    with pytest.raises(gpurisk.BadInput, match="p_f2"):
        _run(t, 0.1, {"kim_jeong": {"p_f2": 1.5}})
    with pytest.raises(gpurisk.BadInput, match="exceeds"):
        _run(t, 0.5, {"risk_fishing_subsample": {"p_f2": 0.2}})
    r = _run(t, 0.1, {"bethlehem_flag": {"threshold": 0.02}})
    assert r["bethlehem_flag"].value == 0.0      # Pr(PU) = 0.01 <= 0.02


def test_population_measures_not_applicable_without_population():
    res = gpurisk.assess(POP, ["gender", "age"], fraction=0.5,
                         measures=["pop_uniques", "risk_fishing", "risk_broad", "sample_uniques"])
    for m in ("pop_uniques", "risk_fishing", "risk_broad"):
        assert res.measures[m].value is None and "population" in res.measures[m].reason
    assert res.measures["sample_uniques"].value == 3.0   # M41, M55, F55 within the ten rows
