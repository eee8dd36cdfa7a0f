"""Roll a :class:`FreqTable` up the lattice of key subsets, and regroup categories, by summing counts.

A table over keys (a, b, c, d) holds everything needed for the table over any subset, say (b, d):
each fine cell belongs to exactly one coarse cell, whose mixed-radix id is computed from the fine
cell's codes, and f, F and w are summed per coarse cell. The same pass can map categories through a
lookup table (a recode: 111 single years of age -> 20 five-year bands), so a recode never touches the
records either. The cost is proportional to the fine table's cells, never to the records.

Two ways to sum a table's cells, both vectorised and written against ``table.xp`` (numpy or cupy):

- dense: when the coarse id space is small, ``bincount`` over the coarse ids (one pass; f and F are
  packed into one float64 weight ``F * 2**b + f`` when the totals allow it exactly, so one
  ``bincount`` sums both);
- sorted: otherwise, sort the coarse ids, mark run starts, give each fine cell its run's index, and
  ``bincount`` over those indices.

When the coarse key space overflows int64 the ids are surrogate (dense ranks, densified left to right
exactly as :func:`gpurisk.freq.cellid.surrogate_ids` does, so the cells come out in the same order as a
recount) and the coarse table keeps each cell's codes.

:class:`Lattice` plans a whole family of subsets. A table whose id space is small enough is kept as a
**cube**: the dense array of its sums, one axis per key (Zhao, Deshpande & Naughton 1997, array-based
aggregation). Any subset of a cube is an axis sum over it (:func:`sum_axes`), at a cost per cube
element rather than per fine cell, with no decoding of cell ids; a handful of large cubes is summed
from the finest table's cells and everything else inside them from cubes. Tables too large to be
cubes are summed from sparse tables as above. Each table comes from the built table cheapest to read
that contains it, with intermediate tables added where that lowers the total (cubes' costs are exact;
sparse tables' sizes are estimated from a sample of the finest table's cells). The roll-ups can run
in a pool of threads ahead of the caller (:meth:`Lattice.tables`).

By concern: the roll-up primitives are in :mod:`gpurisk.freq.rollup`, the cost planner in
:mod:`gpurisk.freq.planner` (:class:`~gpurisk.freq.planner.Planner`, ``CUBE_LIMIT``), the serial
``Future`` stand-ins in :mod:`gpurisk.freq.schedule`; this module runs a plan (:meth:`Lattice.tables`)
and hands every name on. Patch a constant where it is read (``planner.CUBE_LIMIT``,
``rollup.pack_limit_ok``), not here.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from gpurisk.freq.planner import CUBE_FACTOR, CUBE_LIMIT, Plan, Planner, _bits  # noqa: F401
from gpurisk.freq.rollup import (DECODE_CHUNK, DENSE_FACTOR, DENSE_LIMIT, DENSE_MIN,  # noqa: F401
                                 RADIX_CHUNK, CodeMap, _cube_from_cells, _table_from_cube,
                                 cell_codes, f_margins, kept_codes, pack_limit_ok, pack_weights,
                                 regroup, rollup, sum_axes)
from gpurisk.freq.schedule import _Later, _submit
from gpurisk.freq.table import FreqTable

__all__ = ["Lattice", "Plan", "Planner", "CodeMap", "cell_codes", "regroup", "rollup", "sum_axes",
           "pack_weights", "pack_limit_ok", "CUBE_LIMIT", "CUBE_FACTOR", "DENSE_LIMIT", "DENSE_FACTOR",
           "DENSE_MIN", "RADIX_CHUNK", "DECODE_CHUNK"]


def _root_codes_and_margins(root: FreqTable, codes):
    """The root's cell codes (``codes`` when the planner decoded them), kept in its cache with its
    margins of f (:func:`~gpurisk.freq.rollup.f_margins`: the roll-ups hand them on to every table)."""
    codes = kept_codes(root, codes)
    f_margins(root, codes)
    return codes


class Lattice(Planner):
    """Tables for many key subsets of one finest ``root`` table, each summed from a small parent.

    ``tables(targets)`` yields ``(i, table)`` for every target key tuple (in an order where parents
    come first), keeping a table only while a later one will be summed from it.
    """

    def __init__(self, root: FreqTable, codes: list | None = None):
        super().__init__(root, codes)
        self.built = 0        # roll-ups done by the last tables() call
        self._reads: list[int] = []   # the cells each of them read (from sparse tables)
        self._summed: list[int] = []  # the cube elements each of them summed (from cubes)

    # --- running -------------------------------------------------------------------------------
    def tables(self, targets: Sequence[Sequence[str]], skip: Iterable[int] = (),
               plan: Plan | None = None, threads: int = 0,
               prepare: Callable[[FreqTable], Any] | None = None) -> Iterator[tuple[int, FreqTable]]:
        """Yield ``(i, table)`` for every target ``i`` not in ``skip``; parents before children.

        The table of target i has the keys of ``targets[i]`` in the root's order (measures do not
        depend on the order of keys; use :func:`rollup` for another order). The chain of roll-ups
        behind a target never depends on ``skip`` (the plan is fixed by the targets), so every table
        comes out bit-identical whichever targets are skipped.

        With ``threads >= 1`` (numpy tables) the roll-ups run in a pool of that many threads, up to
        ``2 * threads`` targets ahead of the one being yielded, while the caller works on the tables
        already yielded (numpy releases the GIL in its loops); ``threads=0`` builds each table in
        the calling thread when it is asked for. Tables come out in the same order and bit-identical
        whichever thread builds them. ``prepare(table)``, when given, runs on each target table
        where it is built (in the worker), e.g. to compute the summaries its measures will read.
        """
        targets = [tuple(t) for t in targets]
        root = self.root
        pool = None
        if int(threads) >= 1 and root.xp is np:
            from concurrent.futures import ThreadPoolExecutor
            pool = ThreadPoolExecutor(int(threads), thread_name_prefix="gpurisk-rollup")
        try:
            root_codes = self._root_codes
            # the root's codes are decoded and its weights packed side by side, while the plan is
            # made (the plan needs a sample of the codes only)
            # (kept in the root's cache with its margins of f, which every roll-up hands on)
            codes_fut = _submit(pool, _root_codes_and_margins, root, root_codes)
            packed_fut = _submit(pool, pack_weights, root)
            futs: dict[int, Any] = {self.full: _Later(lambda: (root, codes_fut.result(),
                                                               packed_fut.result(), None))}
            plan = plan or self.plan(targets)
            skip = set(skip)
            by_mask: dict[int, list[int]] = {}
            for i, m in enumerate(plan.targets):
                if i not in skip:
                    by_mask.setdefault(m, []).append(i)
            need = plan.needed(by_mask)
            order = [m for m in plan.order if m in need]
            kids_left: dict[int, int] = {}      # kids not yet submitted (main thread only)
            for m in order:
                kids_left[plan.parent[m]] = kids_left.get(plan.parent[m], 0) + 1
            parents = frozenset(kids_left)      # fixed: what the workers read
            self.built = 0
            self._reads = []
            self._summed = []
            if self.full in by_mask and prepare is not None:
                prepare(root)
            for i in by_mask.get(self.full, []):
                yield i, root
            if not order:
                return
            keys_of = {m: tuple(self.keys[j] for j in _bits(m)) for m in order}

            cubes = plan.cube

            def build(m, parent_fut):
                # a node is (table or None, codes, packed weights, cube arrays or None)
                ptab, pcodes, ppacked, parrays = parent_fut.result()
                p = plan.parent[m]
                if m in cubes:
                    if parrays is not None:           # an axis sum over the parent's cube
                        axes = tuple(a for a, i in enumerate(_bits(p)) if not m >> i & 1)
                        arrays = tuple(None if x is None else sum_axes(x, axes) for x in parrays)
                        self._summed.append(int(parrays[0].size))
                    else:                             # one bincount over the parent's cells
                        arrays = _cube_from_cells(ptab, keys_of[m], pcodes, ppacked)
                        self._reads.append(int(ptab.cell_id.shape[0]))     # list.append is atomic
                    bits = ppacked[2]
                    tab = None
                    if m in by_mask:
                        tab = _table_from_cube(root, keys_of[m], arrays, bits)
                        if prepare is not None:
                            prepare(tab)
                    return tab, None, (None, None, bits), (arrays if m in parents else None)
                self._reads.append(int(ptab.cell_id.shape[0]))
                tab = regroup(ptab, keys_of[m], codes=pcodes, packed=ppacked)
                if prepare is not None and m in by_mask:
                    prepare(tab)
                if m in parents:          # a parent: decode its cells here, in the worker
                    return tab, kept_codes(tab), pack_weights(tab), None
                return tab, None, None, None

            window = 2 * int(threads) if pool is not None else 0
            queue: list = []             # (target, future) submitted, not yet yielded, in plan order
            pos = 0
            while True:
                # submit in plan order until `window` targets are ahead of the one to yield next
                while pos < len(order) and len(queue) <= window:
                    m = order[pos]
                    pos += 1
                    p = plan.parent[m]
                    futs[m] = _submit(pool, build, m, futs[p])
                    self.built += 1
                    kids_left[p] -= 1
                    if not kids_left[p] and p != self.full:
                        del futs[p]          # the tasks still to run hold it while they need it
                    if m in by_mask:
                        queue.append((m, futs[m]))
                if not queue:
                    break
                m, fut = queue.pop(0)
                tab = fut.result()[0]
                del fut
                if not kids_left.get(m):
                    futs.pop(m, None)
                for i in by_mask[m]:
                    yield i, tab
                del tab
            if self._root_codes is None:
                self._root_codes = futs[self.full].result()[1]
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    @property
    def cells_read(self) -> int:
        """Cells of sparse tables read by the last :meth:`tables` call (parent cells, once per child)."""
        return int(sum(self._reads))

    @property
    def cube_elements(self) -> int:
        """Cube elements summed by the last :meth:`tables` call (parent cube size, once per child)."""
        return int(sum(self._summed))

