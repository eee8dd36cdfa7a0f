"""The scan runner: one finest table, every combination rolled up from it, measures per combination.

The records are read once (``build_table`` over every key any combination uses); recodes regroup that
table's categories; a :class:`~gpurisk.freq.lattice.Lattice` then yields each combination's table,
summed from the smallest table already built. Each combination's row (key names, never key values;
counts; every measure's value, se, upper bound and reason) goes to the sink as soon as it is done.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.io.lock import locked
from gpurisk.freq.lattice import Lattice
from gpurisk.measure import Context
from gpurisk.scan.distributed import SummaryScan, summary_path
from gpurisk.scan.plan import Combination, build_plan, combo_seed, root_keys
from gpurisk.scan.sink import (ParquetSink, check_output_path, check_resume_inputs, read_rows,
                               row_schema)

#: per-scan defaults of measure options, applied unless the user sets them. theta_hat_dis, the Monte
#: Carlo check of θ̂, costs K random draws per combination (a few ms at its single-assessment default
#: K = 200 000, as much as rolling up a mid-sized combination); a scan runs K = 10 000 and reports
#: the s.e. that goes with it. ``--option theta_hat_dis.K=200000`` restores the default.
SCAN_DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {"theta_hat_dis": {"K": 10_000}}

#: measures used to rank combinations in the closing summary, first available wins: the estimated
#: number of correct unique matches θ̂·n1 (issue 21: ranking by θ̂ alone put combinations with one
#: sample unique and no sample pair on top), then θ̂, Pr(PU), n1
RANK_PREFERENCE = ("matches_hat", "theta_hat", "pr_pu", "n1")
#: what each rank column is, for the output's "ranked by ..." line
RANK_MEANING = {
    "matches_hat": "θ̂·n1 (matches_hat), which orders combinations by their correct unique matches; "
                   "as a count it is a lower estimate of the expected correct matches E",
    "theta_hat": "θ̂, the estimated probability that a unique match is correct",
    "pr_pu": "Pr(PU), the share of population uniques",
    "n1": "n1, the number of sample uniques",
}


def rank_meaning(col: str) -> str:
    """One line saying what a ranking by ``col`` ranks by."""
    return RANK_MEANING.get(col, col)


@dataclass
class ScanResult:
    """What :func:`scan` returns: the rows (sorted by plan order) and how the scan went."""

    results: pd.DataFrame
    path: Path | None
    measures: list[str]
    settings: dict
    timings: dict = field(default_factory=dict)
    rollups: int = 0
    cells_read: int = 0
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)
    cube_elements: int = 0

    @property
    def rank_by(self) -> str:
        return rank_column(self.results)

    # DataFrame-like access to the rows (what callers of ``read_scan`` did with its frame):
    # ``len(r)``, ``r["n1"]``, ``r[r["size"] == 2]``, ``r.columns``, ``r.iterrows()``... go to
    # ``results``; ``to_frame()`` is the rows as a DataFrame of their own.
    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, item):
        return self.results[item]

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "results":
            raise AttributeError(name)
        rows = self.__dict__.get("results")
        if rows is not None and hasattr(pd.DataFrame, name):
            return getattr(rows, name)
        raise AttributeError(f"'ScanResult' object has no attribute {name!r}")

    def to_frame(self) -> pd.DataFrame:
        """The rows (one per combination, plan order) as a DataFrame (a copy)."""
        return self.results.copy()

    def top(self, k: int = 10, by: str | None = None) -> pd.DataFrame:
        """The ``k`` riskiest combinations (key names and numbers only)."""
        return top_combinations(self.results, k, by)

    def _headline(self) -> str:
        r, s = self.results, self.settings
        keys = s.get("keys") or sorted({k for ks in r.get("keys", []) for k in ks})
        head = f"{len(r)} combination(s) of {len(keys)} key(s), n={s.get('n', '?')}"
        return head + (f", N={s['N']}" if s.get("N") is not None else "")

    def __repr__(self) -> str:
        from gpurisk.core.display import fmt
        text = f"<ScanResult {self._headline()}"
        if len(self.results):
            by = self.rank_by
            best = self.top(1).iloc[0]
            text += f"; riskiest: {best['combo']} ({by}={fmt(best[by])})"
        if self.warnings:
            text += f"; {len(self.warnings)} warning(s)"
        return text + (f"; {self.path}>" if self.path is not None else ">")

    def _repr_html_(self) -> str:
        from gpurisk.core.display import html_table
        by = self.rank_by if len(self.results) else "n1"
        top = self.top(10) if len(self.results) else self.results
        rows = [(t["combo"], t["size"], t["cells"], t["n1"], t[by]) for _, t in top.iterrows()]
        return html_table(f"Scan: {self._headline()}; the {len(rows)} riskiest, ranked by {by}",
                          rows, ["combination", "size", "cells", "n1", by],
                          [f"warning: {w}" for w in self.warnings[:5]])


def rank_column(results: pd.DataFrame) -> str:
    for col in RANK_PREFERENCE:
        if col in results.columns and results[col].notna().any():
            return col
    return "n1"


_COUNT_COLUMNS = ("size", "n", "N", "cells", "pop_cells", "n1", "n2", "n3", "N1")


def rankable_columns(measures: Sequence[str]) -> list[str]:
    """The columns a scan of ``measures`` can be ranked by: its numeric columns."""
    import pyarrow as pa
    return [f.name for f in row_schema(list(measures))
            if (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
            and f.name not in ("order", "seed")]


def check_rank_by(by: str | None, measures: Sequence[str]) -> None:
    """BadInput unless ``by`` (None: the default ranking) is a numeric column of a scan of
    ``measures``; checked before the scan starts."""
    if by is None:
        return
    cols = rankable_columns(measures)
    if by not in cols:
        counts = [c for c in cols if c in _COUNT_COLUMNS]
        raise BadInput(f"cannot rank by {by!r}: not a numeric column of this scan (rank by a count: "
                       f"{', '.join(counts)}; a measure: {', '.join(measures) or 'none'}; or a "
                       "measure's _se or _upper column)")


def top_combinations(results: pd.DataFrame, k: int = 10, by: str | None = None) -> pd.DataFrame:
    by = by or rank_column(results)
    if by not in results.columns or not pd.api.types.is_numeric_dtype(results[by]):
        raise BadInput(f"cannot rank by {by!r}: not a numeric column of the scan "
                       f"(columns: {', '.join(c for c in results.columns if c not in ('keys', 'combo', 'scenario', 'warnings') and not c.endswith('_reason'))})")
    ranked = results.assign(_r=results[by].astype(float).fillna(-math.inf))
    ranked = ranked.sort_values(["_r", "size", "order"], ascending=[False, True, True], kind="stable")
    return ranked.drop(columns="_r").head(k).reset_index(drop=True)


def _num(v):
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    v = float(v)
    return v if math.isfinite(v) else None


def _scan_options(names: Sequence[str], options: Mapping | None) -> dict:
    """The options checked (see :func:`gpurisk.plugins.check_options`), plus the scan's defaults."""
    from gpurisk.plugins import check_options
    opts = copy.deepcopy(check_options(options))
    for m, defaults in SCAN_DEFAULT_OPTIONS.items():
        if m in names:
            mine = dict(opts.get(m, {}))
            for k, v in defaults.items():
                mine.setdefault(k, v)
            opts[m] = mine
    return opts


#: what a measure may need and still run on a combination's counts alone
COUNT_NEEDS = frozenset({"fraction", "population", "weights"})


def _measure_names(measures: Iterable[str] | None) -> list[str]:
    """The measures named, or by default every file-level measure that reads counts only and runs by
    default (``Measure.default``; a model fit that declares ``default = False`` runs when named).

    Measures that need each record's cell or other columns (``records``, ``columns``) cost a pass
    over the records for every combination; a scan runs them only when named.
    """
    from gpurisk.plugins import measure_registry, unknown_measure_hint
    reg = measure_registry()
    if measures is None:
        return [n for n, r in reg.items() if getattr(r.cls, "level", "file") == "file"
                and getattr(r.cls, "default", True)
                and set(r.cls.needs) <= COUNT_NEEDS and not getattr(r.cls, "column_options", ())]
    names = [measures] if isinstance(measures, str) else list(measures)
    unknown = [m for m in names if m not in reg]
    if unknown:
        raise BadInput(f"unknown measure(s) {', '.join(map(repr, unknown))}; registered: {', '.join(reg)}"
                       + unknown_measure_hint())
    return names


def prepare_summaries(table) -> None:
    """Compute the summaries most measures read (kept on the table), where the table is built."""
    table.fof_vector()
    if table.F is not None:
        table.pop_uniques()
        table.unique_stats()


def default_threads() -> int:
    """Roll-up threads: the CPUs this process may use, at most 4 (roll-ups are memory-bound past a
    few), or 0 (everything in the calling thread) on a single CPU."""
    import os
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return 0 if n <= 1 else min(4, n)


def _check_threads(threads) -> int:
    from gpurisk.core.settings import THREADS
    return THREADS.check(threads)


def _counts_sha(table) -> str:
    """A fingerprint of the finest table's counts (cell ids, f, F): what --resume compares for data
    given as a frame."""
    from gpurisk.io.checkpoint import fingerprint
    from gpurisk.xp import to_host
    arrays = [table.cell_id, table.f] + ([table.F] if table.F is not None else [])
    return fingerprint({"keys": list(table.keys)}, [to_host(a) for a in arrays])[:16]


def _check_batch_rows(batch_rows) -> int:
    from gpurisk.core.settings import Param
    from gpurisk.options import Option
    return Param("batch_rows", "--batch-rows", Option(int, 256, min=1)).check(batch_rows)


def combination_row(i: int, combo: Combination, table, ctx: Context, names: Sequence[str],
                    timeout: float | None = None) -> dict:
    """One result row: counts and every measure of one combination's table."""
    from gpurisk.core.evaluate import run_measures
    N = table.N          # a SummaryTable (cells kept on the workers) answers N, not F
    row = {"order": i, "combo": combo.combo, "scenario": combo.scenario, "keys": list(combo.keys),
           "size": len(combo.keys), "n": table.n, "N": table.N, "cells": table.sample_cells,
           # with a population every cell has F_j >= 1 (f_j <= F_j is checked when counting)
           "pop_cells": None if N is None else int(table.population_cells),
           "n1": table.n_r(1), "n2": table.n_r(2), "n3": table.n_r(3),
           "N1": None if N is None else table.pop_uniques(), "seed": ctx.seed}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_measures(table, ctx, names, timeout=timeout)
    for m in names:
        r = res[m]
        row[m] = _num(r.value)
        row[f"{m}_se"] = _num(r.se)
        row[f"{m}_upper"] = _num(r.upper)
        row[f"{m}_reason"] = r.reason
    msgs = list(dict.fromkeys(str(w.message) for w in caught))
    row["warnings"] = "; ".join(msgs) if msgs else None
    return row


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    prog = Progress(TextColumn("scanning"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("combinations"), TimeElapsedColumn(), TimeRemainingColumn(),
                    console=Console(stderr=True), transient=False)
    prog.start()
    prog.add_task("scan", total=total)
    return prog


def scan(data, keys: Sequence[str] | str | None = None, max_size: int | None = None,
         min_size: int = 1, scenarios=None, fundamental: Sequence[str] | str | None = None,
         plus_each: bool = False, fraction: float | None = None, population=None,
         sample_flag: str | None = None, weights: str | None = None,
         measures: Iterable[str] | None = None, options: Mapping | None = None,
         alpha: float = 0.01, seed: int = 0, recode=None, missing: str = "category",
         backend: str | None = None, output=None, resume: bool = False, overwrite: bool = False,
         batch_rows: int = 256, flush_seconds: float = 2.0, progress: bool = False,
         sep: str | None = None, encoding: str = "utf-8", allow_high_cardinality: bool = False,
         measure_timeout: float | None = None, threads: int | None = None,
         cells_on_workers: bool = False, rank_by: str | None = None) -> ScanResult:
    """Risk of many key-variable combinations from one pass over the records.

    ``keys`` is the pool; every subset with ``min_size <= size <= max_size`` is evaluated, and/or the
    named ``scenarios`` (a TOML path or a list of :class:`Combination`), and/or ``fundamental`` plus
    each other pool variable (``plus_each=True``). ``recode`` is a list of ``KEY=SPEC`` strings
    (see :mod:`gpurisk.freq.recode`). With ``output`` rows stream to a Parquet dataset (a directory);
    ``resume=True`` finishes an interrupted scan there. Returns a :class:`ScanResult`.
    ``allow_high_cardinality`` and ``measure_timeout`` as in :func:`gpurisk.assess`. ``threads``:
    roll-ups run in this many background threads while the calling thread computes the measures
    of finished combinations (default: the CPUs this process may use, at most 4; 0 runs
    everything in the calling thread). The results do not depend on it. ``cells_on_workers``
    (Dask backends, measures that all read summaries, no recode): the finest table stays on the
    workers and each combination's summaries are reduced there, so this process's memory does not
    grow with the cells; slower than bringing the table here (see docs/scan.md). ``rank_by``: the
    column :meth:`ScanResult.top` will rank by, checked (with every other argument) before
    anything is read or written.
    """
    from gpurisk.core.settings import Design, Run
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    run = Run(measures=measures, options=options, alpha=alpha, seed=seed,
              measure_timeout=measure_timeout)          # checked before anything is read
    return scan_with(data, design, run, keys=keys, max_size=max_size, min_size=min_size,
                     scenarios=scenarios, fundamental=fundamental, plus_each=plus_each,
                     recode=recode, missing=missing, backend=backend, output=output, resume=resume,
                     overwrite=overwrite, batch_rows=batch_rows, flush_seconds=flush_seconds,
                     progress=progress, sep=sep, encoding=encoding,
                     allow_high_cardinality=allow_high_cardinality, threads=threads,
                     cells_on_workers=cells_on_workers, rank_by=rank_by)


@locked("output", "the scan output", marker="_scan.json")
def scan_with(data, design, run, *, keys: Sequence[str] | str | None = None,
              max_size: int | None = None, min_size: int = 1, scenarios=None,
              fundamental: Sequence[str] | str | None = None, plus_each: bool = False, recode=None,
              missing: str = "category", backend: str | None = None, output=None,
              resume: bool = False, overwrite: bool = False, batch_rows: int = 256,
              flush_seconds: float = 2.0, progress: bool = False, sep: str | None = None,
              encoding: str = "utf-8", allow_high_cardinality: bool = False,
              threads: int | None = None, cells_on_workers: bool = False,
              rank_by: str | None = None) -> ScanResult:
    """:func:`scan` on the settings objects: a :class:`gpurisk.core.settings.Design` (π, population,
    sample flag, weights) and a :class:`gpurisk.core.settings.Run` (measures, options, α, seed, time
    limit), both checked when built; the other arguments as in :func:`scan`."""
    from gpurisk.core.evaluate import option_columns
    from gpurisk.inputs import Inputs, key_list
    population, sample_flag, weights = design.population, design.sample_flag, design.weights
    measures = None if run.measures is None else list(run.measures)
    alpha, seed, measure_timeout = run.alpha, run.seed, run.measure_timeout
    t_start = time.perf_counter()
    pool = None if keys is None else key_list(keys)          # None: scenarios only
    fundamental = None if fundamental is None else key_list(fundamental, "fundamental keys")
    combos = build_plan(pool, max_size, min_size, scenarios, fundamental, plus_each)
    # keys in name order: every combination's table then has one cell order whatever the pool or
    # scenario order, so seeded Monte Carlo measures give the same value for the same key set
    rkeys = sorted(root_keys(pool, combos))
    threads = default_threads() if threads is None else _check_threads(threads)
    names = _measure_names(measures)
    check_rank_by(rank_by, names)                       # before anything is read or written
    batch_rows = _check_batch_rows(batch_rows)
    opts = _scan_options(names, run.options)
    col_opts = option_columns(names, opts)
    inp = Inputs(data, rkeys, **design.kwargs(), missing=missing, recode=recode, backend=backend, sep=sep,
                 encoding=encoding, allow_high_cardinality=allow_high_cardinality, columns=col_opts)
    recodes = list(inp.recode)
    data_name = inp.name
    pop_name = (str(population) if isinstance(population, (str, Path))
                else None if population is None else f"<{type(population).__name__}>")
    if output is not None:                                  # before the records are read
        check_output_path(output, resume, overwrite)
        if resume:
            check_resume_inputs(output, data_name,
                                pop_name if isinstance(population, (str, Path)) else None)
    elif resume:
        raise BadInput("--resume needs --output (the scan directory to finish)")
    frames = inp.read()
    t0 = time.perf_counter()
    if summary_path(names, inp, cells_on_workers, opts):   # the cells stay on the workers
        from gpurisk.scan.distributed import bucket_classes

        def context_for(i, pi, source):      # the context combination i's measures run with
            return Context(fraction=pi, fraction_source=source, alpha=float(alpha),
                           seed=combo_seed(seed, combos[i].keys), options=opts)

        summ = SummaryScan(inp, frames, rkeys, [c.keys for c in combos],
                           bucket_measures=bucket_classes(names), context_for=context_for)
        root, pi, source, notes = summ.table, summ.fraction, summ.fraction_source, list(summ.notes)
        t_build, t_recode = time.perf_counter() - t0, 0.0
    else:
        summ = None
        counted = inp.count(frames)
        root, pi, source = counted.table, counted.fraction, counted.fraction_source
        t_build, t_recode = counted.timings["build_s"], counted.timings["recode_s"]
        notes = list(counted.notes)
    columns = inp.column_values(frames, col_opts)
    del frames
    settings = {
        "data": data_name, "population": pop_name, "sample_flag": sample_flag, "weights": weights,
        "keys": rkeys, "n": root.n, "N": root.N, "fraction": pi, "fraction_source": source,
        "alpha": float(alpha), "seed": int(seed), "measures": names, "options": opts,
        "recode": [str(r) for r in recodes], "missing": missing,
        "combinations": len(combos),
        "plan_sha": hashlib.sha256(json.dumps([[c.combo, list(c.keys), c.scenario] for c in combos])
                                   .encode()).hexdigest()[:16],
    }
    if summ is None and data_name.startswith("<"):
        settings["counts_sha"] = _counts_sha(root)    # a frame has no file for --resume to check
    settings = json.loads(json.dumps(settings, default=str))
    sink = None
    done: set[str] = set()
    if output is not None:
        sink = ParquetSink(output, settings, names, resume=resume, overwrite=overwrite,
                           batch_rows=batch_rows, flush_seconds=flush_seconds)
        done = sink.finished() if resume else set()
    elif resume:
        raise BadInput("--resume needs --output (the scan directory to finish)")
    skip = {i for i, c in enumerate(combos) if c.combo in done}

    lattice = None if summ is not None else Lattice(root)
    rows: list[dict] = []
    t_roll = t_meas = 0.0
    prog = _progress(progress, len(combos) - len(skip))
    it = None
    try:
        if summ is not None:      # each combination's summaries, reduced on the workers
            summ.skip.update(skip)
            it = summ.tables()
        else:
            it = lattice.tables([c.keys for c in combos], skip=skip, threads=threads,
                                prepare=prepare_summaries)
        while True:
            t0 = time.perf_counter()
            try:
                i, table = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            c = combos[i]
            ctx = Context(fraction=pi, fraction_source=source, alpha=float(alpha),
                          seed=combo_seed(seed, c.keys), options=opts, columns=columns)
            row = combination_row(i, c, table, ctx, names, measure_timeout)
            del table
            if sink is not None:
                sink.add(row)
            else:
                rows.append(row)
            t_roll += t1 - t0
            t_meas += time.perf_counter() - t1
            if prog is not None:
                prog.advance(prog.task_ids[0])
        if sink is not None:
            sink.close()
    except BaseException:
        # interrupted (Ctrl-C) or failed: keep the rows already finished, for --resume
        if sink is not None:
            try:
                sink.flush()
            except Exception:   # the original error matters more
                pass
        raise
    finally:
        if it is not None:
            it.close()           # stops the roll-up threads before returning or raising
        if summ is not None:
            summ.close()         # cancels the combinations in flight on the cluster
        if prog is not None:
            prog.stop()
    if sink is not None:
        results = read_rows(output)
    else:
        import pyarrow as pa
        results = (pa.Table.from_pylist(rows, schema=row_schema(names)).to_pandas()
                   .sort_values("order", kind="stable").reset_index(drop=True))
    from gpurisk.core.messages import phrase_frame
    results = phrase_frame(results)            # reasons phrased for the caller (API or command line)
    timings = {"build_s": t_build, "recode_s": t_recode, "rollup_s": t_roll, "measures_s": t_meas,
               "total_s": time.perf_counter() - t_start}
    if summ is not None:
        return ScanResult(results, Path(output) if output is not None else None, names, settings,
                          timings, summ.built, 0, len(skip), notes, 0)
    return ScanResult(results, Path(output) if output is not None else None, names, settings, timings,
                      lattice.built, lattice.cells_read, len(skip), notes, lattice.cube_elements)
