"""A source named by a path (or given as a frame) counted through :class:`gpurisk.Inputs`: its
summaries (:func:`summarize`) and its record-level counts (:func:`write_record_counts`).

Record-level output: each record's cell counts, written to Parquet without gathering records.

``write_record_counts(source, keys, out_dir)`` writes, for every sample record in input order, the
sample count ``f`` of its cell (sdcMicro's ``fk``), the population count ``F`` with a population or a
sample flag, and the sum of design weights ``w`` of its cell with ``weights`` (sdcMicro's ``Fk``),
after any ``carry`` columns (an id, say). On ``dask``/``dask-cudf`` partition ``i`` of the input
becomes ``out_dir/part.{i:05d}.parquet``, written by the worker that holds it: the files in name
order are the records in input order (only flagged records with ``sample_flag``). The cell table
stays on the workers, in ranges of cells; each partition looks its records up range by range.
In-process backends write ``part.00000.parquet`` from the FreqTable's ``record_counts()``.
"""
from __future__ import annotations

from pathlib import Path

from gpurisk.errors import BadInput
from gpurisk.freq.summary import CellSummary, combine, summary_of_table


def write_record_counts(source, keys, out_dir, backend=None, population=None, sample_flag=None,
                        weights=None, missing="category", carry=(), sep=None, buckets=None) -> dict:
    """Write record-level cell counts of ``source`` to the Parquet dataset ``out_dir``, read and
    checked through :class:`gpurisk.Inputs`.

    Returns ``{"files": ..., "rows": ..., "buckets": ...}``.
    """
    from gpurisk.inputs import Inputs
    carry = [carry] if isinstance(carry, str) else list(carry or ())
    inputs = Inputs(source, keys, population=population, sample_flag=sample_flag, weights=weights,
                    missing=missing, backend=backend, sep=sep, columns=carry)
    keys = list(inputs.keys)
    if inputs.distributed:
        return inputs.backend_obj.write_records(source, keys, out_dir, population=population,
                                                sample_flag=sample_flag, weights=weights,
                                                missing=missing, sep=sep, carry=carry,
                                                buckets=buckets)
    frames = inputs.read()
    miss = [c for c in carry if c not in frames.sample.columns]
    if miss:
        raise BadInput(f"column(s) {', '.join(map(repr, miss))} to carry are not in the sample")
    table = inputs.count(frames, guard=False).table
    rc = table.record_cell()
    sub = frames.sample
    if sample_flag:
        from gpurisk.freq.partial import _flag
        sub = sub[_flag(sub, sample_flag)]
    out, sub = inputs.backend_obj.output_frame(sub, carry)   # a cuDF frame on the GPU
    for c in carry:
        out[c] = sub[c].reset_index(drop=True)
    out["f"] = table.f[rc]
    if table.F is not None:
        out["F"] = table.F[rc]
    if table.w is not None:
        out["w"] = table.w[rc]
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    from gpurisk.io import atomic_path
    with atomic_path(d / "part.00000.parquet") as tmp:
        out.to_parquet(str(tmp), index=False)
    return {"files": 1, "rows": int(len(out)), "buckets": 1}


def summarize(source, keys, population=None, sample_flag=None, weights=None, missing="category",
              backend=None, sep=None, buckets=None) -> CellSummary:
    """A :class:`CellSummary` of ``source`` (a frame, a Dask frame or a path) over ``keys``.

    Read and checked through :class:`gpurisk.Inputs`. On ``dask``/``dask-cudf`` the cells stay
    distributed in ``buckets`` ranges (default: one per eight partitions, at most 64); elsewhere the
    FreqTable is built and summarised.
    """
    from gpurisk.inputs import Inputs
    inputs = Inputs(source, keys, population=population, sample_flag=sample_flag, weights=weights,
                    missing=missing, backend=backend, sep=sep)
    if not inputs.distributed:
        return summary_of_table(inputs.count(guard=False).table)
    frames = inputs.read()
    plan, parts = inputs.backend_obj.summary(frames.sample, list(inputs.keys),
                                             population=frames.population, sample_flag=sample_flag,
                                             weights=weights, missing=missing, sep=sep,
                                             buckets=buckets)
    return combine(plan, parts, inputs.backend)
