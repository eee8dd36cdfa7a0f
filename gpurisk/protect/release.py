"""Writing the protected release of ``protect``, and the plan that reproduces it.

The release is the input with each generalised key's values replaced by their group at the chosen
node (a key left at level 0 and every other column are untouched: a CSV is read as text and written
back as text, with its separator; Parquet keeps its column types; Stata ``.dta`` and SPSS ``.sav``
keep their codes, variable labels and the value labels of the columns left as they were), written
atomically in the input's format. SAS files (``.sas7bdat``, ``.xpt``) have no writer here: their
release is written as Parquet or CSV, as ``--output`` names it. Each record's group comes from the
counted table (the record's cell, its codes, the level's map), so the release holds exactly the
groups that were counted.

A value set missing by local suppression is told apart from a value that was missing before: for
each key with a suppressed value the release gets a column ``KEY_suppressed`` (1 where gpurisk
suppressed the value, 0 elsewhere; in Stata, whose names are at most 32 characters, the key's name
is cut to leave room for the suffix).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.freq.table import FreqTable
from gpurisk.io.atomic import atomic_path, check_output_file
from gpurisk.io.provenance import sha256_file  # noqa: F401  (re-exported for protect.workflow)
from gpurisk.protect.hierarchy import KeyLevels
from gpurisk.xp import to_host

CSV_SUFFIXES = (".csv", ".csv.gz", ".txt", ".tsv", ".tab", ".dat")
PARQUET_SUFFIXES = (".parquet", ".pq")
STATA_SUFFIXES = (".dta",)
SPSS_SUFFIXES = (".sav", ".zsav")
SAS_SUFFIXES = (".sas7bdat", ".xpt")
FLAG_SUFFIX = "_suppressed"


def input_format(data, sep: str | None, encoding: str) -> dict:
    """How the input is stored: {"format": "csv", "sep", "compression"} or {"format": "parquet"};
    ``{"format": "frame"}`` for an in-memory frame."""
    if not isinstance(data, (str, Path)):
        return {"format": "frame"}
    from gpurisk.io import detect_separator, is_parquet, resolve_path
    p = resolve_path(data)
    if is_parquet(p):
        if p.is_dir():
            raise BadInput(f"{p}: protect writes one file; give a single Parquet file, not a folder")
        return {"format": "parquet"}
    name = p.name.lower()
    for fmt, suffixes in (("stata", STATA_SUFFIXES), ("spss", SPSS_SUFFIXES), ("sas", SAS_SUFFIXES)):
        if name.endswith(suffixes):
            return {"format": fmt}
    if not name.endswith(CSV_SUFFIXES):
        raise BadInput(f"{p.name}: protect reads CSV, Parquet, Stata .dta, SPSS .sav and SAS "
                       "files; this name ends in none of their suffixes")
    return {"format": "csv", "sep": sep or detect_separator(p, encoding),
            "compression": "gzip" if name.endswith(".gz") else None}


def _pyreadstat():
    try:
        import pyreadstat
    except ImportError:
        raise BadInput("protect on Stata and SPSS files needs pyreadstat: "
                       "pip install 'gpurisk[formats]'") from None
    return pyreadstat


def check_release_output(output, fmt: dict, inputs=()) -> Path:
    """The release's path, checked before any work: writable, not one of ``inputs``, and named for
    the input's format."""
    if fmt["format"] == "parquet":
        return check_output_file(output, PARQUET_SUFFIXES, "{arg:--output|output}", inputs)
    if fmt["format"] == "stata":
        return check_output_file(output, STATA_SUFFIXES, "{arg:--output|output}", inputs)
    if fmt["format"] == "spss":
        return check_output_file(output, SPSS_SUFFIXES, "{arg:--output|output}", inputs)
    if fmt["format"] == "csv":
        suffixes = (".csv.gz", ".gz") if fmt["compression"] else CSV_SUFFIXES
        return check_output_file(output, suffixes, "{arg:--output|output}", inputs)
    return check_output_file(output, CSV_SUFFIXES + PARQUET_SUFFIXES, "{arg:--output|output}", inputs)


def record_groups(root: FreqTable, keys: Sequence[KeyLevels], node: Mapping[str, int]
                  ) -> dict[str, np.ndarray]:
    """Per generalised key (level > 0), each record's group label at the node (object array, None
    for a missing value), in record order."""
    cell = to_host(root.record_cell())
    codes = root.cell_codes()
    out = {}
    for v, kl in enumerate(keys):
        lev = int(node.get(kl.key, 0))
        if lev == 0:
            continue
        labels = np.array(kl.cats[lev] + [None], dtype=object)[:-1]
        out[kl.key] = labels[kl.luts[lev][to_host(codes[v]).astype(np.int64)[cell]]]
    return out


def read_raw(data, fmt: dict, encoding: str) -> pd.DataFrame:
    """The whole input: a CSV as text (every column a string, nothing parsed), Parquet as stored,
    Stata and SPSS as their codes (their labels kept in ``frame.attrs["meta"]`` for the writer),
    SAS as pandas reads it."""
    if fmt["format"] == "frame":
        return data.copy()
    from gpurisk.io import resolve_path
    p = resolve_path(data)
    if fmt["format"] == "parquet":
        return pd.read_parquet(p)
    if fmt["format"] in ("stata", "spss"):
        prs = _pyreadstat()
        read = prs.read_dta if fmt["format"] == "stata" else prs.read_sav
        try:
            frame, meta = read(str(p))
        except Exception as exc:  # pyreadstat's own error types
            raise BadInput(f"{p.name}: cannot read it again to write the release "
                           f"({type(exc).__name__})") from None
        frame.attrs["meta"] = meta
        return frame
    if fmt["format"] == "sas":
        from gpurisk.io.formats import read_sas
        return read_sas(p)
    return pd.read_csv(p, sep=fmt["sep"], dtype=str, keep_default_na=False, na_filter=False,
                       encoding=encoding, compression=fmt["compression"])


def released_frame(raw: pd.DataFrame, groups: Mapping[str, np.ndarray], fmt: dict,
                   suppressed: np.ndarray | None = None, keys: Sequence[str] = (),
                   perturbed: Mapping | None = None) -> pd.DataFrame:
    """``raw`` with the generalised keys' groups, and the ``suppressed`` values missing (an empty
    field in a CSV): a records bool array suppresses every key of those records, a records × keys
    array the values it marks."""
    out = raw.copy()
    for key, labels in groups.items():
        if len(labels) != len(out):
            raise BadInput(f"the data has {len(out)} rows but {len(labels)} records were counted")
        if fmt["format"] == "csv":
            out[key] = pd.array([("" if g is None else str(g)) for g in labels], dtype=object)
        else:
            out[key] = pd.Series(labels, index=out.index, dtype=object)
    for key, (rows, labels) in (perturbed or {}).items():
        col = out[key].astype(object)
        idx = out.index[rows]
        if fmt["format"] == "csv":
            col.loc[idx] = ["" if g is None else str(g) for g in labels]
        else:
            col.loc[idx] = list(labels)
        out[key] = col
    if suppressed is not None and suppressed.any():
        if len(suppressed) != len(out):
            raise BadInput(f"the data has {len(out)} rows but {len(suppressed)} records were counted")
        for v, key in enumerate(keys):
            marked = suppressed if suppressed.ndim == 1 else suppressed[:, v]
            rows = out.index[marked]
            if not len(rows):
                continue
            if fmt["format"] == "csv":
                out[key] = out[key].astype(object)
                out.loc[rows, key] = ""
            elif fmt["format"] in ("stata", "spss") and pd.api.types.is_numeric_dtype(out[key]):
                out[key] = out[key].astype("float64")
                out.loc[rows, key] = np.nan
            else:
                out[key] = out[key].astype(object)
                out.loc[rows, key] = None
            flag = flag_name(key, out.columns, fmt)
            out.attrs.setdefault("flags", {})[flag] = key
            out[flag] = (pd.array(np.where(marked, "1", "0"), dtype=object) if fmt["format"] == "csv"
                         else marked.astype(np.int8))
    return out


def flag_name(key: str, columns, fmt: dict) -> str:
    """The column that marks ``key``'s suppressed values: ``KEY_suppressed`` (Stata: cut to 32
    characters), with a number added if the input already has a column of that name."""
    base = key[:32 - len(FLAG_SUFFIX)] if fmt["format"] == "stata" else key
    name, i = base + FLAG_SUFFIX, 2
    while name in columns:
        name, i = f"{base}{FLAG_SUFFIX}{i}", i + 1
    return name


def write_release(frame: pd.DataFrame, output, fmt: dict, encoding: str = "utf-8") -> Path:
    """``frame`` written atomically in the input's format; the same frame always gives the same
    bytes (a gzip member carries no name and time 0)."""
    import gzip
    p = Path(output)
    name = p.name.lower()
    with atomic_path(p) as tmp:
        if fmt["format"] in ("stata", "spss"):
            _write_labelled(frame, tmp, fmt)
        elif fmt["format"] == "parquet" or (fmt["format"] in ("frame", "sas")
                                            and name.endswith(PARQUET_SUFFIXES)):
            frame.to_parquet(tmp, index=False)
        else:
            buf = frame.to_csv(sep=fmt.get("sep") or ",", index=False)   # a str, in memory
            data = buf.encode(encoding)
            if name.endswith(".gz"):
                data = gzip.compress(data, mtime=0)
            Path(tmp).write_bytes(data)
    return p


def _write_labelled(frame: pd.DataFrame, tmp, fmt: dict) -> None:
    """Stata or SPSS through pyreadstat, with the input's variable labels and the value labels of
    the columns whose codes were kept (a generalised key holds its groups' names instead)."""
    prs = _pyreadstat()
    meta = frame.attrs.get("meta")
    data = frame.copy()
    data.attrs = {}
    kept_codes = [c for c in data.columns if pd.api.types.is_numeric_dtype(data[c])]
    labels = dict(zip(getattr(meta, "column_names", []), getattr(meta, "column_labels", []) or []))
    value_labels = {c: v for c, v in (getattr(meta, "variable_value_labels", None) or {}).items()
                    if c in kept_codes}
    flags = frame.attrs.get("flags", {})
    column_labels = [labels.get(c) or (f"1 = the value of {flags[c]} was suppressed by gpurisk"
                                       if c in flags else "") for c in data.columns]
    for c in data.columns:      # text columns: None for missing, as pyreadstat writes them
        if data[c].dtype == object:
            missing = data[c].isna().to_numpy()
            text = data[c].astype(str).to_numpy(dtype=object)
            text[missing] = None
            data[c] = text
    if fmt["format"] == "stata":
        prs.write_dta(data, str(tmp), column_labels=column_labels,
                      variable_value_labels=value_labels or None)
    else:
        prs.write_sav(data, str(tmp), column_labels=column_labels,
                      variable_value_labels=value_labels or None)
