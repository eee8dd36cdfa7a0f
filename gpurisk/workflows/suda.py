"""``gpurisk suda`` and :func:`gpurisk.suda`: SUDA scores and DIS-SUDA probabilities of every record
(SPEC §9), read, checked and counted by :class:`gpurisk.inputs.Inputs` like every command, the MSU
search run by :mod:`gpurisk.models.suda_table`.

DIS-SUDA needs the share f of the records an intruder holds: ``dis_fraction`` when given, else the
sampling fraction π as :func:`gpurisk.assess` has it (``fraction``, or n/N from ``population`` or
``sample_flag``), else n/Σw from design ``weights`` (Σw estimates N). With none of them (or π = 1)
DIS-SUDA is not applicable: ``dis_sum`` and ``dis_max`` are None and ``dis_reason`` says why; it is
never computed at an assumed f.

Returns the file-level summary and the per-record frame (``row``, ``suda``, ``dis_suda``, ``msu_min``,
``msu_count``, ``contrib_<key>``, in input order); with ``output`` the frame is written to Parquet
atomically (the path is checked before any work).
"""
from __future__ import annotations

from pathlib import Path

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gpurisk.core.messages import bad_input, phrase
from gpurisk.core.settings import Design, Reading, inputs
from gpurisk.freq.guards import sample_categories
from gpurisk.errors import BadInput
from gpurisk.xp import to_host

NULL_POLICY = {"category": "a missing key value is a category of its own",
               "error": "missing key values are refused"}


@dataclass
class SudaResult:
    """The summary (a JSON-ready dict) and one row per record (a pandas frame, input order)."""

    summary: dict[str, Any]
    records: pd.DataFrame | None = None
    timings: dict[str, float] = field(default_factory=dict)


def suda(data, keys, max_msu: int | None = None, scoring: str = "elliot",
         dis_fraction: float | None = None, output=None, missing: str = "category", recode=None,
         backend: str | None = None, sep: str | None = None, encoding: str = "utf-8",
         allow_high_cardinality: bool = False, memory_limit: float | None = None,
         records: bool = True, report=None, fraction: float | None = None, population=None,
         sample_flag: str | None = None, weights: str | None = None) -> SudaResult:
    """SUDA of ``data`` (a path or a frame) over ``keys``; see the module docstring.

    ``memory_limit`` (bytes) bounds the search's working memory (default
    :data:`gpurisk.models.suda.MEMORY_LIMIT`); ``records=False`` skips the per-record frame (unless
    ``output`` is given); ``report``: an HTML page with the distribution of the scores and each key's
    contribution (:mod:`gpurisk.report.suda`).
    """
    design = Design(fraction=fraction, population=population, sample_flag=sample_flag,
                    weights=weights)
    reading = Reading(missing=missing, recode=recode, backend=backend, sep=sep, encoding=encoding,
                      allow_high_cardinality=allow_high_cardinality)
    return suda_with(data, keys, design, reading, max_msu=max_msu, scoring=scoring,
                     dis_fraction=dis_fraction, output=output, memory_limit=memory_limit,
                     records=records, report=report)


def suda_with(data, keys, design: Design, reading: Reading | None = None, *,
              max_msu: int | None = None, scoring: str = "elliot",
              dis_fraction: float | None = None, output=None, memory_limit: float | None = None,
              records: bool = True, report=None) -> SudaResult:
    """:func:`suda` on the settings objects: the :class:`gpurisk.core.settings.Design` (π, a
    population, a sample flag or weights: DIS-SUDA's share f defaults to π), the
    :class:`~gpurisk.core.settings.Reading` (missing values, recodes, backend, CSV separator and
    encoding). The other arguments as in :func:`suda`."""
    from gpurisk.models import suda_table as st
    from gpurisk.models.suda import check_lattice, check_max_msu
    from gpurisk.models.suda_scores import SCORINGS, check_dis_fraction
    if scoring not in SCORINGS:
        raise bad_input(f"{{arg:--scoring|scoring}} {scoring!r} is not one of {', '.join(SCORINGS)}")
    reading = reading or Reading()
    f = None if dis_fraction is None else check_dis_fraction(dis_fraction)
    inp = inputs(data, keys, design, reading)
    m = check_max_msu(len(inp.keys), max_msu)
    check_lattice(inp.keys, m)                         # before reading anything
    if memory_limit is not None and not float(memory_limit) > 0:
        raise BadInput(f"memory limit {memory_limit!r} must be a positive number of bytes")
    if output is not None:
        from gpurisk.io import check_output_file
        check_output_file(output, (".parquet", ".pq"), "suda output (the rows are written as Parquet)")
    if report is not None:
        from gpurisk.io import check_output_file
        check_output_file(report, (".html", ".htm"), "{arg:suda --report|suda(report=...)}")
    t0 = time.perf_counter()
    frames = inp.read()
    t1 = time.perf_counter()
    per_record = records or output is not None or report is not None
    # the summary needs the cells only (any backend); the per-record columns need each record's cell
    counted = inp.count(frames, weights=design.weights is not None,
                        records="suda's per-record output" if per_record else None)
    table = counted.table
    st.check_identifier_keys(table)
    f, source, why = _dis_fraction(f, counted)
    t2 = time.perf_counter()
    st.msus(table, m, memory_limit, record_order=per_record)
    doc = st.summary(table, m, scoring, f, memory_limit)
    doc["dis_fraction_from"] = source
    if why:
        doc["dis_reason"] = why
    doc["warnings"] = list(counted.notes) + doc["warnings"]
    t3 = time.perf_counter()
    doc["missing"] = NULL_POLICY[inp.missing]
    doc["categories"] = dict(zip(table.keys, sample_categories(table)))   # distinct values seen
    res = SudaResult(doc, timings={"read_s": t1 - t0, "count_s": t2 - t1, "search_s": t3 - t2})
    if per_record:
        cols = {"row": np.arange(table.n, dtype=np.int64)}
        cols.update((name, to_host(a)) for name, a in st.record_columns(table, m, scoring, f,
                                                                        memory_limit).items())
        if records:
            res.records = pd.DataFrame(cols)
        t4 = time.perf_counter()
        res.timings["records_s"] = t4 - t3
        if output is not None:
            _write(cols, output)
            doc["output"] = {"path": str(output), "rows": int(table.n)}
            res.timings["write_s"] = time.perf_counter() - t4
        if report is not None:
            from gpurisk.report.suda import write_suda_report
            write_suda_report(doc, cols["suda"], cols["dis_suda"], report,
                              data=data if isinstance(data, (str, Path)) else None)
            doc["report"] = str(report)
    return res


def _dis_fraction(f, counted) -> tuple[float | None, str | None, str | None]:
    """(DIS-SUDA's f, where it came from, why there is none): --dis-fraction, else π (given or
    n/N), else n/Σw from the design weights."""
    if f is not None:
        return f, "dis_fraction", None
    table = counted.table
    pi, source = counted.fraction, counted.fraction_source
    if pi is None and table.has_weights:
        total = float(to_host(table.w).sum())
        if total > 0:
            pi, source = table.n / total, "n/sum(w)"
    if pi is None:
        return None, None, phrase("not applicable: needs the share f of the records an intruder "
                                  "holds: give {fraction}, {population}, {sample_flag}, {weights} "
                                  "or {dis_fraction}")
    if not 0.0 < pi < 1.0:
        return None, source, (f"not applicable: π = {pi:g} ({source}) leaves no record outside the "
                              + phrase("release for the intruder's file; give {dis_fraction}"))
    return pi, source, None


def _write(cols: dict, path) -> None:
    """The per-record columns to Parquet, atomically (no pandas frame in between: no copy)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpurisk.io.atomic import atomic_path
    with atomic_path(path) as tmp:
        pq.write_table(pa.table(cols), tmp)
