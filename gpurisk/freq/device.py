"""The counting engine for one piece held by one device: a frame in, a FreqTable in namespace ``xp``.

The whole frame is one piece: its distinct key values give the plan (on the host: a few values per
key), its records are encoded and counted in ``xp`` (:mod:`gpurisk.freq.partial`), and each record's
cell is kept in ``xp`` for record-level measures. The cuDF backend runs it on a cuDF frame with
CuPy; the tests run it on pandas frames with the strict namespace of
:mod:`gpurisk.testing.strict` (keys encoded on the host and moved once), so the code a GPU runs is
the code the CPU tests check.
"""
from __future__ import annotations

from gpurisk.errors import BadInput
from gpurisk.xp import frame_namespace
from gpurisk.freq import partial as P
from gpurisk.freq.plan import make_plan, partition_uniques, uniques_to_pandas


def build_table_device(sample, keys, population=None, sample_flag=None, weights=None,
                       missing="category", xp=None, backend="cudf"):
    """A FreqTable with arrays in ``xp`` (default: the frame's own) and a record locator in ``xp``."""
    if population is not None and sample_flag is not None:
        raise BadInput("give either a population frame or a sample flag, not both")
    keys = list(keys)
    xp = frame_namespace(sample) if xp is None else xp
    u_s = uniques_to_pandas(partition_uniques(sample, keys))
    u_p = uniques_to_pandas(partition_uniques(population, keys)) if population is not None else None
    if u_s["n"] == 0:
        raise BadInput("the sample has no records")
    plan = make_plan(keys, u_s["uniq"], u_p["uniq"] if u_p else None, u_s["na"],
                     u_p["na"] if u_p else None, missing)
    role = "register" if sample_flag else "sample"
    part, inv = P.count_piece(plan, sample, role, sample_flag, weights, want_inverse=True, xp=xp)
    if population is not None:
        m_s = P.size(part)
        part, to_final = P.merge(part, P.partial(plan, population, "population", xp=xp),
                                 want_inverse=True)
        inv = to_final[:m_s][inv]
    if sample_flag:
        mask = P._flag(sample, sample_flag)
        if frame_namespace(sample) is not xp:
            from gpurisk.xp import to_device
            mask = to_device(mask, xp)
        inv = inv[mask]
    record_cell = inv
    return P.finish(plan, part, backend=backend, record_locator=lambda: record_cell)
