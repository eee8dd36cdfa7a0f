"""``gpurisk record-risk``: the identification risk of each record (SPEC §5, Skinner 2007).
:func:`record_risk_with` is the workflow on the settings objects (what the command calls);
:func:`record_risk` the convenience that takes them as keywords. The model (p̂ from the two-way
log-linear fit, the search methods, the summary and the writers) is in
:mod:`gpurisk.models.record_model`.
"""
from __future__ import annotations

import warnings
from typing import Iterable

from gpurisk.core.settings import CELL_LIMIT, THRESHOLD, Design, Reading, inputs
from gpurisk.errors import BadInput, GpuriskWarning
from gpurisk.core.messages import bad_input, phrase
from gpurisk.freq.guards import sample_categories
from gpurisk.measures import search_methods as sm
from gpurisk.models.loglinear import MAX_CELLS, MAX_ITER, TOL
from gpurisk.models.record_model import (DEFAULT_THRESHOLDS, RecordRisk, _attach_rows,
                                         _distributed_rows, build_model, selected_records,
                                         summarize, write_records)


def record_risk(frame, keys, population_size=None, population=None, sample_flag=None,
                fraction=None, weights=None, methods: Iterable[str] = sm.DEFAULT_METHODS, y=None,
                database_size=None, p_tilde=None, all_records: bool = False,
                thresholds: Iterable[float] = DEFAULT_THRESHOLDS, output=None, tol: float = TOL,
                max_iter: int = MAX_ITER, max_cells: float = MAX_CELLS, missing: str = "category",
                backend: str | None = None, show_records: bool = False, recode=None,
                allow_high_cardinality: bool = False, sep: str | None = None,
                encoding: str = "utf-8", ids: Iterable[str] = ()) -> RecordRisk:
    """Record-level risk of ``frame`` (a frame or a path) for ``keys``: a :class:`RecordRisk` (the
    summary; ``to_dict()`` is the document of ``--json``); rows to ``output``. A fit stopped before
    converging, or a given N that differs from the population's, is a :class:`~gpurisk.GpuriskWarning`
    (also in ``.warnings``). Read, checked and counted by :class:`gpurisk.inputs.Inputs`, as every command.

    Row numbers in the output are 0-based positions in ``frame`` (the register, with ``sample_flag``).
    ``ids`` names columns of ``frame`` put in front of the rows of ``output`` (``--id``), so the
    risks can be joined back. On a distributed backend ``output`` is a Parquet dataset folder (one
    file per partition, written by the workers, which carry the ids).
    """
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag, weights=weights)
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return record_risk_with(frame, keys, design, reading, population_size=population_size,
                            methods=methods, y=y, database_size=database_size, p_tilde=p_tilde,
                            all_records=all_records, thresholds=thresholds, output=output, tol=tol,
                            max_iter=max_iter, max_cells=max_cells, show_records=show_records,
                            ids=ids)


def record_risk_with(frame, keys, design: Design, reading: Reading | None = None, *,
                     population_size=None, methods: Iterable[str] = sm.DEFAULT_METHODS, y=None,
                     database_size=None, p_tilde=None, all_records: bool = False,
                     thresholds: Iterable[float] = DEFAULT_THRESHOLDS, output=None,
                     tol: float = TOL, max_iter: int = MAX_ITER, max_cells: float = MAX_CELLS,
                     show_records: bool = False, ids: Iterable[str] = ()) -> RecordRisk:
    """:func:`record_risk` on the settings objects: the :class:`gpurisk.core.settings.Design` (π, a
    population, a sample flag, or weights: they give N = Σw, by the one rule of
    :mod:`gpurisk.core.weights`; the model is fitted to the counts), the
    :class:`~gpurisk.core.settings.Reading` (missing values, recodes, backend, CSV separator and
    encoding). The model's and the output's arguments as in :func:`record_risk`."""
    # before anything is read
    thresholds = tuple(THRESHOLD.check(t) for t in
                       ([thresholds] if isinstance(thresholds, (int, float)) else thresholds))
    max_cells = CELL_LIMIT.check(max_cells)
    reading = reading or Reading()
    inp = inputs(frame, keys, design, reading, columns=list(ids))
    if ids and output is None:
        raise BadInput("ids name columns to copy into the output; give an output file too")
    if inp.distributed and inp.recode:
        raise bad_input(f"record-risk with {{arg:--recode|recode}} on the {inp.backend} backend: the "
                        "records' cells are found among the counted cells before recoding; recode the "
                        "data, or use {backend_pandas} (or cudf)")
    if output is not None:      # before the work, not after
        from gpurisk.io.atomic import check_output_dataset, check_output_file
        check = check_output_dataset if inp.distributed else check_output_file
        check(output, (".parquet", ".pq"), "record-level output (the rows are written as Parquet)")
    frames = inp.read()
    counted = inp.count(frames, weights=design.weights is not None,
                        records=None if inp.distributed else "record-risk")
    table, fraction = counted.table, counted.fraction
    keys = list(inp.keys)
    if design.weights is not None and fraction is None and population_size is None:
        # the one rule for weights (gpurisk.core.weights): design weights give N = Σw (π = n/Σw)
        from gpurisk.core.weights import normalised_reason, weight_rule
        from gpurisk.xp import scalar
        rule = weight_rule(table.n, float(scalar(table.w.sum())))
        raise bad_input(f"{{arg:--weights|weights}} {design.weights}: "
                        + normalised_reason(rule, "{population_size} (or {fraction})"))
    model = build_model(table, methods, population_size, fraction, y, database_size, p_tilde,
                        tol, max_iter, max_cells)
    doc = summarize(model, all_records, thresholds)
    doc["keys"] = keys
    doc["categories"] = dict(zip(table.keys, sample_categories(table)))   # distinct values seen
    notes = []
    if population_size is not None and table.N is not None and abs(float(population_size) - table.N) > 0.5:
        notes.append(f"given N = {float(population_size):g} differs from the population's size "
                     f"{table.N}; the given value is used")
    if not model.fit.converged:
        notes.append(f"IPF stopped after {model.fit.iterations} iterations with margin discrepancy "
                     f"{model.fit.discrepancy:.3g} > tol = {model.fit.tol:g}; raise the iteration "
                     "limit ({arg:--max-iter|max_iter})")
    notes = [phrase(n) for n in notes]          # the flag on the command line, the parameter here
    doc["warnings"] = notes
    for note in notes:
        warnings.warn(note, GpuriskWarning, stacklevel=2)
    if inp.distributed:
        _distributed_rows(doc, model, inp, frames, output, all_records, show_records, ids)
        return RecordRisk(doc)
    pos, cells = selected_records(table, False)
    rownums = inp.record_rows(frames)
    _attach_rows(doc["table3"], pos, cells, table, show_records, rownums)
    if output is not None:
        doc["output"] = {"path": str(output),
                         "rows": write_records(model, output, rownums, all_records)}
        if ids:
            from gpurisk.io.record_writer import add_id_columns
            ids = list(ids)
            add_id_columns(output, frames.sample[ids])
            doc["output"]["id_columns"] = ids
    return RecordRisk(doc)
