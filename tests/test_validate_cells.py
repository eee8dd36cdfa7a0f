"""``gpurisk validate`` drawing replicate samples from the population's cell counts (``draw="cells"``),
as a population read by Dask workers must (its records stay on the workers).

References: the binomial and multivariate hypergeometric moments (hand formulas), the record-level
draws of the same design (same distribution of the sample counts, another random stream), and the
pandas run with the same seed (a Dask run must equal it exactly)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpurisk
from conftest import data_path, run_cli
from gpurisk.errors import BadInput
from gpurisk.validation import design as dz

F = np.array([1, 1, 2, 3, 7, 40, 1, 5, 0, 12], dtype=np.int64)


def _draws(kind, pi, R, seed=3):
    rng = np.random.default_rng(seed)
    out = [fm for _, _, fm in dz.cell_batches(dz.parse_design(kind), pi, R, F, rng)]
    return np.vstack(out)


def test_bernoulli_cells_have_binomial_moments():
    pi, R = 0.3, 40_000
    f = _draws("bernoulli", pi, R)
    assert f.shape == (R, F.size) and (f <= F).all() and (f >= 0).all()
    mean, var = F * pi, F * pi * (1 - pi)
    se = np.sqrt(var / R)
    assert (np.abs(f.mean(0) - mean) <= 5 * se + 1e-12).all()
    keep = F > 0
    assert np.allclose(f.var(0, ddof=1)[keep], var[keep], rtol=0.06)


def test_srs_cells_have_hypergeometric_moments():
    pi, R = 0.25, 40_000
    N = int(F.sum())
    n = int(np.rint(pi * N))
    f = _draws("srs", pi, R)
    assert (f.sum(1) == n).all() and (f <= F).all()
    p = F / N
    mean = n * p
    var = n * p * (1 - p) * (N - n) / (N - 1)          # multivariate hypergeometric, by hand
    assert (np.abs(f.mean(0) - mean) <= 5 * np.sqrt(var / R) + 1e-12).all()
    keep = F > 0
    assert np.allclose(f.var(0, ddof=1)[keep], var[keep], rtol=0.06)


@pytest.mark.parametrize("design", ["bernoulli", "srs", "stratified:marital-status"])
def test_cells_and_records_give_the_same_distribution_on_real_data(design):
    """adult, 3 keys, π = 5 %: the truths' and θ̂'s means over 300 replicates drawn from records and
    from cells agree within 4 standard errors of their difference; srs and stratified draw the same
    n in every replicate both ways."""
    kw = dict(fractions=[0.05], replicates=300, measures=["theta_hat"], design=design)
    a = gpurisk.validate("example:adult", "age,sex,race", draw="records", **kw).replicates
    b = gpurisk.validate("example:adult", "age,sex,race", draw="cells", seed=1, **kw).replicates
    for col in ("n", "n1", "n2", "value"):
        x = a.loc[a.measure == "theta_hat", col].astype(float)
        y = b.loc[b.measure == "theta_hat", col].astype(float)
        se = np.sqrt(x.var() / len(x) + y.var() / len(y))
        assert abs(x.mean() - y.mean()) <= 4 * se + 1e-12, (col, x.mean(), y.mean(), se)
    if design != "bernoulli":
        assert a.n.nunique() == 1 and b.n.nunique() == 1 and a.n.iloc[0] == b.n.iloc[0]


def test_cells_resume_equals_an_uninterrupted_run(tmp_path):
    # in this process (processes=0): the interruption below is this process's counter
    kw = dict(fractions=[0.1], replicates=12, measures=["theta_hat", "tau1_hat"], draw="cells", seed=4,
              processes=0)
    whole = gpurisk.validate("example:adult", "age,sex", **kw)
    from gpurisk.validation import runner
    calls = {"n": 0}
    real = runner._run_one

    def dies(*a, **k):
        calls["n"] += 1
        if calls["n"] > 6:
            raise KeyboardInterrupt
        return real(*a, **k)

    runner._run_one = dies
    try:
        with pytest.raises(KeyboardInterrupt):
            gpurisk.validate("example:adult", "age,sex", resume=tmp_path / "ck", **kw)
    finally:
        runner._run_one = real
    calls["n"] = -10**9      # counts the resumed run's replicates, never dies
    runner._run_one = dies
    try:
        again = gpurisk.validate("example:adult", "age,sex", resume=tmp_path / "ck", **kw)
    finally:
        runner._run_one = real
    assert calls["n"] + 10**9 == 12 - runner.CHUNK     # the saved chunk is read back, not redrawn
    pd.testing.assert_frame_equal(whole.summary, again.summary)


def test_stratified_cells_keep_every_stratum_size():
    """stratified:sex drawn from cells: in every replicate each stratum gives exactly
    n_h = round(π N_h) records (counted back by a pandas groupby of the population by sex)."""
    df = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"))
    Nh = df.groupby("sex").size()
    want = int(sum(np.rint(0.1 * Nh)))
    r = gpurisk.validate(df, "age,race", design="stratified:sex", draw="cells", fractions=[0.1],
                         replicates=5, measures=["theta_hat"]).replicates
    assert (r["n"] == want).all()


def test_cells_refuse_designs_that_need_records():
    for design in ("systematic", "systematic:sex"):
        with pytest.raises(BadInput, match="use design='bernoulli', 'srs' or 'stratified:COL'"):
            gpurisk.validate("example:adult", "age,race", design=design, draw="cells",
                             fractions=[0.1], replicates=2)
    with pytest.raises(BadInput, match="draw="):
        gpurisk.validate("example:adult", "age", draw="rows", fractions=[0.1], replicates=2)


def test_cli_draw_cells_and_refusal():
    r = run_cli("validate", "example:adult", "--keys", "age,sex", "--fractions", "0.1",
                "--replicates", "3", "--draw", "cells", "--json", check=True)
    import json
    assert json.loads(r.stdout)["info"]["draw"] == "cells"
    bad = run_cli("validate", "example:adult", "--keys", "age,sex", "--design", "systematic",
                  "--fractions", "0.1", "--draw", "cells")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


# --- on Dask: the population's records stay on the workers; numbers equal pandas' cell draws -----
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")


def test_dask_validate_equals_pandas_cell_draws(client):
    pop = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    keys = ["iage", "isex", "irace"]
    kw = dict(fractions=[0.02, 0.1], replicates=6, seed=9,
              measures=["theta_hat", "tau1_hat", "pr_pu_su", "pop_uniques"])
    want = gpurisk.validate(pop, keys, draw="cells", **kw)
    got = gpurisk.validate(dd.from_pandas(pop, npartitions=5), keys, backend="dask", **kw)
    assert got.info["draw"] == "cells"
    pd.testing.assert_frame_equal(got.summary, want.summary)
    pd.testing.assert_frame_equal(got.replicates, want.replicates)


def test_dask_validate_stratified_equals_pandas_cell_draws(client):
    pop = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    kw = dict(fractions=[0.05], replicates=4, seed=2, design="stratified:istatenum",
              measures=["theta_hat", "tau1_hat"])
    want = gpurisk.validate(pop, ["iage", "isex", "irace"], draw="cells", **kw)
    got = gpurisk.validate(dd.from_pandas(pop, npartitions=4), ["iage", "isex", "irace"],
                           backend="dask", **kw)
    pd.testing.assert_frame_equal(got.replicates, want.replicates)


def test_dask_validate_of_a_records_design_is_one_line(client):
    pop = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    with pytest.raises(BadInput, match="use design='bernoulli', 'srs' or 'stratified:COL'"):
        gpurisk.validate(dd.from_pandas(pop, npartitions=3), ["iage", "isex"], backend="dask",
                         design="systematic", fractions=[0.1])
    with pytest.raises(BadInput, match="does not keep"):
        gpurisk.validate(dd.from_pandas(pop, npartitions=3), ["iage", "isex"], backend="dask",
                         draw="records", fractions=[0.1], replicates=2)
