"""Reading the files offices hold. Every failure is a :class:`BadInput` naming the file and problem.

CSV (separator detected among , ; tab | unless given; gzip etc. by extension) and Parquet (a file or
a directory dataset). ``example:adult`` names the bundled UCI Adult file. Stata ``.dta`` (pandas),
SPSS ``.sav``/``.zsav`` (pyreadstat, the ``formats`` extra), SAS ``.sas7bdat`` and ``.xpt`` (pandas):
see :mod:`gpurisk.io.formats`. Results are written by :func:`write_results` (JSON, CSV or Parquet).
"""
from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from gpurisk.errors import BadInput

EXAMPLES = {"adult": "adult.csv.gz"}
SEPARATORS = ",;\t|"


def example_path(name: str) -> Path:
    if name not in EXAMPLES:
        raise BadInput(f"unknown example {name!r}; examples: {', '.join(EXAMPLES)}")
    from importlib import resources
    path = Path(str(resources.files("gpurisk") / "data" / EXAMPLES[name]))
    if not path.exists():
        raise BadInput(f"the bundled example {name!r} is missing from this installation ({path})")
    return path


def resolve_path(path) -> Path:
    s = str(path)
    if s.startswith("example:"):
        return example_path(s.split(":", 1)[1])
    p = Path(s)
    if not p.exists():
        raise BadInput(f"file {s!r} does not exist")
    if not p.is_file() and not p.is_dir():
        return _spooled(p)
    return p


#: a named pipe or device already read once in this process -> the regular file holding its bytes
_SPOOLED: dict[str, Path] = {}


def _spooled(p: Path) -> Path:
    """A named pipe (``mkfifo``, ``<(zcat x.gz)``) or a character device (/dev/stdin) as a regular
    file: its bytes are copied once into a private temporary file (removed at exit) with the same
    name, so the readers, which open a file more than once (separator, header, row check, data),
    see all of it. Anything else that is not a file (a socket) is refused in one line."""
    import atexit
    import shutil
    import stat
    import tempfile
    key = str(p)
    if key in _SPOOLED:
        return _SPOOLED[key]
    mode = p.stat().st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise BadInput(f"{p}: not a regular file, a folder or a named pipe; gpurisk cannot read it")
    d = Path(tempfile.mkdtemp(prefix="gpurisk-pipe-"))
    atexit.register(shutil.rmtree, d, True)
    tmp_copy = d / (p.name if p.suffix else p.name + ".csv")     # a private copy, not an output
    try:
        with open(p, "rb") as src, open(tmp_copy, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except OSError as exc:
        raise BadInput(f"{p}: cannot read it ({exc.strerror or exc})") from None
    _SPOOLED[key] = tmp_copy
    return tmp_copy


def is_parquet(p: Path) -> bool:
    if p.is_dir():
        return any(p.rglob("*.parquet"))
    return p.suffix.lower() in (".parquet", ".pq")


def detect_separator(p: Path, encoding: str = "utf-8") -> str:
    """The separator among , ; tab | that splits the first lines into equal, largest field counts."""
    import gzip
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding=encoding, newline="") as fh:
            head = fh.read(65536)
    except UnicodeDecodeError as exc:
        raise BadInput(f"{p}: not {encoding} text ({exc.reason} at byte {exc.start}); "
                       "give the file's encoding with --encoding") from None
    lines = [ln for ln in head.splitlines() if ln.strip()][:20]
    if not lines:
        raise BadInput(f"{p}: the file is empty")
    if len(lines) > 1 and not head.endswith(("\n", "\r")):
        lines = lines[:-1]  # last line may be cut by the 64 KiB read
    best, best_score = ",", (-1, 0)
    for sep in SEPARATORS:
        counts = [len(next(csv.reader([ln], delimiter=sep))) for ln in lines]
        consistent = sum(c == counts[0] for c in counts)
        score = (consistent if counts[0] > 1 else 0, counts[0])
        if score > best_score:
            best, best_score = sep, score
    return best


def csv_header(p: Path, sep: str | None, encoding: str) -> tuple[str, list]:
    """(separator, column names) of a CSV file; an empty or undecodable file is BadInput."""
    if p.stat().st_size == 0:
        raise BadInput(f"{p}: the file is empty")
    sep = sep or detect_separator(p, encoding)
    try:
        header = pd.read_csv(p, sep=sep, nrows=0, encoding=encoding).columns.tolist()
    except pd.errors.EmptyDataError:
        raise BadInput(f"{p}: the file is empty") from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"{p}: not {encoding} text ({exc.reason} at byte {exc.start}); "
                       "give the file's encoding with --encoding") from None
    return sep, header


def read_table(path, sep: str | None = None, columns: list[str] | None = None,
               encoding: str = "utf-8") -> pd.DataFrame:
    """Read CSV or Parquet into pandas; only ``columns`` when given (checked to exist).

    ``path`` may also be a glob (``"parts/*.csv"``): the files, in name order, one after another.
    """
    if any(ch in str(path) for ch in GLOB_CHARS) and not Path(str(path)).exists():
        files = expand_input(path)
        return pd.concat([read_table(f, sep=sep, columns=columns, encoding=encoding) for f in files],
                         ignore_index=True)
    p = resolve_path(path)
    if is_parquet(p):
        return _read_parquet(p, columns)
    from gpurisk.io import formats
    reader = formats.reader_for(p)
    if reader is not None:
        return reader(p, columns, encoding)
    if p.is_dir():
        raise BadInput(f"{p}: a directory with no .parquet files")
    import gzip
    import zlib
    try:
        return _read_csv(p, sep, columns, encoding)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        # a cut download: gzip's EOFError would otherwise reach click as "aborted" (exit 130)
        what = ("it ends before the end of the compressed data" if isinstance(exc, EOFError) else
                "not gzip data" if isinstance(exc, gzip.BadGzipFile) else "corrupt compressed data")
        raise BadInput(f"{p}: truncated or corrupt compressed file ({what}); "
                       "download or copy it again") from None


def _read_csv(p: Path, sep, columns, encoding) -> pd.DataFrame:
    sep, header = csv_header(p, sep, encoding)
    dups = sorted({str(c).rsplit(".", 1)[0] for c in header if _is_mangled_dup(c, header)})
    if columns is not None:
        miss = [c for c in columns if c not in header]
        if miss:
            extra = f"; duplicated column name(s): {', '.join(dups)}" if dups else ""
            raise BadInput(f"column(s) {', '.join(map(repr, miss))} not in {p} "
                           f"(its columns: {', '.join(map(str, header[:20]))}{' ...' if len(header) > 20 else ''}){extra}")
        dupkeys = [c for c in columns if c in dups]
        if dupkeys:
            raise BadInput(f"{p}: column name(s) {', '.join(map(repr, dupkeys))} appear more than once")
    check_row_lengths(p, sep, encoding, len(header))
    try:
        return pd.read_csv(p, sep=sep, usecols=columns, encoding=encoding, low_memory=False,
                           keep_default_na=True, na_values=[""])
    except UnicodeDecodeError as exc:
        raise BadInput(f"{p}: not {encoding} text ({exc.reason} at byte {exc.start}); "
                       "give the file's encoding with --encoding") from None
    except pd.errors.ParserError as exc:
        raise BadInput(f"{p}: malformed CSV ({str(exc).strip().splitlines()[-1]})") from None


def check_row_lengths(p: Path, sep: str, encoding: str, width: int) -> None:
    """Refuse a CSV whose rows do not all have the header's number of fields.

    pandas' C parser fills a short row with missing values and (with ``usecols``) drops the fields
    of a long one, without a word; a ragged row is almost always a broken export (an unquoted
    separator inside a value, a cut line), so it is refused. The check tokenizes the file with
    pyarrow's multi-threaded parser (quoted newlines allowed), converting no column. The message
    gives row numbers and field counts, never the row's text (it may hold a unique's key values).
    """
    import pyarrow as pa
    import pyarrow.csv as pc
    bad: list[tuple] = []

    def on_bad(row):
        bad.append((row.number, row.actual_columns, row.expected_columns))
        return "skip"

    enc = "utf8" if encoding.lower().replace("-", "") in ("utf8", "utf_8") else encoding
    try:
        pc.read_csv(p, read_options=pc.ReadOptions(encoding=enc),
                    parse_options=pc.ParseOptions(delimiter=sep, newlines_in_values=True,
                                                  invalid_row_handler=on_bad),
                    convert_options=pc.ConvertOptions(include_columns=[]))
    except (pa.ArrowInvalid, UnicodeDecodeError, LookupError):
        return   # the pandas read below names encoding and parse errors itself
    if bad:
        first = bad[0]
        where = f"row {first[0]}" if first[0] is not None else "a row"
        raise BadInput(f"{p}: malformed CSV: {len(bad)} row(s) do not have the header's {width} "
                       f"fields ({where} has {first[1]}); fix the export (an unquoted separator "
                       "inside a value, or a cut line?)")


def _is_mangled_dup(c, header) -> bool:
    s = str(c)
    if "." not in s:
        return False
    base, suffix = s.rsplit(".", 1)
    return suffix.isdigit() and base in header


def _read_parquet(p: Path, columns):
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        schema = pq.read_schema(p) if p.is_file() else pq.ParquetDataset(p).schema
        names = schema.names
        if columns is not None:
            miss = [c for c in columns if c not in names]
            if miss:
                raise BadInput(f"column(s) {', '.join(map(repr, miss))} not in {p} "
                               f"(its columns: {', '.join(names[:20])})")
        return pd.read_parquet(p, columns=columns)
    except BadInput:
        raise
    except (pa.ArrowException, OSError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"{p}: not a readable Parquet file ({msg})") from None


def write_results(result, path) -> Path:
    """Write an :class:`~gpurisk.Assessment` (or its ``to_dict()``) to ``path``, by extension.

    ``.json``: the JSON document of ``gpurisk assess --json``. ``.csv``, ``.csv.gz``, ``.parquet``:
    one row per measure (keys, n, N, fraction, measure, value, se, upper, reason, extra as JSON).
    Written atomically: a temporary file in the same folder, renamed over ``path``.
    """
    from gpurisk.io.formats import write_atomic
    return write_atomic(result, path)


# --- lazy, partition-wise reading (Dask) ---------------------------------------------------------

GLOB_CHARS = "*?["
#: bytes of CSV per Dask partition (compressed files are one partition each: they cannot be split)
CSV_BLOCKSIZE = "64MiB"
#: decoded bytes (Parquet's uncompressed size of the columns read) per Dask partition of Parquet:
#: a file's row groups are grouped up to this size, so one large file is many partitions
PARQUET_PARTITION_BYTES = 64 << 20
#: ... and at most this many rows: counting holds some 50-150 bytes per row (codes, ids, sort
#: buffers) whatever the keys' width, so narrow keys must not make long partitions
PARQUET_PARTITION_ROWS = 2_000_000


def expand_input(path) -> list[Path]:
    """The files a SAMPLE names: one file, a Parquet directory, or a glob of files."""
    import glob
    s = str(path)
    if s.startswith("example:"):
        return [example_path(s.split(":", 1)[1])]
    if any(ch in s for ch in GLOB_CHARS) and not Path(s).exists():
        files = sorted(Path(f) for f in glob.glob(s, recursive=True) if Path(f).is_file())
        if not files:
            raise BadInput(f"no file matches {s!r}")
        return files
    return [resolve_path(s)]


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
              partition_bytes: int = PARQUET_PARTITION_BYTES):
    """A Dask DataFrame over CSV (a file or a glob) or Parquet (a file, a directory, or a glob).

    Nothing is read but the schema or the header (and Parquet footers): partitions are read by the
    workers, one at a time per worker thread. A large Parquet file is split by its row groups into
    partitions of about ``partition_bytes`` decoded bytes (:func:`row_groups_per_partition`), CSV
    into blocks of ``blocksize``. CSV columns are typed by pandas on each block (integers as floats, so
    that a block with a missing value types like one without); a column whose values change type
    between blocks is an error when counted. ``gpu`` gives cuDF partitions: Parquet is then read by
    dask-cudf on the workers' GPUs, in partitions of 1/32 of a GPU's memory; CSV is parsed by pandas
    (types exactly as on the CPU backends) and moved.
    """
    import dask.dataframe as dd

    files = expand_input(path)
    if all(is_parquet(p) for p in files):
        target = str(files[0]) if len(files) == 1 else [str(p) for p in files]
        names = _parquet_names(files[0])
        if columns is not None:
            miss = [c for c in columns if c not in names]
            if miss:
                raise BadInput(f"column(s) {', '.join(map(repr, miss))} not in {path} "
                               f"(its columns: {', '.join(names[:20])})")
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
        sep, header = csv_header(first, sep, encoding)
        if columns is not None:
            miss = [c for c in columns if c not in header]
            if miss:
                raise BadInput(f"column(s) {', '.join(map(repr, miss))} not in {first} "
                               f"(its columns: {', '.join(map(str, header[:20]))}"
                               f"{' ...' if len(header) > 20 else ''})")
        compressed = any(p.suffix.lower() in (".gz", ".bz2", ".xz", ".zip", ".zst") for p in files)
        ddf = dd.read_csv([str(p) for p in files], sep=sep, usecols=columns, encoding=encoding,
                          blocksize=None if compressed else blocksize, assume_missing=True,
                          keep_default_na=True, na_values=[""])
    if gpu:
        ddf = ddf.to_backend("cudf")
    return ddf


def _parquet_names(p: Path) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        schema = pq.read_schema(p) if p.is_file() else pq.ParquetDataset(p).schema
    except (pa.ArrowException, OSError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BadInput(f"{p}: not a readable Parquet file ({msg})") from None
    return list(schema.names)


# atomic writing: every file gpurisk writes goes through these (gpurisk.io.atomic)
from gpurisk.io.atomic import (atomic_path, check_output_file, temp_path,  # noqa: E402,F401
                                write_bytes_atomic, write_frame_atomic, write_text_atomic)
