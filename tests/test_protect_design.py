"""``protect --sample-flag COL`` and ``--weights COL``: criteria on a register's population counts
and on design weights, against pandas recounts of every node of adult's lattice."""
from __future__ import annotations


import numpy as np
import pandas as pd
import pytest

from gpurisk.errors import BadInput
from gpurisk.protect import apply_plan, protect
from conftest import arx_hierarchy_maps, data_path, run_cli

KEYS = ["sex", "age", "race"]



@pytest.fixture(scope="module")
def register(tmp_path_factory):
    src = data_path("arx/adult.csv")
    df = pd.read_csv(src, sep=";", dtype=str, keep_default_na=False)
    df = df.sample(n=3000, random_state=5).reset_index(drop=True)
    rng = np.random.default_rng(5)
    df["in_sample"] = np.where(rng.random(len(df)) < 0.2, "1", "0")
    df["w"] = [f"{x:.3f}" for x in rng.uniform(1.0, 9.0, len(df))]
    d = tmp_path_factory.mktemp("design")
    data = d / "register.csv"
    df.to_csv(data, sep=";", index=False)
    hier = str(src.parent / "adult_hierarchy_age.csv")
    return data, df, hier, arx_hierarchy_maps(hier)


def _generalised(df, maps, lev):
    g = df[KEYS].copy()
    if lev:
        g["age"] = df["age"].map(maps[lev - 1])
    return g


def test_weights_feed_theta_hat_weighted(register, tmp_path):
    data, df, hier, maps = register
    crit = "theta_hat_weighted<=0.1"
    p = protect(data, KEYS, {"age": hier}, [crit], weights="w", output=tmp_path / "r.csv",
                plan=tmp_path / "p.json")
    r = p.result
    w = df["w"].astype(float)
    for i, lv in enumerate(r.levels.tolist()):
        g = _generalised(df, maps, lv[1])
        grp = g.assign(w=w).groupby(KEYS)
        f, ws = grp.size(), grp["w"].sum()
        n1, d = int((f == 1).sum()), float((ws[f == 2] - 2).sum())
        want = n1 / (n1 + d) if n1 + d > 0 else np.nan
        got = r.values[i, 0, 0]
        assert (np.isnan(want) and np.isnan(got)) or got == pytest.approx(want, rel=1e-12), lv
    ok = [lv for i, lv in enumerate(r.levels.tolist()) if r.feasible[i]]
    assert ok and p.node["age"] == min(lv[1] for lv in ok)
    assert not r.feasible[0]                     # the bottom fails: the search had work to do
    apply_plan(tmp_path / "p.json", tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == (tmp_path / "r.csv").read_bytes()
    with pytest.raises(BadInput, match="needs design weights: give weights=COL"):
        protect(data, KEYS, {"age": hier}, [crit])
    with pytest.raises(BadInput, match="with weights is not supported"):
        protect(data, KEYS, {"age": hier}, [crit], weights="w", suppress_limit=0.01)


def test_sample_flag_gives_population_counts_and_pi(register, tmp_path):
    data, df, hier, maps = register
    flag = (df["in_sample"] == "1").to_numpy()
    pi = flag.sum() / len(df)
    out, plan = tmp_path / "s.csv", tmp_path / "s.json"
    p = protect(data, KEYS, {"age": hier}, ["pop_uniques<=5", "theta_hat<=0.5"],
                sample_flag="in_sample", output=out, plan=plan, prune=False)
    r = p.result
    assert p.plan["criteria"] == ["pop_uniques.value<=5", "theta.value<=0.5"]
    assert p.settings["fraction"] == pytest.approx(pi)
    for i, lv in enumerate(r.levels.tolist()):
        g = _generalised(df, maps, lv[1])
        F = g.groupby(KEYS).size()
        f = g[flag].groupby(KEYS).size()
        assert r.values[i, 0, 0] == int((F == 1).sum()), lv
        # a register: theta_hat<=0.5 is judged on the exact θ = n1 / Σ_{f=1} F (eq. 2; issue 40)
        su = f[f == 1].index
        n1 = len(su)
        want = n1 / F.loc[su].sum() if n1 else np.nan
        got = r.values[i, 1, 0]
        assert (np.isnan(want) and np.isnan(got)) or got == pytest.approx(want, rel=1e-12), lv
    ok = [lv for i, lv in enumerate(r.levels.tolist()) if r.feasible[i]]
    assert ok and not r.feasible[0] and p.node["age"] == min(lv[1] for lv in ok)
    # the release is the flagged records, recoded; other columns as they were
    rel = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False)
    sub = df[flag].reset_index(drop=True)
    assert len(rel) == int(flag.sum())
    lev = p.node["age"]
    want_age = sub["age"].map(maps[lev - 1]) if lev else sub["age"]
    assert rel["age"].equals(want_age.rename("age"))
    others = [c for c in df.columns if c != "age"]
    assert rel[others].equals(sub[others])
    apply_plan(plan, tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == out.read_bytes()
    with pytest.raises(BadInput, match="suppress_limit with sample_flag is not supported"):
        protect(data, KEYS, {"age": hier}, ["pop_uniques<=0"], sample_flag="in_sample",
                suppress_limit=0.01)


def test_cli_sample_flag_and_weights(register, tmp_path):
    data, df, hier, _ = register
    base = ["protect", data, "--keys", ",".join(KEYS), "--hierarchy", f"age={hier}", "--json"]
    import json
    a = json.loads(run_cli(*base, "--criterion", "pop_uniques<=0", "--sample-flag", "in_sample",
                           check=True).stdout)
    b = protect(data, KEYS, {"age": hier}, ["pop_uniques<=0"], sample_flag="in_sample")
    assert a["node"] == b.node
    c = json.loads(run_cli(*base, "--criterion", "theta_hat_weighted<=0.1", "--weights", "w",
                           check=True).stdout)
    d = protect(data, KEYS, {"age": hier}, ["theta_hat_weighted<=0.1"], weights="w")
    assert c["node"] == d.node
    proc = run_cli(*base, "--criterion", "pop_uniques<=0")
    assert proc.returncode == 2 and "--sample-flag" in proc.stderr


def test_protect_errors_name_the_parameter_in_the_api_and_the_flag_on_the_command_line(tmp_path):
    """The same refusal in both places: ``suppress_limit with weights`` from the Python API,
    ``--suppress-limit with --weights`` from the command line (issue 28)."""
    data = pd.DataFrame({"age": np.arange(300) % 60, "sex": np.arange(300) % 2,
                         "w": np.full(300, 10.0)})
    with pytest.raises(BadInput) as err:
        protect(data, ["age", "sex"], {"age": ["bands:5"]}, ["k_anonymity>=3"], weights="w",
                suppress_limit=0.01)
    assert str(err.value).startswith("suppress_limit with weights is not supported")
    assert "--" not in str(err.value)
    src = tmp_path / "d.csv"
    data.to_csv(src, index=False)
    p = run_cli("protect", src, "--keys", "age,sex", "--hierarchy", "age=bands:5", "--criterion",
                "k_anonymity>=3", "--weights", "w", "--suppress-limit", "0.01")
    assert p.returncode == 2 and "--suppress-limit with --weights is not supported" in p.stderr
    assert "suppress_limit" not in p.stderr
