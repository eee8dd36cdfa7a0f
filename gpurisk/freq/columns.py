"""The design columns of a frame, checked: the boolean sample flag of a register and the design
weights. Shared by every counting path (pandas, the device engine, Dask partitions)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput


def sample_flag_mask(frame: pd.DataFrame, col: str) -> np.ndarray:
    """The boolean sample flag of a register frame; anything but booleans (or 0/1) is bad input."""
    if col not in frame.columns:
        raise BadInput(f"sample flag column {col!r} not in the register "
                       f"(its columns: {', '.join(map(str, list(frame.columns)[:20]))})")
    s = frame[col]
    if pd.api.types.is_bool_dtype(s.dtype):
        if s.isna().any():
            raise BadInput(f"sample flag column {col!r} has {int(s.isna().sum())} missing value(s)")
        return s.to_numpy(dtype=bool)
    if s.isna().any():
        raise BadInput(f"sample flag column {col!r} has {int(s.isna().sum())} missing value(s); "
                       "it must be boolean (True/False or 1/0)")
    if pd.api.types.is_numeric_dtype(s.dtype):
        bad = ~s.isin([0, 1])
        if not bad.any():
            return s.to_numpy() == 1
    else:
        low = s.astype(str).str.strip().str.lower()
        bad = ~low.isin(["true", "false", "1", "0"])
        if not bad.any():
            return low.isin(["true", "1"]).to_numpy()
    # counts only: a value held by one record could identify it
    raise BadInput(f"sample flag column {col!r} is not boolean: {int(bad.sum())} record(s) hold "
                   f"{int(s[bad].nunique())} other value(s) (expected True/False or 1/0)")


def weight_array(frame: pd.DataFrame, col: str, mask: np.ndarray | None = None) -> np.ndarray:
    """The design weights as float64, each finite and > 0 (BadInput otherwise). With ``mask`` (a
    register's sample flag) only the sampled records' weights are checked and used: a register may
    leave the weight of a record outside the sample blank (it is set to 1 here, and never read)."""
    if col not in frame.columns:
        raise BadInput(f"weight column {col!r} not in the sample")
    s = frame[col]
    if not pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        held = "text" if pd.api.types.is_string_dtype(s.dtype) or s.dtype == object else s.dtype
        raise BadInput(f"weight column {col!r} is not numeric (it holds {held})")
    w = s.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(w) | (w <= 0)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        w = np.where(mask, w, 1.0)
        bad &= mask
    if bad.any():
        rows = np.flatnonzero(bad)[:5].tolist()
        raise BadInput(f"weight column {col!r} has {int(bad.sum())} missing, infinite or "
                       f"non-positive value(s) (first rows {rows}); weights must be > 0")
    return w
