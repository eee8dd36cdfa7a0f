"""FreqTable: the counts every measure reads.

Cells are the key combinations seen in the sample or the population, sorted by cell id. Arrays live
in the table's array namespace ``xp`` (numpy, or cupy on a GPU backend):

- ``cell_id``: int64 id of each cell (mixed radix of the codes when ``radix`` is true)
- ``f``: sample count f_j (0 for cells seen only in the population)
- ``F``: population count F_j, or None without a population
- ``w``: sum of the sample's design weights in the cell, or None without weights

Frequencies of frequencies count CELLS: ``n_r = #{j : f_j = r}`` (SPEC §1).

A FreqTable is not changed once built: the summaries every measure reads (n, N, the frequencies of
frequencies, what the population measures read of the sample-unique cells) are computed once per table
and kept, so a scan running seventeen measures on a table passes over its cells a few times, not
seventeen. Assigning a new ``f``, ``F``, ``w`` or ``cell_id`` array drops them; changing an array in
place does not.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


#: the arrays whose summaries are kept; assigning one of them drops the kept summaries
_ARRAYS = frozenset({"cell_id", "f", "F", "w"})


@dataclass(frozen=True)
class UniqueStats:
    """What the population measures read of the sample-unique cells (f_j = 1), in one pass."""

    n1: int            # #{j : f_j = 1}
    F_sum: int         # Σ_{f_j = 1} F_j
    inv_F_sum: float   # Σ_{f_j = 1} 1 / F_j
    pop_unique: int    # #{j : f_j = 1, F_j = 1}  (τ1)


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
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __setattr__(self, name, value):
        if name in _ARRAYS:
            memo = self.__dict__.get("_memo")
            if memo:
                memo.clear()
        object.__setattr__(self, name, value)

    def _kept(self, name: str, make: Callable[[], Any]):
        memo = self._memo
        if name not in memo:
            memo[name] = make()
        return memo[name]

    # --- sizes -----------------------------------------------------------------------------
    @property
    def cards(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.categories)

    @property
    def n(self) -> int:
        return self._kept("n", lambda: int(self.f.sum()))

    @property
    def N(self) -> int | None:
        if self.F is None:
            return None
        return self._kept("N", lambda: int(self.F.sum()))

    @property
    def sample_cells(self) -> int:
        """Number of cells with f_j > 0."""
        return int(self.fof_vector()[1:].sum())

    # --- frequencies of frequencies ----------------------------------------------------------
    def fof_vector(self) -> np.ndarray:
        """numpy ``Z`` with ``Z[r] = n_r`` for r = 1..max f_j (``Z[0] = 0``; length at least 2)."""
        return self._kept("Z", lambda: _fof_vector(self.xp, self.f))

    def freq_of_freq(self) -> dict[int, int]:
        """{r: n_r} for every r >= 1 with n_r > 0 (numbers of cells)."""
        return self._kept("fof", lambda: _nonzero_dict(self.fof_vector()))

    def pop_freq_of_freq(self) -> dict[int, int] | None:
        """{r: N_r} for every r >= 1 with N_r > 0 (numbers of cells), or None without ``F``."""
        return None if self.F is None else _nonzero_dict(_fof_vector(self.xp, self.F))

    def n_r(self, r: int) -> int:
        Z = self.fof_vector()
        r = int(r)
        return int(Z[r]) if 0 < r < Z.shape[0] else 0

    def N_r(self, r: int) -> int:
        if self.F is None:
            raise ValueError("no population counts")
        if int(r) == 1:
            return self.pop_uniques()
        return int((self.F == r).sum())

    def pop_uniques(self) -> int:
        """N_1 = #{j : F_j = 1}, the population uniques (needs ``F``)."""
        if self.F is None:
            raise ValueError("no population counts")
        return self._kept("N1", lambda: int((self.F == 1).sum()))

    def unique_stats(self) -> UniqueStats:
        """n1, Σ F_j, Σ 1/F_j and #{F_j = 1} over the sample-unique cells (f_j = 1; needs ``F``)."""
        if self.F is None:
            raise ValueError("no population counts")

        def make():
            su = self.f == 1
            Fsu = self.F[su]
            return UniqueStats(n1=int(Fsu.shape[0]), F_sum=int(Fsu.sum()),
                               inv_F_sum=float((1.0 / Fsu).sum()), pop_unique=int((Fsu == 1).sum()))
        return self._kept("su", make)

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


def _fof_vector(xp, f) -> np.ndarray:
    """Z[r] = #{j : f_j = r} for r >= 1, Z[0] = 0, length at least 2 (numpy), for counts f >= 0."""
    if f.shape[0] == 0:
        return np.zeros(2, np.int64)
    Z = np.asarray(_to_numpy(xp.bincount(f))).astype(np.int64, copy=False)
    if Z.shape[0] < 2:
        Z = np.concatenate([Z, np.zeros(2 - Z.shape[0], np.int64)])
    Z[0] = 0
    return Z


def _nonzero_dict(Z: np.ndarray) -> dict[int, int]:
    nz = np.flatnonzero(Z)
    return dict(zip(nz.tolist(), Z[nz].tolist()))
