"""The counting engine on one GPU: cuDF frames in, a FreqTable of CuPy arrays (``xp = cupy``) out.

The whole frame is one piece: its distinct key values give the plan (on the host: a few values per
key), its records are encoded and counted on the device (:mod:`gpurisk.freq.partial` with CuPy),
and each record's cell is kept on the device for record-level measures. Nothing here is imported
unless the ``cudf`` backend is asked for.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import BadInput
from . import partial as P
from .plan import check_columns, make_plan, partition_uniques, uniques_to_pandas


def to_cudf(data, columns, sep=None, where="the sample", **check):  # pragma: no cover - needs a GPU
    """A cuDF frame of ``columns`` from a path, a pandas frame or a cuDF frame.

    CSV is parsed by pandas (so types and missing values are read exactly as on the pandas
    backend) and then moved to the device; Parquet is read by cuDF.
    """
    import cudf

    from ..backends import data_kind
    from ..io import _parquet_names, expand_input, is_parquet, read_table
    cols = list(dict.fromkeys(columns))
    if isinstance(data, (str, Path)):
        files = expand_input(data)
        if all(is_parquet(p) for p in files):
            check_columns(_parquet_names(files[0]), **check, where=where)
            target = str(files[0]) if len(files) == 1 else [str(p) for p in files]
            return cudf.read_parquet(target, columns=cols)
        frame = read_table(data, sep=sep, columns=cols)
        return cudf.from_pandas(frame)
    kind = data_kind(data)
    if kind in ("dask", "dask-cudf"):
        raise BadInput("a Dask DataFrame counts on --backend dask or dask-cudf, not cudf")
    if kind not in ("pandas", "cudf") or not hasattr(data, "columns"):
        raise BadInput(f"expected a DataFrame or a path, got {type(data).__name__}")
    check_columns(data.columns, **check, where=where)
    sub = data[cols]
    return cudf.from_pandas(sub) if kind == "pandas" else sub


def build_table_cudf(sample, keys, population=None, sample_flag=None, weights=None,
                     missing="category", sep=None):  # pragma: no cover - needs a GPU
    """A FreqTable with CuPy arrays (``backend="cudf"``) and a device-side record locator."""
    if population is not None and sample_flag is not None:
        raise BadInput("give either a population frame or a sample flag, not both")
    keys = list(keys)
    extra = [c for c in (sample_flag, weights) if c]
    s = to_cudf(sample, keys + extra, sep=sep, keys=keys, sample_flag=sample_flag, weights=weights)
    p = None
    if population is not None:
        p = to_cudf(population, keys, sep=sep, where="the population", keys=keys)
    u_s = uniques_to_pandas(partition_uniques(s, keys))
    u_p = uniques_to_pandas(partition_uniques(p, keys)) if p is not None else None
    if u_s["n"] == 0:
        raise BadInput("the sample has no records")
    plan = make_plan(keys, u_s["uniq"], u_p["uniq"] if u_p else None, u_s["na"],
                     u_p["na"] if u_p else None, missing)
    role = "register" if sample_flag else "sample"
    part, inv = P.count_piece(plan, s, role, sample_flag, weights, want_inverse=True)
    if p is not None:
        m_s = P.size(part)
        part, to_final = P.merge(part, P.partial(plan, p, "population"), want_inverse=True)
        inv = to_final[:m_s][inv]
    if sample_flag:
        inv = inv[P._flag(s, sample_flag)]
    record_cell = inv
    return P.finish(plan, part, backend="cudf", record_locator=lambda: record_cell)
