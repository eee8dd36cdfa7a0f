"""l_diversity: per-cell distinct and entropy l (sdcMicro src/Measure_Risk.h compute_group_ldiversity)
checked by hand and against pandas' groupby on testdata."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

gc = pytest.importorskip("gpurisk_classic")
import gpurisk  # noqa: E402
from gpurisk.testing import run_cli  # noqa: E402

from classic_data import data_path  # noqa: E402

KEYS = ["urbrur", "water", "sex", "age"]


def test_by_hand_with_missing_values_as_sdcmicro():
    df = pd.DataFrame({"a": [1, 1, 1, 1, 2, 2, 3, 3, 3],
                       "s": ["x", "y", "y", None, "x", "x", None, None, None]})
    table = gpurisk.build_table(df, ["a"])
    distinct, entropy_l = gc.cell_diversity(table, df["s"])
    # cell 1: x, y, y, missing -> 3 values; cell 2: x, x -> 1; cell 3: only missing -> 0 (sdcMicro)
    assert distinct.tolist() == [3, 1, 0]
    h1 = -(0.25 * math.log(0.25) * 2 + 0.5 * math.log(0.5))
    np.testing.assert_allclose(entropy_l, [math.exp(h1), 1.0, 1.0], rtol=1e-14)
    res = gpurisk.assess(df, ["a"], measures=["l_diversity"],
                         options={"l_diversity": {"sensitive": "s", "l": 2}}).measures["l_diversity"]
    assert res.value == 0 and res.extra["cells_below_l"] == 2 and res.extra["records_below_l"] == 5
    assert res.extra["entropy_l"] == 1.0 and res.extra["records_below_l_entropy"] == 5


@pytest.mark.parametrize("sensitive", ["walls", "relat"])
def test_testdata_against_pandas_groupby(sensitive):
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    table = gpurisk.build_table(df, KEYS)
    distinct, entropy_l = gc.cell_diversity(table, df[sensitive])
    g = df.groupby(KEYS)[sensitive]
    want_distinct = g.transform("nunique")
    pairs = df.groupby(KEYS + [sensitive]).size()
    share = pairs / pairs.groupby(level=KEYS).transform("sum")
    entropy = (-share * np.log(share)).groupby(level=KEYS).sum().rename("H")
    want_entropy = np.exp(df.join(entropy, on=KEYS)["H"])
    rc = table.record_cell()
    np.testing.assert_array_equal(distinct[rc], want_distinct)
    np.testing.assert_allclose(entropy_l[rc], want_entropy, rtol=1e-12)
    res = gpurisk.assess(df, KEYS, measures=["l_diversity"],
                         options={"l_diversity": {"sensitive": sensitive, "l": 3}}).measures["l_diversity"]
    assert res.value == want_distinct.min()
    assert res.extra["entropy_l"] == pytest.approx(want_entropy.min(), rel=1e-12)
    assert res.extra["records_below_l"] == int((want_distinct < 3).sum())


def test_sensitive_must_not_be_a_key_and_option_is_needed():
    df = pd.DataFrame({"a": [1, 1, 2], "s": [1, 2, 3]})
    with pytest.raises(gpurisk.BadInput, match="is one of the key variables"):
        gpurisk.assess(df, ["a"], measures=["l_diversity"], options={"l_diversity": {"sensitive": "a"}})
    res = gpurisk.assess(df, ["a"], measures=["l_diversity"]).measures["l_diversity"]
    assert "--option l_diversity.sensitive=COLUMN" in res.reason.cli
    with pytest.raises(gpurisk.BadInput, match="'zz'"):
        gpurisk.assess(df, ["a"], measures=["l_diversity"], options={"l_diversity": {"sensitive": "zz"}})


def test_cli():
    proc = run_cli("assess", data_path("sdcmicro/testdata.csv"), "--keys", ",".join(KEYS),
                   "--measures", "l_diversity", "--option", "l_diversity.sensitive=walls", "--json")
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)["measures"]["l_diversity"]
    assert m["value"] == 1 and m["sensitive"] == "walls"
