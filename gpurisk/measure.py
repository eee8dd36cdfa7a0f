"""What a measure is and what it returns.

A measure is a class registered through the ``gpurisk_register_measures`` hook (see
:mod:`gpurisk.hookspecs`). The host instantiates it and calls :meth:`Measure.compute` with a
:class:`~gpurisk.freq.table.FreqTable` (counts only, never records or backend frames) and a
:class:`Context` (sampling fraction, options, seed). It returns a :class:`Result`.

A measure that needs a non-key variable (l-diversity's sensitive variable, a household id) names it
with an option listed in ``column_options``; the host then passes that column's values, one numpy
array in record order, as ``ctx.column(name)`` (and ``gpurisk.cell_value_counts`` tabulates them
within cells).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Mapping

from gpurisk.options import Option, OptionSpecs, option_specs  # noqa: F401 - Option re-exported

#: Everything a measure may declare in ``needs``.
NEEDS = {
    "fraction": "the sampling fraction pi (--fraction, or n/N from a population)",
    "population": "population counts F_j (--population or --sample-flag)",
    "weights": "design weights (--weights COL)",
    "records": "each record's cell (record-level)",
    "columns": "other columns of the sample, named by the measure's column options (record-level)",
}


@dataclass
class Result:
    """One measure's answer. ``value`` is None (or NaN) exactly when ``reason`` says why."""

    value: float | None = None
    se: float | None = None
    upper: float | None = None
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: the measure failed (raised, ran past its time limit, or returned something malformed): set by
    #: the runner (:mod:`gpurisk.core.evaluate`), never by a measure; a protect criterion on it fails
    failed: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self):
        # a reason written with placeholders ({population}, {option:m.x=V}) is phrased for where it
        # is read (gpurisk.core.messages): the flag on the command line, the parameter in the API
        from gpurisk.core.messages import reason
        self.reason = reason(self.reason)

    @classmethod
    def not_applicable(cls, reason: str, **extra: Any) -> "Result":
        return cls(value=None, reason=reason, extra=dict(extra))

    @classmethod
    def failure(cls, reason: str) -> "Result":
        """Not applicable because the measure failed (see ``failed``)."""
        return cls(value=None, reason=reason, failed=True)

    def to_dict(self) -> dict[str, Any]:
        out = {"value": _clean(self.value), "se": _clean(self.se), "upper": _clean(self.upper),
               "reason": self.reason}
        for k, v in self.extra.items():
            out.setdefault(k, _clean(v))
        return out


def _clean(v: Any) -> Any:
    """JSON-safe scalar: NaN and infinities become None, numpy scalars become Python ones."""
    if v is None:
        return None
    if hasattr(v, "item") and getattr(v, "ndim", 0) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def _real(v: Any) -> tuple[Any, str | None]:
    """(v as a plain Python int or float, None), or (None, what v is) when it is not a real number.

    numpy and cupy scalars and 0-d arrays of an integer or float dtype are accepted; bools, complex
    numbers, strings, arrays and everything else are not.
    """
    if v is None or type(v) is float or type(v) is int:     # the common case, first
        return v, None
    if getattr(v, "ndim", None) == 0 and hasattr(v, "dtype"):
        kind = getattr(v.dtype, "kind", "")
        if kind not in ("i", "u", "f"):
            what = {"b": "bool", "c": "complex"}.get(kind, f"{type(v).__name__} of dtype {v.dtype}")
            return None, _a(what)
        from gpurisk.xp import scalar
        v = scalar(v)                    # a device scalar comes to the host by name
    if isinstance(v, bool):
        return None, "a bool"
    if isinstance(v, complex):
        return None, "a complex"
    if isinstance(v, numbers.Integral):
        return int(v), None
    if isinstance(v, numbers.Real):
        return float(v), None
    shape = getattr(v, "shape", None)
    if shape is not None:
        return None, _a(f"{type(v).__name__} of shape {tuple(shape)}")
    return None, _a(type(v).__name__)


def _a(what: str) -> str:
    return ("an " if what[:1].lower() in "aeio" else "a ") + what


def checked_result(res: Any) -> Result:
    """``res`` as a well-formed :class:`Result`, or a not-applicable one saying what was wrong.

    A Result has a finite real value or a reason; ``se`` and ``upper`` are finite real numbers or
    None (NaN with a reason); the numbers come back as plain Python ints and floats, and ``extra``
    must be JSON once cleaned. Nothing a measure returned is quoted, only its type.
    """
    if _simple(res):
        return res
    if not isinstance(res, Result):
        return Result.failure(f"measure returned {type(res).__name__}, not a gpurisk.Result")
    reason = res.reason
    if reason is not None and not isinstance(reason, str):
        return Result.failure(f"measure returned a reason of type {type(reason).__name__}, "
                                     "not a text")
    has_reason = bool(reason and reason.strip())
    clean = {}
    for attr in ("value", "se", "upper"):
        v, bad = _real(getattr(res, attr))
        as_ = "" if attr == "value" else f" as {attr}"
        if bad is not None:
            return Result.failure(f"measure returned {bad}{as_}, not a real number")
        if isinstance(v, float) and not math.isfinite(v) and not has_reason:
            shown = "NaN" if math.isnan(v) else str(v)
            return Result.failure(f"measure returned {shown}{as_} without a reason")
        clean[attr] = v
    if clean["value"] is None and not has_reason:
        return Result.failure("measure returned no value and no reason")
    if not isinstance(res.extra, dict):
        return Result.failure(f"measure returned extra of type {type(res.extra).__name__}, "
                                     "not a dict")
    same = all(getattr(res, a) is clean[a] for a in clean)
    out = res if same else replace(res, **clean)
    if all(_plain(v) for v in res.extra.values()):   # scalars: JSON once cleaned (the fast path:
        return out                                      # a scan checks thousands of Results)
    try:
        import json
        json.dumps(out.to_dict(), allow_nan=False)
    except (TypeError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Result.failure(f"measure returned extra that is not JSON ({why})")
    return out


_PLAIN = (str, int, float, bool, type(None))
_NUMBER = (int, float, type(None))


def _simple(res) -> bool:
    """True for a Result that needs no conversion and passes every check: plain Python numbers
    (finite, or any with a reason), a value or a reason, plain scalars in ``extra`` (the common
    case, checked without building the JSON document)."""
    if type(res) is not Result or type(res.extra) is not dict:
        return False
    reason, v, se, up = res.reason, res.value, res.se, res.upper
    if reason is not None and (type(reason) is not str or not reason.strip()):
        return False
    if type(v) not in _NUMBER_SET or type(se) not in _NUMBER_SET or type(up) not in _NUMBER_SET:
        return False
    if reason is None and (v is None or v != v or v in _INF or se in _INF or up in _INF
                           or (se is not None and se != se) or (up is not None and up != up)):
        return False
    for x in res.extra.values():
        if type(x) not in _PLAIN_SET:
            return False
    return True


_NUMBER_SET = frozenset(_NUMBER)
_PLAIN_SET = frozenset(_PLAIN)
_INF = (math.inf, -math.inf)


def _plain(v) -> bool:
    """A value that :func:`_clean` makes JSON whatever it holds (NaN and inf become None)."""
    if type(v) in _PLAIN_SET:
        return True
    import numpy as np
    return isinstance(v, (np.integer, np.floating, np.bool_))


@dataclass
class Context:
    """Everything besides the counts that a measure may read.

    ``fraction`` is pi (given, or n/N when a population was supplied), ``alpha`` the one-sided level
    of upper bounds, ``seed`` the seed of every random procedure, ``options`` per-measure options
    (``options["theta_hat_dis"]["K"]``).
    """

    fraction: float | None = None
    fraction_source: str | None = None  # "given" | "n/N"
    alpha: float = 0.01
    seed: int = 0
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: values of the sample columns that measures' column options name, one numpy array per column,
    #: in the order of ``table.record_cell()`` (filled by :func:`gpurisk.assess`)
    columns: Mapping[str, Any] = field(default_factory=dict)

    def option(self, measure: str, key: str, default: Any = None) -> Any:
        return self.options.get(measure, {}).get(key, default)

    def column(self, name: str):
        """The sample's values of column ``name``, one per record in ``table.record_cell()`` order."""
        name = str(name)
        if name not in self.columns:
            from gpurisk.errors import BadInput
            have = ", ".join(map(repr, self.columns)) or "none"
            raise BadInput(f"column {name!r} was not passed to the measures (passed: {have})")
        return self.columns[name]


class Measure:
    """Base class of every measure, built-in or third-party.

    Class attributes describe it (``gpurisk measures`` lists them); :meth:`compute` does the work.
    Write ``compute`` against ``table.xp`` (numpy or cupy) and the table's count arrays.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    needs: ClassVar[frozenset[str]] = frozenset()
    level: ClassVar[str] = "file"  # "file" or "record"
    reference: ClassVar[str] = ""
    #: one line: what the value estimates and under which intruder scenario (``gpurisk assess``
    #: prints it under "what each figure answers"), e.g. "k: the smallest cell of the release; ..."
    scenario: ClassVar[str | None] = None
    #: options, each a :class:`gpurisk.Option` (type, default, range, help) or a plain default, e.g.
    #: ``{"K": Option(int, 100_000, min=1)}`` or ``{"K": 100_000}``. Turned into an
    #: :class:`~gpurisk.options.OptionSpecs` when the class is made: ``options["K"]`` is the default,
    #: ``options.specs["K"]`` the declaration; ``--option NAME.K=V`` is checked against it.
    options: ClassVar[Mapping[str, Any]] = OptionSpecs()
    #: an option namespace shared with other measures that this one also reads (e.g. ``kim_jeong``:
    #: ``--option kim_jeong.p_f2=0.1`` sets p_f2 for each of them), or None
    shared_options: ClassVar[str | None] = None
    #: name of the measure whose true value this one estimates ("theta" for theta_hat), or None;
    #: ``gpurisk validate`` pairs each estimate with that truth
    estimates: ClassVar[str | None] = None
    #: options whose value names a column of the sample that the measure reads with
    #: ``ctx.column(...)`` (declare ``"columns"`` in ``needs`` too), e.g. ("sensitive",)
    column_options: ClassVar[tuple[str, ...]] = ()
    #: options without which the measure does not apply (its ``compute`` then says why, reading no
    #: cell), e.g. ("matrices",): on a distributed backend a run does not bring the cells to the
    #: client for a "cells" measure whose required option was not given
    requires_options: ClassVar[tuple[str, ...]] = ()
    #: run when no measures are named; costly measures (a model fit) set False and run when named
    default: ClassVar[bool] = True
    #: what the measure reads of the table:
    #:
    #: - "summary": ``compute`` reads n, N, ``n_r``/``N_r``, ``freq_of_freq``, ``fof_vector``,
    #:   ``unique_stats``, ``pop_uniques``, the categories;
    #: - "buckets": the measure reads the cells bucket by bucket and does not write ``compute``: it
    #:   defines :meth:`map_bucket` (a small dict from one :class:`~gpurisk.freq.buckets.CellBucket`
    #:   of cells: ``f``, ``F``, ``w`` in ``bucket.xp``) and :meth:`reduce_buckets` (the Result from
    #:   the list of those dicts, the table's summaries and the Context);
    #: - "cells": ``compute`` reads the table's count arrays, or each record's cell.
    #:
    #: On a distributed backend a run whose measures all read summaries or buckets keeps the cells
    #: on the workers: the summaries and the bucket maps are computed there and only they reach the
    #: client (:class:`gpurisk.freq.summary.SummaryTable`). The conformance kit checks a "summary"
    #: measure against that table, and a "buckets" measure on random splits of the cells.
    reads: ClassVar[str] = "cells"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        opts = cls.__dict__.get("options")
        if isinstance(opts, Mapping) and not isinstance(opts, OptionSpecs):
            try:
                cls.options = OptionSpecs(opts)
            except Exception:  # noqa: BLE001 - left as declared; the conformance kit reports it
                pass

    def compute(self, table, ctx: Context) -> Result:
        """The measure's Result on ``table``. A "buckets" measure inherits this one: the buckets'
        dicts (mapped on the workers, or here the whole table as one bucket) reduced."""
        if self.reads != "buckets":  # pragma: no cover - abstract
            raise NotImplementedError
        from gpurisk.freq.buckets import bucket_parts
        return self.reduce_buckets(bucket_parts(self, table, ctx), table, ctx)

    def map_bucket(self, bucket, ctx: Context) -> dict:  # pragma: no cover - abstract
        """("buckets" measures) A small dict of numbers or short arrays from one bucket of cells
        (:class:`gpurisk.freq.buckets.CellBucket`: ``f``, ``F`` or None, ``w`` or None, arrays of
        ``bucket.xp``; possibly no cell). Runs where the cells are: a Dask worker, a GPU."""
        raise NotImplementedError

    def reduce_buckets(self, parts: list, table, ctx: Context) -> Result:  # pragma: no cover
        """("buckets" measures) The Result from the buckets' dicts (a list, in no promised order)
        and what ``table`` answers from its summaries (n, N, ``fof_vector``, ``unique_stats``...;
        never a cell array: on a distributed run ``table`` is a SummaryTable)."""
        raise NotImplementedError

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"name": cls.name, "description": cls.description, "needs": sorted(cls.needs),
                "level": cls.level, "reference": cls.reference, "options": dict(cls.options),
                "estimates": cls.estimates, "column_options": list(cls.column_options),
                "default": cls.default, "reads": cls.reads,
                "option_specs": {k: o.describe() for k, o in option_specs(cls).items()},
                "shared_options": getattr(cls, "shared_options", None)}


def _has_weights(table) -> bool:
    has = getattr(table, "has_weights", None)
    return bool(has) if has is not None else table.w is not None


def missing_needs(measure: type[Measure], table, ctx: Context) -> str | None:
    """The reason a measure cannot run on this table and context, or None when it can (a
    :class:`gpurisk.core.messages.Reason`: the flag on the command line, the parameter in the API)."""
    from gpurisk.core.messages import Reason
    if "population" in measure.needs and table.N is None:
        return Reason("needs population counts F_j: give {population} or {sample_flag}")
    if "fraction" in measure.needs and ctx.fraction is None:
        return Reason("needs the sampling fraction pi: give {fraction}, {population} or {sample_flag}")
    if "weights" in measure.needs and not _has_weights(table):
        return Reason("needs design weights: give {weights}")
    if ("records" in measure.needs or "columns" in measure.needs) and \
            getattr(table, "record_locator", None) is None:
        return f"needs each record's cell, which the {table.backend} backend did not keep"
    for opt in measure.column_options:
        col = ctx.option(measure.name, opt, measure.options.get(opt))
        if col is None:
            return Reason(f"needs a column: give {{option:{measure.name}.{opt}=COLUMN}}")
        if str(col) not in ctx.columns:
            return f"the sample's column {col!r} (option {measure.name}.{opt}) was not passed to the measure"
    return None
