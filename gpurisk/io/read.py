"""Reading a whole input into pandas: CSV (:mod:`gpurisk.io.text`), Parquet (a file or a folder
dataset), and the statistical packages' files (:mod:`gpurisk.io.formats`). Every failure is one
:class:`BadInput` line naming the file and the problem: an empty or truncated file of any format,
nested Parquet columns (list, struct, map), a folder with no Parquet files."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.io.paths import GLOB_CHARS, expand_input, is_parquet, resolve_path
from gpurisk.io.text import check_encoding, read_csv


def read_table(path, sep: str | None = None, columns: list[str] | None = None,
               encoding: str = "utf-8") -> pd.DataFrame:
    """Read CSV or Parquet into pandas; only ``columns`` when given (checked to exist).

    ``path`` may also be a glob (``"parts/*.csv"``): the files, in name order, one after another.
    """
    if any(ch in str(path) for ch in GLOB_CHARS) and not Path(str(path)).exists():
        files = expand_input(path)
        return pd.concat([read_table(f, sep=sep, columns=columns, encoding=encoding) for f in files],
                         ignore_index=True)
    encoding = check_encoding(encoding)
    p = resolve_path(path)
    if p.is_file() and p.stat().st_size == 0:
        raise BadInput(f"{p}: the file is empty")
    if is_parquet(p):
        return _read_parquet(p, columns)
    from gpurisk.io import formats
    reader = formats.reader_for(p)
    if reader is not None:
        from gpurisk.io.text import nfc_frame
        return nfc_frame(reader(p, columns, encoding))
    if p.is_dir():
        raise BadInput(f"{p}: a directory with no .parquet files")
    return read_csv(p, sep, columns, encoding)


def _parquet_schema(p: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        return pq.read_schema(p) if p.is_file() else pq.ParquetDataset(p).schema
    except (pa.ArrowException, OSError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"{p}: not a readable Parquet file ({msg})") from None


def check_parquet_columns(p, schema, columns) -> None:
    """The named columns exist and none is nested (a list, struct or map has no categories)."""
    import pyarrow as pa
    names = list(schema.names)
    if columns is not None:
        miss = [c for c in columns if c not in names]
        if miss:
            raise BadInput(f"column(s) {', '.join(map(repr, miss))} not in {p} "
                           f"(its columns: {', '.join(names[:20])})")
    nested = [f"{f.name!r} ({str(f.type).split('<')[0]})" for f in schema
              if (columns is None or f.name in columns) and pa.types.is_nested(f.type)]
    if nested:
        raise BadInput(f"{p}: column(s) {', '.join(nested)} hold nested values (lists, structs or "
                       "maps); gpurisk reads flat columns: flatten them first")


def _read_parquet(p: Path, columns):
    import pyarrow as pa

    from gpurisk.io.text import as_written, nfc_frame
    schema = _parquet_schema(p)
    columns = as_written(columns, schema.names)       # names compared in NFC
    check_parquet_columns(p, schema, columns)
    try:
        frame = nfc_frame(pd.read_parquet(p, columns=columns))
    except (pa.ArrowException, OSError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"{p}: not a readable Parquet file ({msg})") from None
    # the Arrow table the frame was converted from is freed, but its allocator keeps the pages (as
    # much again as the frame: 2.2 GB resident for a 100 M-row register of 20 byte keys)
    pa.default_memory_pool().release_unused()
    return frame


def _parquet_names(p: Path) -> list[str]:
    return list(_parquet_schema(p).names)


def write_results(result, path) -> Path:
    """Write an :class:`~gpurisk.Assessment` (or its ``to_dict()``) to ``path``, by extension.

    ``.json``: the JSON document of ``gpurisk assess --json``. ``.csv``, ``.csv.gz``, ``.parquet``:
    one row per measure (keys, n, N, fraction, measure, value, se, upper, reason, extra as JSON).
    Written atomically: a temporary file in the same folder, renamed over ``path``.
    """
    from gpurisk.io.formats import write_atomic
    return write_atomic(result, path)
