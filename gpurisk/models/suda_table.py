"""SUDA of one FreqTable: the MSU search (:mod:`gpurisk.models.suda`) run once per table and
``max_msu``, kept in the table's cache, and scored on demand (:mod:`gpurisk.models.suda_scores`).

The measures ``suda`` and ``dis_suda``, the ``gpurisk suda`` command and :func:`gpurisk.suda` all read
it: the file-level summary (:func:`summary`) needs only the table's cells; the per-record columns
(:func:`record_columns`) need each record's cell.
"""
from __future__ import annotations

from typing import Any

from gpurisk.core.messages import bad_input
from gpurisk.models.suda import MsuSet, check_max_msu, find_msus, msu_by_size
from gpurisk.models.suda_scores import Scores, check_dis_fraction, dis_q, dis_suda, pairs_records, \
    score
from gpurisk.xp import scalar

DEFAULT_DIS_FRACTION = 0.01


def check_identifier_keys(table) -> None:
    """Refuse a key on which every record has a value of its own (n > 1): every record would be a
    minimal sample unique on that key alone (an identifier, not a key variable)."""
    from gpurisk.freq.guards import sample_categories
    n = int(table.n)
    if n < 2:
        return
    cards = sample_categories(table, only=[v for v, k in enumerate(table.cards) if k >= n])
    bad = [key for key, k in zip(table.keys, cards) if k is not None and k >= n]
    if bad:
        raise bad_input(f"suda: key(s) {', '.join(map(repr, bad))} take a different value in every one "
                       f"of the {n} records (an identifier?): every record would be a minimal sample "
                       "unique on it alone; drop it from {arg:--keys|keys} or recode it into bands")


def msus(table, max_msu=None, memory_limit=None, threads: int = 0,
         record_order: bool = False) -> MsuSet:
    """The MSU search of ``table`` up to ``max_msu`` keys, once per table (cached). A search already
    made serves either way; otherwise ``record_order`` puts the candidates in record order (what
    :func:`record_columns` needs; a file-level summary does not, so a scan never locates records)."""
    m = check_max_msu(len(table.keys), max_msu)
    for order in (True, False):
        done = getattr(table, "_memo", {}).get(f"suda_msus:{m}:{order}")
        if done is not None and (order or not record_order):
            return done
    return table.cached(f"suda_msus:{m}:{record_order}",
                        lambda: find_msus(table, m, memory_limit, threads, record_order))


def scores(table, max_msu=None, scoring: str = "elliot", memory_limit=None,
           record_order: bool = False) -> tuple[MsuSet, Scores]:
    ms = msus(table, max_msu, memory_limit, record_order=record_order)
    key = f"suda_scores:{ms.max_msu}:{scoring}:{ms.records is not None}"
    return ms, table.cached(key, lambda: score(ms, scoring))


def summary(table, max_msu=None, scoring: str = "elliot", dis_fraction=DEFAULT_DIS_FRACTION,
            memory_limit=None) -> dict[str, Any]:
    """The file-level summary: records with a score > 0, maximum and total score, MSUs by size, each
    key's contribution (percent), the sum and maximum of the DIS-SUDA probabilities (None with
    ``dis_fraction=None``: no π, no DIS-SUDA)."""
    f = None if dis_fraction is None else check_dis_fraction(dis_fraction)
    ms, sc = scores(table, max_msu, scoring, memory_limit)
    xp = table.xp
    M = len(table.keys)
    P = pairs_records(table)
    dis = dis_suda(sc.suda, M, P, f) if f is not None else None
    scored = int(scalar(xp.count_nonzero(sc.suda > 0))) if ms.candidates else 0
    return {
        "n": int(table.n), "keys": list(table.keys), "max_msu": ms.max_msu, "scoring": scoring,
        "sample_uniques": ms.candidates, "records_scored": scored,
        "max_score": float(scalar(sc.suda.max())) if ms.candidates else 0.0,
        "total_score": sc.total, "msus": ms.msus, "msus_by_size": msu_by_size(ms),
        "contributions_pct": dict(zip(table.keys, sc.file_contributions())),
        "dis_fraction": f, "dis_Q": dis_q(M), "dis_P": P,
        "dis_sum": None if f is None else float(scalar(dis.sum())) if ms.candidates else 0.0,
        "dis_max": None if f is None else float(scalar(dis.max())) if ms.candidates else 0.0,
        "warnings": ([f"no full-key cell holds exactly 2 records (P = 0): every record with a score "
                      "gets DIS-SUDA probability 1, whatever its score (the data intrusion "
                      "simulation has no pairs to calibrate on)"] if P == 0 and scored
                     and f is not None else []),
    }


def record_columns(table, max_msu=None, scoring: str = "elliot", dis_fraction=DEFAULT_DIS_FRACTION,
                   memory_limit=None) -> dict[str, Any]:
    """Per record, in the records' order (``xp`` arrays): suda, dis_suda, msu_min, msu_count and
    contrib_<key> for every key (dis_suda NaN with ``dis_fraction=None``)."""
    f = None if dis_fraction is None else check_dis_fraction(dis_fraction)
    ms, sc = scores(table, max_msu, scoring, memory_limit, record_order=True)
    dis = dis_suda(sc.suda, len(table.keys), pairs_records(table), f) if f is not None else None
    xp = table.xp
    n = int(table.n)

    def spread(values, dtype):          # candidates are in record order: one sequential scatter
        out = xp.zeros(n, dtype=dtype)
        out[ms.records] = values
        return out
    cols = {"suda": spread(sc.suda, xp.float64),
            "dis_suda": spread(dis, xp.float64) if dis is not None else xp.full(n, xp.nan),
            "msu_min": spread(sc.min_size, xp.int64), "msu_count": spread(sc.count, xp.int64)}
    for key, c in zip(table.keys, sc.contributions()):
        cols[f"contrib_{key}"] = spread(c, xp.float64)
    return cols
