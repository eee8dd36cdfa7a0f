"""Typed measure options: what a measure declares, and the check of what a user passes.

A measure declares its options in ``Measure.options``, each either an :class:`Option` or, as
before, a plain default (its type is then inferred from the default; a None default takes any
value)::

    options = {"K": gpurisk.Option(int, 200_000, min=1, max=10**12, help="simulated intrusions"),
               "label": "x"}                      # a plain default: a str option

``Measure.options[name]`` still gives the default, so ``ctx.option(self.name, "K",
self.options["K"])`` keeps working; the declarations are in ``Measure.options.specs``.

:func:`check_options` checks ``--option MEASURE.NAME=VALUE`` (and the ``options=`` argument of
:func:`gpurisk.assess` and :func:`gpurisk.scan`) before any record is read: an unknown measure, an
unknown option, a value of the wrong type or out of range is :class:`~gpurisk.BadInput` naming the
measure, the option and what is expected. The values come back converted (an ``int`` option gives
a Python int). A measure may also read an option namespace shared with other measures
(``Measure.shared_options``, e.g. ``kim_jeong``); its keys are those of the measures sharing it.
"""
from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from gpurisk.errors import BadInput

#: the types an option may declare (None: any value)
TYPES = (int, float, str, bool, list, dict)
_NAMES = {int: "int", float: "float", str: "str", bool: "bool", list: "list", dict: "dict"}


class _Wrong(Exception):
    """A value that does not fit the declared type (the caller words the message)."""


@dataclass(frozen=True)
class Option:
    """One measure option: its type, default, and optional range, choices and help.

    ``type`` is one of int, float, str, bool, list, dict, a tuple of them (the first that fits is
    taken), or None (any value). ``min``/``max`` bound numbers (and a list's items), inclusive unless
    ``min_open``/``max_open``; ``choices`` lists the allowed values; ``item`` is the type of a
    list's items. The default is shown by ``gpurisk measures`` and is not checked (it may be a
    description such as ``"pi"``); a None value is accepted when the default is None (not set).
    """

    type: Any = None
    default: Any = None
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    help: str = ""
    item: Any = None
    min_open: bool = False
    max_open: bool = False

    def __post_init__(self):
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        for t in types:
            if t is not None and t not in TYPES:
                raise TypeError(f"Option type {t!r} is not one of int, float, str, bool, list, dict "
                                "or None")
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(self.choices))

    @classmethod
    def infer(cls, default: Any) -> "Option":
        """The declaration of a plain default: its type, or any value for None (or an odd value)."""
        for t in (bool, int, float, str, list, dict):
            if isinstance(default, t):
                return cls(t, default)
        return cls(None, default)

    # --- what is expected -------------------------------------------------------------------------
    def type_name(self) -> str:
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        names = []
        for t in types:
            name = "any" if t is None else _NAMES[t]
            if t is list and self.item is not None:
                name = f"list of {_NAMES.get(self.item, 'any')}"
            names.append(name)
        return " or ".join(names)

    def range_text(self) -> str | None:
        if self.min is None and self.max is None:
            return None
        if self.max is None:
            return f"{'>' if self.min_open else '>='} {_num(self.min)}"
        if self.min is None:
            return f"{'<' if self.max_open else '<='} {_num(self.max)}"
        return (f"{'(' if self.min_open else '['}{_num(self.min)}, {_num(self.max)}"
                f"{')' if self.max_open else ']'}")

    def expected(self) -> str:
        out = self.type_name()
        if self.choices is not None:
            out += ": one of " + ", ".join(map(str, self.choices))
        rng = self.range_text()
        if rng:
            out += f" in {rng}" if rng[0] in "([" else f" {rng}"
        return out

    def describe(self) -> dict[str, Any]:
        """JSON-able description (``gpurisk measures --json``)."""
        return {"type": self.type_name(), "default": self.default, "min": self.min, "max": self.max,
                "min_open": self.min_open, "max_open": self.max_open,
                "choices": None if self.choices is None else list(self.choices),
                "range": self.range_text(), "help": self.help}

    # --- checking a value ---------------------------------------------------------------------------
    def coerce(self, value: Any, where: str, text: str | None = None) -> Any:
        """``value`` converted to the declared type, or BadInput naming ``where`` (MEASURE.NAME).

        ``text`` is the value as typed on the command line (kept as it is for a str option, and
        quoted in messages).
        """
        shown = _Shown(value, text)
        if value is None and (self.default is None or self.type is None):
            return None
        types = self.type if isinstance(self.type, tuple) else (self.type,)
        for t in types:
            try:
                out = self._convert(t, value, text)
            except _Wrong:
                continue
            self._check_range(out, where, shown)
            return out
        raise BadInput(f"option {where}={shown!r} is not {_article(self.type_name())} "
                       f"(expected {self.expected()})")

    def _convert(self, t, value, text):
        if t is None:
            return value
        if t is list:
            if isinstance(value, (list, tuple)):
                items = list(value)
            elif isinstance(value, str) and self.item not in (None, str):
                items = [_json_or_text(v.strip()) for v in value.split(",") if v.strip()]
            else:
                items = [value]
            if self.item is None:
                return items
            return [_scalar(self.item, v, None) for v in items]
        if t is dict:
            if isinstance(value, Mapping):
                return dict(value)
            raise _Wrong
        return _scalar(t, value, text)

    def _check_range(self, out, where, value) -> None:
        values = out if isinstance(out, list) else [out]
        for v in values:
            bad = False
            if self.choices is not None and not isinstance(out, list) and v not in self.choices:
                raise BadInput(f"option {where}={value!r} is not one of "
                               f"{', '.join(map(str, self.choices))}")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if self.min is not None:
                    bad |= v <= self.min if self.min_open else v < self.min
                if self.max is not None:
                    bad |= v >= self.max if self.max_open else v > self.max
            if bad:
                raise BadInput(f"option {where}={value!r} is out of range (expected {self.expected()})")


class _Shown:
    """A value as a message shows it: repr, or the command line's text as typed (quoted when it
    stayed text)."""

    def __init__(self, value, text):
        self.value, self.text = value, text

    def __repr__(self) -> str:
        if self.text is None:
            return repr(self.value)
        return repr(self.text) if isinstance(self.value, str) else self.text


def _num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _article(what: str) -> str:
    return ("an " if what[:1] in "aeiou" else "a ") + what


def _json_or_text(s: str) -> Any:
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        return s


def _scalar(t, value, text):
    """``value`` as an int, float, str or bool, or _Wrong. Text is not read as a number."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:   # numpy scalars
        value = value.item()
    if t is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, numbers.Integral) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
            return value.strip().lower() in ("true", "yes")
        raise _Wrong
    if t is str:
        if text is not None:
            return text
        if isinstance(value, str):
            return value
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return str(value)
        raise _Wrong
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _Wrong
    if t is int:
        if isinstance(value, numbers.Integral):
            return int(value)
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise _Wrong
    value = float(value)
    if not math.isfinite(value):
        raise _Wrong
    return value


class OptionSpecs(dict):
    """``Measure.options``: name -> default (as before), with the declarations in ``.specs``."""

    def __init__(self, declared: Mapping[str, Any] | None = None):
        declared = dict(declared or {})
        specs = {k: v if isinstance(v, Option) else Option.infer(v) for k, v in declared.items()}
        super().__init__({k: s.default for k, s in specs.items()})
        self.specs: dict[str, Option] = specs
        #: the options given as plain defaults, whose type was inferred
        self.inferred: frozenset[str] = frozenset(k for k, v in declared.items()
                                                  if not isinstance(v, Option))


def option_specs(cls) -> dict[str, Option]:
    """name -> :class:`Option` of a measure class (plain defaults inferred)."""
    opts = getattr(cls, "options", None) or {}
    specs = getattr(opts, "specs", None)
    if isinstance(specs, dict):
        return specs
    return {k: Option.infer(v) for k, v in dict(opts).items()}


def spec_text(d: Mapping[str, Any]) -> str:
    """One line for a table: ``int = 200000 in [1, 1e+12]``, from :meth:`Option.describe`."""
    out = f"{d['type']} = {d['default']!r}"
    if d.get("choices"):
        out += " (" + "|".join(map(str, d["choices"])) + ")"
    if d.get("range"):
        out += f" {d['range']}" if d["range"][0] in "([" else f" ({d['range']})"
    return out


def namespaces(registry) -> dict[str, dict[str, Option]]:
    """Every option namespace (each measure's name, and each shared namespace) -> its options."""
    out: dict[str, dict[str, Option]] = {name: option_specs(r.cls) for name, r in registry.items()}
    for name, r in registry.items():
        shared = getattr(r.cls, "shared_options", None)
        if shared and shared not in registry:
            space = out.setdefault(shared, {})
            for k, spec in option_specs(r.cls).items():
                space.setdefault(k, spec)
    return out


def check_options(options: Mapping[str, Mapping[str, Any]] | None,
                  texts: Mapping[tuple[str, str], str] | None = None, registry=None,
                  hint: str = "") -> dict[str, dict[str, Any]]:
    """The options checked against the measures' declarations in ``registry`` and converted;
    BadInput (one line naming the measure, the option and what is expected) for anything else.

    ``texts`` maps (measure, option) to the value as typed on the command line. Callers use
    :func:`gpurisk.plugins.check_options`, which passes the registry (this module sits below the
    plugin manager and does not import it).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise BadInput(f"options must map measure names to {{option: value}} mappings, "
                       f"not {type(options).__name__}")
    if registry is None:
        raise TypeError("check_options needs the measure registry: call gpurisk.plugins.check_options")
    spaces = namespaces(registry)
    texts = texts or {}
    out: dict[str, dict[str, Any]] = {}
    for measure, values in options.items():
        if measure not in spaces:
            shared = sorted(set(spaces) - set(registry))
            raise BadInput(f"option for unknown measure {measure!r}; measures: "
                           f"{', '.join(registry)}"
                           + (f"; shared option names: {', '.join(shared)}" if shared else "")
                           + hint)
        if not isinstance(values, Mapping):
            raise BadInput(f"options of {measure!r} must be a mapping of option names to values, "
                           f"not {type(values).__name__}")
        known = spaces[measure]
        mine = out.setdefault(measure, {})
        for key, value in values.items():
            if key not in known:
                takes = ", ".join(f"{k} ({s.type_name()})" for k, s in known.items())
                raise BadInput(f"unknown option {measure}.{key}; {measure} takes "
                               + (takes if takes else "no options"))
            mine[key] = known[key].coerce(value, f"{measure}.{key}", texts.get((measure, key)))
    return out
