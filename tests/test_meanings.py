"""One meaning per name (issue 28): ``categories`` counts the distinct values a key takes (not the
integer range its codes span), ``k_anonymity`` is the k a file achieves in assess as in protect's
criterion, journalist and marketer need a population."""
from __future__ import annotations

import numpy as np
import pandas as pd

import gpurisk

from conftest import data_path


def test_categories_count_distinct_values_not_the_integer_range():
    df = pd.DataFrame({"age": np.r_[np.arange(10), 50, 90], "sex": [1, 2] * 6})
    doc = gpurisk.assess(df, ["age", "sex"], fraction=0.1, measures=["sample_uniques"]).to_dict()
    assert doc["categories"] == {"age": df["age"].nunique(), "sex": 2} == {"age": 12, "sex": 2}


def test_categories_on_real_data_equal_pandas_nunique():
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex", "age"]
    doc = gpurisk.assess(df, keys, fraction=0.01, measures=["sample_uniques"]).to_dict()
    assert doc["categories"] == {k: int(df[k].nunique(dropna=False)) for k in keys}


def test_k_anonymity_is_the_k_achieved_in_assess_and_in_protect():
    df = pd.read_csv(data_path("sdcmicro/testdata.csv"))
    keys = ["urbrur", "water", "sex"]
    m = gpurisk.assess(df, keys, measures=["k_anonymity"]).measures["k_anonymity"]
    assert m.value == int(df.groupby(keys).size().min())      # the smallest cell, by pandas
    assert m.extra["records_violating"] == int(sum(c for c in df.groupby(keys).size() if c < 3))


def test_journalist_and_marketer_say_they_need_a_population():
    a = gpurisk.assess("example:adult", ["age", "sex"], fraction=0.01,
                       measures=["journalist", "marketer", "prosecutor"])
    for name in ("journalist", "marketer"):
        assert a.measures[name].value is None and "needs population counts" in a.measures[name].reason
    assert a.measures["prosecutor"].value is not None
