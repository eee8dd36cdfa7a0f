"""Criteria of ``protect``: ``MEASURE[.FIELD] OP NUMBER``, e.g. ``theta_hat.upper<=0.1``.

MEASURE is any registered measure (built-in or from a plugin); FIELD is ``value`` (the default),
``upper``, ``se`` or a key of the Result's ``extra`` (a measure may name another default with the
class attribute ``criterion_field``: ``k_anonymity>=5`` reads ``k_achieved``); OP is one of
``<= < >= >``. A criterion holds on a node when it holds on every scenario; a value the measure
cannot give (a reason instead of a number) does not meet it, unless the run says ``--undefined
meets`` (θ̂ with n1 = n2 = 0: no unique match can happen).

Exact first (issue 40). Where the population counts are known (a register with a sample flag, a
population, π = 1), a criterion on an estimator's value or upper bound (``theta_hat.upper<=0.1``,
``matches_ll<=5``) is judged on the value it estimates, counted (``theta<=0.1``, ``matches<=5``):
:func:`exact_criteria`; the criterion keeps the text the user wrote in ``asked``.

Monotone criteria. A measure may declare ``monotone = {"FIELD": +1 | -1}``: the field never falls
(+1) or never rises (-1) when any key is generalised (SPEC §11: k-anonymity's k and the number of
sample uniques are; θ̂ is not). A criterion ``FIELD >= x`` on a +1 field, or ``FIELD <= x`` on a -1
field, once met by a node is met by every node above it: the only criteria the search may prune on.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

from gpurisk.core.messages import bad_input

OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
_RE = re.compile(r"^\s*([A-Za-z_][\w\-]*)(?:\.([A-Za-z_][\w\-]*))?\s*([<>=!]+)\s*(\S.*?)\s*$")


@dataclass(frozen=True)
class Criterion:
    measure: str
    field: str
    op: str
    bound: float
    text: str
    #: meeting it is inherited by every more general node (a monotone field, the right direction)
    upward: bool = False
    #: whether a node where the measure gives no value (a reason instead) meets it: by default not
    #: (``--undefined meets``: e.g. θ̂ with no sample unique and no pair, where no unique match can
    #: happen)
    undefined_meets: bool = False
    #: the criterion as the user wrote it, where it is judged on another measure: an estimator's
    #: criterion judged on the exact value when the population counts are known
    #: (:func:`exact_criteria`); None otherwise
    asked: str | None = None

    def __str__(self) -> str:
        return self.text

    @property
    def lower_is_better(self) -> bool:
        return self.op in ("<=", "<")

    def holds(self, value) -> bool:
        if value is FAILED:         # the measure failed (raised, or returned nonsense): never met
            return False
        if value is None or math.isnan(value):
            return self.undefined_meets
        return OPS[self.op](value, self.bound)

    def worst(self, values):
        """The most adverse of several scenarios' values (NaN, a missing value, is the worst)."""
        vals = [math.nan if v is None else float(v) for v in values]
        if any(math.isnan(v) for v in vals):
            return math.nan
        return max(vals) if self.lower_is_better else min(vals)


def parse_criterion(text: str, registry=None) -> Criterion:
    """Parse and check one criterion against the measure registry (one-line BadInput otherwise)."""
    from gpurisk.plugins import measure_registry, unknown_measure_hint
    registry = measure_registry() if registry is None else registry
    m = _RE.match(str(text))
    if not m:
        raise bad_input(f"{{arg:--criterion|criteria}} {text!r} is not MEASURE[.FIELD] OP NUMBER "
                       "(e.g. theta_hat.upper<=0.1, k_anonymity>=5)")
    name, fld, op, num = m.groups()
    if op not in OPS:
        raise bad_input(f"{{arg:--criterion|criteria}} {text!r}: unknown operator {op!r}; use one of "
                       f"{', '.join(OPS)}")
    if name not in registry:
        raise bad_input(f"{{arg:--criterion|criteria}} {text!r}: unknown measure {name!r} (see 'gpurisk measures')"
                       f"{unknown_measure_hint()}")
    try:
        bound = float(num)
    except ValueError:
        raise bad_input(f"{{arg:--criterion|criteria}} {text!r}: the bound {num!r} is not a number") from None
    if not math.isfinite(bound):
        raise bad_input(f"{{arg:--criterion|criteria}} {text!r}: the bound must be a finite number")
    cls = registry[name].cls
    if cls.level != "file":
        raise bad_input(f"{{arg:--criterion|criteria}} {text!r}: {name!r} is a record-level measure; criteria "
                       "take file-level measures")
    fld = fld or getattr(cls, "criterion_field", "value") or "value"
    direction = dict(getattr(cls, "monotone", {}) or {}).get(fld, 0)
    upward = (direction > 0 and op in (">=", ">")) or (direction < 0 and op in ("<=", "<"))
    return Criterion(name, fld, op, bound, f"{name}.{fld}{op}{num.strip()}", upward)


def parse_criteria(items, undefined: str = "fails") -> list[Criterion]:
    """Several criteria; ``undefined`` ("fails" or "meets") says whether a node where a measure
    gives no value meets its criterion."""
    from dataclasses import replace
    if undefined not in ("fails", "meets"):
        raise bad_input(f"{{arg:--undefined|undefined}} {undefined!r}: give 'fails' or 'meets'")
    if isinstance(items, (str, Criterion)):
        items = [items]
    out = [replace(c if isinstance(c, Criterion) else parse_criterion(c),
                   undefined_meets=undefined == "meets") for c in (items or [])]
    if not out:
        raise bad_input("protect needs at least one {arg:--criterion|criteria} (e.g. "
                        "theta_hat.upper<=0.1)")
    return out


class _Failed(float):
    """NaN (no value, in every table and comparison) that a criterion never meets: the value of a
    measure that failed (see ``Result.failed``), whatever ``--undefined`` says."""

    def __new__(cls):
        return super().__new__(cls, "nan")

    def __repr__(self) -> str:
        return "FAILED"


FAILED = _Failed()


def field_value(crit: Criterion, res):
    """The criterion's field of a measure's Result (None when the measure gave a reason;
    :data:`FAILED` when it failed)."""
    if getattr(res, "failed", False):
        return FAILED
    if crit.field == "value":
        v = res.value
    elif crit.field in ("upper", "se"):
        v = getattr(res, crit.field)
    elif crit.field in res.extra:
        v = res.extra[crit.field]
    elif res.reason:
        return None
    else:
        have = ", ".join(["value", "upper", "se", *map(str, res.extra)])
        raise bad_input(f"{{arg:--criterion|criteria}} {crit.text!r}: {crit.measure!r} has no field {crit.field!r} "
                       f"(its fields: {have})")
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def exact_criteria(crits: list[Criterion], registry=None) -> list[Criterion]:
    """With population counts: each criterion on the value or upper bound of a measure that
    estimates a counted value (:func:`gpurisk.measures.headline.truth_of`) judged on that value
    instead (same operator and bound, ``asked`` holding the text given); the others unchanged."""
    from dataclasses import replace

    from gpurisk.measures.headline import truth_of
    from gpurisk.plugins import measure_registry
    registry = measure_registry() if registry is None else registry
    out = []
    for c in crits:
        truth = truth_of(c.measure)
        if truth is None or c.field not in ("value", "upper") or truth not in registry:
            out.append(c)
            continue
        at = min(i for i, ch in enumerate(c.text) if ch in "<>")
        num = c.text[at + len(c.op):]
        direction = dict(getattr(registry[truth].cls, "monotone", {}) or {}).get("value", 0)
        upward = (direction > 0 and c.op in (">=", ">")) or (direction < 0 and c.op in ("<=", "<"))
        out.append(replace(c, measure=truth, field="value", text=f"{truth}.value{c.op}{num}",
                           upward=upward, asked=c.text))
    return out
