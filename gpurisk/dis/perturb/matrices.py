"""Per-variable transition / misclassification matrices: how users give them, and their checks.

Used by PRAM (``pram:matrix=...``) and by ``theta_hat_misclass`` (option ``matrices``). A spec is a
mapping key variable -> matrix, or a path to a JSON file holding that mapping. Each matrix is

- a number p in [0, 1]: keep the value with probability p, otherwise move to one of the other
  K − 1 categories uniformly (p I + (1 − p)/(K − 1) (J − I));
- a square nested list, rows and columns in the table's category order (sorted values, a missing
  category last), over all K categories of the key or over the categories that occur in the file
  (integer keys with a small range have every integer of the range as a category, some empty);
- ``{"categories": [...], "matrix": [[...]]}``: rows and columns labelled, put into the table's
  order here (labels compare as text, so 1 and "1" are the same category); every category that
  occurs in the file needs a label;
- a path to a CSV file: a header row of column labels (first cell empty) and one row per category,
  its label first; labelled like the mapping.

Every matrix must be square, non-negative, with rows summing to 1 (within 1e-9). Categories without
records get identity rows (never used). Anything else is bad input naming the variable.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from gpurisk.errors import BadInput

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


def _read_csv_matrix(key: str, path: Path, who: str):
    import pandas as pd
    try:
        df = pd.read_csv(path, index_col=0, dtype={0: str})
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
        raise BadInput(f"{who}: cannot read matrix file {path} for {key!r} ({exc})") from None
    cols, rows = [str(c) for c in df.columns], [str(i) for i in df.index]
    if cols != rows:
        raise BadInput(f"{who}: matrix file {path} for {key!r}: the row labels differ from the "
                       "column labels")
    try:
        return rows, df.to_numpy(dtype=np.float64)
    except ValueError:
        raise BadInput(f"{who}: matrix file {path} for {key!r} holds non-numeric entries") from None


def _as_array(key, m, who) -> np.ndarray:
    try:
        a = np.asarray(m, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadInput(f"{who}: matrix of {key!r} is not a numeric matrix") from None
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise BadInput(f"{who}: matrix of {key!r} is not square (shape {a.shape})")
    return a


def _check_stochastic(key: str, m: np.ndarray, who: str) -> np.ndarray:
    if not np.all(np.isfinite(m)) or (m < 0).any():
        raise BadInput(f"{who}: matrix of {key!r} has negative or non-finite entries")
    rs = m.sum(axis=1)
    bad = np.flatnonzero(np.abs(rs - 1.0) > ROW_TOL)
    if bad.size:
        raise BadInput(f"{who}: rows of the matrix of {key!r} must sum to 1; row {int(bad[0])} "
                       f"sums to {rs[bad[0]]:.12g}")
    return m


def _embed(m: np.ndarray, pos: np.ndarray, K: int) -> np.ndarray:
    """A K x K matrix with ``m`` on the rows/columns ``pos`` and identity rows elsewhere (those
    categories hold no record, so their rows are never used)."""
    out = np.eye(K)
    out[pos, :] = 0.0
    out[np.ix_(pos, pos)] = m
    return out


def _labelled(key, labels, m, categories, present, who, allow_outside, counts=None) -> np.ndarray:
    """Put a labelled matrix into the table's category order (labels compare as text). A category
    that ``counts`` shows held by one record is withheld from the message (issue 20)."""
    lab = [str(x) for x in labels]
    if len(set(lab)) != len(lab):
        raise BadInput(f"{who}: matrix of {key!r} repeats a category label")
    cat = ["" if c is None else str(c) for c in categories]
    where = {c: i for i, c in enumerate(cat)}
    labelled = set(lab)
    unlabelled = [("<withheld: a value of 1 record>" if counts is not None and counts[i] == 1 else c)
                  for i, (c, ok) in enumerate(zip(cat, present)) if ok and c not in labelled]
    if unlabelled:
        raise BadInput(f"{who}: matrix of {key!r} does not label {len(unlabelled)} categories "
                       f"that occur in the file, e.g. {unlabelled[:5]}")
    inside = np.array([x in where for x in lab])
    outside = [x for x in lab if x not in where]
    if outside and not allow_outside:
        raise BadInput(f"{who}: matrix of {key!r} labels {outside[:5]}, which are not categories "
                       "of the variable in this file")
    pos = np.array([where[x] for x in lab if x in where], dtype=np.int64)
    # mass moving to labels outside the file's categories matches nobody: it is dropped
    return _embed(m[np.ix_(inside, inside)], pos, len(cat))


def matrix_for(key: str, spec: Any, categories: Sequence, who: str, present=None,
               allow_outside: bool = False) -> np.ndarray:
    """The K x K matrix of one key variable, in the table's category order, checked.

    ``present`` marks the categories that occur in the file (default: all), or counts the records
    of each (then a category held by one record is never named in a message). Integer keys may carry
    empty categories (every integer of a small range is a category): a keep probability spreads
    over the other *present* categories, an unlabelled matrix may be given over the present
    categories only, and a labelled one needs labels for the present categories only.
    ``allow_outside`` lets a labelled matrix move mass to labels that are not categories of the
    file (a misclassified value that matches nobody); PRAM cannot.
    """
    K = len(categories)
    counts = None if present is None or np.asarray(present).dtype == bool else np.asarray(present)
    present = np.ones(K, bool) if present is None else np.asarray(present) > 0
    pos = np.flatnonzero(present)
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        p = float(spec)
        if not 0.0 <= p <= 1.0:
            raise BadInput(f"{who}: keep probability {p!r} for {key!r} is outside [0, 1]")
        return _embed(keep_matrix(p, pos.size), pos, K) if pos.size else np.eye(K)
    if isinstance(spec, str) and not spec.strip().startswith(("[", "{")):
        s = spec.strip()
        try:
            return matrix_for(key, float(s), categories, who, present, allow_outside)
        except ValueError:
            pass
        p = Path(s)
        if not p.exists():
            raise BadInput(f"{who}: matrix of {key!r}: {s!r} is neither a number nor a file")
        labels, m = _read_csv_matrix(key, p, who)
        m = _check_stochastic(key, _as_array(key, m, who), who)
        return _labelled(key, labels, m, categories, present, who, allow_outside, counts)
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{who}: matrix of {key!r} is not valid JSON ({exc.msg})") from None
    if isinstance(spec, Mapping):
        if "matrix" not in spec or "categories" not in spec:
            raise BadInput(f"{who}: matrix of {key!r} as a mapping needs 'categories' and 'matrix'")
        m = _check_stochastic(key, _as_array(key, spec["matrix"], who), who)
        labels = list(spec["categories"])
        if m.shape[0] != len(labels):
            raise BadInput(f"{who}: matrix of {key!r} is {m.shape[0]} x {m.shape[1]} but labels "
                           f"{len(labels)} categories")
        return _labelled(key, labels, m, categories, present, who, allow_outside, counts)
    m = _check_stochastic(key, _as_array(key, spec, who), who)
    if m.shape[0] == K:
        return m
    if m.shape[0] == pos.size:
        return _embed(m, pos, K)
    in_file = f"{pos.size} categories in the file" + (f" ({K} in its code range)" if pos.size != K else "")
    raise BadInput(f"{who}: matrix of {key!r} is {m.shape[0]} x {m.shape[1]}, but the variable has "
                   f"{in_file}")


def key_matrices(spec: Any, keys: Sequence[str], categories: Sequence[Sequence], who: str,
                 present: Sequence | None = None, allow_outside: bool = False
                 ) -> dict[int, np.ndarray]:
    """{key index: checked K x K matrix} for every key named in ``spec``; ``present[v]`` marks the
    categories of key v that occur in the file."""
    mapping = load_spec(spec, who)
    unknown = [k for k in mapping if k not in keys]
    if unknown:
        raise BadInput(f"{who}: matrices given for {', '.join(map(repr, unknown))}, which are not "
                       f"key variables (keys: {', '.join(keys)})")
    out = {}
    for k, v in mapping.items():
        i = keys.index(k)
        out[i] = matrix_for(k, v, categories[i], who, None if present is None else present[i],
                            allow_outside)
    return out


def cumulative_rows(m: np.ndarray) -> np.ndarray:
    """Row-wise cumulative sums with the last column exactly 1 (for :func:`base.sample_rows`)."""
    c = np.cumsum(m, axis=1)
    c /= c[:, -1:]
    c[:, -1] = 1.0
    return c
