"""CSV text as written: separator, encoding, compression, header, rows and exact integers.

* Separator: one character, or ``\\t`` for a tab (``--sep '\\n'``, a quote or a multi-character
  string are refused); detected among ``, ; tab |`` when not given.
* Encoding: a text encoding Python knows (``rot13``, ``base64`` are codecs, not encodings: refused).
* Compression by the name's ending, in any case: ``.gz``, ``.bz2``, ``.xz``, ``.zip`` (one member),
  ``.zst``; a truncated or corrupt compressed file is one line.
* Header: columns named as written (``age`` and ``age.1`` are two columns); a name written twice is
  refused when it is read.
* Integers: a column of whole numbers is read exactly. pandas reads integers with a blank as
  float64, which rounds beyond 2**53 (distinct ids merge); such columns are read again as nullable
  ``Int64`` (``UInt64`` for values >= 2**63), as are integers beyond int64 that pandas leaves as text.
"""
from __future__ import annotations

import csv
import io
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.io.paths import compression_of

SEPARATORS = ",;\t|"
#: rows of a CSV file's head read to type its columns for the Dask reader
HEAD_ROWS = 20_000


def check_sep(sep) -> str | None:
    """``sep`` as one character (``\\t`` and ``tab`` give a tab); BadInput otherwise."""
    if sep is None:
        return None
    s = str(sep)
    if s in ("\\t", "tab", "TAB"):
        return "\t"
    if len(s) != 1:
        raise bad_input(f"{{arg:--sep|sep}} {s!r}: give one character (or \\t for a tab)")
    if s in "\r\n\"":
        raise bad_input(f"{{arg:--sep|sep}} {s!r} cannot separate fields (a line end or the quote character)")
    return s


def check_encoding(encoding) -> str:
    """``encoding`` when it names a text encoding; BadInput (one line) otherwise."""
    import codecs
    try:
        info = codecs.lookup(str(encoding))
    except (LookupError, TypeError):
        raise bad_input(f"unknown text encoding {encoding!r} ({{arg:--encoding|encoding}}): e.g. utf-8, "
                       "latin-1, cp1252") from None
    if not getattr(info, "_is_text_encoding", True):
        raise bad_input(f"{{arg:--encoding|encoding}} {encoding!r} is a codec, not a text encoding: e.g. utf-8, "
                       "latin-1, cp1252")
    return str(encoding)


def nfc(name) -> str:
    """A column name in Unicode's composed form (NFC): "Région" typed on one keyboard and written
    decomposed by another program print the same and are the same name to gpurisk."""
    import unicodedata
    return unicodedata.normalize("NFC", str(name))


def as_written(columns, header):
    """Each of ``columns`` spelled as ``header`` (the file's names) writes it: the name itself, or
    the one header name equal to it in NFC (:func:`nfc`); a name matching none stays as given
    (the column check names it). None stays None."""
    if columns is None:
        return None
    names = [str(h) for h in header]
    by: dict = {}
    for h in names:
        by.setdefault(nfc(h), []).append(h)
    out = []
    for c in columns:
        hits = by.get(nfc(c), [])
        out.append(c if c in names or len(hits) != 1 else hits[0])
    return out


def nfc_frame(frame):
    """``frame`` with its column names in NFC (a no-op when they already are)."""
    names = [nfc(c) if isinstance(c, str) else c for c in frame.columns]
    if names != list(frame.columns):
        frame = frame.rename(columns=dict(zip(frame.columns, names)))
    return frame


#: Excel writes a first line ``sep=;`` naming the separator of a CSV file it exports
_EXCEL_SEP = ("sep=", "\ufeffsep=")


def excel_sep(p: Path, encoding: str = "utf-8") -> str | None:
    """The separator a first line ``sep=X`` (Excel's) names, or None when the file has none."""
    try:
        with read_errors(p, encoding), open_binary(p) as raw:
            line = io.TextIOWrapper(raw, encoding=encoding, newline="").readline(64)
    except BadInput:
        return None
    line = line.rstrip("\r\n")
    for start in _EXCEL_SEP:
        if line.startswith(start) and len(line) == len(start) + 1:
            return line[-1]
    return None


def _not_text(p, encoding, exc) -> BadInput:
    where = f" at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else ""
    reason = getattr(exc, "reason", None) or type(exc).__name__
    return bad_input(f"{p}: not {encoding} text ({reason}{where}); give the file's encoding with "
                    "{arg:--encoding|encoding}")


@contextmanager
def read_errors(p, encoding: str = "utf-8"):
    """Turn the errors of reading a (compressed) text file into one line naming it."""
    import gzip
    import lzma
    import zipfile
    import zlib
    try:
        yield
    except BadInput:
        raise
    except UnicodeError as exc:
        raise _not_text(p, encoding, exc) from None
    except (EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError, zipfile.BadZipFile) as exc:
        # a cut download: gzip's EOFError would otherwise reach click as "aborted" (exit 130)
        what = ("it ends before the end of the compressed data" if isinstance(exc, EOFError) else
                "not gzip data" if isinstance(exc, gzip.BadGzipFile) else "corrupt compressed data")
        raise BadInput(f"{p}: truncated or corrupt compressed file ({what}); "
                       "download or copy it again") from None
    except OSError as exc:
        if compression_of(p) and exc.errno is None:     # bz2: "Invalid data stream"
            raise BadInput(f"{p}: truncated or corrupt compressed file ({exc}); "
                           "download or copy it again") from None
        raise BadInput(f"{p}: cannot read it ({exc.strerror or exc})") from None


def open_binary(p: Path):
    """The file's bytes, decompressed by its name's ending (any case)."""
    comp = compression_of(p)
    if comp == "gzip":
        import gzip
        return gzip.open(p, "rb")
    if comp == "bz2":
        import bz2
        return bz2.open(p, "rb")
    if comp == "xz":
        import lzma
        return lzma.open(p, "rb")
    if comp == "zip":
        import zipfile
        zf = zipfile.ZipFile(p)
        names = [n for n in zf.namelist() if not n.endswith("/")]
        if len(names) != 1:
            raise BadInput(f"{p}: a zip archive must hold one file, it holds {len(names)}")
        return zf.open(names[0])
    if comp == "zstd":
        try:
            import zstandard
        except ImportError:
            raise BadInput(f"{p}: reading .zst files needs the zstandard package") from None
        return zstandard.open(p, "rb")
    return open(p, "rb")


def detect_separator(p: Path, encoding: str = "utf-8") -> str:
    """The separator an Excel ``sep=X`` first line names, else the one among , ; tab | that
    splits the first lines into equal, largest field counts."""
    named = excel_sep(p, encoding)
    if named is not None:
        return named
    with read_errors(p, encoding), open_binary(p) as raw:
        head = io.TextIOWrapper(raw, encoding=encoding, newline="").read(65536)
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


def _pandas_csv(p, sep, encoding, **kw):
    import warnings
    with read_errors(p, encoding), warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            if "skiprows" not in kw and excel_sep(p, encoding) is not None:
                kw["skiprows"] = 1           # Excel's sep= line is not the header
            return pd.read_csv(p, sep=sep, encoding=encoding, compression=compression_of(p), **kw)
        except pd.errors.EmptyDataError:
            raise BadInput(f"{p}: the file is empty") from None
        except (pd.errors.ParserError, pd.errors.ParserWarning) as exc:
            raise BadInput(f"{p}: malformed CSV ({str(exc).strip().splitlines()[-1]})") from None


def csv_header(p: Path, sep: str | None, encoding: str) -> tuple[str, list]:
    """(separator, column names) of a CSV file; an empty or undecodable file is BadInput."""
    sep, header, _ = csv_header_raw(p, sep, encoding)
    return sep, header


def csv_header_raw(p: Path, sep: str | None, encoding: str) -> tuple[str, list, set]:
    """(separator, column names, names written more than once) of a CSV file."""
    if p.stat().st_size == 0:
        raise BadInput(f"{p}: the file is empty")
    encoding = check_encoding(encoding)
    sep = check_sep(sep) or detect_separator(p, encoding)
    header = _pandas_csv(p, sep, encoding, nrows=0).columns.tolist()
    raw = _pandas_csv(p, sep, encoding, nrows=1, header=None, dtype=str, keep_default_na=False)
    written = [str(x) for x in raw.iloc[0].tolist()] if len(raw) else [str(c) for c in header]
    dups = {c for c in written if written.count(c) > 1}
    same = [nfc(c) for c in written]                   # two spellings of one name
    dups |= {c for c in written if nfc(c) != c and same.count(nfc(c)) > 1}
    dups |= {nfc(c) for c in written if same.count(nfc(c)) > 1}
    return sep, header, dups


def check_columns_in(p, columns, header, dups=()) -> None:
    if columns is None:
        return
    miss = [c for c in columns if c not in header]
    if miss:
        extra = f"; duplicated column name(s): {', '.join(sorted(dups))}" if dups else ""
        raise BadInput(f"column(s) {', '.join(map(repr, miss))} not in {p} "
                       f"(its columns: {', '.join(map(str, header[:20]))}"
                       f"{' ...' if len(header) > 20 else ''}){extra}")
    dupkeys = [c for c in columns if c in dups]
    if dupkeys:
        raise BadInput(f"{p}: column name(s) {', '.join(map(repr, dupkeys))} appear more than once")


def read_csv(p: Path, sep=None, columns=None, encoding: str = "utf-8") -> pd.DataFrame:
    """A CSV file (any compression) as pandas, its integers exact (see the module docstring)."""
    sep, header, dups = csv_header_raw(p, sep, encoding)
    columns = as_written(columns, header)
    check_columns_in(p, columns, header, dups)
    check_row_lengths(p, sep, encoding, len(header))
    kw = dict(usecols=columns, low_memory=False, keep_default_na=True, na_values=[""])
    frame = _pandas_csv(p, sep, encoding, **kw)
    return nfc_frame(exact_integers(frame, lambda cols, dtypes: _pandas_csv(
        p, sep, encoding, **{**kw, "usecols": cols, "dtype": dtypes})))


def head_dtypes(p: Path, sep=None, columns=None, encoding: str = "utf-8") -> dict:
    """{column: "Int64" or "UInt64"} for the columns of whole numbers in the first HEAD_ROWS rows
    of a CSV file (what the Dask reader is told, so that its blocks keep integers exact)."""
    sep, header, dups = csv_header_raw(p, sep, encoding)
    kw = dict(usecols=as_written(columns, header), low_memory=False, keep_default_na=True,
              na_values=[""], nrows=HEAD_ROWS)
    frame = exact_integers(_pandas_csv(p, sep, encoding, **kw), lambda cols, dtypes: _pandas_csv(
        p, sep, encoding, **{**kw, "usecols": cols, "dtype": dtypes}))
    out = {}
    for c in frame.columns:
        dt = frame[c].dtype
        if pd.api.types.is_integer_dtype(dt) and not pd.api.types.is_bool_dtype(dt):
            out[c] = "UInt64" if pd.api.types.is_unsigned_integer_dtype(dt) else "Int64"
    return out


#: what pandas reads as missing in a CSV (its default NA strings and the empty field)
PANDAS_NA = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
             "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]
_KIND_PATTERNS = {
    "int": r"^\s*[+-]?\d+\s*$",
    "float": r"^\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity|nan)\s*$",
    "bool": r"^(True|False|TRUE|FALSE|true|false)$",
}
#: from the narrowest reading of a column to text, which holds anything
KINDS = ("bool", "int", "float", "text")


def column_kinds(p: Path, sep: str, encoding: str, columns, skip_rows: int = 0) -> dict[str, str]:
    """How pandas would read each of ``columns`` of the whole file: ``"bool"``, ``"int"``,
    ``"float"`` or ``"text"`` (any value that is not a number makes a column text), from one
    streaming pass that converts nothing (each field is matched as text; memory stays at one
    block). The Dask reader types a column from the file's head; a value later in the file that
    does not fit that type would fail a block long after the plan was made (and pandas' message
    would quote the value). {} when the file cannot be tokenized (the pandas read says why)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    columns = list(columns)
    if not columns:
        return {}
    level: dict = {c: None for c in columns}     # None until a value is seen
    enc = "utf8" if encoding.lower().replace("-", "") in ("utf8", "utf_8") else encoding
    try:
        with read_errors(p, encoding), open_binary(p) as fh:
            reader = pcsv.open_csv(
                fh, read_options=pcsv.ReadOptions(encoding=enc, skip_rows=skip_rows,
                                                  block_size=16 << 20),
                parse_options=pcsv.ParseOptions(delimiter=sep, newlines_in_values=True,
                                                invalid_row_handler=lambda row: "skip"),
                convert_options=pcsv.ConvertOptions(
                    include_columns=columns, column_types={c: pa.string() for c in columns},
                    null_values=PANDAS_NA, strings_can_be_null=True, quoted_strings_can_be_null=True))
            for batch in reader:
                for c in columns:
                    arr = batch.column(c).drop_null()
                    if level[c] == "text" or not len(arr):
                        continue
                    # bool values mix with nothing else; int values are floats too
                    tries = (("int", "float", "bool") if level[c] is None else ("bool",)
                             if level[c] == "bool" else KINDS[KINDS.index(level[c]):3])
                    level[c] = next((k for k in tries if _all_of_kind(arr, k)), "text")
    except (pa.ArrowInvalid, UnicodeDecodeError, LookupError, KeyError):
        return {}
    return {c: level[c] for c in columns if level[c] is not None}


def _all_of_kind(arr, kind: str) -> bool:
    """Whether every value of a string array reads as ``kind``: Arrow's own cast first (fast,
    C), the pattern only where the cast refuses (pandas reads " 7" and "+7" as numbers too)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    targets = {"int": (pa.int64(), pa.uint64()), "float": (pa.float64(),)}.get(kind, ())
    for t in targets:
        try:
            pc.cast(arr, t)
            return True
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return bool(pc.all(pc.match_substring_regex(arr, _KIND_PATTERNS[kind],
                                                ignore_case=kind == "float")).as_py())


def _lossy(s: pd.Series) -> bool:
    """A column pandas read inexactly: whole numbers beyond 2**53 as float64, or beyond int64 as text."""
    dt = s.dtype
    if dt == np.float64:
        v = s.to_numpy()
        fin = v[np.isfinite(v)]
        return bool(fin.size) and float(np.abs(fin).max()) >= 2.0 ** 53 and bool(np.all(fin == np.trunc(fin)))
    if dt == object or pd.api.types.is_string_dtype(dt):
        nn = s.dropna()
        digits = r"[+-]?\d{1,20}"
        if not len(nn) or not nn.iloc[:1].astype(str).str.fullmatch(digits).all():
            return False
        text = nn.astype(str)
        text = text[text != ""]            # a blank read as text (pandas does with nrows)
        return bool(text.str.fullmatch(digits).all())
    return False


def exact_integers(frame: pd.DataFrame, reread) -> pd.DataFrame:
    """``frame`` with its inexact integer columns (see :func:`_lossy`) read again by
    ``reread(columns, dtypes)`` as Int64, or UInt64 where Int64 overflows; a column that is
    neither (a float written as 1e20) stays as read."""
    lossy = [c for c in frame.columns if _lossy(frame[c])]
    for c in lossy:
        for dt in ("Int64", "UInt64"):
            try:
                frame[c] = reread([c], {c: dt})[c].array
                break
            except (TypeError, ValueError, OverflowError, BadInput):
                continue
    return frame


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
    skip = 1 if excel_sep(p, encoding) is not None else 0

    def tokenize(handler, threads=True):
        with read_errors(p, encoding), open_binary(p) as fh:
            pc.read_csv(fh, read_options=pc.ReadOptions(encoding=enc, skip_rows=skip,
                                                        use_threads=threads),
                        parse_options=pc.ParseOptions(delimiter=sep, newlines_in_values=True,
                                                      invalid_row_handler=handler),
                        convert_options=pc.ConvertOptions(include_columns=[]))
    try:
        tokenize(on_bad)
    except (pa.ArrowInvalid, UnicodeDecodeError, LookupError):
        return   # the pandas read names encoding and parse errors itself
    if bad:
        first = bad[0]
        number = first[0] if first[0] is not None else _first_bad(tokenize)
        where = _where(p, encoding, sep, number) if number is not None else "a row"
        raise BadInput(f"{p}: malformed CSV: {len(bad)} row(s) do not have the header's {width} "
                       f"fields ({where} has {first[1]}); fix the export (an unquoted separator "
                       "inside a value, or a cut line?)")


def _first_bad(tokenize) -> int | None:
    """pyarrow's number of the first ragged row, from a second, serial pass (the multi-threaded
    tokenizer of a file of several blocks does not number its rows); only run on that error."""
    import pyarrow as pa
    found: list = []

    def on_bad(row):
        if not found:
            found.append(row.number)
        return "skip"
    try:
        tokenize(on_bad, threads=False)
    except (pa.ArrowInvalid, UnicodeDecodeError, LookupError):
        return None
    return found[0] if found else None


def _where(p: Path, encoding: str, sep: str, number: int) -> str:
    """"the row on line N" for the row that pyarrow numbers ``number`` (rows counted from 1, the
    header and a ``sep=`` line included): the same number, unless a quoted value before it spans
    lines. Lines are counted in the bytes (fast) while no quote comes before the row; past a quote
    the file is read again with Python's csv module up to that row (only on this error path)."""
    line = _line_by_bytes(p, encoding, number)
    if line is None:
        line = _line_by_records(p, encoding, sep, number)
    return f"the row on line {line}" if line is not None else f"row {number} (the header is row 1)"


def _line_by_bytes(p: Path, encoding: str, number: int) -> int | None:
    """``number`` when no quote character comes before line ``number`` (then each row before it is
    one line), else None. Only for encodings that write a newline as the byte \\n."""
    import codecs
    if codecs.lookup(encoding).name not in ("utf-8", "ascii", "latin-1", "iso8859-1", "cp1252",
                                            "iso8859-15", "utf-8-sig"):
        return None
    seen = 1                          # lines started so far
    with read_errors(p, encoding), open_binary(p) as fh:
        while True:
            chunk = fh.read(16 << 20)
            if not chunk:
                return None
            nl = chunk.count(b"\n")
            if seen + nl >= number:
                at = -1
                for _ in range(number - seen):
                    at = chunk.index(b"\n", at + 1)
                return None if b'"' in chunk[:at + 1] else number
            if b'"' in chunk:
                return None
            seen += nl


def _line_by_records(p: Path, encoding: str, sep: str, number: int) -> int | None:
    with read_errors(p, encoding), open_binary(p) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding=encoding, newline=""), delimiter=sep)
        if number == 1:
            return 1
        for i, _row in enumerate(reader, start=1):
            if i == number - 1:
                return reader.line_num + 1
    return None