"""``gpurisk validate``: designs, pairing of estimates with truths, reproducibility, real data, CLI."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.errors import BadInput
from gpurisk.validation import design as dz

from conftest import data_path, run_cli

TESTDATA_KEYS = ["urbrur", "water", "sex", "age"]


def load_testdata():
    return pd.read_csv(data_path("sdcmicro/testdata.csv"))


# --- samplers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("sort", [False, True])
def test_systematic_enumerates_every_record_once(sort):
    N, L = 1003, 10                                          # N not a multiple of L
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 7, N) if sort else None
    d = dz.Design("systematic", "c" if sort else None)
    reps, recs = [], []
    for first, count, rep, rec in dz.batches(d, 1 / L, 5, N, rng, codes):
        reps.append(rep + first)
        recs.append(rec)
    rep, rec = np.concatenate(reps), np.concatenate(recs)
    assert np.array_equal(np.sort(rec), np.arange(N))        # each record in exactly one sample
    assert sorted(set(rep.tolist())) == list(range(L))      # all L samples, --replicates ignored
    sizes = np.bincount(rep)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == N
    order = np.argsort(codes, kind="stable") if sort else np.arange(N)
    for s in (0, 3, 9):                                      # sample s = every L-th record from s
        assert np.array_equal(np.sort(rec[rep == s]), np.sort(order[s::L]))


def test_systematic_needs_integer_interval():
    with pytest.raises(BadInput, match="1/π"):
        dz.systematic_interval(0.03)
    assert dz.systematic_interval(0.02) == 50


def test_srs_and_stratified_sizes():
    rng = np.random.default_rng(5)
    strata = np.repeat(np.arange(4), [100, 250, 37, 613])
    N = strata.size
    for kind, codes in (("srs", None), ("stratified", strata)):
        d = dz.Design(kind, "s" if codes is not None else None)
        for first, count, rep, rec in dz.batches(d, 0.1, 20, N, rng, codes):
            for b in range(count):
                chosen = rec[rep == b]
                assert np.unique(chosen).size == chosen.size  # without replacement
                if kind == "srs":
                    assert chosen.size == 100
                else:
                    assert np.bincount(strata[chosen], minlength=4).tolist() == [10, 25, 4, 61]


def test_bernoulli_inclusion_probability():
    """Each record is included with probability π: the inclusion counts over R replicates are
    Binomial(R, π) (checked on the mean and the spread)."""
    rng = np.random.default_rng(7)
    N, R, pi = 2000, 400, 0.05
    hits = np.zeros(N)
    for first, count, rep, rec in dz.batches(dz.Design("bernoulli"), pi, R, N, rng):
        hits += np.bincount(rec, minlength=N)
    assert hits.mean() == pytest.approx(R * pi, abs=4 * math.sqrt(R * pi * (1 - pi) / N))
    assert hits.var() == pytest.approx(R * pi * (1 - pi), rel=0.15)


def test_count_batch_is_bincount_per_replicate():
    cell = np.array([0, 2, 2, 1, 0, 2])
    rep = np.array([0, 0, 1, 1, 1, 1])
    rec = np.array([0, 1, 2, 3, 4, 5])
    f = dz.count_batch(cell, 3, 2, rep, rec)
    assert f.tolist() == [[1, 0, 1], [1, 1, 2]]


def test_parse_design():
    assert dz.parse_design("stratified:urbrur") == dz.Design("stratified", "urbrur")
    assert dz.parse_design("systematic") == dz.Design("systematic", None)
    for bad in ("cluster", "stratified", "srs:x"):
        with pytest.raises(BadInput):
            dz.parse_design(bad)


# --- the runner ---------------------------------------------------------------------------------

def test_systematic_replicates_equal_assess_on_the_same_samples():
    """Each enumerated systematic sample, counted by bincount, gives the same values as assess on
    that sample read as records (θ, θ̂ and its s.e., τ1, τ̂1)."""
    pop = load_testdata()
    names = ["theta", "theta_hat", "tau1", "tau1_hat"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = gpurisk.validate(pop, TESTDATA_KEYS, fractions=[0.1], design="systematic:ori_hid",
                             measures=names)
    reps = v.replicates
    assert sorted(reps["replicate"].unique()) == list(range(10))
    assert reps.groupby("replicate")["n"].first().sum() == len(pop)   # the L samples partition U
    order = np.argsort(pop["ori_hid"].to_numpy(), kind="stable")
    for s in (0, 7):
        sample = pop.iloc[np.sort(order[s::10])]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = gpurisk.assess(sample, TESTDATA_KEYS, population=pop, fraction=0.1, measures=names)
        got = reps[reps["replicate"] == s].set_index("measure")
        for m in names:      # a withheld τ̂1 (outside [0, n1]) is validated by its raw value
            want = a.measures[m].extra.get("raw_value", a.measures[m].value)
            assert got.loc[m, "value"] == pytest.approx(want, rel=1e-12), m
            shown = a.measures[m].value
            assert (math.isnan(got.loc[m, "shown"]) if shown is None
                    else got.loc[m, "shown"] == pytest.approx(shown, rel=1e-12)), m
        assert got.loc["theta_hat", "se"] == pytest.approx(a.measures["theta_hat"].se, rel=1e-12)
        assert got.loc["theta_hat", "truth"] == got.loc["theta", "value"]     # θ̂ paired with θ
        assert got.loc["tau1_hat", "truth"] == got.loc["tau1", "value"]       # τ̂1 paired with τ1


def test_summary_statistics_and_pairing():
    pop = load_testdata()
    v = gpurisk.validate(pop, TESTDATA_KEYS, fractions=[0.2, 0.5], replicates=30, design="srs",
                         measures=["theta_hat"], seed=11)
    assert v.info["pairs"] == {"theta_hat": "theta"} and "theta" in v.info["measures"]
    row = v.summary[(v.summary["measure"] == "theta_hat") & (v.summary["fraction"] == 0.2)].iloc[0]
    r = v.replicates[(v.replicates["measure"] == "theta_hat") & (v.replicates["fraction"] == 0.2)]
    assert row["replicates"] == 30 and row["n_mean"] == round(0.2 * len(pop))
    err = r["value"] - r["truth"]
    assert row["error_mean"] == pytest.approx(err.mean())
    assert row["error_sd"] == pytest.approx(err.std(ddof=1))
    assert row["true_sd"] == pytest.approx(r["truth"].std(ddof=1))
    assert row["se_mean"] == pytest.approx(r["se"].mean())
    t1 = v.table1("theta_hat")
    assert t1.loc[("estimate", "mean"), 0.5] == pytest.approx(
        v.summary.query("measure == 'theta_hat' and fraction == 0.5")["estimate_mean"].iloc[0])


def test_fixed_seed_reproduces():
    pop = load_testdata()
    kw = dict(fractions=[0.05, 0.2], replicates=12, design="stratified:urbrur")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = gpurisk.validate(pop, TESTDATA_KEYS, seed=3, **kw)
        b = gpurisk.validate(pop, TESTDATA_KEYS, seed=3, **kw)
        c = gpurisk.validate(pop, TESTDATA_KEYS, seed=4, **kw)
    pd.testing.assert_frame_equal(a.summary, b.summary)
    pd.testing.assert_frame_equal(a.replicates, b.replicates)
    assert not np.allclose(a.replicates["value"].fillna(0), c.replicates["value"].fillna(0))
    # a fraction's replicates do not depend on which other fractions are asked for
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = gpurisk.validate(pop, TESTDATA_KEYS, seed=3, fractions=[0.2], replicates=12,
                             design="stratified:urbrur")
    pd.testing.assert_frame_equal(
        a.replicates[a.replicates["fraction"] == 0.2].reset_index(drop=True), d.replicates)


def test_tau1_nmse_and_reliability_flag():
    pop = load_testdata()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        v = gpurisk.validate(pop, TESTDATA_KEYS, fractions=[0.05, 0.5], replicates=20, design="srs",
                             measures=["tau1_hat"], seed=2)
    s = v.summary.set_index(["measure", "fraction"])
    r = v.replicates[v.replicates["measure"] == "tau1_hat"]
    for frac in (0.05, 0.5):
        g = r[r["fraction"] == frac]
        want = np.mean(((g["value"] - g["truth"]) / g["n"]) ** 2)
        assert s.loc[("tau1_hat", frac), "nmse"] == pytest.approx(want)
    # the flag is calibrated on real populations, not on λ < ln n: here the s.e. is about the size
    # of the estimate at both fractions (π = 0.5 uses the unbiased series, λ = 1), so never reliable
    assert s.loc[("tau1_hat", 0.05), "reliable_share"] == 0.0
    assert s.loc[("tau1_hat", 0.5), "reliable_share"] == 0.0
    assert (r["se"] > 0.3 * r["value"].abs()).mean() > 0.8


def test_tau1_reliable_where_validation_found_it_sound():
    """KDD Cup, five keys that nearly identify donors, π = 10 %: τ̂1 is marked reliable, and the
    samples marked so are within 25 % of τ1 on average, with NMSE < 0.1 (issue 21)."""
    pop = pd.read_csv(data_path("arx_genetic/cup_int.csv"), sep=";")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = gpurisk.validate(pop, ["AGE", "GENDER", "INCOME", "STATE", "NGIFTALL"], fractions=[0.1],
                             replicates=4, measures=["tau1_hat"], seed=5)
    r = v.replicates[v.replicates["measure"] == "tau1_hat"]
    r = r[r["reliable"].astype(bool)]
    assert len(r) >= 2                       # (issue 27: reliable needs s.e. ≤ 5 % of the estimate)
    rel_bias = (r["value"] - r["truth"]).mean() / r["truth"].mean()
    assert abs(rel_bias) < 0.25 and (((r["value"] - r["truth"]) / r["n"]) ** 2).mean() < 0.1
    assert ((r["se"] / r["value"]) <= 0.05).all()
    assert (abs(r["value"] - r["truth"]) <= 0.25 * r["truth"]).all()


def test_theta_hat_on_real_population_table1_shape():
    """Skinner & Elliot's §6 finding on a real file (ARX Adult, 30 162 people, 4 keys), exact over all
    L = 20 systematic samples ordered by age: the bias of θ̂ is well under its standard error and
    v̂^½ is close to sd(θ̂ − θ)."""
    pop = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    v = gpurisk.validate(pop, ["age", "sex", "race", "marital-status"], fractions=[0.05],
                         design="systematic:native-country", measures=["theta_hat"])
    row = v.summary[v.summary["measure"] == "theta_hat"].iloc[0]
    assert row["replicates"] == 20
    assert abs(row["error_mean"]) < 0.5 * row["error_sd"]
    assert 0.6 < row["se_mean"] / row["error_sd"] < 1.6


def test_bad_inputs():
    pop = load_testdata()
    with pytest.raises(BadInput, match="outside"):
        gpurisk.validate(pop, TESTDATA_KEYS, fractions=[1.5])
    with pytest.raises(BadInput, match="1/π"):
        gpurisk.validate(pop, TESTDATA_KEYS, fractions=[0.03], design="systematic")
    with pytest.raises(BadInput, match="'nope'"):
        gpurisk.validate(pop, TESTDATA_KEYS, design="stratified:nope")
    with pytest.raises(BadInput, match="unknown measure"):
        gpurisk.validate(pop, TESTDATA_KEYS, measures=["theta_hatt"])


# --- CLI ------------------------------------------------------------------------------------------

def test_cli_validate_outputs(tmp_path):
    path = data_path("sdcmicro/testdata.csv")
    out_pq, png = tmp_path / "v.parquet", tmp_path / "v.png"
    p = run_cli("validate", path, "--keys", ",".join(TESTDATA_KEYS), "--fractions", "0.1,0.25",
                "--design", "systematic", "--output", out_pq, "--plot", png, "--seed", "1")
    assert p.returncode == 0, p.stderr
    assert "theta_hat vs theta" in p.stdout and "tau1_hat vs tau1" in p.stdout
    assert "π = 0.25" in p.stdout and "reliable" in p.stdout
    df = pd.read_parquet(out_pq)
    th = df[df["measure"] == "theta_hat"]
    assert th["replicates"].tolist() == [10, 4] and set(th["design"]) == {"systematic"}
    assert {"true_mean", "estimate_sd", "error_mean", "se_mean", "nmse"} <= set(df.columns)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out_csv = tmp_path / "v.csv"
    q = run_cli("validate", path, "--keys", ",".join(TESTDATA_KEYS), "--fractions", "0.1",
                "--replicates", "5", "--design", "bernoulli", "--measures", "theta_hat",
                "--output", out_csv, "--json", "--seed", "9")
    assert q.returncode == 0, q.stderr
    doc = json.loads(q.stdout)
    assert doc["info"]["pairs"] == {"theta_hat": "theta"}
    assert pd.read_csv(out_csv)["measure"].tolist() == ["theta_hat", "theta"]
    assert [r["measure"] for r in doc["summary"]] == ["theta_hat", "theta"]


@pytest.mark.parametrize("args,needle", [
    (["--design", "cluster"], "design"),
    (["--design", "systematic", "--fractions", "0.03"], "1/π"),
    (["--fractions", "0.1,x"], "--fractions"),
    (["--keys", "urbrur,nokey"], "nokey"),
])
def test_cli_validate_errors(args, needle):
    path = data_path("sdcmicro/testdata.csv")
    base = {"--keys": ",".join(TESTDATA_KEYS)}
    argv = ["validate", str(path)]
    if "--keys" not in args:
        argv += ["--keys", base["--keys"]]
    p = run_cli(*argv, *args, "--replicates", "2")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.startswith("gpurisk: error:") and p.stderr.count("\n") == 1 and needle in p.stderr


# --- issue 20: progress, and a rerun over a finished --resume folder draws nothing -------------------
def _small_pop():
    rng = np.random.default_rng(5)
    N = 3000
    return pd.DataFrame({"a": rng.integers(0, 30, N), "b": rng.integers(0, 4, N)})


def test_progress_reports_every_replicate_once():
    seen = []
    gpurisk.validate(_small_pop(), ["a", "b"], fractions=[0.1, 0.2], replicates=12, seed=1,
                     progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 24) and seen[-1] == (24, 24)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_rerun_over_a_complete_resume_folder_draws_no_sample(tmp_path, monkeypatch):
    pop = _small_pop()
    kw = dict(fractions=[0.1, 0.2], replicates=12, seed=1)
    first = gpurisk.validate(pop, ["a", "b"], resume=tmp_path / "ck", **kw)
    assert sorted(p.name for p in (tmp_path / "ck").glob("done-*.json")) == ["done-000.json",
                                                                             "done-001.json"]

    def no_draws(*a, **k):
        raise AssertionError("a complete fraction drew replicate samples again")
    monkeypatch.setattr(dz, "batches", no_draws)
    monkeypatch.setattr(dz, "count_batch", no_draws)
    seen = []
    again = gpurisk.validate(pop, ["a", "b"], resume=tmp_path / "ck",
                             progress=lambda d, t: seen.append(d), **kw)
    pd.testing.assert_frame_equal(first.summary, again.summary)
    pd.testing.assert_frame_equal(first.replicates, again.replicates)
    assert first.warnings == again.warnings and seen[-1] == 24
    # a done marker whose part went missing is refused in one line, not silently short
    next((tmp_path / "ck").glob("part-001-*.json")).unlink()
    with pytest.raises(BadInput, match="is missing though done-001.json lists it"):
        gpurisk.validate(pop, ["a", "b"], resume=tmp_path / "ck", **kw)


def test_cli_progress_bar_on_a_terminal_only(tmp_path):
    """A bar on standard error when it is a terminal (a pty here); nothing when piped or with
    --no-progress; --progress on a pipe writes the final state once."""
    import os
    import pty
    import subprocess
    import sys
    from conftest import ROOT
    p = tmp_path / "pop.csv"
    _small_pop().to_csv(p, index=False)
    args = [sys.executable, "-m", "gpurisk", "validate", str(p), "--keys", "a,b", "--fractions",
            "0.1", "--replicates", "40", "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    piped = run_cli(*args[3:])                          # in-process: stderr is not a terminal
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    forced = run_cli(*args[3:], "--progress")           # asked for: the final state, once
    assert forced.returncode == 0 and forced.stderr.count("40/40") == 1, forced.stderr
    master, slave = pty.openpty()
    off = subprocess.Popen(args + ["--no-progress"], stdout=subprocess.PIPE, stderr=slave, env=env)
    off.communicate(timeout=120)
    os.set_blocking(master, False)
    try:
        assert os.read(master, 4096) == b""
    except BlockingIOError:                             # nothing written to the terminal
        pass
    os.set_blocking(master, True)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(master)
    assert proc.returncode == 0
    json.loads(out)                                   # stdout stays clean JSON
    assert b"replicates" in seen and b"/40" in seen, seen[-400:]


def test_summary_shows_coverage_and_se_over_sd_beside_the_bias():
    """Issue 43: per estimator with an interval, s.e./sd and the share of replicates whose upper
    bound holds the truth, recomputed here from the replicates' own values."""
    v = gpurisk.validate(load_testdata(), TESTDATA_KEYS, fractions=(0.05,), replicates=8,
                         measures=["matches_ll"], seed=4)
    r = v.replicates
    est = r[r["measure"] == "matches_ll"].reset_index(drop=True)
    tru = r[r["measure"] == "matches"].reset_index(drop=True)
    err = est["value"] - tru["value"]
    s = v.summary[v.summary["measure"] == "matches_ll"].iloc[0]
    assert s["se_over_sd"] == pytest.approx(est["se"].mean() / err.std(ddof=1))
    assert s["coverage"] == pytest.approx(float(np.mean(tru["value"] <= est["upper"])))
    t1 = v.table1("matches_ll")
    assert ("coverage", "") in t1.index and ("se_over_sd", "") in t1.index
