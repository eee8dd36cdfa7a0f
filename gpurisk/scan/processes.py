"""A scan's measures that read cells, run in processes beside the one that builds the tables.

Ê and τ̂1 (the scan's ranking and the figure beside it) fit a log-linear model per combination:
on a survey file they are most of a scan's time, and they run in Python code that holds the
interpreter, so threads do not share them out (FARS's 255 tables: 4.7-5.3 s in one thread,
4.6-4.8 s in two). Processes do. :class:`MeasureProcesses` keeps ``processes`` of them, forked when the
scan starts (before its roll-up threads and its progress bar start), and
hands each combination's table to one:

- what goes to a process: the costly measures (``default = False``, as a model fit declares
  itself; Ê and τ̂1) that read cells and need neither the records nor the sample's columns (as a
  Dask worker runs them on a table it built: ``Placement.on_tables``), each as its class, so a
  measure registered while the program runs goes too;
- what stays here: every other measure (reading summaries, or cheap: it would cost less than its
  table's copy), and every measure of a table of more than :data:`PROCESS_CELLS` cells (a
  register's large tables: their fit already shares its passes among the CPUs, and a copy would
  cost what it saves);
- each process runs its measures as this process would (:func:`gpurisk.core.evaluate.run_classes`:
  contained, checked, under the time limit) in one thread (:data:`gpurisk.freq.schedule.CPU_LIMIT`),
  and hands back their results and the warnings they raised; the row is made here, in the plan's
  order, so the figures, the warnings and the output are those of a scan without processes (the
  same code on the same counts: every figure equal, bit for bit; tests/test_scan_processes.py);
- where a process ends unexpectedly (killed for memory, say), or gives nothing within
  :attr:`MeasureProcesses.deadline`, the combinations it held and every later one are computed
  here, and the scan's notes say so;
- Ctrl-C ends the scan and its processes (they ignore the signal themselves; this one kills them).

The processes are :class:`gpurisk.core.forked.Forked`'s: forked (so they hold the plugins
registered and the measure classes), only on Linux, on the pandas backend here, in a process that
may have children, with at least :data:`gpurisk.core.forked.MIN_ITEMS` combinations to compute,
whose tables may hold :data:`gpurisk.core.forked.MIN_CELLS` cells in all (:func:`cells_bound`).
``processes=None`` (the default) takes the CPUs this process may use, at most
:data:`gpurisk.core.forked.MAX_PROCESSES`, and none on one CPU; 0 runs every measure in this
process.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from gpurisk.core.forked import PENDING_CELLS, PROCESS_CELLS, Forked, in_turn


def cells_bound(root, keysets: Sequence[Sequence[str]]) -> int:
    """A bound, known before any is built, on the cells of the tables of ``keysets`` (subsets of
    ``root``'s keys) in all: each holds at most the product of its keys' categories, and at most
    ``root``'s cells."""
    cards = dict(zip(root.keys, root.cards))
    whole = int(len(root.f))
    total = 0
    for keys in keysets:
        size = 1
        for k in keys:
            size = min(size * cards[k], whole)
        total += size
    return total


def process_classes(names: Sequence[str]) -> dict:
    """name -> class of the measures among ``names`` that a measure process runs: those that read
    cells, need neither the records nor the sample's columns, and declare themselves costly
    (``default = False``: "costly measures (a model fit) set False and run when named",
    :class:`gpurisk.measure.Measure`). A cheap measure costs less than its table's copy."""
    from gpurisk.plugins import measure_registry
    reg = measure_registry()
    out = {}
    for m in names:
        cls = reg[m].cls if m in reg else None
        if cls is None or cls.reads in ("summary", "buckets") or cls.default:
            continue
        if {"records", "columns"} & set(cls.needs):
            continue
        out[m] = cls
    return out


def _portable(table) -> tuple:
    """What a process needs to rebuild ``table`` (a numpy :class:`~gpurisk.freq.table.FreqTable`):
    its counts and categories and the summaries already counted (not its records' locator)."""
    known = {k: table._memo[k] for k in ("n", "N", "Z", "pop_cells") if k in table._memo}
    return (table.keys, table.categories, table.cell_id, table.f, table.F, table.w, table.radix,
            table.stored_cell_codes, table.backend, known)


def _measures(portable: tuple, classes: Mapping[str, type], ctx, timeout) -> dict:
    """In a measure process: the measures ``classes`` on the table (:func:`_portable`), as
    :func:`gpurisk.core.evaluate.run_classes_caught` gives them."""
    from gpurisk.core.evaluate import run_classes_caught
    from gpurisk.freq.table import FreqTable
    keys, categories, cell_id, f, F, w, radix, codes, backend, known = portable
    table = FreqTable(keys, categories, cell_id, f, F, w, radix, np, codes, None, backend,
                      known=known)
    return run_classes_caught(table, ctx, classes, timeout)


class MeasureProcesses(Forked):
    """``processes`` forked processes (:class:`gpurisk.core.forked.Forked`) that run ``classes``
    (name -> measure class) on the tables handed to them (module docstring). Make it before any
    thread of the scan starts."""

    def __init__(self, processes: int, classes: Mapping[str, type], timeout: float | None):
        self.classes = dict(classes)
        self.timeout = timeout
        super().__init__(processes)

    @property
    def window(self) -> int:
        """How many tables may wait for their measures at a time: enough that the roll-ups go on
        while the processes work (on a 10⁷-record register's 255 tables, 2 CPUs: 5.8-5.9 s at
        8 a process, 6.1-6.4 s at 2), and at most :data:`PENDING_CELLS` cells among them."""
        return 8 * self.processes

    @property
    def deadline(self) -> float:
        """Seconds a table's measures may take in a process, counted from when this process asks
        for them: each measure's time limit, and a minute more. A process past it is taken as
        stuck (a lock a thread of this process held when it was forked, say), and everything is
        computed here from then on."""
        from gpurisk.core.evaluate import check_timeout
        return len(self.classes) * check_timeout(self.timeout) + 60.0

    def submit(self, table, ctx):
        """A future of ``table``'s measures run in a process, or None where they run here (module
        docstring)."""
        if table.xp is not np or int(table.cell_id.shape[0]) > PROCESS_CELLS:
            return None
        from dataclasses import replace
        return self.call(_measures, _portable(table), self.classes, replace(ctx, columns={}),
                         self.timeout)

    def result(self, future) -> dict | None:
        """What the process gave (:func:`_measures`), or None where it ended unexpectedly, or gave
        nothing within :attr:`deadline` (the measures then run here)."""
        return self.outcome(future, self.deadline)


def in_order(tables, start: Callable, finish: Callable, procs: MeasureProcesses | None):
    """For each ``(i, table)`` of ``tables``: ``start(i, table)`` gives the combination's context;
    its measures that go to a process are handed to ``procs`` (none: all run in ``finish``); then
    ``finish(i, table, ctx, done)`` makes its row, ``done`` what the process gave (None: nothing
    ran there), in the tables' order, at most ``procs.window`` tables and :data:`PENDING_CELLS`
    cells waiting at a time. Yields each row as it is finished."""
    def start_one(item):
        i, table = item
        return i, table, start(i, table)

    def submit(item):
        return procs.submit(item[1], item[2]) if procs is not None else None

    def finish_one(item, fut):
        i, table, ctx = item
        return finish(i, table, ctx, procs.result(fut) if fut is not None else None)

    def cells(item):
        return int(item[1].cell_id.shape[0])
    return in_turn(map(start_one, tables), submit, finish_one,
                   procs.window if procs is not None else 0,
                   cells if procs is not None else None, PENDING_CELLS)
