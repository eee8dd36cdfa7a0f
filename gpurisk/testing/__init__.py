"""Conformance kit for measures: what every measure, built-in or third-party, must satisfy.

A plugin's tests call it on each of its measure classes::

    from gpurisk.testing import check_measure
    def test_conformance():
        check_measure(MyMeasure)                       # all the checks below

- :func:`check_metadata`: the class describes itself completely (name usable on the command line,
  description, reference, ``needs`` from :data:`gpurisk.measure.NEEDS`, level, JSON-able options,
  column options declared consistently).
- :func:`check_bad_input`: on awkward tables (no sample uniques, only uniques, one cell, one record)
  and thin contexts (no options, no fraction, no population, no weights) the measure returns a
  :class:`~gpurisk.Result` whose value is a finite number exactly when it gives no reason (never NaN
  or infinity without a reason), or raises :class:`~gpurisk.BadInput` with one line; nothing else.
- :func:`check_reads_summary` / :func:`check_buckets`: a measure that reads summaries gives the
  same result on the summaries alone; one that reads buckets gives the same result on the cells dealt
  at random into several buckets (and on the strict namespace) as in one bucket.
- :func:`check_backends_agree`: the same records counted by every backend named (through
  :func:`gpurisk.build_table`) give the same result as pandas; a backend that raises
  :class:`~gpurisk.UnsupportedBackend` here is skipped and listed in the report. One of them,
  ``strict``, runs everywhere: the device engine with arrays of :mod:`gpurisk.testing.strict`, which
  refuse every implicit host conversion (``np.asarray``, ``float()``, iteration, numpy functions)
  and offer only what CuPy has, so a measure learns on a CPU that it would break on a GPU.

Every check raises ``AssertionError`` naming the measure and each problem found. Measures are run
exactly as :func:`gpurisk.run_measures` runs them (needs checked first), but from the class, so a
measure need not be registered to be checked.
"""
from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput, UnsupportedBackend
from gpurisk.freq.engine import build_table
from gpurisk.measure import NEEDS, Context, Measure, Result, missing_needs

__all__ = ["check_metadata", "check_bad_input", "check_backends_agree", "check_measure",
           "synthetic_register", "table_from_counts", "run_measure", "BackendReport", "BACKENDS",
           "EXTRA_COLUMN", "run_cli", "check_reads_summary", "check_buckets"]

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


# --- checks ----------------------------------------------------------------------------------------
def check_metadata(cls: type[Measure]) -> None:
    """The class describes itself completely and consistently."""
    problems: list[str] = []
    if not (isinstance(cls, type) and issubclass(cls, Measure)):
        raise AssertionError(f"{cls!r} is not a gpurisk.Measure subclass")
    if not isinstance(cls.name, str) or not NAME_RE.match(cls.name):
        problems.append(f"name {cls.name!r} is not lower_snake_case (it is used as --option NAME.KEY=...)")
    for attr in ("description", "reference"):
        v = getattr(cls, attr)
        if not isinstance(v, str) or not v.strip():
            problems.append(f"{attr} is empty")
        elif "\n" in v.strip():
            problems.append(f"{attr} spans several lines (a table cell shows it)")
    unknown = set(cls.needs) - set(NEEDS)
    if unknown:
        problems.append(f"needs {sorted(unknown)} not among {sorted(NEEDS)}")
    if cls.level not in LEVELS:
        problems.append(f"level {cls.level!r} is not one of {LEVELS}")
    if cls.reads not in READS:
        problems.append(f"reads {cls.reads!r} is not one of {READS}")
    elif cls.reads == "summary" and ({"records", "columns", "weights"} & set(cls.needs)):
        problems.append("reads 'summary' but needs records, columns or weights (per-cell data)")
    elif cls.reads == "buckets":
        if {"records", "columns"} & set(cls.needs):
            problems.append("reads 'buckets' but needs records or columns (a bucket holds cells, "
                            "not records)")
        for meth in ("map_bucket", "reduce_buckets"):
            if getattr(cls, meth) is getattr(Measure, meth):
                problems.append(f"reads 'buckets' but does not implement {meth}()")
        if cls.compute is not Measure.compute:
            problems.append("reads 'buckets' but overrides compute() (the host maps and reduces: "
                            "define map_bucket and reduce_buckets only)")
    if not isinstance(cls.options, Mapping) or not all(isinstance(k, str) for k in cls.options):
        problems.append("options is not a mapping of option names to defaults")
    else:
        try:
            json.dumps(dict(cls.options), allow_nan=False)
        except (TypeError, ValueError) as exc:
            problems.append(f"option defaults are not JSON values ({exc})")
    for o in tuple(getattr(cls, "requires_options", ())):
        if o not in cls.options:
            problems.append(f"required option {o!r} has no entry (default) in options")
    cols = tuple(cls.column_options)
    for o in cols:
        if o not in cls.options:
            problems.append(f"column option {o!r} has no entry (default) in options")
    if cols and "columns" not in cls.needs:
        problems.append("declares column_options but not 'columns' in needs")
    if "columns" in cls.needs and not cols:
        problems.append("needs 'columns' but declares no column_options naming them")
    if cls.compute is Measure.compute and cls.reads != "buckets":
        problems.append("does not implement compute()")
    try:
        json.dumps(cls.describe(), allow_nan=False)
    except (TypeError, ValueError) as exc:
        problems.append(f"describe() is not JSON ({exc})")
    _raise(cls, "metadata", problems)


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


def _cases(cls, options):
    """(label, table, ctx) of awkward inputs."""
    opts = _default_options(cls, options)
    tables = {
        "no sample uniques (every f_j >= 2)": ([2, 3, 2, 5], [20, 31, 2, 50]),
        "only sample uniques": ([1, 1, 1, 1, 1], [10, 1, 7, 3, 12]),
        "one cell": ([6], [60]),
        "one record": ([1], [4]),
        "a population cell the sample misses": ([0, 2, 1], [5, 9, 1]),
    }
    for label, (f, F) in tables.items():
        table, sample, _ = table_from_counts(f, F)
        n, N = int(sum(f)), int(sum(F))
        cols = _columns(cls, sample, opts)
        yield label, table, Context(fraction=n / N, fraction_source="n/N", options={cls.name: opts},
                                    columns=cols)
        yield label + ", empty options", table, Context(fraction=n / N, columns=cols)
        bare = build_table(sample, ["k"])
        yield label + ", no fraction/population/weights", bare, Context(options={cls.name: opts},
                                                                        columns=cols)


def check_bad_input(cls: type[Measure], options: Mapping[str, Any] | None = None) -> None:
    """Awkward tables and thin contexts give a well-formed Result or a one-line BadInput."""
    problems = []
    for label, table, ctx in _cases(cls, options):
        try:
            res = run_measure(cls, table, ctx)
        except BadInput as exc:
            if "\n" in str(exc).strip() or not str(exc).strip():
                problems.append(f"{label}: BadInput message is not one line: {str(exc)!r}")
            continue
        except Exception as exc:  # noqa: BLE001 - the point is to report it
            problems.append(f"{label}: raised {type(exc).__name__}: {exc}")
            continue
        problems += [f"{label}: {p}" for p in result_problems(res)]
    _raise(cls, "bad input", problems)


@dataclass
class BackendReport:
    """What :func:`check_backends_agree` compared, skipped (with why) and saw declined."""

    results: dict[str, Result] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    declined: dict[str, str] = field(default_factory=dict)

    @property
    def compared(self) -> list[str]:
        return [b for b in self.results if b != "pandas" and b not in self.declined]


def _close(a, b, rtol, atol) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float, np.integer, np.floating)) and isinstance(b, (int, float, np.integer, np.floating)):
        if math.isnan(float(a)) or math.isnan(float(b)):
            return math.isnan(float(a)) and math.isnan(float(b))
        return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol)
    return a == b


def check_backends_agree(cls: type[Measure], frame: pd.DataFrame | None = None,
                         keys: Iterable[str] | None = None, *, sample_flag: str | None = "in_sample",
                         weights: str | None = "w", options: Mapping[str, Any] | None = None,
                         backends: Iterable[str] = BACKENDS, rtol: float = 1e-9,
                         atol: float = 1e-12) -> BackendReport:
    """Each backend's result equals pandas' (value, se, upper, reason and numeric extras).

    Default data: :func:`synthetic_register` with keys k1, k2, k3, sample flag ``in_sample`` and
    weights ``w``. A backend raising UnsupportedBackend is skipped; a backend whose table keeps no
    record cells may decline a record-level measure (listed in ``declined``), never answer otherwise.
    """
    if frame is None:
        frame = synthetic_register()
        keys = ["k1", "k2", "k3"] if keys is None else keys
    elif keys is None:
        raise ValueError("give the keys of the frame")
    else:
        sample_flag = sample_flag if sample_flag in frame.columns else None
        weights = weights if weights in frame.columns else None
    keys = list(keys)
    opts = _default_options(cls, options)
    mask = None
    if sample_flag is not None:
        from gpurisk.freq.engine import sample_flag_mask
        mask = sample_flag_mask(frame, sample_flag)
    cols = _columns(cls, frame, opts, mask)
    report = BackendReport()
    problems = []
    for b in dict.fromkeys(["pandas", *backends]):
        try:
            if b == "strict":
                from gpurisk.testing.strict import strict_table
                table = strict_table(frame, keys, sample_flag=sample_flag, weights=weights)
            else:
                table = build_table(frame, keys, sample_flag=sample_flag, weights=weights, backend=b)
        except UnsupportedBackend as exc:
            report.skipped[b] = str(exc)
            continue
        pi = table.n / table.N if table.N else None
        ctx = Context(fraction=pi, fraction_source="n/N" if pi else None, options={cls.name: opts},
                      columns=cols)
        try:
            res = run_measure(cls, table, ctx)
        except BadInput as exc:
            res = Result.not_applicable(f"BadInput: {exc}")
        except Exception as exc:
            if b != "strict":
                raise
            problems.append(f"backend strict (a GPU stand-in: device arrays, no host conversion): "
                            f"raised {type(exc).__name__}: {exc}")
            continue
        report.results[b] = res
        problems += [f"backend {b}: {p}" for p in result_problems(res)]
    ref = report.results.get("pandas")
    for b, res in report.results.items():
        if b == "pandas" or ref is None:
            continue
        if res.reason and "did not keep" in res.reason:  # a backend without record cells declines
            report.declined[b] = res.reason
            continue
        for attr in ("value", "se", "upper", "reason"):
            if not _close(getattr(ref, attr), getattr(res, attr), rtol, atol):
                problems.append(f"backend {b}: {attr} {getattr(res, attr)!r} != pandas {getattr(ref, attr)!r}")
        for k, v in ref.extra.items():
            if isinstance(v, (int, float, np.integer, np.floating)) and not _close(v, res.extra.get(k), rtol, atol):
                problems.append(f"backend {b}: extra {k!r} {res.extra.get(k)!r} != pandas {v!r}")
    _raise(cls, "backends", problems)
    return report


def check_reads_summary(cls: type[Measure], frame: pd.DataFrame | None = None,
                        keys: Iterable[str] | None = None, *, sample_flag: str | None = "in_sample",
                        options: Mapping[str, Any] | None = None, rtol: float = 1e-9,
                        atol: float = 1e-12) -> Result | None:
    """A measure that declares ``reads = "summary"`` gives the same result on the table's summaries
    alone (:class:`gpurisk.freq.summary.SummaryTable`, what a distributed count brings back) as on
    the table; it fails if it reads a cell array. Returns that result (None for a "cells" measure)."""
    if cls.reads != "summary":
        return None
    from gpurisk.freq.summary import summary_table
    if frame is None:
        frame, keys = synthetic_register(), ["k1", "k2", "k3"] if keys is None else keys
    elif keys is None:
        raise ValueError("give the keys of the frame")
    elif sample_flag not in frame.columns:
        sample_flag = None
    table = build_table(frame, list(keys), sample_flag=sample_flag)
    pi = table.n / table.N if table.N else None
    ctx = Context(fraction=pi, fraction_source="n/N" if pi else None,
                  options={cls.name: _default_options(cls, options)})
    ref = run_measure(cls, table, ctx)
    try:
        got = run_measure(cls, summary_table(table), ctx)
    except Exception as exc:     # CellsNotKept: it read a cell array
        _raise(cls, "reads = 'summary'", [f"on summaries only: raised {type(exc).__name__}: {exc}"])
    problems = [f"on summaries only: {p}" for p in result_problems(got)]
    for attr in ("value", "se", "upper", "reason"):
        if not _close(getattr(ref, attr), getattr(got, attr), rtol, atol):
            problems.append(f"on summaries only: {attr} {getattr(got, attr)!r} != on the table "
                            f"{getattr(ref, attr)!r}")
    _raise(cls, "reads = 'summary'", problems)
    return got


def check_buckets(cls: type[Measure], frame: pd.DataFrame | None = None,
                  keys: Iterable[str] | None = None, *, sample_flag: str | None = "in_sample",
                  weights: str | None = "w", options: Mapping[str, Any] | None = None,
                  splits: Iterable[int] = (2, 5, 17), rtol: float = 1e-9,
                  atol: float = 1e-12) -> Result | None:
    """A measure that declares ``reads = "buckets"`` gives the same result when the cells are dealt
    at random into several buckets (one of them empty) as on the table in one bucket, its reduction
    reading only the table's summaries (a :class:`~gpurisk.freq.summary.SummaryTable`, as on a
    cluster); and the same on the strict array namespace (:mod:`gpurisk.testing.strict`, a GPU
    stand-in) split the same ways. Returns the one-bucket result (None for other measures)."""
    if cls.reads != "buckets":
        return None
    from gpurisk.freq.buckets import map_one, split_table
    from gpurisk.freq.summary import summary_table
    from gpurisk.testing.strict import strict_table
    if frame is None:
        frame, keys = synthetic_register(), ["k1", "k2", "k3"] if keys is None else keys
    elif keys is None:
        raise ValueError("give the keys of the frame")
    sample_flag = sample_flag if sample_flag in frame.columns else None
    weights = weights if weights in frame.columns else None
    keys = list(keys)
    table = build_table(frame, keys, sample_flag=sample_flag, weights=weights)
    pi = table.n / table.N if table.N else None
    ctx = Context(fraction=pi, fraction_source="n/N" if pi else None,
                  options={cls.name: _default_options(cls, options)})
    try:
        ref = run_measure(cls, table, ctx)
    except BadInput as exc:
        ref = Result.not_applicable(f"BadInput: {exc}")
    except Exception as exc:  # noqa: BLE001 - the point is to report it
        _raise(cls, "reads = 'buckets'", [f"in one bucket: raised {type(exc).__name__}: {exc}"])
    problems = [f"in one bucket: {p}" for p in result_problems(ref)]
    summ = summary_table(table)
    tables = [("", table)]
    try:
        tables.append(("strict namespace, ", strict_table(frame, keys, sample_flag=sample_flag,
                                                         weights=weights)))
    except Exception as exc:  # noqa: BLE001 - reported
        problems.append(f"strict table: {type(exc).__name__}: {exc}")
    for label, t in tables:
        for k in splits:
            where = f"{label}{k} random buckets and an empty one"
            try:
                if missing_needs(cls, summ, ctx):
                    got = run_measure(cls, summ, ctx)
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        parts = [map_one(cls(), b, ctx) for b in split_table(t, k, seed=k)]
                        got = cls().reduce_buckets(parts, summ, ctx)
            except BadInput as exc:
                got = Result.not_applicable(f"BadInput: {exc}")
            except Exception as exc:  # noqa: BLE001 - the point is to report it
                problems.append(f"{where}: raised {type(exc).__name__}: {exc}")
                continue
            problems += [f"{where}: {p}" for p in result_problems(got)]
            for attr in ("value", "se", "upper", "reason"):
                if not _close(getattr(ref, attr), getattr(got, attr), rtol, atol):
                    problems.append(f"{where}: {attr} {getattr(got, attr)!r} != in one bucket "
                                    f"{getattr(ref, attr)!r}")
            for key, v in ref.extra.items():
                if isinstance(v, (int, float, np.integer, np.floating)) and \
                        not _close(v, got.extra.get(key), rtol, atol):
                    problems.append(f"{where}: extra {key!r} {got.extra.get(key)!r} != in one "
                                    f"bucket {v!r}")
    _raise(cls, "reads = 'buckets'", problems)
    return ref


def check_measure(cls: type[Measure], options: Mapping[str, Any] | None = None, **backend_kw) -> BackendReport:
    """:func:`check_metadata`, :func:`check_bad_input`, :func:`check_reads_summary`,
    :func:`check_buckets` and :func:`check_backends_agree` in turn."""
    check_metadata(cls)
    check_bad_input(cls, options)
    check_reads_summary(cls, options=options)
    check_buckets(cls, options=options)
    return check_backends_agree(cls, options=options, **backend_kw)


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
