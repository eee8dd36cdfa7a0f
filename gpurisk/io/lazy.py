"""Lazy, partition-wise reading for Dask: nothing is read here but the schema or the header (and
Parquet footers, and the head of a CSV file to type its integer columns)."""
from __future__ import annotations

from gpurisk.errors import BadInput
from gpurisk.io.paths import expand_input, is_parquet
from gpurisk.io.read import _parquet_names, _parquet_schema, check_parquet_columns
from gpurisk.io.text import (as_written, check_columns_in, check_encoding, check_row_lengths,
                             check_sep, csv_header_raw, excel_sep, head_dtypes, nfc)

#: bytes of CSV per Dask partition (compressed files are one partition each: they cannot be split)
CSV_BLOCKSIZE = "64MiB"
#: decoded bytes (Parquet's uncompressed size of the columns read) per Dask partition of Parquet:
#: a file's row groups are grouped up to this size, so one large file is many partitions
PARQUET_PARTITION_BYTES = 64 << 20
#: ... and at most this many rows: counting holds some 50-150 bytes per row (codes, ids, sort
#: buffers) whatever the keys' width, so narrow keys must not make long partitions
PARQUET_PARTITION_ROWS = 2_000_000


def row_groups_per_partition(files, columns=None, target: int = PARQUET_PARTITION_BYTES,
                             max_rows: int = PARQUET_PARTITION_ROWS) -> int | None:
    """How many row groups of these Parquet files make a partition of at most ``target`` bytes
    (the uncompressed size of ``columns``, from the files' footers) and at most ``max_rows`` rows;
    None when every file fits in one partition (then one partition per file). A row group larger
    than that is a partition of its own: Parquet cannot be split inside a row group."""
    import pyarrow.parquet as pq
    largest, most, longest = 0, 0, 0
    for f in files:
        paths = sorted(f.rglob("*.parquet")) if f.is_dir() else [f]
        for p in paths:
            meta = pq.ParquetFile(p).metadata
            names = [meta.schema.column(i).name for i in range(meta.num_columns)]
            pick = [i for i, n in enumerate(names) if columns is None or n in columns]
            for g in range(meta.num_row_groups):
                rg = meta.row_group(g)
                largest = max(largest, sum(rg.column(i).total_uncompressed_size for i in pick))
                longest = max(longest, rg.num_rows)
            most = max(most, meta.num_row_groups)
    if largest == 0 or most <= 1:
        return None
    k = max(1, min(int(target) // largest, int(max_rows) // max(longest, 1)))
    return None if k >= most else k


def read_lazy(path, sep: str | None = None, columns: list[str] | None = None,
              encoding: str = "utf-8", blocksize=CSV_BLOCKSIZE, gpu: bool = False,
              partition_bytes: int = PARQUET_PARTITION_BYTES, text_columns=(), typed=None):
    """A Dask DataFrame over CSV (a file or a glob) or Parquet (a file, a directory, or a glob);
    Stata, SPSS and SAS files are read whole, as on pandas, and cut into partitions.

    Nothing is read but the schema or the header (and Parquet footers): partitions are read by the
    workers, one at a time per worker thread. A large Parquet file is split by its row groups into
    partitions of about ``partition_bytes`` decoded bytes (:func:`row_groups_per_partition`), CSV
    into blocks of ``blocksize``. CSV columns of whole numbers in the file's head are read as nullable
    integers (Int64, UInt64 beyond int64: exact, and a block with a missing value types like one
    without), other columns are typed by pandas on each block (integers as floats); a column whose
    values change type between blocks is an error when counted. Each CSV file's rows are checked to
    have the header's number of fields, as on pandas (one tokenizing pass, no values converted). ``gpu`` gives cuDF partitions: Parquet is then read by
    dask-cudf on the workers' GPUs, in partitions of 1/32 of a GPU's memory; CSV is parsed by pandas
    (types exactly as on the CPU backends) and moved.
    """
    import dask.dataframe as dd

    files = expand_input(path)
    from gpurisk.io.formats import reader_for
    if any(p.is_file() and reader_for(p) is not None for p in files):
        # Stata, SPSS, SAS: read whole by the same readers as on pandas (their checks, their
        # messages), then cut into partitions
        from gpurisk.io.read import read_table
        frame = read_table(path, sep=sep, columns=columns, encoding=encoding)
        ddf = dd.from_pandas(frame, npartitions=max(1, -(-len(frame) // 1_000_000)), sort=False)
        return ddf.to_backend("cudf") if gpu else ddf
    if all(is_parquet(p) for p in files):
        target = str(files[0]) if len(files) == 1 else [str(p) for p in files]
        if columns is not None:
            schema = _parquet_schema(files[0])
            columns = as_written(columns, schema.names)
            check_parquet_columns(path, schema, columns)
        try:
            if gpu:  # pragma: no cover - needs a GPU
                # read and decoded on the GPU (no host copy), in partitions of dask-cudf's default
                # size, 1/32 of the first GPU's memory (a row group is never split)
                import dask_cudf
                return dask_cudf.read_parquet(target, columns=columns)
            k = row_groups_per_partition(files, columns, partition_bytes)
            ddf = dd.read_parquet(target, columns=columns,
                                  **({"split_row_groups": k} if k else {}))
        except Exception as exc:  # pyarrow / fsspec errors: one line naming the input
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BadInput(f"{path}: not a readable Parquet dataset ({msg})") from None
    else:
        if any(p.is_dir() for p in files):
            raise BadInput(f"{path}: a directory with no .parquet files")
        first = files[0]
        encoding = check_encoding(encoding)
        given = check_sep(sep)
        # each file's own separator, as pandas reads each file of a glob (a comma- and a
        # semicolon-separated file together), its columns and its row lengths checked
        runs: list[tuple[str, list, int]] = []
        for i, f in enumerate(files):
            f_sep, header, dups = csv_header_raw(f, given, encoding)
            if i == 0:           # names as the file writes them (compared in NFC: see as_written)
                spelled = dict(zip(map(nfc, header), header))
                columns = as_written(columns, header)
                typed = None if typed is None else [spelled.get(nfc(c), c) for c in typed]
                text_columns = [spelled.get(nfc(c), c) for c in text_columns]
            check_columns_in(f, columns, header, dups)
            check_row_lengths(f, f_sep, encoding, len(header))   # ragged rows refused as on pandas
            skip = 1 if excel_sep(f, encoding) is not None else 0   # Excel's sep= first line
            if runs and runs[-1][0] == f_sep and runs[-1][2] == skip:
                runs[-1][1].append(f)
            else:
                runs.append((f_sep, [f], skip))
        # whole numbers stay exact: typed from the head as nullable integers (a float64 block would
        # round ids beyond 2**53); a later block with other values is one line when counted
        dtypes = head_dtypes(first, runs[0][0], columns, encoding)
        # columns checked value by value (the sample flag) are read as text: Dask types a column
        # from the file's head, and a later "maybe" cast to the head's bool would read as True
        dtypes.update({c: "object" for c in text_columns if columns is None or c in columns})
        compressed = any(p.suffix.lower() in (".gz", ".bz2", ".xz", ".zip", ".zst") for p in files)

        def read(types):
            parts = [dd.read_csv([str(p) for p in group], sep=f_sep, usecols=columns,
                                 encoding=encoding, blocksize=None if compressed else blocksize,
                                 assume_missing=True, keep_default_na=True, na_values=[""],
                                 dtype=types or None, **({"skiprows": skip} if skip else {}))
                     for f_sep, group, skip in runs]
            return parts[0] if len(parts) == 1 else dd.concat(parts)
        ddf = read(dtypes)
        wanted = list(ddf.columns) if typed is None else [c for c in typed if c in ddf.columns]
        final = whole_file_types(runs, encoding, ddf.dtypes, wanted, dtypes)
        if final != dtypes:
            ddf = read(final)
    names = [nfc(c) for c in ddf.columns]
    if names != list(ddf.columns):
        ddf = ddf.rename(columns=dict(zip(ddf.columns, names)))
    if gpu:
        ddf = ddf.to_backend("cudf")
    return ddf


def _kind_of(dtype) -> str | None:
    import pandas as pd
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    return None


def whole_file_types(runs, encoding: str, meta, columns, dtypes: dict) -> dict:
    """The dtypes to read ``columns`` with so that no block of the files fails late: Dask types
    each column from the head of the first file (``meta``: its guess; ``dtypes``: what the head
    gave as whole numbers); a column of numbers there with text further on (pandas, which reads the
    whole file, reads it as text) is read as text, one of whole numbers with decimals later as
    floats (:func:`gpurisk.io.text.column_kinds`, one streaming pass over those columns). Columns
    Dask reads as text are told so, so that a later block of numbers stays text too."""
    from gpurisk.io.text import KINDS, column_kinds
    import dask
    import pandas as pd
    # the dtype Dask gives the text columns it reads (pyarrow strings unless configured otherwise)
    text = pd.StringDtype("pyarrow") if dask.config.get("dataframe.convert-string", True) else object
    out = dict(dtypes)
    guess = {c: _kind_of(meta[c]) for c in columns}
    for c, k in guess.items():
        if k is None and c not in out:
            out[c] = meta[c]                   # text in the head: every block read as text
    numeric = [c for c, k in guess.items() if k is not None]
    if not numeric:
        return out
    whole: dict = {}
    for f_sep, group, skip in runs:
        for f in group:
            for c, k in column_kinds(f, f_sep, encoding, numeric, skip).items():
                old = whole.get(c)
                whole[c] = (k if old is None or old == k else "text" if "bool" in (old, k)
                            else max(old, k, key=KINDS.index))
    for c in numeric:
        k, g = whole.get(c), guess[c]
        if k is None or k == g or (g == "float" and k == "int"):
            continue
        out[c] = "float64" if k == "float" and g == "int" else text
    return out


def check_flat(path, columns) -> None:
    """Refuse nested Parquet columns (list, struct, map) among ``columns`` of a Parquet input."""
    files = expand_input(path)
    if all(is_parquet(p) for p in files):
        names = _parquet_names(files[0])
        check_parquet_columns(path, _parquet_schema(files[0]), [c for c in columns if c in names])
