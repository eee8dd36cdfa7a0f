"""Per-variable transition / misclassification matrices: how users give them, and their checks.

Used by PRAM (``pram:matrix=...``) and by ``theta_hat_misclass`` (option ``matrices``). A spec is a
mapping key variable -> matrix, or a path to a JSON file holding that mapping. Each matrix is

- a number p in [0, 1]: keep the value with probability p, otherwise move to one of the other
  K − 1 categories uniformly (p I + (1 − p)/(K − 1) (J − I));
- a K x K nested list (rows and columns in the table's category order: sorted values, a missing
  category last);
- ``{"categories": [...], "matrix": [[...]]}``: rows and columns labelled, put into the table's
  order here (labels compare as text, so 1 and "1" are the same category);
- a path to a CSV file: a header row of column labels (first cell empty) and one row per category,
  its label first.

Every matrix must be K x K for the variable's K categories, non-negative, with rows summing to 1
(within 1e-9). Anything else is bad input naming the variable.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import BadInput

ROW_TOL = 1e-9


def keep_matrix(p: float, K: int) -> np.ndarray:
    """p I + (1 − p)/(K − 1)(J − I); the identity when K = 1."""
    if K == 1:
        return np.ones((1, 1))
    m = np.full((K, K), (1.0 - p) / (K - 1))
    np.fill_diagonal(m, p)
    return m


def load_spec(spec: Any, who: str) -> Mapping[str, Any]:
    """The mapping key -> matrix spec from a dict, JSON text, or a path to a JSON file."""
    if isinstance(spec, Mapping):
        return spec
    if isinstance(spec, (str, Path)):
        s = str(spec).strip()
        if s.startswith("{"):
            try:
                out = json.loads(s)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{who}: matrices are not valid JSON ({exc.msg})") from None
        else:
            p = Path(s)
            if not p.exists():
                raise BadInput(f"{who}: matrix file {s!r} does not exist")
            try:
                out = json.loads(p.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise BadInput(f"{who}: {p} is not a JSON mapping of key variable -> matrix "
                               f"({exc})") from None
        if not isinstance(out, Mapping):
            raise BadInput(f"{who}: the matrices must be a JSON object key variable -> matrix")
        return out
    raise BadInput(f"{who}: matrices must be a mapping key variable -> matrix, or a JSON file")


def _labels_to_order(key: str, labels: Sequence, categories: Sequence, who: str) -> np.ndarray:
    """Position in ``labels`` of each of the table's categories."""
    lab = [str(x) for x in labels]
    cat = ["" if c is None else str(c) for c in categories]
    if len(set(lab)) != len(lab):
        raise BadInput(f"{who}: matrix of {key!r} repeats a category label")
    missing = [c for c in cat if c not in lab]
    extra = [x for x in lab if x not in cat]
    if missing or extra:
        raise BadInput(f"{who}: matrix of {key!r} does not label the variable's categories: "
                       f"missing {missing[:5]}, unknown {extra[:5]}")
    where = {x: i for i, x in enumerate(lab)}
    return np.array([where[c] for c in cat])


def _read_csv_matrix(key: str, path: Path, who: str):
    import pandas as pd
    try:
        df = pd.read_csv(path, index_col=0, dtype={0: str})
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
        raise BadInput(f"{who}: cannot read matrix file {path} for {key!r} ({exc})") from None
    return list(df.columns), [str(i) for i in df.index], df.to_numpy(dtype=np.float64)


def matrix_for(key: str, spec: Any, categories: Sequence, who: str) -> np.ndarray:
    """The K x K matrix of one key variable, in the table's category order, checked."""
    K = len(categories)
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        p = float(spec)
        if not 0.0 <= p <= 1.0:
            raise BadInput(f"{who}: keep probability {p!r} for {key!r} is outside [0, 1]")
        return keep_matrix(p, K)
    if isinstance(spec, str) and not spec.strip().startswith(("[", "{")):
        s = spec.strip()
        try:
            return matrix_for(key, float(s), categories, who)
        except ValueError:
            pass
        p = Path(s)
        if not p.exists():
            raise BadInput(f"{who}: matrix of {key!r}: {s!r} is neither a number nor a file")
        cols, rows, m = _read_csv_matrix(key, p, who)
        if [str(c) for c in cols] != rows:
            raise BadInput(f"{who}: matrix file {p} for {key!r}: the row labels differ from the "
                           "column labels")
        order = _labels_to_order(key, rows, categories, who)
        return _check(key, m[np.ix_(order, order)], K, who)
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{who}: matrix of {key!r} is not valid JSON ({exc.msg})") from None
    if isinstance(spec, Mapping):
        if "matrix" not in spec or "categories" not in spec:
            raise BadInput(f"{who}: matrix of {key!r} as a mapping needs 'categories' and 'matrix'")
        m = _as_array(key, spec["matrix"], who)
        labels = list(spec["categories"])
        if m.shape != (len(labels), len(labels)):
            raise BadInput(f"{who}: matrix of {key!r} is {m.shape[0]} x {m.shape[1]} but labels "
                           f"{len(labels)} categories")
        order = _labels_to_order(key, labels, categories, who)
        return _check(key, m[np.ix_(order, order)], K, who)
    return _check(key, _as_array(key, spec, who), K, who)


def _as_array(key, m, who) -> np.ndarray:
    try:
        a = np.asarray(m, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInput(f"{who}: matrix of {key!r} is not a numeric matrix") from None
    if a.ndim != 2:
        raise BadInput(f"{who}: matrix of {key!r} is not two-dimensional (shape {a.shape})")
    return a


def _check(key: str, m: np.ndarray, K: int, who: str) -> np.ndarray:
    if m.shape != (K, K):
        raise BadInput(f"{who}: matrix of {key!r} is {m.shape[0]} x {m.shape[1]}, but the variable "
                       f"has {K} categories")
    if not np.all(np.isfinite(m)) or (m < 0).any():
        raise BadInput(f"{who}: matrix of {key!r} has negative or non-finite entries")
    rs = m.sum(axis=1)
    bad = np.flatnonzero(np.abs(rs - 1.0) > ROW_TOL)
    if bad.size:
        raise BadInput(f"{who}: rows of the matrix of {key!r} must sum to 1; row {int(bad[0])} "
                       f"sums to {rs[bad[0]]:.12g}")
    return m


def key_matrices(spec: Any, keys: Sequence[str], categories: Sequence[Sequence], who: str
                 ) -> dict[int, np.ndarray]:
    """{key index: checked K x K matrix} for every key named in ``spec``."""
    mapping = load_spec(spec, who)
    unknown = [k for k in mapping if k not in keys]
    if unknown:
        raise BadInput(f"{who}: matrices given for {', '.join(map(repr, unknown))}, which are not "
                       f"key variables (keys: {', '.join(keys)})")
    return {keys.index(k): matrix_for(k, v, categories[keys.index(k)], who)
            for k, v in mapping.items()}


def cumulative_rows(m: np.ndarray) -> np.ndarray:
    """Row-wise cumulative sums with the last column exactly 1 (for :func:`base.sample_rows`)."""
    c = np.cumsum(m, axis=1)
    c /= c[:, -1:]
    c[:, -1] = 1.0
    return c
