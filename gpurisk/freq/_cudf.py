"""The counting engine on one GPU: cuDF frames in, a FreqTable of CuPy arrays (``xp = cupy``) out.

Inputs are read or moved to cuDF here; the count is :func:`gpurisk.freq.piece.build_table_piece`
(the code the strict-namespace tests run on the CPU). Nothing here is imported unless the ``cudf``
backend is asked for.
"""
from __future__ import annotations

from pathlib import Path

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.freq.plan import check_columns


def to_cudf(data, columns, sep=None, where="the sample", **check):  # pragma: no cover - needs a GPU
    """A cuDF frame of ``columns`` from a path, a pandas frame or a cuDF frame.

    CSV is parsed by pandas (so types and missing values are read exactly as on the pandas
    backend: integers beyond 2**53 as nullable Int64/UInt64, which cuDF holds exactly as int64/uint64
    with nulls) and then moved to the device; Parquet is read by cuDF (nested columns refused).
    """
    import cudf

    from gpurisk.io import _parquet_names, expand_input, is_parquet, read_table
    cols = list(dict.fromkeys(columns))
    if isinstance(data, (str, Path)):
        files = expand_input(data)
        if all(is_parquet(p) for p in files):
            check_columns(_parquet_names(files[0]), **check, where=where)
            from gpurisk.io.lazy import check_flat
            check_flat(data, cols)          # lists, structs, maps: one line, as on the CPU
            target = str(files[0]) if len(files) == 1 else [str(p) for p in files]
            return cudf.read_parquet(target, columns=cols)
        frame = read_table(data, sep=sep, columns=cols)
        return cudf.from_pandas(frame)
    from gpurisk.xp import is_cudf, is_pandas
    if hasattr(data, "__dask_graph__") and hasattr(data, "npartitions"):
        raise bad_input("a Dask DataFrame counts on {arg:--backend dask|backend='dask'} or "
                        "{arg:--backend dask-cudf|backend='dask-cudf'}, not cudf")
    on_gpu = is_cudf(data)
    if not (on_gpu or is_pandas(data)) or not hasattr(data, "columns"):   # a pandas or a cuDF frame
        raise BadInput(f"expected a DataFrame or a path, got {type(data).__name__}")
    check_columns(data.columns, **check, where=where)
    sub = data[cols]
    return sub if on_gpu else cudf.from_pandas(sub)


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
    from gpurisk.freq.piece import build_table_piece
    return build_table_piece(s, keys, p, sample_flag, weights, missing, backend="cudf")
