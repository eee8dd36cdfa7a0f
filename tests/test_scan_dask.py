"""gpurisk scan on Dask without gathering the cells: when every measure reads summaries, each
combination's summaries are reduced on the workers, and the rows equal the pandas scan's.

The session's Dask cluster (conftest.shared_cluster: two worker processes, one thread each) serves every
test. Buckets are made small (``CELLS_PER_BUCKET``, read by the client when it builds the graphs) so
that the finest table is cut into several range buckets and the larger subsets into several of their
own: a subset cell then comes from several finest buckets, and the merges across them are tested.
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

import gpurisk
from gpurisk.scan import read_scan

from conftest import data_path

distributed = pytest.importorskip("distributed")

from gpurisk.freq import _dask  # noqa: E402
from gpurisk.freq.summary import SummaryTable  # noqa: E402
from gpurisk.freq.table import FreqTable  # noqa: E402
from gpurisk.plugins import measure_registry  # noqa: E402
from gpurisk.scan import runner  # noqa: E402

ADULT6 = ["sex", "age", "race", "marital-status", "education", "native-country"]
FARS8 = ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic", "istatenum", "iinjury"]


@pytest.fixture
def small_buckets(monkeypatch):
    """Cut a table of ``rows`` records into about 4 buckets (of the finest table, and of a subset
    that may hold as many cells)."""
    return lambda rows: monkeypatch.setattr(_dask, "CELLS_PER_BUCKET", rows // 4 + 1)


@pytest.fixture(scope="module")
def adult():
    df = pd.read_csv(data_path("arx/adult.csv"), sep=";")
    df["s"] = np.random.default_rng(0).random(len(df)) < 0.1
    return df


@pytest.fixture(scope="module")
def fars():
    df = pd.read_csv(data_path("arx_genetic/fars_int.csv"), sep=";")
    df["s"] = np.random.default_rng(1).random(len(df)) < 0.2
    return df


def summary_measures() -> list[str]:
    reg = measure_registry()
    return [m for m in runner._measure_names(None) if reg[m].cls.reads == "summary"]


@pytest.fixture
def spy(monkeypatch):
    """The tables the scan hands to the measures, and a guard that the cells are never gathered."""
    seen = []
    real = runner.combination_row

    def row(i, combo, table, *a, **k):
        seen.append(type(table))
        return real(i, combo, table, *a, **k)

    def no_gather(*a, **k):
        raise AssertionError("the finest table was gathered to the client")

    monkeypatch.setattr(runner, "combination_row", row)
    monkeypatch.setattr(_dask, "build_table_dask", no_gather)
    return seen


@pytest.mark.parametrize("data,keys,size", [("adult", ADULT6, 3), ("fars", FARS8, 4)])
def test_summary_scan_equals_pandas_with_a_sample_flag(client, small_buckets, spy, request, data,
                                                       keys, size):
    df = request.getfixturevalue(data)
    small_buckets(len(df))
    names = summary_measures()
    assert "theta_hat" in names and "pop_uniques" in names
    opts = dict(keys=keys, max_size=size, sample_flag="s", measures=names, seed=3)
    want = gpurisk.scan(df, backend="pandas", **opts).results
    spy.clear()
    got = gpurisk.scan(df, backend="dask", cells_on_workers=True, **opts)
    assert set(spy) == {SummaryTable} and len(spy) == len(want)
    assert got.rollups == len(want)
    pd.testing.assert_frame_equal(got.results, want)
    assert want["N1"].notna().all() and (want["pop_cells"] >= want["cells"]).all()


def test_a_batch_of_one_range_combinations_is_merged_whole(client, monkeypatch, fars):
    """Every combination one range of cells (2 keys of FARS: at most 5 100 cells) over 6 finest
    buckets, no bucket measure: the batch is merged and summarised by tasks of the whole batch
    (subsets._batch_graph), and the rows equal pandas'."""
    from gpurisk.freq import _dask, subsets
    monkeypatch.setattr(_dask, "CELLS_PER_BUCKET", 20_000)
    batches = []
    real = subsets._batch_graph
    monkeypatch.setattr(subsets, "_batch_graph",
                        lambda run, cells, idxs, shapes, *rest: (
                            batches.append((len(cells), len(idxs))),
                            real(run, cells, idxs, shapes, *rest))[1])
    opts = dict(keys=FARS8, max_size=2, sample_flag="s", measures=summary_measures(), seed=3)
    want = gpurisk.scan(fars, backend="pandas", **opts).results
    got = gpurisk.scan(fars, backend="dask", cells_on_workers=True, **opts).results
    pd.testing.assert_frame_equal(got, want)
    assert batches == [(6, len(want))] and len(want) == 36


@pytest.mark.parametrize("data,keys", [("adult", ADULT6), ("fars", FARS8)])
def test_summary_scan_equals_pandas_with_a_fraction(client, small_buckets, spy, request, data, keys):
    df = request.getfixturevalue(data)
    sample = df[df["s"]].drop(columns="s").reset_index(drop=True)
    small_buckets(len(sample))
    opts = dict(keys=keys, max_size=2, fraction=0.1, measures=summary_measures())
    want = gpurisk.scan(sample, backend="pandas", **opts).results
    spy.clear()
    got = gpurisk.scan(sample, backend="dask", cells_on_workers=True, **opts).results
    assert set(spy) == {SummaryTable}
    assert want["N"].isna().all() and want["pop_cells"].isna().all()
    pd.testing.assert_frame_equal(got, want)


def test_summary_scan_with_a_population_frame(client, small_buckets, spy, adult):
    sample = adult[adult["s"]].reset_index(drop=True)
    small_buckets(len(adult))
    opts = dict(keys=ADULT6[:4], max_size=4, population=adult, measures=summary_measures())
    want = gpurisk.scan(sample, backend="pandas", **opts).results
    spy.clear()
    got = gpurisk.scan(sample, backend="dask", cells_on_workers=True, **opts).results
    assert set(spy) == {SummaryTable}
    pd.testing.assert_frame_equal(got, want)


def test_a_large_subset_is_reduced_in_several_buckets(client, monkeypatch, adult):
    """The subsets' own range buckets: with 1 cell per subset bucket every subset of more than one
    cell is cut into as many buckets as the finest table has, and the sums still equal pandas'."""
    from gpurisk.freq import subsets
    monkeypatch.setattr(_dask, "CELLS_PER_BUCKET", 5000)
    nsubs = []
    real = subsets.subset_shape

    def shape(plan, idx, max_cells, per, nbuckets):
        got = real(plan, idx, max_cells, 1, nbuckets)
        nsubs.append(got[0])
        return got

    monkeypatch.setattr(subsets, "subset_shape", shape)
    opts = dict(keys=ADULT6[:5], max_size=5, min_size=4, sample_flag="s", measures=summary_measures())
    want = gpurisk.scan(adult, backend="pandas", **opts).results
    got = gpurisk.scan(adult, backend="dask", cells_on_workers=True, **opts).results
    assert min(nsubs) > 1          # several finest buckets
    pd.testing.assert_frame_equal(got, want)


def test_a_cell_reading_measure_runs_on_the_workers_and_a_recode_gathers(client, adult, caplog,
                                                                         spy):
    """A named measure that reads cells (theta_hat_misclass once given its matrices) runs on each
    combination's table, built on a worker, by default and with cells_on_workers=True: the rows
    equal pandas' and nothing is brought here."""
    mopts = dict(keys=["sex", "age", "race"], min_size=3, max_size=3,
                 sample_flag="s", options={"theta_hat_misclass": {"matrices": {"sex": 0.95}}})
    want = gpurisk.scan(adult, backend="pandas", measures=["theta_hat", "theta_hat_misclass"],
                        **mopts).results
    assert want["theta_hat_misclass"].notna().any()
    for keep in (None, True):
        spy.clear()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gpurisk.backends"):
            got = gpurisk.scan(adult, backend="dask", cells_on_workers=keep,
                               measures=["theta_hat", "theta_hat_misclass"], **mopts).results
        assert "brought to this process" not in caplog.text and set(spy) == {SummaryTable}
        pd.testing.assert_frame_equal(got, want)


def test_a_recode_gathers_and_says_why(client, adult, caplog):
    opts = dict(keys=ADULT6[:4], max_size=2, sample_flag="s")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gpurisk.backends"):
        got = gpurisk.scan(adult, backend="dask", cells_on_workers=True, measures=["theta_hat"],
                           recode=["age=bands:10"],
                           **opts).results
    assert "recodes" in caplog.text
    want = gpurisk.scan(adult, backend="pandas", measures=["theta_hat"], recode=["age=bands:10"],
                        **opts).results
    pd.testing.assert_frame_equal(got, want)


def test_interrupted_dask_scan_resumes_to_the_uninterrupted_table(client, small_buckets, tmp_path,
                                                                  adult, monkeypatch):
    small_buckets(len(adult))
    opts = dict(keys=ADULT6, max_size=3, sample_flag="s", measures=summary_measures(),
                batch_rows=1000, flush_seconds=1e9, backend="dask", cells_on_workers=True)
    full = gpurisk.scan(adult, **opts).results
    real = runner.combination_row
    calls = []

    def interrupted(i, combo, table, *a, **k):
        assert isinstance(table, SummaryTable) and not isinstance(table, FreqTable)
        calls.append(1)
        if len(calls) == 17:
            raise KeyboardInterrupt
        return real(i, combo, table, *a, **k)

    monkeypatch.setattr(runner, "combination_row", interrupted)
    out = tmp_path / "scan.parquet"
    with pytest.raises(KeyboardInterrupt):
        gpurisk.scan(adult, output=out, **opts)
    assert len(read_scan(out)) == 16          # flushed although no batch was full
    monkeypatch.setattr(runner, "combination_row", real)
    res = gpurisk.scan(adult, output=out, resume=True, **opts)
    assert res.skipped == 16 and res.rollups == len(full) - 16
    pd.testing.assert_frame_equal(res.results, full)
    # nothing is left running on the cluster once the scan returned or was interrupted
    assert not client.processing() or not any(client.processing().values())


# --- the worker functions, without a cluster -----------------------------------------------------

def _finest(df, keys, role="register"):
    from gpurisk.freq import partial as P
    from gpurisk.freq.plan import make_plan, partition_uniques
    u = partition_uniques(df, keys)
    plan = make_plan(keys, u["uniq"], None, u["na"], None, "category")
    return plan, P.partial(plan, df, role, "s" if role == "register" else None)


@pytest.mark.parametrize("strict", [False, True])
def test_subset_partials_equal_a_groupby_of_the_records(fars, strict):
    """A subset's partial summed from the finest cells (histogram path for a small key space, sort
    path for a large one, cut into range buckets) equals a pandas groupby of the records; under the
    strict namespace (CuPy's stand-in) no worker function calls numpy on a device array."""
    from gpurisk.freq import partial as P
    from gpurisk.freq._dask import bucket_summary
    from gpurisk.freq.subsets import bucket_codes, subset_split
    from gpurisk.xp import to_host
    plan, part = _finest(fars, FARS8)
    if strict:
        from gpurisk.testing.strict import xp
        part = {k: ([xp.asarray(w) for w in v] if k == "words" else xp.asarray(v)) for k, v in part.items()}
    cells = bucket_codes(plan, part)
    for keys in (["iage", "isex"], ["iage", "ideathday", "istatenum", "irace"]):
        idx = sorted(FARS8.index(k) for k in keys)
        names = [FARS8[i] for i in idx]
        want = fars.groupby(names, sort=True).agg(F=("s", "size"), f=("s", "sum"))
        for nsub in (1, 3):
            space = int(np.prod([plan.cards[i] for i in idx]))
            pieces = subset_split(plan, cells, idx, nsub, -(-space // nsub))
            assert len(pieces) == nsub
            got = P.concat(pieces) if nsub > 1 else pieces[0]
            np.testing.assert_array_equal(to_host(got["F"]), want["F"].to_numpy())
            np.testing.assert_array_equal(to_host(got["f"]), want["f"].to_numpy())
            sm = [bucket_summary(p) for p in pieces]
            assert sum(s["n"] for s in sm) == int(fars["s"].sum())
            assert sum(s["N"] for s in sm) == len(fars)
            assert sum(s["fof"].get(1, 0) for s in sm) == int((want["f"] == 1).sum())


@pytest.mark.parametrize("strict", [False, True])
def test_a_batch_of_subsets_from_one_lattice_equals_a_groupby(fars, strict):
    """subset_batch (issue 40): one task sums a batch of subsets from a finest bucket through one
    lattice (cubes and roll-ups shared); each subset's pieces equal a pandas groupby of the records,
    as subset_split's do, under the strict namespace too."""
    from gpurisk.freq import partial as P
    from gpurisk.freq.subsets import bucket_codes, subset_batch
    from gpurisk.xp import to_host
    plan, part = _finest(fars, FARS8)
    if strict:
        from gpurisk.testing.strict import xp
        part = {k: ([xp.asarray(w) for w in v] if k == "words" else xp.asarray(v)) for k, v in part.items()}
    cells = bucket_codes(plan, part)
    subsets = [["iage", "isex"], ["iage", "ideathday", "istatenum", "irace"], ["isex"], list(FARS8)]
    spec = []
    for keys, nsub in zip(subsets, (1, 3, 2, 1)):
        idx = sorted(FARS8.index(k) for k in keys)
        space = int(np.prod([plan.cards[i] for i in idx]))
        spec.append((idx, nsub, -(-space // nsub)))
    got = subset_batch(plan, cells, spec)
    for (idx, nsub, _), pieces in zip(spec, got):
        assert len(pieces) == nsub
        names = [FARS8[i] for i in idx]
        want = fars.groupby(names, sort=True).agg(F=("s", "size"), f=("s", "sum"))
        one = P.concat(pieces) if nsub > 1 else pieces[0]
        np.testing.assert_array_equal(to_host(one["F"]), want["F"].to_numpy())
        np.testing.assert_array_equal(to_host(one["f"]), want["f"].to_numpy())


@pytest.mark.parametrize("strict", [False, True])
def test_a_subsets_table_built_on_a_worker_gives_the_estimate_of_pandas(fars, strict):
    """table_measures (what a worker runs for the measures that read cells in a scan whose cells
    stay on the workers): the subset's table rebuilt from its range buckets (three here) gives Ê
    and τ̂1 equal to gpurisk.assess of the same sample on pandas, under the strict namespace (CuPy's
    stand-in) too: no host round trip of a device array on the way to the fit."""
    from gpurisk.freq.subsets import bucket_codes, subset_split, table_measures
    from gpurisk.measure import Context
    from gpurisk.measures.matches_ll import MatchesLL
    from gpurisk.measures.tau1_ll import Tau1LL
    sample = fars[fars["s"]].drop(columns="s").reset_index(drop=True)
    plan, part = _finest(sample, FARS8, role="sample")
    if strict:
        from gpurisk.testing.strict import xp
        part = {k: ([xp.asarray(w) for w in v] if k == "words" else xp.asarray(v)) for k, v in part.items()}
    cells = bucket_codes(plan, part)
    idx = sorted(FARS8.index(k) for k in ("iage", "isex", "irace"))
    space = int(np.prod([plan.cards[i] for i in idx]))
    pieces = subset_split(plan, cells, idx, 3, -(-space // 3))
    got = table_measures(plan, idx, [MatchesLL, Tau1LL], Context(fraction=0.2), None, *pieces)
    want = gpurisk.assess(sample, [FARS8[i] for i in idx], fraction=0.2,
                          measures=["matches_ll", "tau1_ll"]).measures
    for m in ("matches_ll", "tau1_ll"):
        r = got["results"][m]
        assert r.reason is None and r.value > 0
        assert (r.value, r.se, r.upper) == (want[m].value, want[m].se, want[m].upper)


def test_buckets_keep_their_margins_and_a_batch_plans_once_per_worker(fars, monkeypatch):
    """A finest bucket keeps each key's margin of f (summed once, in bucket_codes: equal to the
    margins its table sums afresh), and the buckets of one batch share the lattice plan the first
    of them made on a worker: the second bucket's batch plans nothing and its pieces still equal
    a groupby of its own records. With weights (float sums) each bucket plans for itself."""
    from gpurisk.freq import partial as P
    from gpurisk.freq import subsets as S
    from gpurisk.freq.lattice import Lattice
    from gpurisk.freq.rollup import f_margins
    plan, _ = _finest(fars, FARS8)
    half = len(fars) // 2
    halves = (fars.iloc[:half], fars.iloc[half:])
    buckets = [S.bucket_codes(plan, P.partial(plan, d, "register", "s")) for d in halves]
    for cells in buckets:
        fresh = S.bucket_table(plan, {k: v for k, v in cells.items() if k != S.MARGINS})
        assert fresh._memo == {}
        for kept, summed in zip(cells[S.MARGINS], f_margins(fresh)):
            np.testing.assert_array_equal(kept, summed)
    made = []
    real = Lattice.plan
    monkeypatch.setattr(Lattice, "plan", lambda self, t: made.append(t) or real(self, t))
    monkeypatch.setattr(S, "_PLANS", type(S._PLANS)())
    subsets = [["iage", "isex"], ["iage", "ideathday", "istatenum", "irace"], ["isex"]]
    spec = []
    for keys in subsets:
        idx = sorted(FARS8.index(k) for k in keys)
        spec.append((idx, 1, int(np.prod([plan.cards[i] for i in idx]))))
    for n, (cells, d) in enumerate(zip(buckets, halves)):
        got = S.subset_batch(plan, cells, spec)
        assert len(made) == 1                          # planned for the first bucket alone
        for (idx, _, _), pieces in zip(spec, got):
            want = d.groupby([FARS8[i] for i in idx], sort=True).agg(F=("s", "size"), f=("s", "sum"))
            np.testing.assert_array_equal(pieces[0]["F"], want["F"].to_numpy())
            np.testing.assert_array_equal(pieces[0]["f"], want["f"].to_numpy())
    import dataclasses
    table = S.bucket_table(plan, buckets[0])
    weighted = dataclasses.replace(table, w=np.ones(table.cell_id.shape[0]))
    assert S._batch_plan(Lattice(weighted), weighted, [tuple(k) for k in subsets]) is None


def test_subset_partials_of_several_buckets_merge_to_the_groupby(fars):
    """Cells of one subset coming from several finest tables (here: of two halves of the records)
    merge into the subset's cells, by histograms (small key space) or by a sort (large)."""
    from gpurisk.freq import partial as P
    from gpurisk.freq.subsets import bucket_codes, merge_subset, subset_split
    plan, _ = _finest(fars, FARS8)
    half = len(fars) // 2
    parts = [P.partial(plan, d, "register", "s") for d in (fars.iloc[:half], fars.iloc[half:])]
    for keys in (["iage", "isex"], ["iage", "ideathday", "istatenum", "irace"]):
        idx = sorted(FARS8.index(k) for k in keys)
        space = int(np.prod([plan.cards[i] for i in idx]))
        pieces = [subset_split(plan, bucket_codes(plan, p), idx, 1, 1)[0] for p in parts]
        want = fars.groupby([FARS8[i] for i in idx], sort=True).agg(F=("s", "size"), f=("s", "sum"))
        for sp in (space, None):        # None: the sort of partial.merge
            got = merge_subset(sp, *pieces)
            np.testing.assert_array_equal(got["F"], want["F"].to_numpy())
            np.testing.assert_array_equal(got["f"], want["f"].to_numpy())


def test_where_the_table_is_made_follows_what_the_measures_read(client, adult, monkeypatch):
    """One rule for every command (issue 40, gpurisk.core.placement): a scan keeps the finest
    table on the workers by default, whatever its measures read (a named measure that reads cells
    runs on each combination's table there); ``cells_on_workers=False`` (CLI ``--cells-here``)
    brings it here and rolls it up. The rows are the same every way."""
    def refuse(*a, **k):
        raise AssertionError("the summary path was taken although the table was to come here")

    opts = dict(keys=ADULT6[:4], max_size=2, sample_flag="s", measures=["theta_hat", "sample_uniques"])
    def no_gather(*a, **k):
        raise AssertionError("the finest table was gathered to the client")

    named_opts = dict(opts, measures=["theta_hat", "matches_ll"])
    with monkeypatch.context() as m:
        m.setattr(_dask, "build_table_dask", no_gather)
        kept = gpurisk.scan(adult, backend="dask", **opts).results
        named = gpurisk.scan(adult, backend="dask", **named_opts).results
    with monkeypatch.context() as m:
        m.setattr(runner, "SummaryScan", refuse)
        here = gpurisk.scan(adult, backend="dask", cells_on_workers=False, **opts).results
        named_here = gpurisk.scan(adult, backend="dask", cells_on_workers=False,
                                  **named_opts).results
    want = gpurisk.scan(adult, backend="pandas", **opts).results
    pd.testing.assert_frame_equal(kept, want)
    pd.testing.assert_frame_equal(here, want)
    assert named["matches_ll"].notna().all()
    pd.testing.assert_frame_equal(named, named_here)


def bucket_measures() -> list[str]:
    reg = measure_registry()
    return [m for m in reg if reg[m].cls.reads == "buckets"]


@pytest.mark.parametrize("design", ["flag", "fraction", "weights"])
def test_bucket_measures_scan_on_the_workers(client, small_buckets, spy, fars, design):
    """Measures that read buckets (theta_hat_weighted, indiv_risk, journalist, marketer, ...) map
    every combination's buckets where they are: the rows equal the pandas scan's, no cell reaches the
    client, and each combination's maps ran with its own seed and options."""
    names = bucket_measures()
    assert {"theta_hat_weighted", "indiv_risk"} <= set(names)
    df = fars.copy()
    keys = FARS8[:5]
    opts = dict(keys=keys, max_size=3, seed=5, measures=names + ["theta_hat", "sample_uniques"])
    if design == "flag":
        opts["sample_flag"] = "s"
    else:
        df = df[df["s"]].drop(columns="s").reset_index(drop=True)
        opts["fraction"] = 0.2
        if design == "weights":
            df["wt"] = np.random.default_rng(2).uniform(2, 8, len(df))
            opts["weights"] = "wt"
    small_buckets(len(df))
    want = gpurisk.scan(df, backend="pandas", **opts).results
    spy.clear()
    got = gpurisk.scan(df, backend="dask", cells_on_workers=True, **opts).results
    assert set(spy) == {SummaryTable} and len(spy) == len(want)
    pd.testing.assert_frame_equal(got, want)
    defined = [m for m in names if want[m].notna().any()]
    assert "indiv_risk" in defined
    if design == "weights":
        assert "theta_hat_weighted" in defined


def test_default_measures_scan_keeps_the_cells_on_the_workers(client, small_buckets, spy, fars):
    """No --measures: the default set scans on the workers and equals pandas, the log-linear
    headline (Ê, matches_ll, and τ̂1 beside it, which read cells) included: each combination's
    table is built on a worker from its merged range buckets (small buckets: several a subset) and
    the fit runs there, so the rows equal pandas' in every column although the finest table never
    reaches the client."""
    sample = fars[fars["s"]].drop(columns="s").reset_index(drop=True)
    small_buckets(len(sample))
    opts = dict(keys=FARS8[:4], max_size=3, fraction=0.2, seed=1)
    want = gpurisk.scan(sample, backend="pandas", **opts)
    spy.clear()
    got = gpurisk.scan(sample, backend="dask", cells_on_workers=True, **opts)
    assert set(spy) == {SummaryTable}
    assert "theta_hat_misclass" in got.columns      # run by default, not applicable: no cells read
    ll = [c for c in want.results.columns if c.startswith(("matches_ll", "tau1_ll"))]
    assert len(ll) == 14     # value, se, upper, reason, note and the two-sided interval's ends, each
    assert got.results["matches_ll"].notna().all() and got.rank_by == want.rank_by == "matches_ll"
    pd.testing.assert_frame_equal(got.results, want.results)
    assert not any("was not run" in w for w in got.warnings)


def test_a_table_too_large_for_a_worker_gives_its_reason(client, spy, monkeypatch, adult):
    """A combination whose table could hold more than TABLE_CELLS cells is not built on a worker:
    its log-linear columns give the reason (and how to run them), the others are computed."""
    from gpurisk.freq import subsets
    from gpurisk.freq.subsets import TABLE_CELLS
    monkeypatch.setattr(subsets, "TABLE_CELLS", 60)       # sex × race (10 cells) fits, age does not
    sample = adult[adult["s"]].drop(columns="s").reset_index(drop=True)
    opts = dict(keys=["sex", "race", "age"], max_size=2, fraction=0.1)
    got = gpurisk.scan(sample, backend="dask", cells_on_workers=True, **opts).results
    want = gpurisk.scan(sample, backend="pandas", **opts).results
    small = got["keys"].map(lambda k: "age" not in k)
    assert small.sum() == 3 and got.loc[small, "matches_ll"].notna().all()
    pd.testing.assert_series_equal(got.loc[small, "matches_ll"], want.loc[small, "matches_ll"])
    why = got.loc[~small, "matches_ll_reason"]
    assert got.loc[~small, "matches_ll"].isna().all()
    assert why.str.contains("more than the 60 a worker builds").all()
    assert why.str.contains("cells_on_workers=True").all()
    assert got.loc[~small, "tau1_ll_reason"].equals(why)
    # the limit the guides give is the one in force
    from conftest import ROOT
    limit = f"{TABLE_CELLS:,}".replace(",", " ")
    for guide in ("scan.md", "backends.md"):
        assert limit in (ROOT / "docs" / guide).read_text(encoding="utf-8"), guide


def test_default_scan_on_the_workers_ranks_by_the_log_linear_estimate(client, adult, spy):
    """Issues 27 and 43: the scan's ranking, Ê (matches_ll), fits each combination's cells by
    their key values, which a summary does not carry. With --cells-on-workers each combination's
    table is built on a worker and fitted there: the scan ranks by Ê and equals pandas, and no
    cell of the finest table reaches the client; a named measure that reads cells runs there too."""
    opts = dict(keys=ADULT6[:4], max_size=2, fraction=0.1)   # a sample alone: E is estimated
    adult = adult[adult["s"]].drop(columns="s").reset_index(drop=True)
    got = gpurisk.scan(adult, backend="dask", cells_on_workers=True, **opts)
    want = gpurisk.scan(adult, backend="pandas", **opts)
    assert want.rank_by == got.rank_by == "matches_ll" and want.results["matches_ll"].notna().all()
    assert not any(" was not run: " in w for w in got.warnings)
    pd.testing.assert_frame_equal(got.results, want.results)
    spy.clear()
    named = gpurisk.scan(adult, backend="dask", cells_on_workers=True,
                         measures=["matches_ll", "theta_hat"], **opts)
    assert named.rank_by == "matches_ll" and set(spy) == {SummaryTable}
    pd.testing.assert_series_equal(named.results["matches_ll"], want.results["matches_ll"])


def test_default_scan_on_dask_keeps_the_cells_there_and_brings_a_large_table_here(
        client, adult, spy, monkeypatch):
    """Without --cells-on-workers the scan on Dask keeps the finest table on the workers too (the
    rule of every command, gpurisk/core/placement.py) and fits Ê there; a combination whose table
    could hold more than TABLE_CELLS cells has its own table brought here and fitted here instead
    of a reason: every row equals pandas', and the finest table never comes here."""
    from gpurisk.freq import subsets
    opts = dict(keys=["sex", "race", "age", "marital-status"], max_size=2, fraction=0.1)
    adult = adult[adult["s"]].drop(columns="s").reset_index(drop=True)
    want = gpurisk.scan(adult, backend="pandas", **opts)
    spy.clear()
    got = gpurisk.scan(adult, backend="dask", **opts)
    assert got.rank_by == "matches_ll" and set(spy) == {SummaryTable}
    pd.testing.assert_frame_equal(got.results, want.results)
    monkeypatch.setattr(subsets, "TABLE_CELLS", 60)      # the tables with age are brought here
    fetched = []
    real = subsets.table_measures
    monkeypatch.setattr(subsets, "table_measures",
                        lambda plan, idx, *a: (fetched.append(len(idx)), real(plan, idx, *a))[1])
    got = gpurisk.scan(adult, backend="dask", **opts)
    assert len(fetched) == 4         # age alone and with each of the three others, here
    pd.testing.assert_frame_equal(got.results, want.results)


def test_a_named_estimator_on_a_register_is_fitted_on_the_workers(client, adult, spy):
    """A register scanned on Dask with Ê and τ̂1 named beside the exact E: the estimators run on
    each combination's table built on a worker, its population counts F included, and every row
    equals the pandas scan's (ranked by the exact E); no table is gathered."""
    opts = dict(keys=ADULT6[:4], max_size=2, sample_flag="s",
                measures=["matches", "matches_ll", "tau1_ll"])
    want = gpurisk.scan(adult, backend="pandas", **opts)
    spy.clear()
    got = gpurisk.scan(adult, backend="dask", **opts)
    assert got.rank_by == want.rank_by == "matches" and set(spy) == {SummaryTable}
    assert got.results["matches_ll"].notna().all()
    pd.testing.assert_frame_equal(got.results, want.results)


def test_register_scan_on_the_workers_leads_with_the_exact_E(client, adult):
    """Issue 40, exact first: a register (sample flag) scanned with the cells kept on the workers
    runs no estimator by default, ranks by the exact E (matches, a summary the workers reduce) and
    equals a pandas oracle: E = Σ_{f=1} 1/F and τ1 = #{f = 1, F = 1} by groupby, per combination."""
    keys = ADULT6[:4]
    got = gpurisk.scan(adult, keys=keys, max_size=2, sample_flag="s", backend="dask",
                       cells_on_workers=True)
    assert got.rank_by == "matches" and got.measures[:2] == ["matches", "tau1"]
    assert not {"matches_ll", "tau1_ll", "matches_hat", "theta_hat"} & set(got.measures)
    assert not any("was not run" in w for w in got.warnings)
    for _, row in got.results.iterrows():
        ks = list(row["keys"])
        cell = adult.groupby(ks, dropna=False).ngroup().to_numpy()
        F = np.bincount(cell)
        f = np.bincount(cell[adult["s"].to_numpy()], minlength=F.size)
        su = f == 1
        assert row["matches"] == pytest.approx(np.sum(1.0 / F[su]), rel=1e-12)
        assert row["tau1"] == np.sum(F[su] == 1)


def test_batches_are_bounded_by_subsets_and_cells(monkeypatch):
    """Subsets go to the workers in consecutive batches of at most BATCH subsets and BATCH_CELLS
    cells out of a bucket (each subset counted at min(its key space, the bucket's cells))."""
    from gpurisk.freq import subsets
    monkeypatch.setattr(subsets, "BATCH", 3)
    monkeypatch.setattr(subsets, "BATCH_CELLS", 100)
    spaces = [10, 10, 10, 10, 60, 50, 1000, 5, 5]
    got = subsets.batches_of(spaces, bucket_cells=80)
    assert got == [[0, 1, 2], [3, 4], [5], [6, 7, 8]]
    assert [n for g in got for n in g] == list(range(len(spaces)))
    assert subsets.batches_of([], 80) == []
