"""``gpurisk.assess``: one key combination, every applicable measure."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from gpurisk.errors import BadInput
from gpurisk.inputs import resolve_fraction  # noqa: F401  (re-exported: gpurisk.workflows.assess.resolve_fraction)
from gpurisk.freq.table import FreqTable
from gpurisk.measure import Context, Result, checked_result, missing_needs
from gpurisk.plugins import measure_registry, unknown_measure_hint


@dataclass(repr=False)
class Assessment:
    """What :func:`assess` returns. ``to_dict()`` is the JSON document of ``gpurisk assess --json``;
    ``to_frame()`` one row per measure (what ``--output FILE.csv`` writes)."""

    table: FreqTable
    context: Context
    measures: dict[str, Result]
    warnings: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return self.table.n

    @property
    def N(self) -> int | None:
        return self.table.N

    def to_frame(self):
        """One row per measure: keys, n, N, π, measure, value, se, upper, reason, extra (JSON)."""
        from gpurisk.io.formats import result_rows
        return result_rows(self.to_dict())

    def __repr__(self) -> str:
        t = self.table
        shown = [f"{name}={r.value:.4g}" for name, r in self.measures.items()
                 if isinstance(r.value, (int, float))][:6]
        idle = sum(1 for r in self.measures.values() if r.value is None)
        head = f"n={t.n}" + (f", N={t.N}" if t.N is not None else "")
        return (f"<Assessment {head}, keys={list(t.keys)}: {', '.join(shown)}"
                + (", ..." if len(shown) < len(self.measures) - idle else "")
                + (f"; {idle} not applicable>" if idle else ">"))

    def to_dict(self) -> dict[str, Any]:
        t = self.table
        doc = {
            "n": t.n,
            "N": t.N,
            "fraction": self.context.fraction,
            "keys": list(t.keys),
            "cells": t.sample_cells,
            "freq_of_freq": {str(r): c for r, c in sorted(t.freq_of_freq().items())},
            "measures": {name: r.to_dict() for name, r in self.measures.items()},
            "fraction_source": self.context.fraction_source,
            "categories": {k: len(c) for k, c in zip(t.keys, t.categories)},
            "backend": t.backend,
            "warnings": list(self.warnings),
        }
        if t.N is not None:
            doc["population_cells"] = t.population_cells
            doc["pop_freq_of_freq"] = {str(r): c for r, c in sorted(t.pop_freq_of_freq().items())
                                       if r <= 10}
        return doc


def _call_with_timeout(fn, timeout: float):
    """``fn()`` in a worker thread, waiting at most ``timeout`` seconds: (finished, value, exception).

    A thread cannot be killed: a measure past its limit keeps running in the background (a daemon
    thread, so it does not hold the process open) while the others go on.
    """
    import threading
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["exc"] = exc

    th = threading.Thread(target=target, daemon=True, name="gpurisk-measure")
    th.start()
    th.join(timeout)
    if th.is_alive():
        return False, None, None
    return True, box.get("value"), box.get("exc")


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def run_measures(table: FreqTable, ctx: Context, names: Iterable[str] | None = None,
                 timeout: float | None = None) -> dict[str, Result]:
    """Every registered measure (or those named) on one table; one failing measure never stops the rest.

    A measure that raises (any exception, ``SystemExit`` included; ``KeyboardInterrupt`` and
    :class:`BadInput` still stop the run), returns something other than a well-formed
    :class:`Result` (see :func:`gpurisk.measure.checked_result`: a finite real value or a reason;
    se and upper real numbers) or (with ``timeout`` seconds) runs past the time limit is reported on
    its own row as not applicable, with the reason; the other measures still run. Values come back
    as plain Python ints and floats.
    """
    if timeout is not None and not (float(timeout) > 0):
        raise BadInput(f"measure time limit {timeout!r} must be a positive number of seconds")
    reg = measure_registry()
    if names is None:
        names = [m for m, r in reg.items() if getattr(r.cls, "default", True)]
    else:
        names = list(names)
        unknown = [m for m in names if m not in reg]
        if unknown:
            raise BadInput(f"unknown measure(s) {', '.join(map(repr, unknown))}; "
                           f"registered: {', '.join(reg)}" + unknown_measure_hint())
    out: dict[str, Result] = {}
    for name in names:
        cls = reg[name].cls
        why = missing_needs(cls, table, ctx)
        if why:
            out[name] = Result.not_applicable(why)
            continue
        try:
            if timeout is None:
                res = cls().compute(table, ctx)
            else:
                finished, res, exc = _call_with_timeout(lambda: cls().compute(table, ctx), float(timeout))
                if not finished:
                    out[name] = Result.not_applicable(f"exceeded the time limit of {float(timeout):g} s")
                    continue
                if exc is not None:
                    raise exc
        except BadInput:
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: B036 - isolate a failing measure (sys.exit too) on its row
            res = Result.not_applicable(f"measure raised {type(exc).__name__}: {_first_line(exc)}")
        out[name] = checked_result(res)
    return out


def option_columns(measures: Iterable[str] | None = None,
                   options: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The sample columns that the chosen measures' column options name (see ``Measure.column_options``)."""
    reg = measure_registry()
    names = list(reg) if measures is None else [m for m in measures if m in reg]
    options = options or {}
    cols: list[str] = []
    for name in names:
        cls = reg[name].cls
        for opt in cls.column_options:
            col = options.get(name, {}).get(opt, cls.options.get(opt))
            if col is not None and str(col) not in cols:
                cols.append(str(col))
    return cols


def _can_run(cls, inp, options: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """Whether what the measure needs was given (a measure that cannot run needs no cells): its
    needs, and (with ``options``) the options it declares in ``requires_options``."""
    if options is not None:
        mine = options.get(cls.name, {})
        if any(mine.get(o, cls.options.get(o)) is None for o in getattr(cls, "requires_options", ())):
            return False
    needs = set(cls.needs)
    if "weights" in needs and not inp.weights:
        return False
    if "population" in needs and inp.population is None and inp.sample_flag is None:
        return False
    return not ({"records", "columns"} & needs and inp.distributed)


def assess(frame, keys: Iterable[str], fraction: float | None = None, population=None,
           sample_flag: str | None = None, weights: str | None = None,
           measures: Iterable[str] | None = None, missing: str = "category", alpha: float = 0.01,
           seed: int = 0, options: Mapping[str, Mapping[str, Any]] | None = None,
           backend: str | None = None, sep: str | None = None, recode=None,
           allow_high_cardinality: bool = False, measure_timeout: float | None = None,
           encoding: str = "utf-8") -> Assessment:
    """Risk measures of one release for one set of key variables.

    ``frame`` is a pandas, Dask or cuDF DataFrame or a path (CSV, Parquet, Stata, SPSS, SAS,
    ``example:adult``); ``keys`` a list or ``"a,b,c"``. Everything is read, checked and counted by
    :class:`gpurisk.inputs.Inputs`, as in every command. ``population`` is a frame (or path)
    holding the population's records; ``sample_flag`` names a boolean column of ``frame`` marking the
    released records (``frame`` then being the whole register). ``fraction`` is π; with a population
    it defaults to n/N. ``recode`` regroups categories (``["age=bands:5", ...]``, see
    :mod:`gpurisk.freq.recode`) on the counted table, never on the records. A key with more than 1000
    distinct values and more than n/2 is refused unless ``allow_high_cardinality`` (see
    :mod:`gpurisk.freq.guards`). ``measure_timeout`` (seconds) reports a measure that runs longer as not
    applicable and goes on (see :func:`run_measures`).
    """
    from gpurisk.inputs import Inputs
    from gpurisk.plugins import check_options
    if isinstance(measures, str):
        measures = [m.strip() for m in measures.split(",") if m.strip()]
    measures = None if measures is None else list(measures)
    options = check_options(options)   # before anything is read
    if not 0.0 < float(alpha) < 0.5:
        raise BadInput(f"alpha={alpha!r} is outside (0, 0.5)")
    extra_cols = option_columns(measures, options)
    inp = Inputs(frame, keys, population=population, sample_flag=sample_flag, weights=weights,
                 fraction=fraction, missing=missing, recode=recode, backend=backend, sep=sep,
                 encoding=encoding, allow_high_cardinality=allow_high_cardinality,
                 columns=extra_cols)
    frames = inp.read()
    reg = measure_registry()
    chosen = [m for m in (measures if measures is not None else
                          [m for m, r in reg.items() if getattr(r.cls, "default", True)]) if m in reg]
    runnable = [m for m in chosen if _can_run(reg[m].cls, inp, options)]
    cell_readers = [m for m in runnable if reg[m].cls.reads not in ("summary", "buckets")]
    if inp.distributed and not cell_readers and not inp.recode:
        # the cells stay on the workers: summaries and the bucket measures' maps come back
        counted = inp.summarize(frames, bucket_measures=[reg[m].cls for m in chosen
                                                         if reg[m].cls.reads == "buckets"
                                                         and _can_run(reg[m].cls, inp)],
                                context=Context(alpha=float(alpha), seed=int(seed),
                                                options=dict(options or {})))
    else:
        counted = inp.count(frames)
        if inp.distributed:
            import logging
            logging.getLogger("gpurisk.backends").info(
                "the table of %d cells was brought to this process for the measure(s) that read "
                "cells (%s); naming only measures that read summaries or buckets (--measures) keeps "
                "the cells on the workers", counted.table.sample_cells, ", ".join(cell_readers) or "recodes")
    ctx = Context(fraction=counted.fraction, fraction_source=counted.fraction_source,
                  alpha=float(alpha), seed=int(seed), options=dict(options or {}),
                  columns=inp.column_values(frames, extra_cols))
    notes = list(counted.notes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run_measures(counted.table, ctx, measures, timeout=measure_timeout)
    notes += [str(w.message) for w in caught]
    return Assessment(counted.table, ctx, results, notes)
