"""The statistical packages' files (Stata, SPSS, SAS) in, results (JSON, CSV, Parquet) out.

Value labels become pandas categories when they are unique and label every value present in the
column; otherwise the column keeps its codes (two codes sharing one label would merge two groups
of people, and a half-labelled column would mix labels with numbers). A missing value stays
missing (a key's own category in the engine). SAS files carry no value labels (their formats live
in a separate catalog), so they are read as stored.

Readers take ``(path, columns, encoding)`` and return a pandas DataFrame holding ``columns`` (all
when None), raising :class:`~gpurisk.BadInput` with one line naming the file and the problem.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from gpurisk.errors import BadInput

STATA = (".dta",)
SPSS = (".sav", ".zsav")
SAS = (".sas7bdat", ".xpt")
#: a SAS transport (XPORT) file is a sequence of records of this many bytes
XPORT_RECORD = 80
RESULT_SUFFIXES = (".json", ".csv", ".csv.gz", ".parquet", ".pq")


def reader_for(p: Path) -> Callable | None:
    suffix = p.suffix.lower()
    if suffix in STATA:
        return read_stata
    if suffix in SPSS:
        return read_spss
    if suffix in SAS:
        return read_sas
    return None


def _check_columns(p: Path, columns, names) -> list | None:
    """``columns`` as the file spells them (compared in NFC), checked to be there."""
    if columns is None:
        return None
    from gpurisk.io.text import as_written
    columns = as_written(columns, names)
    miss = [c for c in columns if c not in names]
    if miss:
        raise BadInput(f"column(s) {', '.join(map(repr, miss))} not in {p} "
                       f"(its columns: {', '.join(map(str, list(names)[:20]))}"
                       f"{' ...' if len(names) > 20 else ''})")
    return columns


def apply_labels(codes: pd.Series, labels: dict | None) -> pd.Series:
    """``codes`` as a categorical of their labels when the labels are unique and cover every value."""
    if not labels:
        return codes
    present = pd.unique(codes.dropna())
    texts = list(labels.values())
    if len(set(texts)) != len(texts) or not all(v in labels for v in present):
        return codes
    order = [labels[k] for k in sorted(labels)]
    return pd.Series(pd.Categorical(codes.map(labels), categories=order), index=codes.index,
                     name=codes.name)


# --- Stata ----------------------------------------------------------------------------------------
def read_stata(p: Path, columns=None, encoding: str = "utf-8") -> pd.DataFrame:
    """Stata ``.dta`` through pandas; value labels become categories (see the module docstring)."""
    try:
        with pd.io.stata.StataReader(p) as rdr:
            names = list(rdr.read(nrows=1, convert_categoricals=False).columns)
    except StopIteration:
        raise BadInput(f"{p}: the Stata file holds no records") from None
    except Exception as exc:  # noqa: BLE001 - ValueError, OSError, struct.error (a cut header), ...
        raise BadInput(f"{p}: not a readable Stata file ({_first_line(exc)}); truncated?") from None
    columns = _check_columns(p, columns, names)
    cols = list(columns) if columns is not None else names
    try:
        raw = pd.read_stata(p, columns=cols, convert_categoricals=False)
    except Exception as exc:  # noqa: BLE001 - a truncated file: a header and too few bytes
        raise BadInput(f"{p}: not a readable Stata file ({_first_line(exc)}); truncated?") from None
    try:
        labelled = pd.read_stata(p, columns=cols, convert_categoricals=True)
        candidates = {c: labelled[c] for c in cols}
    except ValueError:  # some column's labels are not unique: find the others one by one
        candidates = {}
        for c in cols:
            try:
                candidates[c] = pd.read_stata(p, columns=[c], convert_categoricals=True)[c]
            except ValueError:
                continue
    for c, lab in candidates.items():
        # a half-labelled column comes back with numbers among its categories: keep the codes
        if isinstance(lab.dtype, pd.CategoricalDtype) and all(isinstance(x, str) for x in lab.cat.categories):
            raw[c] = lab.cat.as_unordered()
    return raw[cols]


# --- SPSS -----------------------------------------------------------------------------------------
def _pyreadstat():
    try:
        import pyreadstat
    except ImportError:
        raise BadInput("reading SPSS files needs pyreadstat: pip install 'gpurisk[formats]'") from None
    return pyreadstat


def read_spss(p: Path, columns=None, encoding: str = "utf-8") -> pd.DataFrame:
    """SPSS ``.sav``/``.zsav`` through pyreadstat; user-defined missing values become missing."""
    prs = _pyreadstat()
    try:
        _, meta = prs.read_sav(str(p), metadataonly=True)
    except Exception as exc:  # pyreadstat raises its own error types
        raise BadInput(f"{p}: not a readable SPSS file ({_first_line(exc)})") from None
    columns = _check_columns(p, columns, meta.column_names)
    try:
        df, meta = prs.read_sav(str(p), usecols=list(columns) if columns is not None else None,
                                apply_value_formats=False, user_missing=False)
    except Exception as exc:  # a truncated file has a readable header and too few rows
        raise BadInput(f"{p}: not a readable SPSS file ({_first_line(exc)}); truncated?") from None
    for c, labels in meta.variable_value_labels.items():
        if c in df.columns:
            df[c] = apply_labels(df[c], labels)
    return df if columns is None else df[list(columns)]


# --- SAS ------------------------------------------------------------------------------------------
def read_sas(p: Path, columns=None, encoding: str = "utf-8", chunksize: int = 200_000) -> pd.DataFrame:
    """SAS ``.sas7bdat`` or transport ``.xpt`` through pandas, read in chunks of the needed columns;
    what pandas cannot read (XPORT version 8, some compressed files) through pyreadstat when installed."""
    fmt = "xport" if p.suffix.lower() == ".xpt" else "sas7bdat"
    enc = "infer" if fmt == "sas7bdat" else encoding
    size = p.stat().st_size
    if fmt == "xport" and size % XPORT_RECORD:
        # a transport file is 80-byte records to its end; a cut one would be read short, exit 0
        raise BadInput(f"{p}: not a readable SAS xport file (truncated: {size} bytes, not a whole "
                       f"number of {XPORT_RECORD}-byte records); copy it again")
    declared = xport_check(p) if fmt == "xport" else None
    parts = []
    try:
        with pd.read_sas(p, format=fmt, encoding=enc, chunksize=chunksize) as rdr:
            expected = getattr(rdr, "row_count", None)     # sas7bdat: the header's record count
            for chunk in rdr:
                if not parts:
                    columns = _check_columns(p, columns, list(chunk.columns))
                parts.append(chunk if columns is None else chunk[list(columns)])
    except BadInput:
        raise
    except Exception as exc:  # pandas' SAS readers raise ValueError, struct.error, ...
        return _counted(p, "SAS xport" if fmt == "xport" else "SAS",
                        _read_sas_pyreadstat(p, fmt, columns, exc), declared)
    if not parts:
        raise BadInput(f"{p}: the SAS file holds no records")
    frame = pd.concat(parts, ignore_index=True)
    return _counted(p, "SAS xport" if fmt == "xport" else "SAS", frame,
                    declared if fmt == "xport" else expected)


def _counted(p: Path, what: str, frame: pd.DataFrame, declared: int | None) -> pd.DataFrame:
    """``frame``, when it holds the number of records the file's header declares (or none is
    declared); a file cut short is read by some readers as a smaller whole: refused."""
    if declared is not None and int(declared) != len(frame):
        raise BadInput(f"{p}: not a readable {what} file (truncated: its header declares "
                       f"{int(declared)} records, the file holds {len(frame)}); copy it again")
    return frame


_XPORT_HEAD = b"HEADER RECORD*******"


def xport_check(p: Path) -> int | None:
    """Check a SAS transport file's first member against its own layout; its declared number of
    records (XPORT version 8 and 9 headers carry one) or None (version 5 has none).

    A version 5 file has no record count: its records run to the end of the file, the last
    80-byte record padded with blanks. A file cut at an 80-byte boundary inside a record therefore
    ends in a partial record that is not blank padding, which is refused here; one cut exactly at
    a record boundary that is also a multiple of 80 bytes cannot be told from a whole file (the
    format holds nothing that would tell). A layout this does not recognise is left to the reader.
    """
    import mmap
    with open(p, "rb") as fh:
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):
            return None
        with mm:
            return _xport_layout(p, mm)


def _xport_layout(p: Path, mm) -> int | None:
    R = XPORT_RECORD
    size = len(mm)
    if not mm[:R].startswith(_XPORT_HEAD + b"LIB"):
        return None
    rec = lambda i: mm[i:i + R]                                     # noqa: E731

    def field(pos, tags, cols):
        """(position, integer in ``cols``) of the next header record named by one of ``tags``."""
        while pos < size and rec(pos)[20:25] not in tags:
            pos += R
        try:
            return pos, int(rec(pos)[cols])
        except ValueError:       # no such record (an empty slice), or not a number there
            return size, 0
    pos, namestr_len = field(R, (b"MEMBE", b"MEMBV"), slice(74, 78))      # MEMBER / MEMBV8
    pos, nvars = field(pos, (b"NAMES", b"NAMST"), slice(48, 58))         # NAMESTR / NAMSTV8
    if pos >= size:
        return None
    start = pos + R
    if namestr_len <= 0 or nvars <= 0 or start + nvars * namestr_len > size:
        return None
    obs_len = sum(int.from_bytes(mm[start + i * namestr_len + 4:start + i * namestr_len + 6], "big")
                  for i in range(nvars))
    pos = start + -(-nvars * namestr_len // R) * R
    while pos < size and not rec(pos).startswith(_XPORT_HEAD + b"OBS"):    # after any labels
        pos += R
    if pos >= size or obs_len <= 0:
        return None
    head, data = rec(pos), pos + R
    declared = None
    count = head[48:].strip()
    if head[20:25] == b"OBSV8" and count.isdigit():
        declared = int(count)
        if data + declared * obs_len > size:
            raise BadInput(f"{p}: not a readable SAS xport file (truncated: its header declares "
                           f"{declared} records of {obs_len} bytes, the file ends "
                           f"{data + declared * obs_len - size} bytes short); copy it again")
        return declared
    nxt = mm.find(_XPORT_HEAD + b"MEMBER  HEADER RECORD", data)     # a second member
    while nxt != -1 and (nxt - data) % R:
        nxt = mm.find(_XPORT_HEAD + b"MEMBER  HEADER RECORD", nxt + 1)
    end = size if nxt == -1 else nxt
    length = end - data
    tail = bytes(mm[max(data, end - R):end])
    blanks = len(tail) - len(tail.rstrip(b" "))
    if not any((length - m) % obs_len == 0 for m in range(0, min(blanks, R - 1) + 1)):
        whole = length // obs_len
        raise BadInput(f"{p}: not a readable SAS xport file (truncated: its data end inside a "
                       f"record, after {whole} whole records of {obs_len} bytes); copy it again")
    return None


def _read_sas_pyreadstat(p: Path, fmt: str, columns, first_error: Exception) -> pd.DataFrame:
    try:
        import pyreadstat
    except ImportError:
        raise BadInput(f"{p}: not a readable SAS {fmt} file ({_first_line(first_error)})") from None
    read = pyreadstat.read_xport if fmt == "xport" else pyreadstat.read_sas7bdat
    try:
        _, meta = read(str(p), metadataonly=True)
    except Exception:  # noqa: BLE001 - report pandas' reason, the first reader's
        raise BadInput(f"{p}: not a readable SAS {fmt} file ({_first_line(first_error)})") from None
    columns = _check_columns(p, columns, meta.column_names)
    df, _ = read(str(p), usecols=list(columns) if columns is not None else None)
    return df if columns is None else df[list(columns)]


# --- results --------------------------------------------------------------------------------------
def result_rows(doc: dict[str, Any], extra: str = "json") -> pd.DataFrame:
    """One row per measure of an assessment document: keys, n, N, π, measure, value, se, upper,
    reason, then the measures' other fields.

    ``extra="json"`` (what ``--output FILE.csv|.parquet`` writes) puts them in one column ``extra``
    holding a JSON object, so a file has the same columns whatever measures ran and files of
    different runs stack. ``extra="columns"`` (``Assessment.to_frame()``) gives one column per field
    instead, named ``extra.<field>`` (a nested field ``extra.<field>.<sub>``), empty where a measure
    has no such field; whole-number fields are nullable integers (``Int64``).
    """
    if extra not in ("json", "columns"):
        raise BadInput(f"extra={extra!r}: use 'json' or 'columns'")
    rows, fields = [], {}
    for name, m in doc["measures"].items():
        more = {k: v for k, v in m.items() if k not in ("value", "se", "upper", "reason")}
        row = {"keys": ",".join(doc["keys"]), "n": doc["n"], "N": doc["N"],
               "fraction": doc["fraction"], "measure": name, "value": m.get("value"),
               "se": m.get("se"), "upper": m.get("upper"), "reason": _reason(m.get("reason"), extra)}
        if extra == "json":
            row["extra"] = json.dumps(more, sort_keys=True, default=str)
        else:
            flat = _flatten(more, "extra.")
            for k, v in flat.items():      # a field is whole numbers when every value given is
                whole = isinstance(v, int) and not isinstance(v, bool)
                fields[k] = fields.get(k, True) and (whole or v is None)
            row.update(flat)
        rows.append(row)
    base = ["keys", "n", "N", "fraction", "measure", "value", "se", "upper", "reason"]
    df = pd.DataFrame(rows, columns=base + (["extra"] if extra == "json" else list(fields)))
    for c in ("value", "se", "upper", "fraction"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
    df["N"] = df["N"].astype("Int64")
    for c, whole in fields.items():
        if whole and df[c].notna().any():
            df[c] = df[c].astype("Int64")
    return df


def _reason(text, extra: str):
    """A file (``extra="json"``) keeps a reason's neutral form, which both the command line and
    the Python API read (:mod:`gpurisk.core.messages`); ``to_frame()`` shows it as phrased."""
    from gpurisk.core.messages import stored
    return stored(text) if extra == "json" else (None if text is None else str(text))


def _stored(doc):
    """``doc`` with every reason in its neutral form (what files keep)."""
    from gpurisk.core.messages import Reason
    if isinstance(doc, Reason):
        return doc.template
    if isinstance(doc, dict):
        return {k: _stored(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [_stored(v) for v in doc]
    return doc


def _flatten(d: dict, prefix: str) -> dict:
    """A nested document's fields as ``prefix + "a.b"``; lists stay values."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _suffix(p: Path) -> str:
    name = p.name.lower()
    for s in sorted(RESULT_SUFFIXES, key=len, reverse=True):
        if name.endswith(s):
            return s
    raise BadInput(f"output file {str(p)!r} has an unknown extension; use one of "
                   f"{', '.join(RESULT_SUFFIXES)}")


def check_output(path, inputs=()) -> tuple[Path, str]:
    """(path, kind) of a results file that can be written; BadInput for a bad extension or folder,
    an input of the run (``inputs``), a device (see :mod:`gpurisk.io.outputs`)."""
    from gpurisk.io.outputs import check_output_file
    kind = _suffix(Path(path))
    return check_output_file(path, None, "output", inputs), kind


def write_atomic(result, path) -> Path:
    """See :func:`gpurisk.io.write_results`."""
    p, kind = check_output(path)
    doc = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    from gpurisk.io.atomic import atomic_path
    try:
        with atomic_path(p) as tmp:
            if kind == ".json":
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump(_stored(doc), fh, indent=2, allow_nan=False)
                    fh.write("\n")
            elif kind in (".csv", ".csv.gz"):
                result_rows(doc).to_csv(tmp, index=False, compression="gzip" if kind == ".csv.gz" else None)
            else:
                result_rows(doc).to_parquet(tmp, index=False)
    except OSError as exc:
        raise BadInput(f"cannot write {str(p)!r}: {exc.strerror or exc}") from None
    return p


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
