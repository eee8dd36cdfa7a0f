"""The counting engine: records in, :class:`FreqTable` out. The one place that touches records.

``build_table`` takes a sample frame, and optionally a population frame or a boolean sample-flag
column of one register frame, plus optional design weights; it dispatches to the backend's
object (:mod:`gpurisk.backends`). Every backend
counts with the same functions of :mod:`gpurisk.freq.partial` (the one reducer), against the same
kind of encoding plan (:mod:`gpurisk.freq.plan`), with the same mixed-radix ids
(:func:`gpurisk.freq.cellid.mixed_radix_ids`):

- an in-process frame (pandas, or cuDF on one GPU) is ONE piece: :func:`gpurisk.freq.piece.build_table_piece` encodes
  it, counts its words into a partial, merges the population's partial in, and finishes the table;
- a Dask frame is many pieces (:mod:`gpurisk.freq._dask`): the same partials, merged in a tree on
  the cluster.

A pandas frame is encoded by :func:`gpurisk.freq.encode.encode_keys` in one pass, categories and
codes at once (:func:`gpurisk.freq.plan.plan_of`); other frames get their plan from their distinct
values first (the Dask path's pass 1) and are encoded against it on their device. Counts are made in
the namespace ``xp`` (numpy for pandas; CuPy for cuDF; the strict namespace of
:mod:`gpurisk.testing.strict` in the tests, a pandas frame's words moved there once), so the code a
GPU runs is the code the CPU tests check. Each record's cell is located lazily, when a record-level
measure first asks (:func:`gpurisk.freq.partial.locate`).
"""
from __future__ import annotations

from gpurisk.freq.columns import sample_flag_mask, weight_array  # noqa: F401  (re-exported)
from gpurisk.freq.piece import build_table_piece
from gpurisk.freq.table import FreqTable

__all__ = ["build_table", "build_table_piece", "dispatch_build", "sample_flag_mask", "weight_array"]


def build_table(sample, keys, population=None, sample_flag: str | None = None,
                weights: str | None = None, missing: str = "category",
                backend: str | None = None) -> FreqTable:
    """Count ``sample`` over ``keys``; see the module docstring.

    ``population`` is a frame holding the population's records (same key columns); ``sample_flag``
    names a boolean column of ``sample`` that marks the released records, ``sample`` then being the
    whole register. At most one of the two.
    """
    from gpurisk.backends import resolve_backend
    return dispatch_build(resolve_backend(backend, sample), sample, list(keys),
                          population=population, sample_flag=sample_flag, weights=weights,
                          missing=missing)


def dispatch_build(name: str, sample, keys, **kw):
    """build_table on the backend registered as ``name``: checked to run here, then its ``count``
    (:mod:`gpurisk.backends`: each backend object says how it counts; the counting code is the
    engine's, :mod:`gpurisk.freq.piece` in process, :mod:`gpurisk.freq._dask` on a cluster)."""
    from gpurisk.backends import get_backend
    backend = get_backend(name)
    backend.require()
    return backend.count(sample, keys, **kw)
