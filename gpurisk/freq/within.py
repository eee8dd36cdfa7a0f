"""How a variable other than the keys is distributed within each cell (l-diversity and the like).

``cell_value_counts(table, values)`` takes one value per sample record (in the order of
``table.record_cell()``, i.e. the sample's row order), encodes it with the engine's key encoder
(a missing value is its own category, the last one), and counts the records of every
(cell, value) pair with the engine's reducer: the pair's id is the mixed radix of (cell index, value
code), sorted and run-length encoded (:func:`gpurisk.freq.partial.count_ids`). Nothing loops over
records or cells.

From the pairs: the number of distinct values in a cell, ``distinct()``, and the entropy of the
cell's value distribution, ``entropy()`` = -Σ_v (f_jv / f_j) log(f_jv / f_j) (natural log).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpurisk.errors import BadInput
from gpurisk.freq.cellid import mixed_radix_ids
from gpurisk.freq.partial import count_ids
from gpurisk.freq.encode import encode_keys
from gpurisk.xp import to_host
from gpurisk.freq.table import FreqTable


@dataclass(frozen=True)
class CellValueCounts:
    """Counts of (cell, value) pairs, sorted by cell then value code (numpy arrays)."""

    cell: np.ndarray          # index into the table's cell arrays
    code: np.ndarray          # value code: index into ``categories``
    count: np.ndarray         # records of the cell holding the value
    categories: list          # value labels; a trailing None is the missing category
    cell_f: np.ndarray        # f_j of every cell of the table (length = number of cells)

    @property
    def missing_code(self) -> int | None:
        """Code of the missing category, or None when no value is missing."""
        return len(self.categories) - 1 if self.categories and self.categories[-1] is None else None

    @property
    def ncells(self) -> int:
        return int(self.cell_f.size)

    def distinct(self) -> np.ndarray:
        """Number of distinct values in each cell (a missing value counts as one value; 0 if f_j = 0)."""
        return np.bincount(self.cell, minlength=self.ncells).astype(np.int64)

    def entropy(self) -> np.ndarray:
        """Entropy (natural log) of each cell's value distribution; 0 for empty cells."""
        p = self.count / self.cell_f[self.cell]
        return -np.bincount(self.cell, weights=p * np.log(p), minlength=self.ncells) + 0.0

    def only_missing(self) -> np.ndarray:
        """True for the cells whose records all have a missing value."""
        out = np.zeros(self.ncells, bool)
        mc = self.missing_code
        if mc is not None:
            alone = self.distinct()[self.cell] == 1
            out[self.cell[alone & (self.code == mc)]] = True
        return out


def cell_value_counts(table: FreqTable, values, name: str = "values") -> CellValueCounts:
    """Distribution of ``values`` (one per sample record, in record order) within each cell."""
    rc = np.asarray(to_host(table.record_cell()), dtype=np.int64)
    s = values if isinstance(values, pd.Series) else pd.Series(to_host(values))
    if len(s) != rc.size:
        raise BadInput(f"column {name!r} has {len(s)} values but the sample has {rc.size} records")
    (enc,) = encode_keys(pd.DataFrame({name: s.reset_index(drop=True)}), [name])
    card = max(enc.cardinality, 1)
    f = np.asarray(to_host(table.f), dtype=np.int64)
    pair = mixed_radix_ids([rc, enc.sample], [max(f.size, 1), card], dtype=np.int64)
    ids, cnt = count_ids(pair)
    return CellValueCounts(ids // card, ids % card, cnt, list(enc.categories), f)
