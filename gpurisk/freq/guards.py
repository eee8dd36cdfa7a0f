"""Checks of key variables that would give a correct-looking but useless or wrong answer.

* A key column that is missing in every record distinguishes no one: refused (a misnamed column or a
  wrong file is the usual cause).
* A key with very many categories (a continuous variable used as a key: income, an exact date, an
  id) makes almost every record a sample unique, and every measure says "everyone is at risk". It is
  refused with advice unless allowed (``allow_high_cardinality=True``, ``--allow-high-cardinality``).
  The rule: **more than :data:`MAX_CATEGORIES` (1000) distinct values among the sample's records and
  more than half as many distinct values as records** (categories > n / 2). Both together: a key
  with 5000 categories in 10 million records (a municipality) passes; a key with 800 distinct values
  in 1000 records passes too (small files simply have few records per value); income with 40 000
  distinct values in 50 000 records is refused.
* Below that size the share of distinct values and the key's type decide, whatever n is (issue 20:
  1000 distinct floats in 1000 records, or an id with 500 values in 500 records, ran without a word
  and gave θ̂ = 1). With at least :data:`MIN_DISTINCT` (50) distinct values, a key is refused when
  more than half of the records have their own value and its values are **non-integral numbers** (a
  continuous variable), or when **at least 90 %** of the records have their own value (an
  identifier). Age in 100 records (about 50 values) passes; income in cents in 300 records, or a
  person number, does not.
"""
from __future__ import annotations

from gpurisk.errors import BadInput
from gpurisk.core.messages import bad_input
from gpurisk.xp import scalar

#: a key with more distinct values than this (and more than half as many as records) is refused
MAX_CATEGORIES = 1000
#: below MAX_CATEGORIES, the share rules apply to keys with at least this many distinct values
MIN_DISTINCT = 50
#: a key with at least this share of distinct values among the records is an identifier
ID_SHARE = 0.9


def check_key_columns(frame, keys) -> None:
    """Refuse a key column that is missing in every record (pandas frames; lazy frames are skipped)."""
    import pandas as pd
    if not isinstance(frame, pd.DataFrame) or len(frame) == 0:
        return
    for k in keys:
        if k in frame.columns and not isinstance(frame[k], pd.DataFrame) and frame[k].isna().all():
            raise all_missing(k, len(frame))


def all_missing(key, n: int) -> BadInput:
    """The error of a key missing in all ``n`` records (pandas frames here, Dask's first pass)."""
    return BadInput(f"key column {key!r} is missing in all {n} records: it distinguishes "
                    "no one; check the column name and file, or drop it from the keys")


def sample_categories(table, only=None) -> list[int | None]:
    """Per key, the number of distinct categories that occur in the sample (cells with f > 0).

    ``only``: indices of the keys to count (the others come back as None); each is counted with one
    ``bincount`` over the codes of the sample's cells, in the table's namespace (on a GPU table only
    the counts come to the host).
    """
    want = range(len(table.keys)) if only is None else set(only)
    if not want:
        return [None] * len(table.keys)
    known = getattr(table, "sample_cards", None)      # a table of summaries knows them
    if known is not None:
        return [int(k) if v in want else None for v, k in enumerate(known)]
    xp = table.xp
    live = table.f > 0
    from gpurisk.freq.lattice import cell_codes
    codes = cell_codes(table)
    out: list[int | None] = []
    for v, c in enumerate(codes):
        if v not in want:
            out.append(None)
            continue
        seen = xp.bincount(c[live].astype(xp.int64), minlength=table.cards[v])
        out.append(int(scalar(xp.count_nonzero(seen))))
    return out


def check_cardinality(table, allow_high_cardinality: bool = False, keys=None) -> None:
    """Refuse a key whose distinct values make nearly every record unique (see the module); with
    ``keys``, only those of the table's keys (the others are columns counted alongside)."""
    if allow_high_cardinality:
        return
    n = int(table.n)
    # a key with fewer categories in all than the smallest that can fail is not counted
    lowest = max(MIN_DISTINCT, n / 2)
    cards = sample_categories(table, only=[v for v, k in enumerate(table.cards) if k > lowest])
    for v, (key, k) in enumerate(zip(table.keys, cards)):
        if keys is not None and key not in keys:
            continue
        if k is None or k <= n / 2 or k < MIN_DISTINCT:
            continue
        if k > MAX_CATEGORIES:
            what = "a continuous variable or an identifier?"
        elif _non_integral(table.categories[v]):
            what = "a continuous variable: its values are not whole numbers"
        elif k >= ID_SHARE * n:
            what = f"an identifier? {k / n:.0%} of the records have a value of their own"
        else:
            continue
        raise bad_input(f"key column {key!r} has {k} distinct values in {n} records ({what}): "
                        f"nearly every record would be unique; recode it into bands "
                        f"({{arg:--recode {key}=bands:WIDTH|recode=['{key}=bands:WIDTH']}}) "
                        "or pass {arg:--allow-high-cardinality|allow_high_cardinality=True}")


def _non_integral(categories) -> bool:
    """True when some category is a number with a fractional part (a continuous measurement)."""
    import math
    for c in categories:
        if isinstance(c, float) and math.isfinite(c) and not c.is_integer():
            return True
    return False
