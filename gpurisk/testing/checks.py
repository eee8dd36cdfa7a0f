"""The conformance checks (see :mod:`gpurisk.testing` for what each one asks of a measure)."""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput, UnsupportedBackend
from gpurisk.freq.engine import build_table
from gpurisk.measure import NEEDS, Context, Measure, Result, missing_needs
from gpurisk.testing.kit import (BACKENDS, LEVELS, in_process_cluster, NAME_RE, READS, _close, _columns, _default_options,
                                 _raise, result_problems, run_measure, synthetic_register,
                                 table_from_counts)


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
        from gpurisk.backends import DEFAULT
        return [b for b in self.results if b != DEFAULT and b not in self.declined]


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
    from gpurisk.backends import DEFAULT, get_backend
    for b in dict.fromkeys([DEFAULT, *backends]):
        backend = get_backend(b)
        try:
            if not backend.listed:      # a testing stand-in (strict): not offered by build_table
                table = backend.count(frame, keys, sample_flag=sample_flag, weights=weights)
            else:
                with in_process_cluster(b):
                    table = build_table(frame, keys, sample_flag=sample_flag, weights=weights,
                                        backend=b)
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
            if not backend.stand_in:
                raise
            problems.append(f"backend {b} (a GPU stand-in: device arrays, no host conversion): "
                            f"raised {type(exc).__name__}: {exc}")
            continue
        report.results[b] = res
        problems += [f"backend {b}: {p}" for p in result_problems(res)]
    ref = report.results.get(DEFAULT)
    for b, res in report.results.items():
        if b == DEFAULT or ref is None:
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


