"""T, P, F of perturbed files and pr(cm|um) from them, and the stopping rule (see :mod:`gpurisk.dis`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.freq import cellid
from gpurisk.freq.partial import count_ids, values_at
from gpurisk.xp import to_host


def record_codes(table) -> list[np.ndarray]:
    """Each sample record's code per key, in record order, from a table that keeps its records."""
    rc = to_host(table.record_cell())
    return [to_host(c)[rc] for c in table.cell_codes()]


def _ids(orig: Sequence[np.ndarray], pert: Sequence[np.ndarray], cards) -> tuple[np.ndarray, np.ndarray, int]:
    """Cell ids of the original (n,) and perturbed (B, n) keys in one id space, and its size."""
    shape = np.shape(pert[0])
    flat = [np.ascontiguousarray(p).reshape(-1) for p in pert]
    if cellid.fits_radix(cards):
        o = cellid.mixed_radix_ids(list(orig), cards)
        p = cellid.mixed_radix_ids(flat, cards)
        space = cellid.radix_space(cards)
    else:
        o, p = cellid.surrogate_ids([list(orig), flat], cards)
        space = int(max(o.max(initial=0), p.max(initial=0))) + 1
    return o, p.reshape(shape), space


ORIENTATIONS = ("intruder", "release")


def tpf_counts(orig: Sequence[np.ndarray], pert: Sequence[np.ndarray], cards,
               orientation: str = "intruder") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T, P, F (one value per perturbed file) of original codes (n,) and perturbed codes (B, n).

    ``orientation="intruder"`` (SPEC §6, the default) looks up each record's true key x_r in the
    released file's counts f^B. ``"release"`` is the paper's literal procedure (§13: "each record
    from B was then matched against file A"): each released key x'_r is looked up in the original
    counts f^A; T = x'_r = x_r with f^A = 1, P = x'_r = x_r with f^A = 2, F = x'_r ≠ x_r with
    f^A(x'_r) = 1. Without perturbation both give θ̂; under perturbation they differ.
    """
    if orientation not in ORIENTATIONS:
        raise BadInput(f"orientation={orientation!r} is not one of {', '.join(ORIENTATIONS)}")
    pert = [np.atleast_2d(p) for p in pert]
    B, n = pert[0].shape
    o, p, space = _ids(orig, pert, cards)
    if orientation == "release":
        cells, cnt = count_ids(o)
        fB = values_at(cells, cnt, p.astype(np.int64, copy=False))
    else:
        if space * B > cellid.INT64_LIMIT:  # densify the id space first
            o, p = cellid.surrogate_ids([[o], [p.ravel()]], [space])
            p = p.reshape(B, n)
            space = int(max(o.max(initial=0), p.max(initial=0))) + 1
        # the counts f^B of every released file at once: cells are (file, id) pairs
        rep = np.broadcast_to(np.arange(B, dtype=np.int64)[:, None], (B, n))
        cells, cnt = count_ids(cellid.mixed_radix_ids([rep, p], [B, space], dtype=np.int64).ravel())
        want = cellid.mixed_radix_ids([rep, np.broadcast_to(o, (B, n))], [B, space], dtype=np.int64)
        fB = values_at(cells, cnt, want)
    same = p == o[None, :]
    one = fB == 1
    T = np.count_nonzero(same & one, axis=1)
    P = np.count_nonzero(same & (fB == 2), axis=1)
    F = np.count_nonzero(~same & one, axis=1)
    return T, P, F


def pr_cm_um(T, P, F, f: float) -> np.ndarray:
    """T f / (T f + P (1 − f) + F), NaN where no unique match can happen."""
    T, P, F = (np.asarray(x, dtype=np.float64) for x in (T, P, F))
    num = T * f
    den = num + P * (1.0 - f) + F
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def stop_point(values: np.ndarray, max_iter: int, stable: int, decimals: int) -> tuple[int, bool] | None:
    """(iterations, converged) once the rule is met within ``values``, else None."""
    v = np.asarray(values, dtype=np.float64)[:max_iter]
    k = v.size
    tol = 0.5 * 10.0 ** (-decimals)
    if k >= stable + 1 and not np.isnan(v).any():
        m = np.cumsum(v) / np.arange(1, k + 1)
        win = np.lib.stride_tricks.sliding_window_view(m, stable + 1)
        ok = np.flatnonzero(win.max(axis=1) - win.min(axis=1) < tol)
        if ok.size:
            return int(ok[0]) + stable + 1, True
    if k >= max_iter:
        return max_iter, False
    return None


