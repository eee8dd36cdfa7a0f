"""Measures that declare ``reads = "summary"`` give the table's answer from its summaries alone.

The summaries (n, N, frequencies of frequencies, the joint (f_j, F_j) counts) are what a distributed
count brings back to the client (:class:`gpurisk.freq.summary.SummaryTable`). Each such built-in
measure is run on real registers twice, on the table and on its summaries only; the conformance kit's
``check_reads_summary`` catches a measure that declares summaries but reads a cell array.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import data_path
from gpurisk import Measure, Result
from gpurisk.freq.engine import build_table
from gpurisk.freq.summary import CellsNotKept, summary_table
from gpurisk.io import read_table
from gpurisk.measure import Context
from gpurisk.plugins import measure_registry
from gpurisk.testing import check_metadata, check_reads_summary, run_measure

SUMMARY = sorted(m for m, r in measure_registry().items() if r.cls.reads == "summary")
REGISTERS = [("arx_genetic/fars_int.csv", ["iage", "isex", "irace", "istatenum"]),
             ("arx/adult.csv", ["age", "sex", "race", "marital-status", "education"])]


def test_the_file_level_measures_declare_summaries():
    assert {"theta_hat", "theta", "pr_pu", "pr_pu_su", "match_prob_a", "theta_hat_dis", "tau1",
            "tau1_hat", "pop_uniques", "sample_uniques", "risk_broad", "risk_fishing",
            "risk_fishing_subsample", "risk_response", "bethlehem_flag"} <= set(SUMMARY)
    reg = measure_registry()
    for name in ("theta_hat_misclass", "pr_cm_um"):
        assert reg[name].cls.reads == "cells"
    assert reg["theta_hat_weighted"].cls.reads == "buckets"


@pytest.mark.parametrize("rel,keys", REGISTERS, ids=[r[0] for r in REGISTERS])
@pytest.mark.parametrize("share", [0.02, 0.2])
def test_summary_measures_equal_on_summaries(rel, keys, share):
    frame = read_table(data_path(rel))
    frame["s"] = np.random.default_rng(11).random(len(frame)) < share
    table = build_table(frame, keys, sample_flag="s")
    summ = summary_table(table)
    assert (summ.n, summ.N, summ.sample_cells, summ.population_cells) == \
        (table.n, table.N, table.sample_cells, table.population_cells)
    assert summ.freq_of_freq() == table.freq_of_freq()
    us, ut = summ.unique_stats(), table.unique_stats()
    assert (us.n1, us.F_sum, us.pop_unique) == (ut.n1, ut.F_sum, ut.pop_unique)
    assert math.isclose(us.inv_F_sum, ut.inv_F_sum, rel_tol=1e-12)
    ctx = Context(fraction=table.n / table.N, fraction_source="n/N")
    for name in SUMMARY:
        cls = measure_registry()[name].cls
        a, b = run_measure(cls, table, ctx), run_measure(cls, summ, ctx)
        for attr in ("value", "se", "upper", "reason"):
            x, y = getattr(a, attr), getattr(b, attr)
            assert x == y or (isinstance(x, float) and math.isclose(x, y, rel_tol=1e-12)) \
                or (isinstance(x, float) and math.isnan(x) and math.isnan(y)), (name, attr, x, y)
        check_reads_summary(cls, frame, keys, sample_flag="s")


def test_a_measure_that_reads_cells_cannot_pass_as_summary():
    class Liar(Measure):
        name = "liar"
        description = "max f_j, declared as reading summaries"
        reference = "none"
        reads = "summary"

        def compute(self, table, ctx):
            return Result(value=float(table.xp.max(table.f)))
    check_metadata(Liar)
    with pytest.raises(AssertionError, match="liar.*on summaries only.*CellsNotKept|CellsNotKept"):
        check_reads_summary(Liar)
    table = build_table(read_table(data_path("arx/adult.csv")), ["age", "sex"])
    with pytest.raises(CellsNotKept, match="table.f: this table keeps only summaries"):
        summary_table(table).f


def test_reads_is_checked_in_the_metadata():
    class Bad(Measure):
        name = "bad_reads"
        description = "x"
        reference = "x"
        reads = "everything"

        def compute(self, table, ctx):
            return Result(value=1.0)
    with pytest.raises(AssertionError, match="reads 'everything' is not one of"):
        check_metadata(Bad)
