"""The counting engine's one-piece case: an in-process frame (pandas, or cuDF on one GPU) in, a
:class:`FreqTable` out, counted by the reducer every backend uses (:mod:`gpurisk.freq.partial`).

See :mod:`gpurisk.freq.engine` for how the backends share it; the Dask engine merges many such
partials on the cluster instead.
"""
from __future__ import annotations

import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.xp import frame_namespace, to_device
from gpurisk.freq import partial as P
from gpurisk.freq.columns import sample_flag_mask, weight_array
from gpurisk.freq.encode import encode_keys
from gpurisk.freq.plan import make_plan, pack_words, partition_uniques, plan_of, uniques_to_pandas
from gpurisk.freq.table import FreqTable


def piece_plan(sample, keys, population=None, missing="category", plan_first=False):
    """``(plan, sample codes, population codes)`` of one piece. A pandas piece is encoded in one
    pass (codes per key, in key order); another frame's plan (or any frame's, with ``plan_first``)
    comes from its distinct values, and its codes (None here) are encoded against the plan where it
    lives."""
    pandas = isinstance(sample, pd.DataFrame) and (population is None or isinstance(population, pd.DataFrame))
    if pandas and not plan_first:
        enc = encode_keys(sample, keys, population, missing)
        return (plan_of(enc), [e.sample for e in enc],
                [e.population for e in enc] if population is not None else None)
    u_s = uniques_to_pandas(partition_uniques(sample, keys))
    u_p = uniques_to_pandas(partition_uniques(population, keys)) if population is not None else None
    if u_s["n"] == 0:
        raise BadInput("the sample has no records")
    plan = make_plan(keys, u_s["uniq"], u_p["uniq"] if u_p else None, u_s["na"],
                     u_p["na"] if u_p else None, missing)
    return plan, None, None


def build_table_piece(sample, keys, population=None, sample_flag=None, weights=None,
                      missing="category", xp=None, backend=None, plan_first=False) -> FreqTable:
    """The FreqTable of one in-process piece (pandas or cuDF frame), counted in ``xp`` (default: the
    frame's own namespace), with a lazy record locator in ``xp``. ``plan_first``: encode a pandas
    frame as a cuDF frame is (plan from its distinct values, then codes against the plan)."""
    if population is not None and sample_flag is not None:
        raise BadInput("give either a population frame or a sample flag, not both")
    keys = list(keys)
    host = frame_namespace(sample)
    xp = host if xp is None else xp
    if backend is None:
        backend = "pandas" if xp is host and isinstance(sample, pd.DataFrame) else "cudf"
    plan, s_codes, p_codes = piece_plan(sample, keys, population, missing, plan_first)
    role = "register" if sample_flag else "sample"
    if s_codes is None:
        words, mask, w = P.encode_piece(plan, sample, role, sample_flag, weights, xp)
    else:
        words = pack_words(plan, s_codes, host)
        del s_codes
        mask = sample_flag_mask(sample, sample_flag) if sample_flag else None
        w = weight_array(sample, weights, mask) if weights else None
        if xp is not host:
            words = [to_device(a, xp) for a in words]
            mask = None if mask is None else to_device(mask, xp)
            w = None if w is None else to_device(w, xp)
    # the sample's records' words, for the locator; the register's are dropped while counting
    rec_words = [x[mask] for x in words] if mask is not None else words
    part = P.count_words(xp, words, role, mask, w, space=plan.space, consume=mask is not None)
    if population is not None:
        if p_codes is None:
            p_words = P.encode_piece(plan, population, "population", xp=xp)[0]
        else:
            p_words = [to_device(a, xp) for a in pack_words(plan, p_codes, host)]
            del p_codes
        part = P.merge(part, P.count_words(xp, p_words, "population", space=plan.space))
        del p_words
    words = rec_words
    space = plan.space
    # the locator's view of the table's f: the table marks its own arrays read-only
    f_counts = part["f"].view() if hasattr(part["f"], "view") else part["f"]

    def locator():
        return P.locate(words, part_words, space=space, counts=f_counts, complete=True)
    table = P.finish(plan, part, backend=backend, record_locator=locator)
    part_words = [table.cell_id] if plan.radix else part["words"]
    return table
