"""``gpurisk validate``: estimators checked against their true values on replicate samples of a real
population. :func:`validate_with` is the workflow on the settings objects (what the command calls);
:func:`validate` the convenience that takes them as keywords. The samplers are in
:mod:`gpurisk.validation.design`, the replicate runs and the summary in
:mod:`gpurisk.validation.runner`.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from gpurisk.core.settings import Reading, Run, inputs
from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.io.lock import locked
from gpurisk.validation import design as dz
from gpurisk.validation import runner
from gpurisk.validation.runner import Validation
from gpurisk.xp import to_host


def validate(population, keys, fractions=(0.02, 0.05, 0.10), replicates: int = 100,
             design: str = "bernoulli", measures: Iterable[str] | None = None, seed: int = 0,
             options: Mapping[str, Mapping[str, Any]] | None = None, alpha: float = 0.01,
             missing: str = "category", sep: str | None = None,
             encoding: str = "utf-8", resume=None, recode=None, backend: str | None = None,
             allow_high_cardinality: bool = False, progress=None,
             draw: str | None = None, processes: int | None = None) -> Validation:
    """Draw replicate samples from ``population`` (frame or CSV/Parquet path) and compare each
    estimator with its true value; see the module docstring. Fixed ``seed`` reproduces the result.
    The population is read, checked and counted by :class:`gpurisk.inputs.Inputs`, as every command.

    ``resume`` names a folder where each chunk of replicates is saved as it completes (see
    :mod:`gpurisk.validation.resume`); a run killed at any point and started again with the same
    folder and settings skips the saved chunks and gives the same result as an uninterrupted run.
    A fraction whose chunks are all saved is read back without drawing its samples, so a rerun over
    a complete folder draws none.

    ``draw``: "records" draws each replicate's records (every design); "cells" draws its counts from
    the population's cell counts (bernoulli, srs, stratified; same distribution, another random stream; see
    :mod:`gpurisk.validation.design`). Default: records, and cells on a distributed backend, whose
    records stay on the workers (only the population's cell table comes to this process).

    ``progress``, when given, is called as ``progress(done, total)`` with counts of replicates
    (over all fractions) before the first and after each chunk (``gpurisk validate`` draws a bar).

    ``processes``: the replicates run in this many processes forked beside this one, each
    inheriting the population's cells (default: the CPUs this process may use, at most 8, on Linux,
    for 8 replicates or more and at most 2²⁰ cells; 0: in this process;
    :mod:`gpurisk.core.forked`). The results do not depend on it: each replicate's rows and
    warnings are made by the same code and put together in the replicates' order.
    """
    run = Run(measures=measures, options=options, alpha=alpha, seed=seed)   # checked once
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return validate_with(population, keys, run, reading, fractions=fractions,
                         replicates=replicates, design=design, resume=resume, progress=progress,
                         draw=draw, processes=processes)


@locked("resume", "the resume folder", marker="_validate.json")
def validate_with(data, keys, run: Run, reading: Reading | None = None, *,
                  fractions=(0.02, 0.05, 0.10), replicates: int = 100, design: str = "bernoulli",
                  resume=None, progress=None, draw: str | None = None,
                  processes: int | None = None) -> Validation:
    """:func:`validate` on the settings objects (``data``: the population the replicates are drawn
    from): a :class:`gpurisk.core.settings.Run` (measures,
    options, α, seed; its time limit is not used) and a :class:`gpurisk.core.settings.Reading` (how
    the population is read: missing values, recodes, backend, CSV separator and encoding), each
    checked when built. There is no :class:`~gpurisk.core.settings.Design`: the replicate samples'
    ``design`` (bernoulli, srs, systematic, stratified:COL, ...) and ``fractions`` are validate's
    own. The other arguments as in :func:`validate`."""
    reading = reading or Reading()
    missing = reading.missing
    dsg = dz.parse_design(design)
    fracs = runner._check_fractions(fractions)
    if processes is not None:
        from gpurisk.core.settings import PROCESSES
        processes = PROCESSES.check(processes)
    if dsg.kind != "systematic" and (isinstance(replicates, bool) or int(replicates) < 1):
        raise BadInput(f"replicates={replicates!r} must be a positive integer")
    measures = None if run.measures is None else list(run.measures)
    options, alpha, seed = run.options, run.alpha, run.seed
    inp = inputs(data, keys, None, reading, columns=[dsg.column] if dsg.column else [],
                 role="population")
    keys = list(inp.keys)
    names, pairs = runner._measure_names(measures)
    for f in fracs:
        dz.replicate_count(dsg, f, int(replicates))   # systematic: 1/π must be an integer
    draw = ("cells" if inp.distributed else "records") if draw is None else draw
    if draw not in ("records", "cells"):
        raise BadInput(f"draw={draw!r} is not 'records' or 'cells'")
    if draw == "records" and inp.distributed:
        raise bad_input(f"{{arg:--draw records|draw='records'}} needs each record's cell, which the "
                        f"{inp.backend} backend does not keep: use {{arg:--draw cells|draw='cells'}} "
                        "(bernoulli, srs) or {backend_pandas}")
    if draw == "cells":
        dz.check_cell_design(dsg)
    frames = inp.read()
    frame = frames.sample
    strata = None
    if draw == "cells" and dsg.kind == "stratified":
        # the population over the keys and the stratum column, and its roll-up over the keys
        from gpurisk.freq.lattice import regroup
        fine = inp.count(frames, also=[dsg.column]).table
        pop, inv = regroup(fine, keys, return_inverse=True)
        h = to_host(fine.cell_codes()[list(fine.keys).index(dsg.column)])
        strata = (to_host(fine.f).astype(np.int64), h, to_host(inv), int(pop.f.shape[0]))
        cell = None
    elif draw == "cells":
        pop = inp.count(frames).table
        cell = None
    else:
        pop = inp.count(frames, records="validate (it draws samples from the population's "
                                        "records)").table
        cell = to_host(pop.record_cell()).astype(np.int64, copy=False)
    F = to_host(pop.f).astype(np.int64, copy=False)
    N, C = int(F.sum()), F.size
    codes = dz.column_codes(frame, dsg.column) if dsg.column and cell is not None else None

    rows: list[dict] = []
    caught: dict[str, list] = {}
    store = None
    if resume is not None:
        from gpurisk.validation.resume import ChunkStore
        store = ChunkStore(resume, {
            "keys": keys, "fractions": fracs, "replicates": int(replicates), "design": dsg.label,
            "measures": names, "seed": int(seed), "alpha": float(alpha), "missing": missing,
            "options": dict(options or {}), "N": N, "cells": C,
            **({"draw": "cells"} if draw == "cells" else {}),
            **({"recode": [str(r) for r in inp.recode]} if inp.recode else {})}, F, pop.cell_id)
    total = sum(dz.replicate_count(dsg, f, int(replicates)) for f in fracs)
    parts = (pop.keys, pop.categories, pop.cell_id, F, pop.radix, pop.stored_cell_codes)

    def local(*job):                           # one replicate, in this process
        return runner.replicate(parts, *job)

    def taken(job, fut):                       # a process's replicate, or here where they broke
        got = procs.outcome(fut) if fut is not None else None
        return local(*job) if got is None else got
    # the replicates in forked processes (each inherits the population's cells), where there are
    # enough of them and their tables are not too large to hand over
    from gpurisk.core.forked import PENDING_CELLS, PROCESS_CELLS, Forked, how_many, in_turn
    nproc = how_many(processes, total) if C <= PROCESS_CELLS else 0
    procs = Forked(nproc, inherit=parts, what="replicate samples") if nproc else None
    window = max(nproc, min(4 * nproc, PENDING_CELLS // max(C, 1)))

    def run_all():
        done = 0
        if progress is not None:
            progress(0, total)
        for fi, frac in enumerate(fracs):
            if store is not None and store.complete(fi):
                # every chunk of this fraction is saved: read them back, draw no sample (a rerun
                # over a finished folder used to redraw every replicate sample to skip each chunk)
                for part_rows, part_caught in store.load_all(fi):
                    rows.extend(part_rows)
                    for key, (msg, k) in part_caught.items():
                        caught.setdefault(key, [msg, 0])[1] += k
                done += dz.replicate_count(dsg, frac, int(replicates))
                if progress is not None:
                    progress(done, total)
                continue
            rng = np.random.default_rng([int(seed), int(round(frac * 2**32))])
            if draw == "cells":
                drawn = ((first, count, None, fm) for first, count, fm in
                         (dz.cell_batches(dsg, frac, int(replicates), F, rng) if strata is None
                          else dz.cell_batches(dsg, frac, int(replicates), strata[0], rng,
                                               strata[1:])))
            else:
                drawn = dz.batches(dsg, frac, int(replicates), N, rng, codes)
            for first, count, rep, rec in drawn:
                fmat = rec if rep is None else None
                step = runner.CHUNK if store is not None else count
                for c0 in range(first, first + count, step):
                    c1 = min(first + count, c0 + step)
                    saved = store.load(fi, c0) if store is not None else None
                    if saved is not None:
                        part_rows, part_caught = saved
                    else:
                        if fmat is None:
                            fmat = dz.count_batch(cell, C, count, rep, rec)
                        part_rows, part_caught = [], {}
                        jobs = ((fmat[r - first], frac, r, alpha, seed, options, names)
                                for r in range(c0, c1))
                        got = (in_turn(jobs, lambda job: procs.call(runner.replicate_forked, *job),
                                       taken, window)
                               if procs is not None else (local(*job) for job in jobs))
                        for rows_r, caught_r in got:     # in the replicates' order, as one loop
                            part_rows.extend(rows_r)
                            for key, (msg, k) in caught_r.items():
                                part_caught.setdefault(key, [msg, 0])[1] += k
                        if store is not None:
                            store.save(fi, c0, part_rows, part_caught)
                    rows.extend(part_rows)
                    for key, (msg, k) in part_caught.items():
                        caught.setdefault(key, [msg, 0])[1] += k
                    done += c1 - c0
                    if progress is not None:
                        progress(done, total)
            if store is not None:
                store.mark_complete(fi)

    failed = True
    try:
        run_all()
        failed = False
    finally:
        if procs is not None:
            procs.close(failed)
    if procs is not None and procs.broken:
        caught.setdefault(procs.broken, [procs.broken, 1])
    reps = pd.DataFrame(rows, columns=runner.REPLICATE_COLUMNS)
    reps = runner._attach_truth(reps, pairs)
    ddof = 0 if dsg.kind == "systematic" else 1
    summary = runner.summarise(reps, names, pairs, ddof)
    summary.insert(1, "design", dsg.label)
    info = {"N": N, "cells": C, "keys": keys, "design": dsg.label, "draw": draw, "fractions": fracs,
            "replicates": {f: dz.replicate_count(dsg, f, int(replicates)) for f in fracs},
            "seed": int(seed), "measures": names, "pairs": pairs, "ddof": ddof}
    notes = [msg if k == 1 else f"{msg} (in {k} of {total} replicates; numbers from the first)"
             for msg, k in caught.values()]
    return runner.Validation(summary, reps, info, notes)
