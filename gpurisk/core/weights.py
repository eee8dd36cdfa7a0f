"""Weights as offices hold them: one rule for every command that reads ``--weights`` (assess,
scan, design, record-risk, the classic plugin's F̂ from weights).

- **design weights** w_i = 1/π_i: their sum Σw is the size of the population the sample stands for
  (Σw > :data:`NORMALISED_MEAN_WEIGHT` · n); π = n/Σw where no π is given.
- **calibrated weights**: design weights adjusted to known totals; a few may lie below 1. They are
  design weights; a cell whose weight sum is below its count (F̂_j < f_j, which a population cannot
  have) is raised to its count: the cell's records stand for at least themselves.
- **normalised weights**: scaled to Σw = n (mean at most :data:`NORMALISED_MEAN_WEIGHT`). They
  say nothing of the population's size. Given it (π = n/N: ``--fraction``, a population, or
  record-risk's ``--population-size``) they are scaled by N/n = 1/π into design weights; without it,
  what needs design weights says in one line how to give it (:func:`normalised_reason`).

:func:`weight_rule` decides which; :func:`design_cell_weights` gives the cells' design-weight sums.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

#: weights whose mean is at most this are normalised weights (they sum to about n, as survey
#: weights scaled to mean 1 do), not 1/π: they give no π
NORMALISED_MEAN_WEIGHT = 1.01


@dataclass(frozen=True)
class WeightRule:
    """How a weight column is read: ``kind`` "design" or "normalised", ``total`` Σw over ``n``
    records, ``scale`` the factor that turns the weights into design weights (1 for design
    weights, 1/π for normalised weights with π known, None when the population size is missing)."""

    kind: str
    total: float
    n: int
    scale: float | None

    @property
    def usable(self) -> bool:
        return self.scale is not None

    def words(self) -> str:
        """One phrase for notes and JSON: what the weights were taken as."""
        if self.kind == "design":
            return f"design weights (Σw = {self.total:.6g}, the population size they stand for)"
        if self.scale is None:
            return f"normalised weights (Σw = {self.total:.6g} ≈ n = {self.n}): no population size"
        return (f"normalised weights (Σw = {self.total:.6g} ≈ n = {self.n}), scaled by N/n = "
                f"{self.scale:.6g} to design weights")


def weight_rule(n: int, total: float, fraction: float | None = None) -> WeightRule:
    """The rule for a weight column with sum ``total`` over ``n`` records; ``fraction`` the π given
    (or n/N of a population), used only to scale normalised weights."""
    total = float(total)
    if n and math.isfinite(total) and total > NORMALISED_MEAN_WEIGHT * n:
        return WeightRule("design", total, int(n), 1.0)
    scale = None if not fraction else 1.0 / float(fraction)
    return WeightRule("normalised", total, int(n), scale)


def normalised_reason(rule: WeightRule, how: str = "{fraction} (π = n/N)") -> str:
    """The one line for normalised weights without a population size (a neutral message template:
    ``how`` names the setting that gives it)."""
    return (f"the weights sum to n (Σw = {rule.total:.6g}, n = {rule.n}): normalised weights, which "
            f"say nothing of the population size; give it as {how} to scale them to design "
            "weights, or give design weights 1/π_i")


def design_cell_weights(f, w, scale: float, xp):
    """The cells' design-weight sums: ``w`` times ``scale``, each at least the cell's count ``f``
    (calibrated weights below 1), and the number of cells raised. Arrays of any one namespace."""
    ws = w.astype(xp.float64) * float(scale)
    fl = f.astype(xp.float64)
    low = (f > 0) & (ws < fl)
    return xp.where(low, fl, ws), low


def as_design_weights(table, fraction: float | None):
    """``table`` (a FreqTable) with its weights turned into design weights by the rule, and the notes
    that say what was done; unchanged without weights, for a table whose cells stay on the workers,
    or for normalised weights without π (the measures that need design weights then say why)."""
    from dataclasses import replace

    from gpurisk.freq.table import FreqTable
    from gpurisk.xp import scalar
    if not isinstance(table, FreqTable) or table.w is None or not table.n:
        return table, []
    rule = weight_rule(table.n, float(scalar(table.w.sum())), fraction)
    if not rule.usable:
        return table, []
    dw, low = design_cell_weights(table.f, table.w, rule.scale, table.xp)
    raised = int(scalar(low.sum()))
    notes = [] if rule.kind == "design" else [f"the weights are {rule.words()}"]
    if raised:
        notes.append(f"{raised} cell(s) whose weights sum below their sample count (calibrated "
                     "weights below 1) are taken at their count: F̂_j ≥ f_j")
    if rule.scale == 1.0 and not raised:
        return table, notes
    return replace(table, w=dw), notes
