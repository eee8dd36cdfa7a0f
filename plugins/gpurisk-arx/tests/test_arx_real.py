"""The plugin's measures on real microdata (FARS, adult), through the CLI and the Python API, checked
against the same formulas computed by a pandas groupby of the records (not gpurisk's counting)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.testing import run_cli
from arx_data import ADULT_KEYS, FARS_KEYS, data_path

pytest.importorskip("gpurisk_arx")
ALL = "prosecutor,journalist,marketer,pop_uniqueness"


@pytest.fixture(scope="module")
def fars():
    return pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")


def _groupby_risks(sample: pd.DataFrame, keys, pop: pd.DataFrame | None = None, t=0.2):
    """The formulas of SPEC §10 by a pandas groupby (independent of the engine)."""
    f = sample.groupby(keys, dropna=False).size().rename("f").reset_index()
    if pop is None:
        f["F"] = f["f"]
    else:
        F = pop.groupby(keys, dropna=False).size().rename("F").reset_index()
        f = f.merge(F, on=keys, how="left")
    n, J = f["f"].sum(), len(f)
    return {"highest": 1 / f["F"].min(), "lowest": 1 / f["F"].max(),
            "records_above_threshold": int(f.loc[1 / f["F"] > t, "f"].sum()),
            "records_at_highest": int(f.loc[f["F"] == f["F"].min(), "f"].sum()),
            "average": max(J / f["F"].sum(), (f["f"] / f["F"]).sum() / n),
            "marketer": (f["f"] / f["F"]).sum() / n, "n1": int((f["f"] == 1).sum()), "J": J}


def test_fars_sample_cli(fars):
    keys = ["iage", "irace", "isex", "istatenum", "iinjury"]
    p = run_cli("assess", str(data_path("arx_genetic/fars_int.csv")), "--keys", ",".join(keys),
                "--measures", ALL, "--fraction", "0.05", "--option", "prosecutor.threshold=0.1",
                "--option", "journalist.sample_as_population=true",
                "--option", "marketer.sample_as_population=true", "--json")
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)["measures"]
    want = _groupby_risks(fars, keys, t=0.1)
    pr = m["prosecutor"]
    for k in ("highest", "lowest", "records_above_threshold", "records_at_highest", "average"):
        assert pr[k] == pytest.approx(want[k], rel=1e-12), k
    assert m["journalist"]["average"] == pr["average"] and m["journalist"]["population_used"] is False
    assert m["marketer"]["value"] == pytest.approx(want["J"] / len(fars), rel=1e-12)
    pu = m["pop_uniqueness"]
    assert pu["model"] == "loglinear_eb" and pu["reason"] is None     # the default model (issue 43)
    # its forest names the keys: race and injury severity are far from independent in FARS (the
    # pair the held-out tests kept too: its gain ~100 times their threshold)
    assert "irace x iinjury" in pu["interactions"].split(", ")
    assert pu["lower"] <= pu["value"] <= pu["upper"] and pu["se"] > 0
    assert pu["n1"] == want["n1"] and pu["N"] == pytest.approx(len(fars) / 0.05)
    assert 0 < pu["share"] < 1 and pu["value"] == pytest.approx(pu["share"] * pu["N"])


def test_fars_register_with_a_population(fars):
    keys = ["iage", "irace", "isex", "istatenum", "ihispanic"]
    reg = fars.copy()
    reg["in_sample"] = np.random.default_rng(18).random(len(reg)) < 0.08
    a = gpurisk.assess(reg, keys, sample_flag="in_sample", measures=ALL.split(","))
    want = _groupby_risks(reg[reg["in_sample"]], keys, pop=reg)
    jo = a.measures["journalist"]
    assert jo.extra["population_used"] is True
    for k in ("highest", "lowest", "records_above_threshold", "records_at_highest", "average", "marketer"):
        assert jo.extra[k] == pytest.approx(want[k], rel=1e-12), k
    assert a.measures["marketer"].value == pytest.approx(want["marketer"], rel=1e-12)
    pu = a.measures["pop_uniqueness"]
    assert pu.extra["N"] == len(reg) and pu.extra["model"] == "loglinear_eb"
    assert pu.value is not None and np.isfinite(pu.value)
    # the true N1 of this register lies in the default model's 95 % interval
    N1 = int((reg.groupby(keys).size() == 1).sum())
    assert pu.extra["lower"] <= N1 <= pu.upper


def test_adult_with_missing_keys_runs():
    p = run_cli("assess", str(data_path("uci_adult/adult_full_48842.csv")), "--keys",
                ",".join(ADULT_KEYS[:-1]), "--measures", ALL, "--fraction", "0.2", "--option",
                "pop_uniqueness.model=dankar", "--json")
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)["measures"]
    pu = m["pop_uniqueness"]
    assert pu["rule"] == "gpurisk" and pu["decision"] == "dankar" and pu["model"] in ("zayatz", "snb")     # π > 0.1
    assert pu["value"] == pytest.approx(min(v for v in (pu["zayatz_uniques"], pu["snb_uniques"])
                                            if v is not None))
    assert m["prosecutor"]["value"] == 1.0


def test_validate_pairs_pop_uniqueness_with_the_true_population_uniques(fars):
    v = gpurisk.validate(fars, ["iage", "isex", "istatenum", "irace"], fractions=[0.05], replicates=3,
                         measures=["pop_uniqueness"], seed=1)
    assert v.info["pairs"] == {"pop_uniqueness": "pop_uniques"}
    row = v.summary.set_index("measure").loc["pop_uniqueness"]
    assert row["defined"] == 3 and np.isfinite(row["error_mean"])
    reps = v.replicates[v.replicates["measure"] == "pop_uniqueness"]
    assert (reps["truth"] > 0).all() and reps["value"].notna().all()


@pytest.mark.parametrize("option, message", [
    ("prosecutor.threshold=2", "prosecutor.threshold=2"),
    ("pop_uniqueness.model=poisson", "pop_uniqueness.model"),
    ("pop_uniqueness.k_estimator=chao", "pop_uniqueness.k_estimator"),
])
def test_bad_options_are_one_line_errors(option, message):
    p = run_cli("assess", str(data_path("arx/adult.csv")), "--keys", "sex,age", "--measures", ALL,
                "--fraction", "0.1", "--option", option)
    assert p.returncode == 2 and p.stderr.startswith("gpurisk: error:") and message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_pop_uniqueness_without_a_fraction_says_why():
    p = run_cli("assess", str(data_path("arx/adult.csv")), "--keys", "sex,age", "--measures",
                "pop_uniqueness", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["measures"]["pop_uniqueness"]
    assert r["value"] is None and "sampling fraction" in r["reason"]


def test_scan_runs_the_plugin_measures_per_combination(fars, tmp_path):
    """In a scan each combination's table is a roll-up; the plugin's measures run on each like the
    built-ins, and equal an assess of the same keys."""
    keys = ["iage", "irace", "isex", "iinjury"]
    out = tmp_path / "scan.parquet"
    p = run_cli("scan", str(data_path("arx_genetic/fars_int.csv")), "--keys", ",".join(keys),
                "--max-size", "2", "--fraction", "0.05", "--measures", "prosecutor,pop_uniqueness",
                "-o", str(out))
    assert p.returncode == 0, p.stderr
    rows = pd.read_parquet(out)
    assert len(rows) == 4 + 6 and rows["pop_uniqueness"].notna().all()
    row = rows[rows["combo"] == "iage,isex"].iloc[0]
    a = gpurisk.assess(fars, ["iage", "isex"], fraction=0.05, measures=["prosecutor", "pop_uniqueness"])
    assert row["pop_uniqueness"] == pytest.approx(a.measures["pop_uniqueness"].value, rel=1e-12)
    assert row["prosecutor"] == a.measures["prosecutor"].value


def test_a_scan_without_measures_runs_only_default_measures(fars):
    """The plugin's measures declare default = False (model fits, and journalist/marketer read cells):
    a scan that names no measures leaves them out, as assess does."""
    res = gpurisk.scan(fars, keys=["iage", "isex"], max_size=1, fraction=0.05)
    assert "theta_hat" in res.measures
    assert not {"prosecutor", "journalist", "marketer", "pop_uniqueness"} & set(res.measures)


def test_unseen_categories_part_on_a_real_register(tmp_path):
    """MACH 2019 (age, gender, race), a 5 % sample: the default adds the uniques in categories no
    sample record has (its extra equals the difference the CLI option turns off), and the sample
    does miss categories that hold population uniques (counted here with pandas)."""
    keys = ["age", "gender", "race"]
    reg = pd.read_csv(data_path("arx_genetic/mach2019_int.csv"), sep=";")
    s = reg[np.random.default_rng(4).random(len(reg)) < 0.05]
    unique = reg.groupby(keys)["age"].transform("size") == 1
    missing = np.zeros(len(reg), dtype=bool)
    for k in keys:
        missing |= ~reg[k].isin(s[k].unique()).to_numpy()
    assert int((unique & missing).sum()) > 10            # population uniques the cells cannot hold
    path = tmp_path / "sample.csv"
    s[keys].to_csv(path, index=False)
    out = {}
    for opt in ("true", "false"):
        p = run_cli("assess", str(path), "--keys", ",".join(keys), "--fraction", "0.05",
                    "--measures", "pop_uniqueness", "--option",
                    f"pop_uniqueness.unseen_categories={opt}", "--json")
        assert p.returncode == 0, p.stderr
        out[opt] = json.loads(p.stdout)["measures"]["pop_uniqueness"]
    part = out["true"]["loglinear_eb_unseen_categories_part"]
    assert part > 0 and out["false"]["loglinear_eb_unseen_categories_part"] == 0.0
    assert out["true"]["value"] == pytest.approx(out["false"]["value"] + part, rel=1e-9)
    assert out["true"]["se"] > out["false"]["se"]
