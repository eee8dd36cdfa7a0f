"""cell_value_counts (a non-key variable's distribution within cells) and how measures get columns:
Measure.column_options, Context.column, and assess() passing the named columns, sample rows only."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.core.messages import phrase
from gpurisk import BadInput, Context, Measure, Result
from gpurisk.workflows.assess import option_columns
from gpurisk.measure import missing_needs
from gpurisk.plugins import register, unregister

from conftest import data_path


def test_counts_match_pandas_groupby_on_adult():
    df = pd.read_csv(data_path("uci_adult/adult_full_48842.csv"), skipinitialspace=True,
                     na_values=["?", ""])
    keys = ["age", "sex", "race"]
    sens = next(c for c in df.columns if c.startswith("occupation"))
    table = gpurisk.build_table(df, keys)
    cv = gpurisk.cell_value_counts(table, df[sens], name=sens)
    g = df.groupby(keys, dropna=False)[sens]
    rc = table.record_cell()
    np.testing.assert_array_equal(cv.distinct()[rc], g.transform(lambda s: s.nunique(dropna=False)))
    # counts of each (cell, value) pair, compared as sorted multisets per cell count
    pairs = df.groupby(keys + [sens], dropna=False).size()
    assert sorted(pairs.tolist()) == sorted(cv.count.tolist())
    assert cv.count.sum() == len(df) and cv.missing_code == len(cv.categories) - 1
    assert cv.categories[-1] is None


def test_entropy_and_only_missing_by_hand():
    df = pd.DataFrame({"k": [1, 1, 1, 1, 2, 3, 3], "s": ["a", "b", "b", "b", None, None, "a"]})
    table = gpurisk.build_table(df, ["k"])
    cv = gpurisk.cell_value_counts(table, df["s"])
    assert cv.distinct().tolist() == [2, 1, 2]
    np.testing.assert_allclose(cv.entropy(), [-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)), 0.0,
                                              np.log(2)], rtol=1e-14)
    assert cv.only_missing().tolist() == [False, True, False]


def test_population_cells_without_sample_records():
    reg = pd.DataFrame({"k": [1, 1, 2, 2, 3], "flag": [True, True, False, False, True], "s": [1, 2, 3, 3, 4]})
    table = gpurisk.build_table(reg, ["k"], sample_flag="flag")
    cv = gpurisk.cell_value_counts(table, reg.loc[reg.flag, "s"])
    assert cv.distinct().tolist() == [2, 0, 1] and cv.entropy()[1] == 0.0


def test_length_mismatch_is_bad_input():
    df = pd.DataFrame({"k": [1, 2, 3]})
    table = gpurisk.build_table(df, ["k"])
    with pytest.raises(BadInput, match="has 2 values but the sample has 3 records"):
        gpurisk.cell_value_counts(table, [1, 2], name="s")


class Peek(Measure):
    """Reads a column through ctx.column: the number of distinct values among the sample's records."""
    name = "peek_test"
    description = "distinct values of a column in the sample"
    reference = "test"
    needs = frozenset({"records", "columns"})
    options = {"col": None}
    column_options = ("col",)

    def compute(self, table, ctx):
        vals = ctx.column(ctx.option(self.name, "col"))
        return Result(value=float(len(set(vals.tolist()))), extra={"n_values": len(vals)})


class _Plugin:
    @gpurisk.hookimpl
    def gpurisk_register_measures(self):
        return [Peek]


@pytest.fixture
def peek():
    register(_Plugin(), name="peek-test-plugin")
    yield Peek
    unregister("peek-test-plugin")


def test_assess_passes_only_the_sample_rows_of_the_named_column(peek):
    reg = pd.DataFrame({"k": [1, 1, 2, 2, 3], "flag": [True, False, True, True, False],
                        "hh": [10, 11, 12, 12, 13]})
    a = gpurisk.assess(reg, ["k"], sample_flag="flag", measures=["peek_test"],
                       options={"peek_test": {"col": "hh"}})
    assert a.measures["peek_test"].value == 2.0 and a.measures["peek_test"].extra["n_values"] == 3
    assert option_columns(["peek_test"], {"peek_test": {"col": "hh"}}) == ["hh"]
    assert option_columns(["peek_test"], {}) == []


def test_missing_needs_for_column_options(peek):
    table = gpurisk.build_table(pd.DataFrame({"k": [1, 2]}), ["k"])
    why = missing_needs(Peek, table, Context())        # phrased for the side asking: Python here
    assert "options={'peek_test': {'col': COLUMN}}" in why
    assert "--option peek_test.col=COLUMN" in phrase(why, "cli")
    why = missing_needs(Peek, table, Context(options={"peek_test": {"col": "hh"}}))
    assert "'hh'" in why and "not passed" in why
    assert missing_needs(Peek, table, Context(options={"peek_test": {"col": "hh"}},
                                              columns={"hh": np.array([1, 2])})) is None
    with pytest.raises(BadInput, match="column 'zz' was not passed"):
        Context(columns={"hh": np.array([1])}).column("zz")
    assert "column_options" in Peek.describe() and Peek.describe()["column_options"] == ["col"]


def test_unknown_column_from_a_file_is_one_line_on_the_cli(peek, tmp_path):
    p = tmp_path / "s.csv"
    pd.DataFrame({"k": [1, 2, 2]}).to_csv(p, index=False)
    # the registration above lives in this process only, so go through the library here
    with pytest.raises(BadInput, match=r"column\(s\) 'nope' not in"):
        gpurisk.assess(str(p), ["k"], measures=["peek_test"], options={"peek_test": {"col": "nope"}})
