"""FreqTable: the counts every measure reads.

Cells are the key combinations seen in the sample or the population, sorted by cell id. Arrays live
in the table's array namespace ``xp`` (numpy, or cupy on a GPU backend):

- ``cell_id``: int64 id of each cell (mixed radix of the codes when ``radix`` is true)
- ``f``: sample count f_j (0 for cells seen only in the population)
- ``F``: population count F_j, or None without a population
- ``w``: sum of the sample's design weights in the cell, or None without weights

Frequencies of frequencies count CELLS: ``n_r = #{j : f_j = r}`` (SPEC §1).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class FreqTable:
    keys: tuple[str, ...]
    categories: list[list]
    cell_id: Any
    f: Any
    F: Any = None
    w: Any = None
    radix: bool = True
    xp: Any = np
    #: codes of each cell (list per key) when ids are surrogate; derived from ids otherwise
    stored_cell_codes: list | None = None
    #: lazily computes each sample record's cell index (None when records are not kept)
    record_locator: Callable[[], Any] | None = field(default=None, repr=False)
    backend: str = "pandas"
    _record_cell: Any = field(default=None, repr=False)
    _fof: dict | None = field(default=None, repr=False)

    # --- sizes -----------------------------------------------------------------------------
    @property
    def cards(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.categories)

    @property
    def n(self) -> int:
        return int(self.f.sum())

    @property
    def N(self) -> int | None:
        return None if self.F is None else int(self.F.sum())

    @property
    def sample_cells(self) -> int:
        """Number of cells with f_j > 0."""
        return int((self.f > 0).sum())

    # --- frequencies of frequencies ----------------------------------------------------------
    def freq_of_freq(self) -> dict[int, int]:
        """{r: n_r} for every r >= 1 with n_r > 0 (numbers of cells)."""
        if self._fof is None:
            self._fof = _fof(self.xp, self.f)
        return self._fof

    def pop_freq_of_freq(self) -> dict[int, int] | None:
        return None if self.F is None else _fof(self.xp, self.F)

    def n_r(self, r: int) -> int:
        return self.freq_of_freq().get(int(r), 0)

    def N_r(self, r: int) -> int:
        if self.F is None:
            raise ValueError("no population counts")
        return int((self.F == r).sum())

    # --- records -------------------------------------------------------------------------------
    def record_cell(self):
        """Index (into the cell arrays) of each sample record's cell, in the records' order."""
        if self._record_cell is None:
            if self.record_locator is None:
                raise ValueError("this table does not keep its records' cells "
                                 "(built by a distributed backend: use the record-level writer)")
            self._record_cell = self.record_locator()
        return self._record_cell

    def record_counts(self):
        """f_j of each sample record's cell (sdcMicro's ``fk``)."""
        return self.f[self.record_cell()]

    def cell_codes(self) -> list:
        """Per key, the code of each cell (arrays in ``xp``)."""
        if self.stored_cell_codes is not None:
            return self.stored_cell_codes
        from .cellid import decode_radix
        return decode_radix(self.cell_id, self.cards)

    def cell_labels(self, index) -> list[dict]:
        """Key values of the cells at ``index`` (for error messages and --show-records)."""
        codes = self.cell_codes()
        idx = np.asarray(_to_numpy(index)).ravel()
        out = []
        for i in idx:
            out.append({k: self.categories[v][int(_to_numpy(codes[v][int(i)]))]
                        for v, k in enumerate(self.keys)})
        return out

    def to_numpy(self) -> "FreqTable":
        """A copy whose arrays are numpy arrays (for measures that need host-side work)."""
        if self.xp is np:
            return self
        conv = _to_numpy
        return FreqTable(self.keys, self.categories, conv(self.cell_id), conv(self.f),
                         None if self.F is None else conv(self.F),
                         None if self.w is None else conv(self.w), self.radix, np,
                         None if self.stored_cell_codes is None else [conv(c) for c in self.stored_cell_codes],
                         (lambda: conv(self.record_cell())) if self.record_locator else None,
                         self.backend)


def _to_numpy(a):
    if hasattr(a, "get") and not isinstance(a, (np.ndarray, dict)):
        return a.get()
    return np.asarray(a)


def _fof(xp, counts) -> dict[int, int]:
    c = counts[counts > 0]
    if c.size == 0:
        return {}
    b = _to_numpy(xp.bincount(c))
    nz = np.flatnonzero(b)
    return {int(r): int(b[r]) for r in nz}
