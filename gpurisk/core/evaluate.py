"""The one measure runner: every command computes measures through it (assess, scan, compare,
validate, protect's search, its before/after table and its perturbed release).

:func:`evaluate` runs one measure on one table: what it needs is checked first
(:func:`gpurisk.measure.missing_needs`), the measure runs isolated (any exception, ``SystemExit``
included, becomes a not-applicable result naming the exception; ``KeyboardInterrupt`` and
:class:`~gpurisk.BadInput` still stop the run), optionally under a time limit, and what it returns is
checked (:func:`gpurisk.measure.checked_result`). A result that failed this way has
``Result.failed`` set. :func:`run_measures` does this for several measures by name.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from gpurisk.errors import BadInput
from gpurisk.measure import Context, Measure, Result, checked_result, missing_needs

__all__ = ["evaluate", "run_measures", "measure_classes", "can_run", "option_columns"]


def call_with_timeout(fn, timeout: float):
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


def check_timeout(timeout) -> float | None:
    """The measure time limit as a float (None: no limit); anything else is BadInput."""
    if timeout is None:
        return None
    from gpurisk.core.settings import check
    return check("measure_timeout", timeout)


def evaluate(measure: Measure | type[Measure], table, ctx: Context,
             timeout: float | None = None, *, isolate: bool = True, check: bool = True) -> Result:
    """One measure (a class, or an instance to reuse) on one table, isolated and checked (see the
    module docstring). ``timeout`` (seconds, already checked) reports a measure that runs longer as
    not applicable. The conformance kit (:mod:`gpurisk.testing`) passes ``isolate=False,
    check=False``: an exception propagates and the result comes back as the measure returned it,
    for the kit to examine."""
    cls = measure if isinstance(measure, type) else type(measure)
    why = missing_needs(cls, table, ctx)
    if why:
        return Result.not_applicable(why)
    inst = measure() if isinstance(measure, type) else measure
    if not isolate:
        res = inst.compute(table, ctx)
        return checked_result(res) if check else res
    try:
        if timeout is None:
            res = inst.compute(table, ctx)
        else:
            finished, res, exc = call_with_timeout(lambda: inst.compute(table, ctx), float(timeout))
            if not finished:
                return Result.failure(f"exceeded the time limit of {float(timeout):g} s")
            if exc is not None:
                raise exc
    except BadInput:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: B036 - isolate a failing measure (sys.exit too) on its row
        return Result.failure(f"measure raised {type(exc).__name__}: {_first_line(exc)}")
    return checked_result(res) if check else res


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

    A measure that raises (any exception, ``SystemExit`` included; ``KeyboardInterrupt`` and
    :class:`BadInput` still stop the run), returns something other than a well-formed
    :class:`Result` (see :func:`gpurisk.measure.checked_result`: a finite real value or a reason;
    se and upper real numbers) or (with ``timeout`` seconds) runs past the time limit is reported on
    its own row as not applicable, with the reason; the other measures still run. Values come back
    as plain Python ints and floats.
    """
    timeout = check_timeout(timeout)
    return {name: evaluate(cls, table, ctx, timeout) for name, cls in measure_classes(names).items()}


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
