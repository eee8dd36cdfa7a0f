"""Issue 40, exact first: with population counts (a register with a sample flag, a population, or
π = 1) every command leads with the exact E = Σ_{f_j=1} 1/F_j and τ1 = #{f_j = 1, F_j = 1},
counted, and runs an estimator of a counted value only when it is named, then against the truth.

The oracle is a pandas groupby over the records of the development populations in
``../shared/data/populations`` (a seeded 5 % flagged sample), never gpurisk's own counts.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpurisk
from conftest import data_path, run_cli

#: population -> key variables (each population's README columns, three or four of them)
POPULATIONS = {
    "VietNamI": ["age", "sex", "married", "educ"],
    "star": ["sch", "gr", "sx", "eth"],
    "covid_testing": ["gender", "age", "clinic_name"],
    "GSSvocab": ["year", "gender", "nativeBorn", "educ"],
}
ESTIMATORS = {"matches_ll", "tau1_ll", "matches_hat", "theta_hat", "theta_hat_dis", "tau1_hat"}


def _register(name: str, seed: int = 5, share: float = 0.05) -> pd.DataFrame:
    pop = pd.read_csv(data_path(f"populations/{name}.csv.gz"))
    return pop.assign(released=np.random.default_rng(seed).random(len(pop)) < share)


def _oracle(reg: pd.DataFrame, keys) -> dict:
    """E, τ1, θ and N1 of the flagged sample, from a groupby over the records (missing values a
    category of their own, as gpurisk counts them by default)."""
    cell = reg.groupby(list(keys), dropna=False).ngroup().to_numpy()
    F = np.bincount(cell)
    f = np.bincount(cell[reg["released"].to_numpy()], minlength=F.size)
    su = f == 1
    return {"matches": float(np.sum(1.0 / F[su])), "tau1": int(np.sum(F[su] == 1)),
            "theta": float(su.sum() / F[su].sum()), "pop_uniques": int(np.sum(F == 1))}


@pytest.mark.parametrize("name", list(POPULATIONS))
def test_register_headline_is_the_exact_E_on_pandas(name):
    keys = POPULATIONS[name]
    reg = _register(name)
    want = _oracle(reg, keys)
    a = gpurisk.assess(reg, keys, sample_flag="released")
    doc = a.to_dict()
    h = doc["headline"]
    assert h["exact"] and h["measure"] == "matches" and h["interval"] is None
    assert h["value"] == pytest.approx(want["matches"], rel=1e-12)
    assert [b["measure"] for b in h["beside"]] == ["tau1"] and h["beside"][0]["value"] == want["tau1"]
    assert a.measures["theta"].value == pytest.approx(want["theta"], rel=1e-12)
    assert a.measures["pop_uniques"].value == want["pop_uniques"]
    # no estimator of a counted value runs unless named
    assert not ESTIMATORS & set(a.measures) and h["against_truth"] == []


@pytest.mark.parametrize("name", ["VietNamI", "star"])
def test_register_headline_on_dask_equals_the_oracle(name, client):
    dd = pytest.importorskip("dask.dataframe")
    keys = POPULATIONS[name]
    reg = _register(name, seed=6)
    want = _oracle(reg, keys)
    b = gpurisk.assess(dd.from_pandas(reg, npartitions=3, sort=False), keys,
                       sample_flag="released", backend="dask")
    h = b.to_dict()["headline"]
    assert h["exact"] and h["value"] == pytest.approx(want["matches"], rel=1e-12)
    assert h["beside"][0]["value"] == want["tau1"]
    assert not ESTIMATORS & set(b.measures)


def test_named_estimators_are_shown_against_the_truth():
    keys = POPULATIONS["VietNamI"]
    reg = _register("VietNamI")
    want = _oracle(reg, keys)
    a = gpurisk.assess(reg, keys, sample_flag="released",
                       measures=["matches_ll", "theta_hat", "tau1_ll"])
    # the truths come with the estimators named
    assert list(a.measures) == ["matches_ll", "theta_hat", "tau1_ll", "matches", "theta", "tau1"]
    checks = {c["measure"]: c for c in a.to_dict()["headline"]["against_truth"]}
    assert set(checks) == {"matches_ll", "theta_hat", "tau1_ll"}
    e = checks["matches_ll"]
    assert e["truth"] == pytest.approx(want["matches"]) and e["truth_measure"] == "matches"
    lo, hi = e["interval"]
    assert e["covered_by"] == "interval" and e["covered"] == (lo <= want["matches"] <= hi)
    assert e["error"] == pytest.approx(a.measures["matches_ll"].value - want["matches"])
    t = checks["theta_hat"]                       # θ̂ has a one-sided bound, no interval
    assert t["covered_by"] == "upper" and t["covered"] == (want["theta"] <= t["upper"])
    assert checks["tau1_ll"]["truth"] == want["tau1"]


def test_fraction_one_is_a_census():
    """π = 1: the release is the population, F = f, so E = n1 and τ1 = n1, counted."""
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex", "age"]
    a = gpurisk.assess(df, keys, fraction=1)
    n1 = int((df.groupby(keys, dropna=False).size() == 1).sum())
    h = a.to_dict()["headline"]
    assert h["exact"] and h["value"] == n1 and h["beside"][0]["value"] == n1
    assert "matches_ll" not in a.measures


def test_cli_assess_of_a_register_leads_with_the_exact_value(tmp_path):
    keys = POPULATIONS["star"]
    reg = _register("star")
    want = _oracle(reg, keys)
    reg.to_csv(tmp_path / "reg.csv", index=False)
    out = run_cli("assess", tmp_path / "reg.csv", "--keys", ",".join(keys), "--sample-flag",
                  "released", check=True).stdout
    head = [ln for ln in out.splitlines() if ln.startswith("headline")][0]
    assert "exact" in head and "≈" not in head and f"{want['matches']:.6g}" in head
    assert "interval" not in head
    named = run_cli("assess", tmp_path / "reg.csv", "--keys", ",".join(keys), "--sample-flag",
                    "released", "--measures", "matches_ll", check=True).stdout
    assert "against the truth" in named
    line = [ln for ln in named.splitlines() if ln.strip().startswith("matches_ll ≈")][0]
    assert f"truth {want['matches']:.6g} (matches)" in line
    assert ("holds the truth" in line) != ("MISSES the truth" in line)
    doc = json.loads(run_cli("assess", tmp_path / "reg.csv", "--keys", ",".join(keys),
                             "--sample-flag", "released", "--json", check=True).stdout)
    assert doc["headline"]["exact"] is True and "matches_ll" not in doc["measures"]
    # without population counts nothing changes: the estimate leads, with its interval
    est = run_cli("assess", tmp_path / "reg.csv", "--keys", ",".join(keys), "--fraction", "0.05",
                  check=True).stdout
    assert "headline expected correct matches E ≈" in est and "(matches_ll)" in est


def test_register_scan_and_compare_rank_by_the_exact_E():
    keys = POPULATIONS["VietNamI"]
    reg = _register("VietNamI")
    res = gpurisk.scan(reg, keys, max_size=2, sample_flag="released")
    assert res.rank_by == "matches" and not ESTIMATORS & set(res.measures)
    for _, row in res.results.iterrows():
        assert row["matches"] == pytest.approx(_oracle(reg, row["keys"])["matches"], rel=1e-12)
    from gpurisk.workflows.compare import compare
    cmp = compare(reg, keys[:3], ["age=bands:10"], sample_flag="released")
    assert cmp.rank_by == "matches" and "matches_ll" not in cmp.columns


def test_protect_judges_an_estimators_criterion_on_the_truth(tmp_path):
    """``theta_hat.upper<=X`` on a register is judged on the exact θ (θ̂'s bound would be an
    estimate of a value the office holds), and the plan says which criterion was asked."""
    keys = ["sex", "married", "educ"]
    reg = _register("VietNamI")
    want = _oracle(reg, keys)
    reg.to_csv(tmp_path / "reg.csv", index=False)
    bound = round(want["theta"] + 0.01, 3)        # the original coding meets it, exactly
    from gpurisk.workflows.protect import protect
    p = protect(str(tmp_path / "reg.csv"), keys, ["educ=bands:3"],
                        [f"theta_hat.upper<={bound}"], sample_flag="released")
    assert p.plan["criteria"] == [f"theta.value<={bound}"]
    assert p.plan["criteria_asked"] == {f"theta.value<={bound}": f"theta_hat.upper<={bound}"}
    before = p.before_after["before"].iloc[0]
    assert before == pytest.approx(want["theta"], rel=1e-9)
    out = run_cli("protect", tmp_path / "reg.csv", "--keys", ",".join(keys), "--hierarchy",
                  "educ=bands:3", "--criterion", f"theta_hat.upper<={bound}", "--sample-flag",
                  "released", check=True).stdout
    assert f"criterion theta_hat.upper<={bound} judged on the exact value theta.value<={bound}" in out


def test_report_verdict_on_a_register_reads_the_exact_E(tmp_path):
    from gpurisk.report.policy import Policy, evaluate
    keys = POPULATIONS["star"]
    reg = _register("star")
    res = gpurisk.scan(reg, keys, max_size=2, sample_flag="released")
    worst = max(_oracle(reg, k)["matches"] for k in res.results["keys"])
    v, = evaluate(Policy(max_expected_matches=worst - 0.5), res.results)
    assert v.status == "fails" and "exact E (matches)" in v.words
    assert v.value == pytest.approx(worst, rel=1e-12)
    v, = evaluate(Policy(max_expected_matches=worst + 0.5), res.results)
    assert v.status == "met"
