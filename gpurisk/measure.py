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
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

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

    @classmethod
    def not_applicable(cls, reason: str, **extra: Any) -> "Result":
        return cls(value=None, reason=reason, extra=dict(extra))

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
            from .errors import BadInput
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
    #: options and their defaults, e.g. {"K": 100_000}
    options: ClassVar[Mapping[str, Any]] = {}
    #: name of the measure whose true value this one estimates ("theta" for theta_hat), or None;
    #: ``gpurisk validate`` pairs each estimate with that truth
    estimates: ClassVar[str | None] = None
    #: options whose value names a column of the sample that the measure reads with
    #: ``ctx.column(...)`` (declare ``"columns"`` in ``needs`` too), e.g. ("sensitive",)
    column_options: ClassVar[tuple[str, ...]] = ()
    #: run when no measures are named; costly measures (a model fit) set False and run when named
    default: ClassVar[bool] = True

    def compute(self, table, ctx: Context) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def describe(cls) -> dict[str, Any]:
        return {"name": cls.name, "description": cls.description, "needs": sorted(cls.needs),
                "level": cls.level, "reference": cls.reference, "options": dict(cls.options),
                "estimates": cls.estimates, "column_options": list(cls.column_options),
                "default": cls.default}


def missing_needs(measure: type[Measure], table, ctx: Context) -> str | None:
    """The reason a measure cannot run on this table and context, or None when it can."""
    if "population" in measure.needs and table.F is None:
        return "needs population counts F_j: give --population POP or --sample-flag COL"
    if "fraction" in measure.needs and ctx.fraction is None:
        return "needs the sampling fraction pi: give --fraction, --population or --sample-flag"
    if "weights" in measure.needs and table.w is None:
        return "needs design weights: give --weights COL"
    if ("records" in measure.needs or "columns" in measure.needs) and \
            getattr(table, "record_locator", None) is None:
        return f"needs each record's cell, which the {table.backend} backend did not keep"
    for opt in measure.column_options:
        col = ctx.option(measure.name, opt, measure.options.get(opt))
        if col is None:
            return f"needs a column: give --option {measure.name}.{opt}=COLUMN"
        if str(col) not in ctx.columns:
            return f"the sample's column {col!r} (option {measure.name}.{opt}) was not passed to the measure"
    return None
