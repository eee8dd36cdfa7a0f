"""One convention for levels, in every command, file and page (issue 41).

From ``--alpha`` α (default 0.01) come two named figures, and only these two:

- the **one-sided (1 − α) upper bound**, a measure's ``upper`` (``matches_ll.upper``, the figure
  protect's criteria and the report's policy read): "one-sided 99 % upper bound";
- the **two-sided (1 − α) interval**, ``interval_lower`` to ``interval_upper`` where a measure gives
  one (z_{α/2} on each side): "two-sided 99 % interval".

At the same α the interval's upper end lies above the bound (z_{α/2} > z_α): they are two figures,
so each is printed with its words. :func:`bound_words` and :func:`interval_words` are the words;
:func:`level_fields` the fields a JSON document carries beside them.
"""
from __future__ import annotations


def pct(level: float) -> str:
    """0.99 -> "99 %"; 0.995 -> "99.5 %"."""
    return f"{100 * float(level):.4g} %"


def bound_words(alpha: float) -> str:
    """"one-sided 99 % upper bound" for α = 0.01."""
    return f"one-sided {pct(1.0 - float(alpha))} upper bound"


def interval_words(level: float) -> str:
    """"two-sided 99 % interval" for level 0.99 (= 1 − α)."""
    return f"two-sided {pct(level)} interval"


def level_fields(alpha: float, interval_level: float | None = None) -> dict:
    """The level fields of a JSON document: ``bound_level`` (1 − α, one-sided) and
    ``interval_level`` (1 − α unless a measure's own option set it, two-sided), with their words."""
    il = 1.0 - float(alpha) if interval_level is None else float(interval_level)
    return {"bound_level": 1.0 - float(alpha), "bound_sides": "one-sided",
            "bound_words": bound_words(alpha), "interval_level": il,
            "interval_sides": "two-sided", "interval_words": interval_words(il)}


def upper_legend(alpha: float) -> str:
    """The line under a table with an ``upper`` column."""
    return (f"upper: the {bound_words(alpha)} (--alpha {float(alpha):g}); an interval is the "
            f"{interval_words(1.0 - float(alpha))}")


def with_levels(headline: dict | None, measures, alpha: float) -> dict | None:
    """A headline dict (``measure``, ``value``, ``interval``, ``level``, ``beside``, ...) with the
    level fields beside its keys, and each figure's one-sided bound ``upper`` (from ``measures``,
    name -> Result)."""
    if not headline:
        return headline

    def bound(entry: dict) -> dict:
        r = measures.get(entry.get("measure"))
        up = getattr(r, "upper", None) if entry.get("value") is not None else None
        return {**entry, "upper": up}
    out = {**bound(headline), **level_fields(alpha)}
    out["beside"] = [bound(b) for b in headline.get("beside", [])]
    return out


def headline_lines(h: dict | None) -> list[str]:
    """The headline as plain lines, the same in the terminal, a notebook and a page: the figure
    (counted and "exact" where the population counts are known, else the estimate with its
    two-sided interval and one-sided bound), what it is shown beside, the scenario, the model, how
    the interval is made, a scan row's note on the figure, and under an exact headline each
    estimator that was named against the truth."""
    if not h:
        return []
    alpha = 1.0 - float(h.get("bound_level", h.get("level", 0.99)))
    il = float(h.get("interval_level", h.get("level", 0.99)))
    exact = bool(h.get("exact"))

    def figures(e: dict) -> str:
        if exact:
            return f"= {e['value']:.6g}, exact"
        lo, hi = (e.get("interval") or [None, None])
        text = "≈ " + num(e["value"])
        if lo is not None and hi is not None:
            text += f", {interval_words(il)} {num(lo)} to {num(hi)}"
        if e.get("upper") is not None:
            text += f"; {bound_words(alpha)} {num(e['upper'], 4)}"
        return text
    if h.get("value") is None:
        return [f"headline {_what(h)} ({h['measure']}): not given here: {h.get('reason')}"]
    if exact:
        lines = [f"headline {_what(h)} = {h['value']:.6g}, exact: counted from the population "
                 f"counts ({h['measure']})"]
    else:
        lines = [f"headline {_what(h)} {figures(h)} ({h['measure']})"]
    for b in h.get("beside", []):
        if b.get("value") is not None:
            lines.append(f"  beside it: {(b.get('scenario') or '').split(':')[0]} {figures(b)} "
                         f"({b['measure']})")
    if h.get("scenario"):
        lines.append(f"  scenario: {h['scenario'].split(': ', 1)[-1]}")
    if h.get("model"):
        lines.append(f"  model: {h['model']}")
    for e in [h] + [b for b in h.get("beside", []) if b.get("value") is not None]:
        if e.get("interval_how"):
            lines.append(f"  {e['measure']}'s interval: {e['interval_how']}")
        if e.get("note"):            # a scan row's note (assess shows it in its measures' table)
            lines.append(f"  {e['measure']}'s note: {e['note']}")
    checks = h.get("against_truth") or []
    if checks:
        lines.append("  estimators named, against the truth (a check on this population):")
    for c in checks:
        if c.get("value") is None:
            lines.append(f"    {c['measure']}: no estimate ({c.get('reason')}); truth "
                         f"{c['truth']:.6g} ({c['truth_measure']})")
            continue
        if c.get("covered_by") == "interval":
            held = f"{interval_words(il)} {num(c['interval'][0])} to {num(c['interval'][1])}"
        elif c.get("covered_by") == "upper":
            held = f"{bound_words(alpha)} {num(c['upper'])}"
        else:
            held = "no interval"
        verdict = {True: "holds the truth", False: "MISSES the truth", None: ""}[c.get("covered")]
        lines.append(f"    {c['measure']} ≈ {num(c['value'], 4)}, {held}; truth {c['truth']:.6g} "
                     f"({c['truth_measure']}){': ' + verdict if verdict else ''}")
    return lines


def num(v: float, digits: int = 3) -> str:
    """A figure with ``digits`` significant digits, never in e-notation (1153, 19.8, 0.000123)."""
    import numpy as np
    v = float(v)
    if abs(v) >= 10 ** (digits - 1):
        return f"{v:.0f}"
    return np.format_float_positional(v, precision=digits, unique=False, fractional=False,
                                      trim="-")


def _what(h: dict) -> str:
    sym = (h.get("scenario") or "").split(":")[0].strip()
    if sym.startswith("E"):
        return "expected correct matches E"
    return sym or h["measure"]


#: measures with a two-sided interval (their ``interval_*`` extras, which a scan's rows keep as
#: ``{measure}_interval_lower``/``_upper``); a page rebuilds it as value ± z_{α/2} s.e. within
#: [0, n1] only from the rows of a scan written before they did
NORMAL_INTERVAL = ("matches_ll", "tau1_ll")


def two_sided(value: float, se: float, alpha: float, n1: float | None = None) -> list[float]:
    """The two-sided (1 − α) interval value ± z_{α/2} s.e., within [0, n1], of a measure of
    :data:`NORMAL_INTERVAL` (what its ``interval_lower``/``interval_upper`` hold)."""
    from gpurisk.measures._util import z_upper
    z = z_upper(float(alpha) / 2.0)
    hi = value + z * se
    return [max(value - z * se, 0.0), hi if n1 is None else min(hi, float(n1))]
