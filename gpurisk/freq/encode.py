"""Encode key columns to dense integer codes, aligned between a sample and its population.

Each key column becomes codes 0..c-1 over its sorted categories (the union of the categories seen
in the sample and in the population). A missing value is its own category, the last one, unless
``missing="error"``. Integer columns with a modest range are encoded without hashing (offset and
compaction by ``bincount``); other columns are factorised by pandas' hash tables.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input

#: integer columns whose value range is at most this are encoded by offset + bincount
DENSE_RANGE_LIMIT = 1 << 24
#: integer columns whose value range is at most this keep every integer of the range as a category
#: (one min/max pass, no compaction); values that never occur are empty categories, which form no
#: cells and change no count
SMALL_RANGE = 1 << 10
MISSING_POLICIES = ("category", "error")


@dataclass
class EncodedKey:
    name: str
    categories: list        # labels, sorted; a trailing None stands for the missing category
    has_missing: bool
    sample: np.ndarray      # codes of the sample records
    population: np.ndarray | None

    @property
    def cardinality(self) -> int:
        return len(self.categories)


def _smallest_int(card: int):
    for dt in (np.int8, np.int16, np.int32):
        if card <= np.iinfo(dt).max:
            return dt
    return np.int64


def _series_parts(s: pd.Series):
    """(values, na_mask, kind) where kind is 'int' for integral values, else 'obj'."""
    dt = s.dtype
    if isinstance(dt, pd.CategoricalDtype):
        return s, None, "cat"
    if pd.api.types.is_bool_dtype(dt) and not pd.api.types.is_extension_array_dtype(dt):
        return s.to_numpy().astype(np.int64), None, "int"
    if pd.api.types.is_integer_dtype(dt):
        if pd.api.types.is_unsigned_integer_dtype(dt) and _beyond_int64(s):
            return s, None, "obj"       # uint64 >= 2**63: hashed as they are (exact, no overflow)
        if pd.api.types.is_extension_array_dtype(dt):
            na = s.isna().to_numpy()
            vals = s.to_numpy(dtype=np.int64, na_value=0)
            return vals, (na if na.any() else None), "int"
        return s.to_numpy(), None, "int"
    if pd.api.types.is_float_dtype(dt):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        na = np.isnan(vals)
        finite = vals[~na]
        if finite.size == 0 or (np.all(np.isfinite(finite)) and np.all(finite == np.round(finite))
                                and np.abs(finite).max() < 2**53):
            return np.where(na, 0, vals).astype(np.int64), (na if na.any() else None), "int"
        return s, None, "obj"
    return s, None, "obj"


def _beyond_int64(s: pd.Series) -> bool:
    """An unsigned column holding a value int64 cannot hold."""
    if len(s) == 0:
        return False
    m = s.max()
    return m is not pd.NA and not pd.isna(m) and int(m) > np.iinfo(np.int64).max


#: pandas' names (``infer_dtype``) of object columns holding values of several Python types that
#: compare or hash equal across types (True == 1 == 1.0), or cannot be ordered ("1" and 1)
MIXED_KINDS = ("mixed", "mixed-integer")


def check_value_types(name, s) -> None:
    """Refuse an object column whose values are of several kinds (bool with numbers, text with
    numbers, bytes with text): ``True``, ``1`` and ``1.0`` would silently be one category. Ints
    with floats are numbers and compare by value; text, dates, numbers alone pass. One C pass."""
    if not isinstance(s, pd.Series) or s.dtype != object:
        return
    kind = pd.api.types.infer_dtype(s, skipna=True)
    if kind in MIXED_KINDS:
        types = sorted({t.__name__ for t in pd.unique(s.dropna().map(type))})
        raise BadInput(f"key column {name!r} mixes value types ({', '.join(types)}); "
                       "convert it to one type")


def _check_missing(name: str, na: np.ndarray | None, missing: str, where: str) -> None:
    if missing == "error" and na is not None and na.any():
        rows = np.flatnonzero(na)[:5].tolist()
        what = f"key column {name!r} has {int(na.sum())} missing value(s) in {where} (first rows {rows})"
        raise BadInput(f"{what}; use missing='category' to treat them as a category",
                       cli=f"{what}; use --missing category to treat them as a category")


def _encode_int(name, parts, missing):
    """Offset + bincount encoding of integral columns with a modest range."""
    lo = min(int(v[~na].min()) if na is not None and (~na).any() else int(v.min())
             for v, na in parts if v.size and (na is None or (~na).any()))
    hi = max(int(v[~na].max()) if na is not None and (~na).any() else int(v.max())
             for v, na in parts if v.size and (na is None or (~na).any()))
    span = hi - lo + 1
    if span > DENSE_RANGE_LIMIT:
        return None
    any_na = any(na is not None and na.any() for _, na in parts)
    if span <= SMALL_RANGE:
        out = []
        for v, na in parts:
            if lo and v.dtype == np.int8 and span > 128:  # v - lo would wrap around in int8
                v = v.astype(np.int16)
            if v.dtype.kind == "u":  # unsigned codes would turn the int64 cell ids into floats
                v = v.astype(np.int64)
            codes = v if lo == 0 else v - lo
            if na is not None and na.any():
                codes = np.where(na, span, codes)
            out.append(codes)
        return list(range(lo, hi + 1)) + ([None] if any_na else []), any_na, out
    present = np.zeros(span, dtype=bool)
    for v, na in parts:
        vv = v if na is None else v[~na]
        if vv.size:
            present |= np.bincount(np.subtract(vv, lo, dtype=np.int64) if lo else vv,
                                   minlength=span).astype(bool)
    ncat = int(present.sum())
    card = ncat + (1 if any_na else 0)
    dt = _smallest_int(card)
    identity = lo == 0 and ncat == span
    remap = None if identity else (np.cumsum(present) - 1).astype(dt)
    out = []
    for v, na in parts:
        if identity:
            codes = v.astype(dt, copy=False) if v.dtype != dt else v
        else:
            idx = np.subtract(v, lo, dtype=np.int64) if lo else v  # no wrap-around in int8/int16
            if na is not None:
                idx = np.where(na, 0, idx)
            codes = remap[idx]
        if na is not None and na.any():
            codes = np.where(na, dt(ncat), codes).astype(dt, copy=False)
        out.append(codes)
    cats = (np.flatnonzero(present) + lo).tolist() + ([None] if any_na else [])
    return cats, any_na, out


def _encode_hash(name, series_list, missing):
    """Hash factorisation for text, categorical and wide-range columns."""
    uniq_parts = []
    for s in series_list:
        check_value_types(name, s)
        u = pd.unique(s.to_numpy(dtype=object) if isinstance(s.dtype, pd.CategoricalDtype) else s)
        uniq_parts.append(pd.Index(u))
    allu = uniq_parts[0]
    for u in uniq_parts[1:]:
        allu = allu.append(u)
    allu = allu.unique()
    na_mask = pd.isna(allu)
    labels = allu[~na_mask]
    any_na = bool(na_mask.any())
    try:
        labels = labels.sort_values()
    except TypeError:
        kinds = sorted({type(x).__name__ for x in labels})
        raise BadInput(f"key column {name!r} mixes value types ({', '.join(kinds)}); "
                       "convert it to one type") from None
    index = pd.Index(labels)
    ncat = len(index)
    card = ncat + (1 if any_na else 0)
    dt = _smallest_int(card)
    out = []
    for s in series_list:
        codes = index.get_indexer(s.to_numpy(dtype=object) if isinstance(s.dtype, pd.CategoricalDtype) else s)
        if any_na:
            codes = np.where(codes < 0, ncat, codes)
        out.append(codes.astype(dt))
    return list(labels) + ([None] if any_na else []), any_na, out


def encode_keys(sample: pd.DataFrame, keys: list[str], population: pd.DataFrame | None = None,
                missing: str = "category") -> list[EncodedKey]:
    """Encode each key of ``sample`` (and ``population``, with the same categories)."""
    if missing not in MISSING_POLICIES:
        raise BadInput(f"missing={missing!r} is not one of {', '.join(MISSING_POLICIES)}")
    check_keys(sample, keys, "the sample")
    if population is not None:
        check_keys(population, keys, "the population")
    result = []
    for key in keys:
        series = [sample[key]] + ([population[key]] if population is not None else [])
        parts = [_series_parts(s) for s in series]
        for (v, na, kind), where, s in zip(parts, ("the sample", "the population"), series):
            na_check = na if kind == "int" else (s.isna().to_numpy() if missing == "error" else None)
            _check_missing(key, na_check, missing, where)
        enc = None
        if all(kind == "int" for _, _, kind in parts):
            if all(v.size == 0 or (na is not None and na.all()) for v, na, _ in parts):
                enc = None
            else:
                enc = _encode_int(key, [(v, na) for v, na, _ in parts], missing)
        if enc is None:
            enc = _encode_hash(key, series, missing)
        cats, any_na, codes = enc
        result.append(EncodedKey(key, cats, any_na, codes[0], codes[1] if len(codes) > 1 else None))
    return result


def check_keys(frame, keys, where: str) -> None:
    if not keys:
        raise bad_input("no key variables given ({arg:--keys a,b,c|keys=['a', 'b', 'c']})")
    dup = sorted({k for k in keys if list(keys).count(k) > 1})
    if dup:
        raise bad_input(f"key column(s) {', '.join(map(repr, dup))} named more than once in {{arg:--keys|keys}}")
    cols = list(frame.columns)
    missing = [k for k in keys if k not in cols]
    if missing:
        shown = ", ".join(map(str, cols[:20])) + (" ..." if len(cols) > 20 else "")
        raise BadInput(f"key column(s) {', '.join(map(repr, missing))} not in {where} "
                       f"(its columns: {shown})")
    dupcols = sorted({c for c in cols if cols.count(c) > 1} & set(keys))
    if dupcols:
        raise BadInput(f"column name(s) {', '.join(map(repr, dupcols))} appear more than once in {where}")
