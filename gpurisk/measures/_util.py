"""Small helpers shared by the built-in measures."""
from __future__ import annotations

import math
from statistics import NormalDist


def z_upper(alpha: float) -> float:
    """z_{1-alpha} of the standard normal (2.326 for alpha = 0.01)."""
    return NormalDist().inv_cdf(1.0 - alpha)


def ratio(num: float, den: float) -> float:
    return num / den if den else math.nan
