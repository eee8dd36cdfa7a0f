"""The one measure runner: every command computes measures through it (assess, scan, compare,
validate, protect's search, its before/after table and its perturbed release).

:func:`evaluate` runs one measure on one table: what it needs is checked first
(:func:`gpurisk.measure.missing_needs`), the measure runs contained, and what it returns is checked
(:func:`gpurisk.measure.checked_result`). Contained means:

- any exception, ``SystemExit`` and a ``KeyboardInterrupt`` the measure raises included, becomes a
  not-applicable result naming the exception (:class:`~gpurisk.BadInput` still stops the run;
  Ctrl-C reaches the main thread and stops it there);
- it runs in a worker thread (:mod:`gpurisk.core.contain`) under a time limit (default
  :data:`gpurisk.core.settings.DEFAULT_MEASURE_TIMEOUT`, 600 s): past it, the measure's row says
  ``exceeded the time limit of ... s`` and the run goes on (a thread cannot be killed: the measure
  finishes in the background, in a daemon thread that does not hold the process open);
- what the measure's thread writes to ``sys.stdout`` and ``sys.stderr`` is dropped, so a ``print()``
  cannot corrupt ``--json`` output (output written by C code straight to the file descriptors, or by
  threads the measure starts, is not caught);
- the working directory is restored after the measure, so an ``os.chdir`` cannot move a relative
  ``-o``;
- ``os._exit``, ``os.abort``, ``os.kill`` of this process and the like, called from the measure's
  thread, raise there instead of ending the run (:func:`gpurisk.core.contain.guard_exits`): the
  measure's row says what it called, and every other measure and the command go on;
- a value, se or upper bound that is an integer beyond the float range (``10**400``) is a
  not-applicable result.

A result that failed this way has ``Result.failed`` set. :func:`run_measures` does this for several
measures by name.
"""
from __future__ import annotations

import copy
import sys
from typing import Any, Iterable, Mapping

from gpurisk.core.contain import MeasureEscape, is_third_party, run_contained
from gpurisk.errors import BadInput
from gpurisk.measure import Context, Measure, Result, checked_result, missing_needs

__all__ = ["evaluate", "run_measures", "measure_classes", "can_run", "option_columns"]


_FLOAT_MAX = sys.float_info.max


def _beyond_float(res: Result) -> Result:
    """A not-applicable result for a value, se or upper bound that is an integer a float cannot hold
    (every command stores and prints them as floats), else ``res``."""
    for attr in ("value", "se", "upper"):
        v = getattr(res, attr)
        if type(v) is int and not -_FLOAT_MAX <= v <= _FLOAT_MAX:
            as_ = "" if attr == "value" else f" as {attr}"
            return Result.failure(f"measure returned an integer beyond the float range{as_}")
    return res


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def check_timeout(timeout) -> float:
    """The measure time limit as a float; None is the default limit
    (:data:`gpurisk.core.settings.DEFAULT_MEASURE_TIMEOUT`); anything else is BadInput."""
    from gpurisk.core.settings import DEFAULT_MEASURE_TIMEOUT, check
    if timeout is None:
        return DEFAULT_MEASURE_TIMEOUT
    return check("measure_timeout", timeout)


def evaluate(measure: Measure | type[Measure], table, ctx: Context,
             timeout: float | None = None, *, isolate: bool = True, check: bool = True) -> Result:
    """One measure (a class, or an instance to reuse) on one table, contained and checked (see the
    module docstring). ``timeout`` (seconds, already checked; None: the default limit) reports a
    measure that runs longer as not applicable. The conformance kit (:mod:`gpurisk.testing`) passes
    ``isolate=False, check=False``: the measure runs in the calling thread, an exception
    propagates and the result comes back as the measure returned it, for the kit to examine."""
    cls = measure if isinstance(measure, type) else type(measure)
    why = missing_needs(cls, table, ctx)
    if why:
        return Result.not_applicable(why)
    if not isolate:
        inst = measure() if isinstance(measure, type) else measure
        res = inst.compute(table, ctx)
        return checked_result(res) if check else res
    timeout = check_timeout(timeout)
    outcome, = run_contained([_call(measure, table, ctx)], timeout, stop=_stops_the_run)
    return _result(outcome, timeout, check)


def _call(measure, table, ctx):
    """The measure's computation as a call for the worker (a class is instantiated there too).

    Each call gets its own copy of the context (a measure that sets ``ctx.fraction`` changes no
    other measure's). A third-party measure (one not defined in gpurisk itself) gets its own copy
    of the table's per-cell arrays, categories and summaries, and of the context's options and
    columns (:func:`private_table`): whatever it writes there, flags it turns writeable
    included, no other measure reads."""
    cls = measure if isinstance(measure, type) else type(measure)
    third = is_third_party(cls)

    def run():
        t, c = (private_table(table), private_context(ctx)) if third else (table, copy.copy(ctx))
        return (measure() if isinstance(measure, type) else measure).compute(t, c)
    return run


def _own(a):
    """A private, read-only copy of an array (numpy or CuPy), or ``a`` when it is not one."""
    if a is None or not hasattr(a, "copy") or not hasattr(a, "shape"):
        return a
    from gpurisk.xp import readonly
    return readonly(a.copy())


def private_table(table):
    """``table`` with copies of everything a measure could write into: the per-cell arrays (f, F,
    w, cell ids, cell codes, each record's cell), the categories, a summary table's summaries and
    bucket maps. Numbers it already computed (n, N, the frequencies of frequencies, ...) are
    carried over."""
    from dataclasses import fields, replace

    from gpurisk.freq.table import FreqTable
    if isinstance(table, FreqTable):
        parent = table
        locator = None if table.record_locator is None else (lambda: _own(parent.record_cell()))
        t = replace(table, categories=copy.deepcopy(table.categories),
                    cell_id=_own(table.cell_id), f=_own(table.f), F=_own(table.F), w=_own(table.w),
                    stored_cell_codes=(None if table.stored_cell_codes is None else
                                       [_own(c) for c in table.stored_cell_codes]),
                    record_locator=locator)
        t._memo.update({k: v for k, v in table._memo.items() if _plain(v)})
        return t
    names = {f.name for f in fields(table)} if hasattr(table, "__dataclass_fields__") else set()
    if {"summary", "categories"} <= names:     # a SummaryTable: no cell arrays, small dicts
        t = replace(table, categories=copy.deepcopy(table.categories),
                    summary=copy.deepcopy(table.summary),
                    bucket_maps=copy.deepcopy(table.bucket_maps), _memo={})
        t._memo.update({k: v for k, v in table._memo.items() if _plain(v)})
        return t
    return table


def _plain(v) -> bool:
    """A cached value that nothing can change (a number, a string, a frozen summary of numbers)."""
    from gpurisk.freq.table import UniqueStats
    return isinstance(v, (int, float, str, bool, type(None), UniqueStats))


def private_context(ctx):
    """A copy of ``ctx`` whose options and column arrays are the measure's own."""
    from dataclasses import replace
    try:
        return replace(ctx, options=copy.deepcopy(dict(ctx.options)),
                       columns={k: _own(v) for k, v in dict(ctx.columns).items()})
    except TypeError:                    # not a gpurisk.Context: a copy is the best there is
        return copy.copy(ctx)


def _stops_the_run(exc: BaseException) -> bool:
    """BadInput stops the run; anything else a measure raises is that measure's failure. A
    KeyboardInterrupt raised in a measure's thread is the measure's own (Ctrl-C and signals reach
    the main thread, which stops the run there): it is a failure like any other."""
    return isinstance(exc, BadInput)


def _result(outcome, timeout: float, check: bool = True) -> Result:
    """A measure's Result from its (finished, value, exception) in :func:`run_contained`."""
    finished, res, exc = outcome
    if not finished:
        return Result.failure(f"exceeded the time limit of {float(timeout):g} s")
    if exc is not None:
        if _stops_the_run(exc):
            raise exc
        if isinstance(exc, MeasureEscape):
            return Result.failure(f"measure {_first_line(exc)}")
        text = _first_line(exc)
        return Result.failure(f"measure raised {type(exc).__name__}" + (f": {text}" if text else ""))
    return _beyond_float(checked_result(res)) if check else res


def measure_classes(names: Iterable[str] | None = None) -> dict[str, type[Measure]]:
    """name -> class of the measures named (BadInput for an unknown name), or of every registered
    measure that runs by default (``Measure.default``)."""
    from gpurisk.plugins import measure_registry, unknown_measure_hint
    reg = measure_registry()
    if names is None:
        return {m: r.cls for m, r in reg.items() if getattr(r.cls, "default", True)}
    names = [names] if isinstance(names, str) else list(names)
    unknown = [m for m in names if m not in reg]
    if unknown:
        raise BadInput(f"unknown measure(s) {', '.join(map(repr, unknown))}; "
                       f"registered: {', '.join(reg)}" + unknown_measure_hint())
    return {m: reg[m].cls for m in names}


def run_measures(table, ctx: Context, names: Iterable[str] | None = None,
                 timeout: float | None = None) -> dict[str, Result]:
    """Every registered measure (or those named) on one table; one failing measure never stops the rest.

    A measure that raises (any exception, ``SystemExit`` and ``KeyboardInterrupt`` included;
    :class:`BadInput` still stops the run), returns something other than a well-formed
    :class:`Result` (see :func:`gpurisk.measure.checked_result`: a finite real value or a reason;
    se and upper real numbers, none an integer beyond the float range) or runs past the time limit
    (``timeout`` seconds; None: the default, see :func:`check_timeout`) is reported on its own row
    as not applicable, with the reason; the other measures still run. What a measure prints is
    dropped and the working directory restored after each. Values come back as plain Python ints
    and floats.
    """
    return run_classes(table, ctx, measure_classes(names), timeout)


def run_classes(table, ctx: Context, classes: Mapping[str, type[Measure]],
                timeout: float | None = None) -> dict[str, Result]:
    """:func:`run_measures` of the measure classes ``classes`` (name -> class), without the
    registry: what a Dask worker runs on a table it built (:func:`gpurisk.freq.subsets.table_measures`)."""
    timeout = check_timeout(timeout)
    out: dict[str, Result] = {}
    for name, cls in classes.items():
        why = missing_needs(cls, table, ctx)
        if why:
            out[name] = Result.not_applicable(why)
    todo = [name for name in classes if name not in out]
    ran = run_contained([_call(classes[n], table, ctx) for n in todo], timeout,
                        stop=_stops_the_run)     # one hand-over to the worker for all of them
    for name, outcome in zip(todo, ran):
        out[name] = _result(outcome, timeout)
    return {name: out[name] for name in classes}


def run_classes_caught(table, ctx: Context, classes: Mapping[str, type[Measure]],
                       timeout: float | None = None) -> dict:
    """:func:`run_classes`, and the warnings the measures raised: ``{"results": {name: Result},
    "warnings": [text, ...]}``, what a worker that ran a table's measures hands back (a Dask
    worker, :func:`gpurisk.freq.subsets.table_measures`; a scan's measure process,
    :mod:`gpurisk.scan.processes`), re-raised where the row is made
    (:func:`gpurisk.scan.runner.combination_row`)."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run_classes(table, ctx, classes, timeout)
    return {"results": results, "warnings": list(dict.fromkeys(str(w.message) for w in caught))}


def can_run(cls, inp, options: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """Whether what the measure needs was given to ``inp`` (an :class:`~gpurisk.inputs.Inputs`; a
    measure that cannot run needs no cells): its needs, and (with ``options``) the options it
    declares in ``requires_options``."""
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


def option_columns(measures: Iterable[str] | None = None,
                   options: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """The sample columns that the chosen measures' column options name (see ``Measure.column_options``)."""
    from gpurisk.plugins import measure_registry
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
