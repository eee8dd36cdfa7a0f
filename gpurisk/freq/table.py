"""FreqTable: the counts every measure reads.

Cells are the key combinations seen in the sample or the population, sorted by cell id. Arrays live
in the table's array namespace ``xp`` (numpy, or cupy on a GPU backend):

- ``cell_id``: int64 id of each cell (mixed radix of the codes when ``radix`` is true)
- ``f``: sample count f_j (0 for cells seen only in the population)
- ``F``: population count F_j, or None without a population
- ``w``: sum of the sample's design weights in the cell, or None without weights

Frequencies of frequencies count CELLS: ``n_r = #{j : f_j = r}`` (SPEC §1).

A FreqTable cannot be changed once built: it is a frozen dataclass, and its count arrays are
read-only (numpy arrays passed in are marked read-only, so a measure that writes into ``table.f`` gets
an error instead of changing every measure after it; CuPy has no read-only arrays). The summaries every measure reads
(n, N, the frequencies of frequencies, what the population measures read of the sample-unique
cells) and other derived arrays are computed once per table and kept in a cache the table owns
(:meth:`FreqTable.cached`), so a scan running seventeen measures on a table passes over its cells a
few times, not seventeen. A table with other counts is a new table (``dataclasses.replace``).

Arrays stay in ``xp``: every number a summary brings to the host goes through
:mod:`gpurisk.xp` (``scalar``, ``to_host``), never ``int()`` or ``np.asarray`` of a device array.
"""
from __future__ import annotations

from dataclasses import InitVar, dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from gpurisk.freq.cellid import count_ids
from gpurisk.xp import readonly, scalar, to_host


@dataclass(frozen=True)
class UniqueStats:
    """What the population measures read of the sample-unique cells (f_j = 1), in one pass."""

    n1: int            # #{j : f_j = 1}
    F_sum: int         # Σ_{f_j = 1} F_j
    inv_F_sum: float   # Σ_{f_j = 1} 1 / F_j
    pop_unique: int    # #{j : f_j = 1, F_j = 1}  (τ1)


@dataclass(frozen=True, eq=False)
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
    #: summaries the builder already knows (a roll-up's n and N, its packed weights), put in the cache
    known: InitVar[Mapping[str, Any] | None] = None
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self, known):
        set_ = object.__setattr__
        set_(self, "keys", tuple(self.keys))
        for name in ("cell_id", "f", "F", "w"):
            set_(self, name, readonly(getattr(self, name)))
        if self.stored_cell_codes is not None:
            set_(self, "stored_cell_codes", [readonly(c) for c in self.stored_cell_codes])
        if known:
            self._memo.update(known)

    def cached(self, name: str, make: Callable[[], Any]):
        """The value kept under ``name`` in this table's cache, made by ``make()`` the first time.

        For anything derived from the counts alone (a fitted model, packed weights): measures and
        plugins share it through this table, never through attributes of their own. A numpy array
        kept here is marked read-only, so a measure that writes into what it was given (the
        frequencies of frequencies, say) gets an error instead of changing what the measures after
        it read."""
        memo = self._memo
        if name not in memo:
            value = make()
            memo[name] = readonly(value) if isinstance(value, np.ndarray) else value
        return memo[name]

    _kept = cached

    # --- sizes -----------------------------------------------------------------------------
    @property
    def cards(self) -> tuple[int, ...]:
        return tuple(len(c) for c in self.categories)

    @property
    def n(self) -> int:
        return self.cached("n", lambda: int(scalar(self.f.sum())))

    @property
    def N(self) -> int | None:
        if self.F is None:
            return None
        return self.cached("N", lambda: int(scalar(self.F.sum())))

    @property
    def has_weights(self) -> bool:
        """Whether the sample's design weights were counted (``w`` is not None)."""
        return self.w is not None

    @property
    def sample_cells(self) -> int:
        """Number of cells with f_j > 0."""
        return int(self.fof_vector()[1:].sum())

    @property
    def population_cells(self) -> int | None:
        """Number of cells with F_j > 0 (None without a population)."""
        if self.F is None:
            return None
        return self.cached("pop_cells", lambda: int(scalar((self.F > 0).sum())))

    # --- frequencies of frequencies ----------------------------------------------------------
    def fof_vector(self) -> np.ndarray:
        """numpy ``Z`` with ``Z[r] = n_r`` for r = 1..max f_j (``Z[0] = 0``; length at least 2)."""
        return self.cached("Z", lambda: fof_vector(self.xp, self.f))

    def freq_of_freq(self) -> dict[int, int]:
        """{r: n_r} for every r >= 1 with n_r > 0 (numbers of cells): a new dict at each call, so a
        measure that edits it changes nothing another measure reads."""
        return dict(self.cached("fof", lambda: nonzero_dict(self.fof_vector())))

    def pop_freq_of_freq(self) -> dict[int, int] | None:
        """{r: N_r} for every r >= 1 with N_r > 0 (numbers of cells), or None without ``F``."""
        return None if self.F is None else fof_dict(self.xp, self.F)

    def n_r(self, r: int) -> int:
        Z = self.fof_vector()
        r = int(r)
        return int(Z[r]) if 0 < r < Z.shape[0] else 0

    def N_r(self, r: int) -> int:
        if self.F is None:
            raise ValueError("no population counts")
        if int(r) == 1:
            return self.pop_uniques()
        return int(scalar((self.F == r).sum()))

    def pop_uniques(self) -> int:
        """N_1 = #{j : F_j = 1}, the population uniques (needs ``F``)."""
        if self.F is None:
            raise ValueError("no population counts")
        return self.cached("N1", lambda: int(scalar((self.F == 1).sum())))

    def unique_stats(self) -> UniqueStats:
        """n1, Σ F_j, Σ 1/F_j and #{F_j = 1} over the sample-unique cells (f_j = 1; needs ``F``)."""
        if self.F is None:
            raise ValueError("no population counts")

        def make():
            Fsu = self.F[self.f == 1]
            return UniqueStats(n1=int(Fsu.shape[0]), F_sum=int(scalar(Fsu.sum())),
                               inv_F_sum=float(scalar((1.0 / Fsu).sum())),
                               pop_unique=int(scalar((Fsu == 1).sum())))
        return self.cached("su", make)

    # --- records -------------------------------------------------------------------------------
    def record_cell(self):
        """Index (into the cell arrays) of each sample record's cell, in the records' order."""
        if self.record_locator is None:
            raise ValueError("this table does not keep its records' cells "
                             "(built by a distributed backend: use the record-level writer)")
        return self.cached("record_cell", lambda: readonly(self.record_locator()))

    def record_counts(self):
        """f_j of each sample record's cell (sdcMicro's ``fk``)."""
        return self.f[self.record_cell()]

    def cell_codes(self) -> list:
        """Per key, the code of each cell (arrays in ``xp``)."""
        if self.stored_cell_codes is not None:
            return self.stored_cell_codes
        from gpurisk.freq.cellid import decode_radix
        return decode_radix(self.cell_id, self.cards)

    def cell_labels(self, index) -> list[dict]:
        """Key values of the cells at ``index`` (for error messages and --show-records)."""
        idx = to_host(index).ravel()
        if idx.size == 0:
            return []
        on_device = self.xp.asarray(idx) if self.xp is not np else idx
        codes = [to_host(c[on_device]) for c in self.cell_codes()]
        return [{k: self.categories[v][int(codes[v][i])] for v, k in enumerate(self.keys)}
                for i in range(idx.size)]

    def to_numpy(self) -> "FreqTable":
        """A copy whose arrays are numpy arrays (an explicit copy of the whole table to the host)."""
        if self.xp is np:
            return self
        conv = to_host
        return FreqTable(self.keys, self.categories, conv(self.cell_id), conv(self.f),
                         conv(self.F), conv(self.w), self.radix, np,
                         None if self.stored_cell_codes is None else [conv(c) for c in self.stored_cell_codes],
                         (lambda: conv(self.record_cell())) if self.record_locator else None,
                         self.backend)


def fof_vector(xp, f) -> np.ndarray:
    """Z[r] = #{j : f_j = r} for r >= 1, Z[0] = 0, length at least 2 (numpy), for counts f >= 0."""
    if f.shape[0] == 0:
        return np.zeros(2, np.int64)
    Z = to_host(xp.bincount(f)).astype(np.int64, copy=False)
    if Z.shape[0] < 2:
        Z = np.concatenate([Z, np.zeros(2 - Z.shape[0], np.int64)])
    Z[0] = 0
    return Z


def nonzero_dict(Z: np.ndarray) -> dict[int, int]:
    nz = np.flatnonzero(Z)
    return dict(zip(nz.tolist(), Z[nz].tolist()))


def fof_dict(xp, f) -> dict[int, int]:
    """{r: #{j : f_j = r}} for every r >= 1 that occurs (ascending), for counts f >= 0 in any
    namespace: :func:`gpurisk.freq.cellid.count_ids` over the counts' own range, a histogram where
    that range is near the cells' number, else sorted run lengths. A register's table of one or two
    keys holds a few cells of millions of people each: :func:`fof_vector` of its F is a vector as
    long as the largest F, allocated and scanned for a handful of counts (17 ms for 100 cells of F
    up to 5·10⁶, in every bucket of every such combination of a Dask scan)."""
    if int(f.shape[0]) == 0:
        return {}
    vals, cnt = (to_host(a) for a in count_ids(f, xp, space=int(scalar(f.max())) + 1))
    keep = vals > 0
    return dict(zip(vals[keep].tolist(), cnt[keep].tolist()))


_fof_vector = fof_vector  # the name measures imported before it was public
