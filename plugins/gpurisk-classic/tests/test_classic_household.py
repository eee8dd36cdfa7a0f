"""household_risk: sdcMicro's hierarchical risk 1 - Π(1 - r_i) per household (R/measure_risk.R,
fast_hier), checked on testdata against sdcMicro's own per-record risks grouped by pandas, and by hand."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

gc = pytest.importorskip("gpurisk_classic")
import gpurisk  # noqa: E402
from gpurisk.testing import run_cli  # noqa: E402

from classic_data import data_path  # noqa: E402

KEYS = ["urbrur", "water", "sex", "age"]


def test_testdata_against_sdcmicro_risks_grouped_by_household():
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    ref = pd.read_csv(data_path("sdcmicro/reference/testdata_w_fk_Fk_risk.csv"))
    # sdcMicro: by(risk, hid, function(x) 1 - prod(1 - x)), then one value per record
    per_hh = ref["risk"].groupby(df["ori_hid"]).agg(lambda x: 1 - np.prod(1 - x))
    want = df["ori_hid"].map(per_hh)
    res = gpurisk.assess(df, KEYS, weights="sampling_weight", measures=["household_risk"],
                         options={"household_risk": {"household": "ori_hid"}}).measures["household_risk"]
    assert res.extra["expected_reidentifications"] == pytest.approx(want.sum(), rel=1e-10)
    assert res.value == pytest.approx(want.mean(), rel=1e-10)
    assert res.extra["households"] == df["ori_hid"].nunique() == 1000
    assert res.extra["max_household_risk"] == pytest.approx(want.max(), rel=1e-10)
    table = gpurisk.build_table(df, KEYS, weights="sampling_weight")
    codes, hh = pd.factorize(df["ori_hid"])
    got = gc.household_of_records(gc.record_risk(table), codes, len(hh))
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12)


def test_by_hand():
    # risks 0.5, 0.5 in one household -> 0.75 each; 1.0 with anyone -> 1; alone -> own risk
    r = np.array([0.5, 0.5, 1.0, 0.2, 0.3])
    codes = np.array([0, 0, 1, 1, 2])
    np.testing.assert_allclose(gc.household_of_records(r, codes, 3), [0.75, 0.75, 1.0, 1.0, 0.3])


def test_missing_household_and_key_as_household_are_bad_input():
    df = pd.DataFrame({"a": [1, 1, 2, 2], "hh": [1.0, np.nan, 2.0, 2.0], "w": [10.0] * 4})
    with pytest.raises(gpurisk.BadInput, match="household column 'hh' has 1 missing"):
        gpurisk.assess(df, ["a"], weights="w", measures=["household_risk"],
                       options={"household_risk": {"household": "hh"}})
    with pytest.raises(gpurisk.BadInput, match="is one of the key variables"):
        gpurisk.assess(df, ["a"], weights="w", measures=["household_risk"],
                       options={"household_risk": {"household": "a"}})


def test_without_the_option_it_says_how_to_give_it():
    df = pd.DataFrame({"a": [1, 1, 2], "w": [10.0] * 3})
    res = gpurisk.assess(df, ["a"], weights="w", measures=["household_risk"]).measures["household_risk"]
    assert res.value is None and "options={'household_risk': {'household': COLUMN}}" in res.reason
    assert "--option household_risk.household=COLUMN" in res.reason.cli


def test_cli_reads_the_household_column():
    path = data_path("sdcmicro/testdata.csv")
    proc = run_cli("assess", path, "--keys", ",".join(KEYS), "--weights", "sampling_weight",
                   "--measures", "household_risk,indiv_risk", "--option", "household_risk.household=ori_hid",
                   "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["measures"]
    assert doc["household_risk"]["households"] == 1000
    assert doc["household_risk"]["value"] > doc["indiv_risk"]["value"]
    bad = run_cli("assess", path, "--keys", "sex", "--measures", "household_risk",
                  "--option", "household_risk.household=nope")
    assert bad.returncode == 2 and "'nope'" in bad.stderr and bad.stderr.strip().count("\n") == 0
