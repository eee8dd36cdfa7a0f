"""Reading the files offices hold. Every failure is a :class:`BadInput` naming the file and problem.

CSV (separator detected among , ; tab | unless given; gzip etc. by extension) and Parquet (a file or
a directory dataset). ``example:adult`` names the bundled UCI Adult file. Stata ``.dta`` (pandas),
SPSS ``.sav``/``.zsav`` (pyreadstat, the ``formats`` extra), SAS ``.sas7bdat`` and ``.xpt`` (pandas):
see :mod:`gpurisk.formats`. Results are written by :func:`write_results` (JSON, CSV or Parquet).
"""
from __future__ import annotations

import csv
import io as _io
from pathlib import Path

import pandas as pd

from .errors import BadInput

EXAMPLES = {"adult": "adult.csv.gz"}
SEPARATORS = ",;\t|"


def example_path(name: str) -> Path:
    if name not in EXAMPLES:
        raise BadInput(f"unknown example {name!r}; examples: {', '.join(EXAMPLES)}")
    from importlib import resources
    return Path(str(resources.files("gpurisk") / "data" / EXAMPLES[name]))


def resolve_path(path) -> Path:
    s = str(path)
    if s.startswith("example:"):
        return example_path(s.split(":", 1)[1])
    p = Path(s)
    if not p.exists():
        raise BadInput(f"file {s!r} does not exist")
    return p


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


def read_table(path, sep: str | None = None, columns: list[str] | None = None,
               encoding: str = "utf-8") -> pd.DataFrame:
    """Read CSV or Parquet into pandas; only ``columns`` when given (checked to exist)."""
    p = resolve_path(path)
    if is_parquet(p):
        return _read_parquet(p, columns)
    from . import formats
    reader = formats.reader_for(p)
    if reader is not None:
        return reader(p, columns, encoding)
    if p.is_dir():
        raise BadInput(f"{p}: a directory with no .parquet files")
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
    try:
        return pd.read_csv(p, sep=sep, usecols=columns, encoding=encoding, low_memory=False,
                           keep_default_na=True, na_values=[""])
    except UnicodeDecodeError as exc:
        raise BadInput(f"{p}: not {encoding} text ({exc.reason} at byte {exc.start}); "
                       "give the file's encoding with --encoding") from None
    except pd.errors.ParserError as exc:
        raise BadInput(f"{p}: malformed CSV ({str(exc).strip().splitlines()[-1]})") from None


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
    from .formats import write_atomic
    return write_atomic(result, path)
