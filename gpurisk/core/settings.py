"""What every command shares besides its data and keys, checked once: the sampling :class:`Design`,
the :class:`Run` (which measures, their options, α, seed, time limit) and the :class:`Reading` (how
the records are read and counted: missing values, recodes, backend, CSV separator and encoding).
Every workflow in :mod:`gpurisk.workflows` takes them (``scan_with(data, design, run, reading,
...)``); :func:`inputs` builds the one :class:`gpurisk.inputs.Inputs` from them.

Each field is declared once in :data:`PARAMS` as a :class:`Param`: its Python name, its command-line
flag and an :class:`~gpurisk.options.Option` (type, range) — the declarations measures use for their
own options. ``__post_init__`` checks every field against its declaration; a bad value is a
:class:`SettingError` (a :class:`~gpurisk.BadInput`) in one format, naming the Python parameter
(``alpha=7 is outside (0, 0.5)``); the command line prints the flag instead
(``--alpha 7 is outside (0, 0.5)``, see :meth:`SettingError.cli_message`).

    >>> Run(alpha=0.05, seed=3).alpha
    0.05
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from gpurisk.errors import BadInput
from gpurisk.options import Option


class SettingError(BadInput):
    """A setting out of its declared range: one line naming the Python parameter; the command line
    shows :meth:`cli_message`, naming the flag."""

    def __init__(self, param: "Param", shown: str, problem: str):
        self.param, self.shown, self.problem = param, shown, problem
        super().__init__(f"{param.name}={shown} {problem}")

    def cli_message(self) -> str:
        return f"{self.param.flag} {self.shown} {self.problem}"


@dataclass(frozen=True)
class Param:
    """One shared setting: Python name, command-line flag, declaration (type and range), and what
    it is (added to the message when it says more than the name)."""

    name: str
    flag: str
    spec: Option
    what: str = ""

    def check(self, value: Any) -> Any:
        """``value`` converted to the declared type (int or float), or :class:`SettingError`."""
        if value is None and self.spec.default is None:
            return None
        shown = _shown(value)
        integer = self.spec.type is int
        if hasattr(value, "item") and getattr(value, "ndim", None) == 0:   # numpy scalars
            value = value.item()
        if isinstance(value, str):          # text from a config or the API: read as a number
            try:
                value = int(value) if integer else float(value)
            except ValueError:
                raise SettingError(self, shown, "is not " + self._kind()) from None
            shown = shown[1:-1].strip()        # a number as typed, unquoted
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise SettingError(self, shown, "is not " + self._kind())
        if integer:
            if isinstance(value, numbers.Integral):
                value = int(value)
            elif math.isfinite(value) and float(value).is_integer():
                value = int(value)
            else:
                raise SettingError(self, shown, "is not " + self._kind())
        else:
            value = float(value)
        if not self._in_range(value):
            raise SettingError(self, shown, self._range_problem())
        return value

    def _kind(self) -> str:
        return ("a whole number" if self.spec.type is int else "a number") + self._what()

    def _what(self) -> str:
        return f" ({self.what})" if self.what else ""

    def _in_range(self, v) -> bool:
        s = self.spec
        if isinstance(v, float) and not math.isfinite(v):
            return False
        if s.min is not None and (v <= s.min if s.min_open else v < s.min):
            return False
        return not (s.max is not None and (v >= s.max if s.max_open else v > s.max))

    def _range_problem(self) -> str:
        rng = self.spec.range_text() or ""
        if rng[:1] in "([":
            return f"is outside {rng}{self._what()}"
        return f"must be {rng}" + (" and finite" if self.spec.type is float else "") + self._what()


#: seconds a measure may run before its row says "exceeded the time limit" and the run goes on
#: (``--measure-timeout``, ``measure_timeout=``; None stands for this default): long enough for the
#: slowest built-in measure on a large file, short enough that a measure that hangs cannot hang
#: the run
DEFAULT_MEASURE_TIMEOUT = 600.0

#: settings of one command, declared here beside the shared ones (one format, the flag on the CLI)
THREADS = Param("threads", "--threads", Option(int, None, min=0, help="roll-up threads"))
PROCESSES = Param("processes", "--processes", Option(int, None, min=0, help="measure processes"))
FRACTIONS = Param("fractions", "--fractions",
                  Option(float, None, min=0.0, max=1.0, min_open=True, max_open=True,
                         help="validate's sampling fractions"))


CHECKPOINT_EVERY = Param("checkpoint_every", "--checkpoint-every",
                         Option(float, 10.0, min=0.0, min_open=True),
                         what="seconds between protect's checkpoints")
#: record-risk's: each risk threshold (a probability), and the log-linear table's cell limit (NaN
#: would switch that guard off)
THRESHOLD = Param("thresholds", "--threshold", Option(float, None, min=0.0, max=1.0),
                  what="a risk is a probability")
CELL_LIMIT = Param("max_cells", "--max-cells", Option(float, 1e30, min=0.0, min_open=True),
                  what="the log-linear table's cell limit")


def suppress_limit(what: str) -> Param:
    """protect's --suppress-limit: a share of ``what`` (key values or records) in [0, 1)."""
    return Param("suppress_limit", "--suppress-limit",
                 Option(float, 0.0, min=0.0, max=1.0, max_open=True), what=f"a share of the {what}")


#: every shared setting, declared once (the CLI's option groups in :mod:`gpurisk.cli._common` show
#: the same flags)
PARAMS: dict[str, Param] = {p.name: p for p in (
    Param("fraction", "--fraction", Option(float, None, min=0.0, max=1.0, min_open=True,
                                           help="sampling fraction π")),
    Param("alpha", "--alpha", Option(float, 0.01, min=0.0, max=0.5, min_open=True, max_open=True,
                                     help="one-sided level of upper bounds")),
    Param("seed", "--seed", Option(int, 0, min=0, help="seed of random procedures")),
    Param("measure_timeout", "--measure-timeout",
          Option(float, None, min=0.0, min_open=True, help="seconds a measure may run"),
          what="the measure time limit, in seconds"),
)}


def _shown(value: Any) -> str:
    """A value as a message quotes it: text quoted, numbers as typed."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, (bool, numbers.Real)):
        return repr(value) if not isinstance(value, float) else f"{value:g}"
    if isinstance(value, str):
        return repr(value)
    return f"<{type(value).__name__}>"


def _text_or_none(name: str, flag: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SettingError(Param(name, flag, Option(str)), _shown(value), "is not a column name")
    return value


@dataclass(frozen=True)
class Design:
    """How the release was drawn: π (``fraction``), a population (frame or path), a column marking
    the released records of a register (``sample_flag``), a design-weight column (``weights``).
    π is checked to lie in (0, 1]; with a population or sample flag it defaults to n/N later."""

    fraction: float | None = None
    population: Any = None
    sample_flag: str | None = None
    weights: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "fraction", PARAMS["fraction"].check(self.fraction))
        object.__setattr__(self, "sample_flag",
                           _text_or_none("sample_flag", "--sample-flag", self.sample_flag))
        object.__setattr__(self, "weights", _text_or_none("weights", "--weights", self.weights))

    def kwargs(self) -> dict[str, Any]:
        """The fields as keyword arguments of the workflows."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def population_counts(self) -> bool:
        """Whether every cell's population count F_j will be known: a population, a register's
        sample flag, or π = 1 (the release is the population). Then the risk is counted, not
        estimated: commands lead with the exact values (:mod:`gpurisk.measures.headline`)."""
        return self.population is not None or self.sample_flag is not None or self.fraction == 1


@dataclass(frozen=True)
class Run:
    """What to compute: the ``measures`` (None: the command's default), their ``options`` (checked
    against the measures' declarations, see :func:`gpurisk.plugins.check_options`), ``alpha`` in
    (0, 0.5), ``seed`` a whole number >= 0, ``measure_timeout`` positive seconds (None: the default,
    :data:`DEFAULT_MEASURE_TIMEOUT`)."""

    measures: tuple[str, ...] | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    alpha: float = 0.01
    seed: int = 0
    measure_timeout: float | None = DEFAULT_MEASURE_TIMEOUT

    def __post_init__(self):
        set_ = object.__setattr__
        if self.measure_timeout is None:
            set_(self, "measure_timeout", DEFAULT_MEASURE_TIMEOUT)
        set_(self, "measures", measure_names(self.measures))
        if self.options:         # checked against the measures' declarations (loads the plugins)
            from gpurisk.plugins import check_options
            set_(self, "options", check_options(self.options))
        else:
            set_(self, "options", {})
        for name in ("alpha", "seed", "measure_timeout"):
            set_(self, name, PARAMS[name].check(getattr(self, name)))

    def kwargs(self, *names: str) -> dict[str, Any]:
        """The fields (or those named) as keyword arguments of the workflows (measures as a list)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if not names or f.name in names}
        if out.get("measures") is not None:
            out["measures"] = list(out["measures"])
        return out


#: how a missing key value is treated (``--missing``)
MISSING = ("category", "error")


@dataclass(frozen=True)
class Reading:
    """How the records are read and counted, the same for every command: ``missing`` ("category":
    a missing key value is a category of its own; "error"), ``recode`` (``["age=bands:5", ...]``,
    see :mod:`gpurisk.freq.recode`; regroups the counted table, never the records), ``backend``
    (None: ``$GPURISK_BACKEND`` or pandas), ``sep`` and ``encoding`` of CSV input, and
    ``allow_high_cardinality`` (accept a key with more than 1000 distinct values and more than n/2).
    ``missing`` and ``allow_high_cardinality`` are checked here; the recodes (against the keys), the
    backend, separator and encoding when :class:`gpurisk.inputs.Inputs` is built, before any file is
    read."""

    missing: str = "category"
    recode: Any = ()
    backend: str | None = None
    sep: str | None = None
    encoding: str = "utf-8"
    allow_high_cardinality: bool = False

    def __post_init__(self):
        if self.missing not in MISSING:
            raise BadInput(f"missing={self.missing!r} is not one of {', '.join(MISSING)}",
                           cli=f"--missing {self.missing!r} is not one of {', '.join(MISSING)}")
        flag = self.allow_high_cardinality
        if hasattr(flag, "item") and getattr(flag, "ndim", None) == 0:      # numpy scalars
            flag = flag.item()
        if not isinstance(flag, (bool, numbers.Integral)):
            raise SettingError(Param("allow_high_cardinality", "--allow-high-cardinality",
                                     Option(bool)), _shown(flag), "is not True or False")
        object.__setattr__(self, "allow_high_cardinality", bool(flag))
        if self.recode is None:
            object.__setattr__(self, "recode", ())

    def kwargs(self) -> dict[str, Any]:
        """The fields as keyword arguments of :class:`gpurisk.inputs.Inputs`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def inputs(data, keys, design: Design | None = None, reading: Reading | None = None, **kw):
    """The one :class:`gpurisk.inputs.Inputs` of a workflow: ``data`` and ``keys`` read as
    ``reading`` says, with ``design``'s π, population, sample flag and weights; ``kw`` are the
    command's own (``columns=``, ``role=``, or a field the command fixes, such as ``backend=``)."""
    from gpurisk.inputs import Inputs
    args = {**(design or Design()).kwargs(), **(reading or Reading()).kwargs(), **kw}
    return Inputs(data, keys, **args)


def measure_names(measures) -> tuple[str, ...] | None:
    """``"a,b"`` or an iterable of names as a tuple (None stays None: the command's default)."""
    if measures is None:
        return None
    if isinstance(measures, str):
        items = [m.strip() for m in measures.split(",")]
    else:
        try:
            items = [str(m).strip() for m in measures]
        except TypeError:
            raise BadInput(f"measures must be a list of measure names or 'a,b,c', not "
                           f"{type(measures).__name__}") from None
    return tuple(m for m in items if m)


def check(name: str, value: Any) -> Any:
    """One shared setting checked alone (``check("alpha", 0.05)``), for a workflow given it as a
    keyword."""
    return PARAMS[name].check(value)
