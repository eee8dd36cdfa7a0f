"""bench/validate_trust.py's estimator study (issue 27): one command, every estimator of E and τ1,
on a population the user names; the printed/JSON numbers are those of the replicates it drew."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, data_path


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("vt")
    td = data_path("sdcmicro/testdata.csv")
    out, csv = tmp / "vt.json", tmp / "reps.csv"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "validate_trust.py"),
                        "--population", f"{td}:urbrur,water,sex,age", "--replicates", "6",
                        "--rank-replicates", "0", "--fractions", "0.1", "--no-theta",
                        "--json", str(out), "--replicates-csv", str(csv)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return p.stdout, json.loads(out.read_text()), pd.read_csv(csv)


def test_prints_every_estimator_of_E_and_tau1(study):
    text, doc, _ = study
    assert "4a. Estimators of E" in text and "4b. Estimators of τ1" in text
    for name in ("matches_ll", "matches_ll@indep_poisson", "matches_hat (θ̂·n1)", "tau1_ll",
                 "tau1_hat"):
        assert name in text
    cell = doc["estimators"][0]
    assert set(cell["E"]) >= {"matches_ll", "matches_hat (θ̂·n1)"}
    assert set(cell["tau1"]) >= {"tau1_ll", "tau1_hat"}


def test_numbers_are_those_of_the_replicates(study):
    _, doc, reps = study
    cell = doc["estimators"][0]
    err = reps["matches_ll"] - reps["matches"]
    assert cell["E"]["matches_ll"]["rel_bias"] == pytest.approx(err.mean() / reps["matches"].mean())
    cover = np.mean(np.abs(err) <= 2.5758293035489004 * reps["matches_ll_se"] + 1e-9)
    assert cell["E"]["matches_ll"]["cover99"] == pytest.approx(cover)
    # the bias's Monte Carlo s.e.: the sd of the errors over √R, relative to the mean truth
    mc = err.std(ddof=1) / (np.sqrt(len(err)) * reps["matches"].mean())
    assert cell["E"]["matches_ll"]["rel_bias_mc"] == pytest.approx(mc)
    # the truth E = Σ_{f=1} 1/F lies in (0, n1]
    assert ((reps["matches"] > 0) & (reps["matches"] <= reps["n1"] + 1e-9)).all()


def test_n1_section_against_the_population_and_its_replicates():
    """Section 5 (--n1-replicates): the truth is the population's count of uniques, counted here with
    pandas; the default's bias and coverage are recomputed here from its replicates' values and
    reported interval (the log-scale one with whole-person ends, checked against its formula), and
    ARX's rule, with no interval, has no coverage."""
    pytest.importorskip("gpurisk_arx")
    sys.path.insert(0, str(ROOT / "bench"))
    import _trust_n1
    td = data_path("sdcmicro/testdata.csv")
    keys = ["urbrur", "water", "sex", "age"]
    pop = pd.read_csv(td)
    n1_true = int((pop.groupby(keys, dropna=False).size() == 1).sum())
    reps = _trust_n1.n1_replicates(pop, keys, [0.1], 6, seed=5)
    assert set(reps["estimator"]) == set(_trust_n1.N1_ESTIMATORS)
    assert (reps["N1"] == n1_true).all()
    rows = {r["estimator"]: r for r in _trust_n1.n1_rows(reps, {"population": "testdata"})}
    d = reps[reps["estimator"] == "default"]
    assert rows["default"]["bias"] == pytest.approx(((d["value"] - n1_true) / n1_true).mean())
    cover = np.mean((d["lower"] <= n1_true) & (n1_true <= d["upper"]))
    assert rows["default"]["cover"] == pytest.approx(cover)
    rel = (d["value"] - n1_true) / n1_true
    assert rows["default"]["bias_mc"] == pytest.approx(rel.std(ddof=1) / np.sqrt(len(rel)))
    assert rows["default"]["cover_mc"] == pytest.approx(np.sqrt(cover * (1 - cover) / len(d)))
    # the default's interval is the log-scale one, N̂1 · exp(± 1.96 s.e./N̂1), its ends rounded
    # outward to whole people; here never clipped. Its lower end is at most that: it is also the
    # one of the estimate without the combinations holding an unseen pair of a kept interaction
    # (gpurisk_arx.loglinear_n1.fit; its own test checks the formula)
    z = 1.959963984540054
    assert (d["lower"] <= np.floor(d["value"] * np.exp(-z * d["se"] / d["value"]))).all()
    assert (d["lower"] >= 0).all()
    np.testing.assert_array_equal(d["upper"], np.ceil(d["value"] * np.exp(z * d["se"] / d["value"])))
    assert np.isnan(rows["ARX (rule=arx)"]["cover"])
    # every value within what the sample allows: N1 ≤ N − (n − n1)
    assert (reps["value"] <= len(pop)).all()


def test_ranking_shares_and_their_monte_carlo_error():
    """Section 3's reported mean, minimum and Monte Carlo s.e. of the top-10 share are those of the
    per-sample shares it lists, each a share of the attainable total, in (0, 1]."""
    sys.path.insert(0, str(ROOT / "bench"))
    import validate_trust as vt
    pop = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    pool = ["urbrur", "roof", "walls", "water", "sex", "age"]
    out = vt.ranking(pop, pool, 3, seed=4, sizes=(1, 2), fraction=0.1)
    assert out["combinations"] == 6 + 15 and out["samples"] == 3
    # ranked as a scan of the sample file alone ranks (by Ê), not by the truth the study counts
    assert out["default_rank_by"] == "matches_ll"
    assert out["default"]["top10_each"] == pytest.approx(out["matches_ll"]["top10_each"])
    # the oracle ranks by each sample's true E: all of the attainable E, and no more of τ1 than all
    assert out["true E (oracle) vs E"]["top10_each"] == pytest.approx([1.0] * 3)
    for name in ("default", "default vs E", "n1", "tau1_ll", "true E (oracle)", "expected E (oracle)"):
        each = np.array(out[name]["top10_each"])
        assert each.size == 3 and ((each > 0) & (each <= 1 + 1e-12)).all()
        assert out[name]["top10_mean"] == pytest.approx(each.mean())
        assert out[name]["top10_min"] == pytest.approx(each.min())
        assert out[name]["top10_mc"] == pytest.approx(each.std(ddof=1) / np.sqrt(3))


def test_expected_e_is_the_other_samples_mean():
    """The "expected E (oracle)" ranking's score: a combination's E over its other samples (hand
    means), NaN where it has one sample."""
    sys.path.insert(0, str(ROOT / "bench"))
    import validate_trust as vt
    rows = pd.DataFrame({"order": [0, 0, 0, 1, 1, 2], "matches": [1.0, 2.0, 6.0, 5.0, 3.0, 4.0]})
    got = vt.expected_e(rows)
    np.testing.assert_allclose(got[:5], [4.0, 3.5, 1.5, 3.0, 5.0])
    assert np.isnan(got[5])


def test_n1_issue_count_takes_one_person_where_n1_is_at_most_four():
    """The count issue 43 asks for: at π ≥ 5 %, among the cells with N1 > 0, those whose mean N̂1 is
    within ±25 % of N1, or within one person where N1 ≤ 4 (hand-made rows)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import _trust_n1

    def row(N1, bias, fraction=0.05, estimator="default"):
        return {"N1": N1, "bias": bias, "fraction": fraction, "estimator": estimator}
    rows = [row(100, 0.25), row(100, -0.26),          # the edge in, just past it out
            row(4, 0.25), row(4, -0.26), row(4, 0.5),  # N1 = 4: one person is 25 %, 1.04 out
            row(2, 0.5), row(2, -0.51), row(1, 1.0),   # 1 person in, 1.02 out, 1 in
            row(12, 0.59), row(0, float("nan")),        # N1 > 4: 25 % only; N1 = 0 left out
            row(100, 0.9, fraction=0.01),              # π = 1 % left out
            row(100, 0.0, estimator="ARX (rule=arx)")]  # another estimator left out
    assert [_trust_n1.within_target(r) for r in rows[:10]] == [
        True, False, True, False, False, True, False, True, False, None]
    assert _trust_n1.issue_count(rows) == (4, 9)
    assert _trust_n1.issue_count(rows, "ARX (rule=arx)") == (1, 1)


def test_bias_split_adds_up_to_the_default_estimate_and_the_truth():
    """bench/ll_bias_by_category.py splits Ê and E (τ̂1 and τ1) by the kind of sample unique: its
    parts add up to matches_ll's (tau1_ll's) value (the script checks that itself) and to
    E = Σ_{f=1} 1/F (τ1 = Σ_{f=1} I(F = 1)) counted here apart, by pandas, on STAR's records with a
    missing value kept as a category of its own."""
    sys.path.insert(0, str(ROOT / "bench"))
    import ll_bias_by_category as split_bench
    from gpurisk.freq.engine import build_table
    from gpurisk.measure import Context
    from gpurisk.measures.matches_ll import MatchesLL
    from gpurisk.measures.tau1_ll import Tau1LL
    keys = ["sch", "gr", "sx", "eth"]     # 212-260 uniques a sample, 8-17 population uniques
    pop = pd.read_csv(data_path("populations/star.csv.gz"))[keys]
    assert pop[keys].isna().any().any()          # the split's "missing" kind is exercised
    counts = pop.groupby(keys, observed=True, dropna=False).size().rename("F").reset_index()
    counts = counts.astype(object).where(counts.notna(), None)
    counts["F"] = counts["F"].astype(float)
    seen = set()
    for seed in range(6):
        sample = pop[np.random.default_rng(seed).random(len(pop)) < 0.05]
        got = split_bench.split(sample, counts, keys, 0.05, rare=2)
        seen |= {k for k, v in got.items() if v[0]}
        # the truth by hand: the sample's cells of one record, their population counts
        filled = {k: "<missing>" for k in keys}
        f = sample.fillna(filled).groupby(keys).size()
        F = pop.fillna(filled).groupby(keys).size()
        uniques = f[f == 1].index
        want_e = float((1.0 / F.loc[uniques]).sum())
        assert sum(v[2] for v in got.values()) == pytest.approx(want_e, rel=1e-12)
        assert sum(v[0] for v in got.values()) == len(uniques)
        value = MatchesLL().compute(build_table(sample, keys), Context(fraction=0.05)).value
        assert sum(v[1] for v in got.values()) == pytest.approx(value, rel=1e-9)
        # τ̂1's split (--measure tau1): the truth is the uniques that are population uniques
        got = split_bench.split(sample, counts, keys, 0.05, rare=2, measure="tau1")
        tau1 = float((F.loc[uniques] == 1).sum())
        assert tau1 > 0 and sum(v[2] for v in got.values()) == tau1
        value = Tau1LL().compute(build_table(sample, keys), Context(fraction=0.05)).value
        assert sum(v[1] for v in got.values()) == pytest.approx(value, rel=1e-9, abs=1e-12)
    assert seen == {"missing", "rare", "other"}
