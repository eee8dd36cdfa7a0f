"""The conformance kit's tools: running a measure as the runner does, synthetic data, the checks
of one returned value, and a real-process CLI runner. The checks are in :mod:`gpurisk.testing.checks`."""
from __future__ import annotations

import json
import logging
import math
import os
import re
import warnings
from contextlib import contextmanager
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from gpurisk.freq.engine import build_table
from gpurisk.measure import Context, Measure, Result

#: backends compared by :func:`check_backends_agree` (pandas is the reference); "strict" is the
#: GPU stand-in of :mod:`gpurisk.testing.strict`, which needs no GPU
BACKENDS = ("pandas", "strict", "dask", "cudf", "dask-cudf")
#: the non-key column of the kit's synthetic data that column options are pointed at by default:
#: consecutive records share a value in runs of 1 to 4 (a household id, or a sensitive variable)
EXTRA_COLUMN = "extra"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
LEVELS = ("file", "record")
READS = ("summary", "buckets", "cells")


# --- running a measure -------------------------------------------------------------------------
def run_measure(cls: type[Measure], table, ctx: Context) -> Result:
    """The measure's answer as :func:`gpurisk.run_measures` would give it, without the registry.

    Unlike ``run_measures`` an exception other than :class:`BadInput` propagates (a test should see it).
    """
    from gpurisk.core.evaluate import evaluate
    with warnings.catch_warnings():  # assess() turns a measure's warnings into notes; so does the kit
        warnings.simplefilter("ignore")
        return evaluate(cls, table, ctx, isolate=False, check=False)


def _default_options(cls: type[Measure], options: Mapping[str, Any] | None) -> dict[str, Any]:
    opts = dict(options or {})
    for o in cls.column_options:
        if opts.get(o, cls.options.get(o)) is None:
            opts[o] = EXTRA_COLUMN
    return opts


def _columns(cls, frame: pd.DataFrame, opts: Mapping[str, Any], mask=None) -> dict[str, np.ndarray]:
    out = {}
    for o in cls.column_options:
        col = opts.get(o, cls.options.get(o))
        if col is not None and str(col) in frame.columns:
            s = frame[str(col)]
            out[str(col)] = (s[mask] if mask is not None else s).to_numpy()
    return out


@contextmanager
def in_process_cluster(backend: str):
    """While a Dask backend counts for the kit, a threads-only local cluster (``processes=False``)
    unless a scheduler is named (``GPURISK_SCHEDULER``, ``config.scheduler``) or a client is running.

    A process-based cluster spawns workers that re-import the caller's main module: a plain script
    calling :func:`check_measure` at top level (no ``if __name__ == "__main__":``) would run again in
    each of them, and their nannies fail to start. The same counting code runs on threads."""
    from gpurisk import backends
    if not backends.get_backend(backend).distributed or os.environ.get(backends.ENV_SCHEDULER) \
            or backends.config.scheduler:
        yield
        return
    try:
        from distributed import Client, LocalCluster, default_client
    except ImportError:           # the backend reports itself unsupported
        yield
        return
    try:
        running = default_client().status == "running"
    except ValueError:
        running = False
    if running:
        yield
        return
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0",
                      silence_logs=logging.CRITICAL) as cluster, Client(cluster):
        yield


# --- synthetic data ------------------------------------------------------------------------------
def synthetic_register(n: int = 3000, sample_share: float = 0.2, seed: int = 0) -> pd.DataFrame:
    """A register of ``n`` people: keys ``k1`` (int), ``k2`` (text), ``k3`` (int with missing values),
    a boolean ``in_sample`` (about ``sample_share`` of rows), design weight ``w`` (1/``sample_share``),
    and :data:`EXTRA_COLUMN` (runs of 1-4 consecutive records share a value)."""
    rng = np.random.default_rng(seed)
    k3 = rng.integers(0, 6, n).astype(float)
    k3[rng.random(n) < 0.03] = np.nan
    runs = np.repeat(np.arange(n), rng.integers(1, 5, n))[:n]
    return pd.DataFrame({
        "k1": rng.zipf(1.6, n).clip(max=40),
        "k2": rng.choice(np.array(["a", "b", "c", "d"]), n, p=[0.5, 0.3, 0.15, 0.05]),
        "k3": k3,
        "in_sample": rng.random(n) < sample_share,
        "w": np.full(n, 1.0 / sample_share),
        EXTRA_COLUMN: runs,
    })


def table_from_counts(f: Iterable[int], F: Iterable[int] | None = None, backend: str | None = None):
    """``(table, sample_frame, register_frame)`` whose cells have sample counts ``f`` (and population
    counts ``F``, sample weights summing to ``F`` per cell), built by :func:`gpurisk.build_table`.

    The key is ``k``; ``w`` is the weight; :data:`EXTRA_COLUMN` cycles through 0, 1, 2 within cells.
    """
    f = np.asarray(list(f), dtype=np.int64)
    F = f.copy() if F is None else np.asarray(list(F), dtype=np.int64)
    if f.shape != F.shape or (f < 0).any() or (F < f).any():
        raise ValueError("need 0 <= f_j <= F_j for every cell")
    cell = np.repeat(np.arange(F.size), F)
    within = np.concatenate([np.arange(x) for x in F]) if F.size else np.zeros(0, np.int64)
    flag = within < np.repeat(f, F)
    w = np.where(flag, np.repeat(F / np.maximum(f, 1), F), 1.0)
    reg = pd.DataFrame({"k": cell, "in_sample": flag, "w": w, EXTRA_COLUMN: within % 3})
    table = build_table(reg, ["k"], sample_flag="in_sample", weights="w", backend=backend)
    return table, reg[flag].reset_index(drop=True), reg


def result_problems(res: Any) -> list[str]:
    """What is wrong with one returned value (empty when it is a well-formed Result)."""
    if not isinstance(res, Result):
        return [f"returned {type(res).__name__}, not a gpurisk.Result"]
    out = []
    has_reason = isinstance(res.reason, str) and bool(res.reason.strip())
    if res.reason is not None and not has_reason:
        out.append(f"reason {res.reason!r} is not a non-empty text")
    v = res.value
    if v is None or (isinstance(v, (float, np.floating)) and math.isnan(v)):
        if not has_reason:
            out.append("value is None/NaN without a reason")
    else:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            out.append(f"value {v!r} is not a number")
        elif not math.isfinite(float(v)):
            out.append(f"value {v!r} is not finite")
        if has_reason:
            out.append(f"value {v!r} comes with a reason ({res.reason!r}); a reason means no value")
    for attr in ("se", "upper"):
        x = getattr(res, attr)
        if x is not None and not (isinstance(x, (int, float, np.integer, np.floating))
                                  and (math.isfinite(float(x)) or (math.isnan(float(x)) and has_reason))):
            out.append(f"{attr} {x!r} is not a finite number")
    try:
        json.dumps(res.to_dict(), allow_nan=False)
    except (TypeError, ValueError) as exc:
        out.append(f"to_dict() is not JSON ({exc})")
    if has_reason and "\n" in res.reason.strip():
        out.append("reason spans several lines")
    return out


def _close(a, b, rtol, atol) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float, np.integer, np.floating)) and isinstance(b, (int, float, np.integer, np.floating)):
        if math.isnan(float(a)) or math.isnan(float(b)):
            return math.isnan(float(a)) and math.isnan(float(b))
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol)
    return a == b


def _raise(cls, what: str, problems: list[str]) -> None:
    if problems:
        name = getattr(cls, "name", None) or getattr(cls, "__name__", repr(cls))
        raise AssertionError(f"measure {name!r} fails the {what} check:\n  - " + "\n  - ".join(problems))


def run_cli(*args: str, env: Mapping[str, str] | None = None, timeout: float = 300):
    """Run ``python -m gpurisk ARGS`` in a subprocess importing this very gpurisk (its folder first on
    PYTHONPATH); returns the ``subprocess.CompletedProcess`` (text, stdout and stderr captured)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = str(Path(__file__).resolve().parents[2])
    e = dict(os.environ)
    e["PYTHONPATH"] = root + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("COLUMNS", "200")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "gpurisk", *map(str, args)], capture_output=True,
                          text=True, env=e, timeout=timeout)
