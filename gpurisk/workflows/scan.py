"""``gpurisk scan``: the risk of many key-variable combinations from one pass over the records.

:func:`scan_with` is the workflow on the settings objects (what the command calls); :func:`scan` the
convenience that takes them as keywords. The parts (the plan, the roll-ups, each combination's row,
the ranking, the Parquet sink) are in :mod:`gpurisk.scan`.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from gpurisk.core.settings import Design, Reading, Run, inputs
from gpurisk.core.messages import bad_input, phrase
from gpurisk.freq.lattice import Lattice
from gpurisk.io.lock import locked
from gpurisk.measure import Context
from gpurisk.scan import runner
from gpurisk.core.placement import place
from gpurisk.scan.plan import build_plan, combo_seed, root_keys
from gpurisk.scan.runner import (ScanResult, _check_batch_rows, _check_processes,
                                 _check_threads, _counts_sha,
                                 _measure_names, _progress, _scan_options, check_rank_by,
                                 default_threads, prepare_summaries)
from gpurisk.scan.sink import (ParquetSink, check_output_path, check_resume_inputs, read_rows,
                               row_schema)


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
         cells_on_workers: bool | None = None, rank_by: str | None = None,
         max_combinations: int | None = None, processes: int | None = None) -> ScanResult:
    """Risk of many key-variable combinations from one pass over the records.

    ``keys`` is the pool; every subset with ``min_size <= size <= max_size`` is evaluated, and/or the
    named ``scenarios`` (a TOML path or a list of :class:`Combination`), and/or ``fundamental`` plus
    each other pool variable (``plus_each=True``). ``recode`` is a list of ``KEY=SPEC`` strings
    (see :mod:`gpurisk.freq.recode`). With ``output`` rows stream to a Parquet dataset (a directory);
    ``resume=True`` finishes an interrupted scan there. Returns a :class:`ScanResult`.
    ``allow_high_cardinality`` and ``measure_timeout`` as in :func:`gpurisk.assess`. ``threads``:
    roll-ups run in this many background threads while the calling thread computes the measures
    of finished combinations (default: the CPUs this process may use, at most 4; 0 runs
    everything in the calling thread). The results do not depend on it. ``processes``: the
    costly measures that read cells (Ê and τ̂1 by default) run in this many processes forked beside
    this one (default: the CPUs this process may use, at most 8, on Linux, for 8 combinations or more
    whose tables may hold 2¹⁵ cells in all; 0 runs them in this process;
    :mod:`gpurisk.scan.processes`); the results do not depend on it either. ``cells_on_workers``
    (Dask backends): where the finest table is made, by :func:`gpurisk.core.placement.place`, the
    rule of every command: None (default) keeps it on the workers when every measure reads
    summaries or buckets (a register's defaults do) and brings it here when a named measure, or
    the estimated headline, reads cells; True keeps it there, leaving default cell readers out with
    their reason; False brings it here (faster while it fits this process, see docs/scan.md). ``rank_by``: the
    column :meth:`ScanResult.top` will rank by, checked (with every other argument) before
    anything is read or written. ``max_combinations`` (default
    :data:`gpurisk.scan.plan.MAX_COMBINATIONS`, 1 000 000): a plan of more combinations is refused
    with its count and the memory and time it would take, counted before any is listed.
    """
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    run = Run(measures=measures, options=options, alpha=alpha, seed=seed,
              measure_timeout=measure_timeout)          # checked before anything is read
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return scan_with(data, design, run, reading, keys=keys, max_size=max_size, min_size=min_size,
                     scenarios=scenarios, fundamental=fundamental, plus_each=plus_each,
                     output=output, resume=resume, overwrite=overwrite, batch_rows=batch_rows,
                     flush_seconds=flush_seconds, progress=progress, threads=threads,
                     cells_on_workers=cells_on_workers, rank_by=rank_by,
                     max_combinations=max_combinations, processes=processes)



@locked("output", "the scan output", marker="_scan.json")
def scan_with(data, design: Design, run: Run, reading: Reading | None = None, *,
              keys: Sequence[str] | str | None = None, max_size: int | None = None,
              min_size: int = 1, scenarios=None, fundamental: Sequence[str] | str | None = None,
              plus_each: bool = False, output=None, resume: bool = False, overwrite: bool = False,
              batch_rows: int = 256, flush_seconds: float = 2.0, progress: bool = False,
              threads: int | None = None, cells_on_workers: bool | None = None,
              rank_by: str | None = None, max_combinations: int | None = None,
              processes: int | None = None) -> ScanResult:
    """:func:`scan` on the settings objects: a :class:`gpurisk.core.settings.Design` (π, population,
    sample flag, weights), a :class:`gpurisk.core.settings.Run` (measures, options, α, seed, time
    limit) and a :class:`gpurisk.core.settings.Reading` (missing values, recodes, backend, CSV
    separator and encoding; None: the defaults), each checked when built; the other arguments as in
    :func:`scan`."""
    from gpurisk.core.evaluate import option_columns
    from gpurisk.inputs import key_list
    reading = reading or Reading()
    missing = reading.missing
    population, sample_flag, weights = design.population, design.sample_flag, design.weights
    measures = None if run.measures is None else list(run.measures)
    alpha, seed, measure_timeout = run.alpha, run.seed, run.measure_timeout
    t_start = time.perf_counter()
    pool = None if keys is None else key_list(keys)          # None: scenarios only
    fundamental = None if fundamental is None else key_list(fundamental, "fundamental keys")
    combos = build_plan(pool, max_size, min_size, scenarios, fundamental, plus_each,
                        max_combinations=max_combinations, to_disk=output is not None)
    # keys in name order: every combination's table then has one cell order whatever the pool or
    # scenario order, so seeded Monte Carlo measures give the same value for the same key set
    rkeys = sorted(root_keys(pool, combos))
    threads = default_threads() if threads is None else _check_threads(threads)
    processes = None if processes is None else _check_processes(processes)
    names = _measure_names(measures, design.population_counts)
    check_rank_by(rank_by, names)                       # before anything is read or written
    batch_rows = _check_batch_rows(batch_rows)
    opts = _scan_options(names, run.options)
    col_opts = option_columns(names, opts)
    inp = inputs(data, rkeys, design, reading, columns=col_opts)
    # where the finest table is made (here, or kept on the workers): one rule for every command;
    # a measure named by --rank-by counts as named
    where = place(names, inp, opts, defaults=measures is None and rank_by not in names,
                  keep=cells_on_workers, exact=design.population_counts, tables=True)
    kept_out = dict(where.kept_out)
    names = [m for m in names if m not in kept_out]
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
        raise bad_input("{arg:--resume|resume=True} needs {arg:--output|output} (the scan directory to finish)")
    frames = inp.read()
    t0 = time.perf_counter()
    if where.on_workers:                                   # the cells stay on the workers
        from gpurisk.core.evaluate import measure_classes
        from gpurisk.scan.distributed import bucket_classes

        def context_for(i, pi, source):      # the context combination i's measures run with
            return Context(fraction=pi, fraction_source=source, alpha=float(alpha),
                           seed=combo_seed(seed, combos[i].keys), options=opts)

        summ = runner.SummaryScan(inp, frames, rkeys, [c.keys for c in combos],
                                  bucket_measures=bucket_classes(names), context_for=context_for,
                                  table_measures=list(measure_classes(where.on_tables).values()),
                                  timeout=measure_timeout, fetch_large=where.fetch_large)
        root, pi, source, notes = summ.table, summ.fraction, summ.fraction_source, list(summ.notes)
        t_build, t_recode = time.perf_counter() - t0, 0.0
    else:
        summ = None
        counted = inp.count(frames)
        root, pi, source = counted.table, counted.fraction, counted.fraction_source
        t_build, t_recode = counted.timings["build_s"], counted.timings["recode_s"]
        notes = list(counted.notes)
    # from here the cluster's combinations are open (summ holds its client): the finally below
    # closes them on any error, the output's too (one that could not be written left them to the
    # garbage collector, which closed that client at a random later moment, inside another
    # client's start: a hang, or an AssertionError from distributed)
    sink = it = prog = procs = None
    failed = True
    try:
        notes += [phrase(f"{m} was not run: {why}") for m, why in kept_out.items()]
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
        done: set[str] = set()
        if output is not None:
            sink = ParquetSink(output, settings, names, resume=resume, overwrite=overwrite,
                               batch_rows=batch_rows, flush_seconds=flush_seconds)
            done = sink.finished() if resume else set()
        elif resume:
            raise bad_input("{arg:--resume|resume=True} needs {arg:--output|output} (the scan directory to finish)")
        skip = {i for i, c in enumerate(combos) if c.combo in done}
        lattice = None if summ is not None else Lattice(root)
        if summ is None and root.xp is np:
            # forked before the roll-up threads and the progress bar start
            from gpurisk.core.forked import how_many
            from gpurisk.scan.processes import MeasureProcesses, cells_bound, process_classes
            classes = process_classes(names)
            todo = [c.keys for i, c in enumerate(combos) if i not in skip]
            count = how_many(processes, len(todo), cells_bound(root, todo)) if classes else 0
            if count:
                procs = MeasureProcesses(count, classes, measure_timeout)
        rows: list[dict] = []
        t_roll = [0.0]
        prog = _progress(progress, len(combos) - len(skip))
        if summ is not None:      # each combination's summaries, reduced on the workers
            summ.skip.update(skip)
            it = summ.tables()
        else:
            it = lattice.tables([c.keys for c in combos], skip=skip, threads=threads,
                                prepare=prepare_summaries)

        def built():              # the tables, as they are built (the time spent waiting kept)
            while True:
                t0 = time.perf_counter()
                try:
                    got = next(it)
                except StopIteration:
                    return
                finally:
                    t_roll[0] += time.perf_counter() - t0
                yield got

        def start(i, table):      # the context combination i's measures run with
            return Context(fraction=pi, fraction_source=source, alpha=float(alpha),
                           seed=combo_seed(seed, combos[i].keys), options=opts, columns=columns)

        def finish(i, table, ctx, done):
            return runner.combination_row(i, combos[i], table, ctx, names, measure_timeout, done)

        from gpurisk.scan.processes import in_order
        t_loop = time.perf_counter()
        for row in in_order(built(), start, finish, procs):
            if sink is not None:
                sink.add(row)
            else:
                rows.append(row)
            if prog is not None:
                prog.advance(prog.task_ids[0])
        t_roll = t_roll[0]
        t_meas = time.perf_counter() - t_loop - t_roll
        if procs is not None and procs.broken:
            notes.append(procs.broken)
        if sink is not None:
            sink.close()
        failed = False
    except BaseException:
        # interrupted (Ctrl-C) or failed: keep the rows already finished, for --resume (a sink
        # that holds no rows writes nothing)
        if sink is not None:
            try:
                sink.flush()
            except Exception:   # the original error matters more
                pass
        raise
    finally:
        if procs is not None:
            procs.close(failed)  # at once where the scan failed or was interrupted
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
