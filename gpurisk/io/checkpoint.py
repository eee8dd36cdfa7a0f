"""Checkpoints that let long runs resume: one fingerprint and one checked reader for every command
that keeps state on disk (``validate --resume``, ``dis --state``; a scan's ``_scan.json`` compares
its settings field by field, so that its message can name the one that differs).

A fingerprint hashes the run's settings (JSON, sorted keys) and the integer arrays it depends on (the
population's counts, the records' codes), so a file written for other data or settings is refused,
never silently mixed with a new run.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from gpurisk.core.messages import bad_input


def fingerprint(settings: Mapping, arrays: Iterable = (), named: Mapping | None = None) -> str:
    """sha256 of ``settings`` and the int64 bytes of ``arrays``, then of each of ``named`` (in name
    order, each name before its array)."""
    h = hashlib.sha256(json.dumps(dict(settings), sort_keys=True, default=str).encode())
    for a in arrays:
        h.update(_int64_view(a))
    for name in sorted(named or {}):
        h.update(str(name).encode())
        h.update(_int64_view(named[name]))
    return h.hexdigest()


def _int64_view(a) -> memoryview:
    """The int64 bytes of ``a`` without a copy when it already is contiguous int64 (hashlib reads
    the buffer: a register's 20 M-cell arrays are not copied to be hashed)."""
    return memoryview(np.ascontiguousarray(np.asarray(a), dtype=np.int64)).cast("B")


def load_checked(path, fp: str, *, unreadable: str, mismatch: str) -> dict:
    """The JSON document at ``path`` whose ``fingerprint`` is ``fp``; one-line BadInput otherwise:
    ``unreadable`` (followed by the reason) or ``mismatch``."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise bad_input(f"{unreadable} ({exc})") from None
    if not isinstance(doc, dict) or doc.get("fingerprint") != fp:
        raise bad_input(mismatch)
    return doc
