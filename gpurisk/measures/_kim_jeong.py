"""Parameters shared by the Kim & Jeong (2007) components of risk (SPEC §3).

Each measure reads its options under its own name, falling back to the shared namespace
``kim_jeong`` (``--option kim_jeong.p_f2=0.1`` sets it for all of them):

- ``p_f1``: P(A ∈ F1), the chance that a person is in the released file; default π.
- ``p_f2``: P(A ∈ F2), the chance that a person is in the intruder's file; default 1 (the intruder
  holds a 100 % population file: the worst case).
- ``subsampling_rate``: P(A ∈ F1 | A ∈ F2) when the release is a subsample of the intruder's file;
  default P(A ∈ F1) / P(A ∈ F2).
"""
from __future__ import annotations

from gpurisk.errors import BadInput

SHARED = "kim_jeong"


def option(ctx, measure: str, key: str, default):
    """(value, source): the measure's own option, else the shared one, else ``default``."""
    if key in ctx.options.get(measure, {}):
        v, src = ctx.options[measure][key], f"{measure}.{key}"
    elif key in ctx.options.get(SHARED, {}):
        v, src = ctx.options[SHARED][key], f"{SHARED}.{key}"
    else:
        return default, "default"
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise BadInput(f"option {src}={v!r} is not a number") from None
    if not 0.0 < v <= 1.0:
        raise BadInput(f"option {src}={v!r} is a probability and must lie in (0, 1]")
    return v, src


def p_f1(ctx, measure: str):
    v, src = option(ctx, measure, "p_f1", ctx.fraction)
    return v, ("pi" if src == "default" else src)


def p_f2(ctx, measure: str):
    return option(ctx, measure, "p_f2", 1.0)


def pr_pu(table) -> tuple[float, int]:
    """(Pr(PU) = N1 / N, N1)."""
    N1 = table.pop_uniques()
    return N1 / table.N, N1
