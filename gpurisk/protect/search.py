"""The search of ``protect``: every node of the generalisation lattice, by roll-up (SPEC §11).

A node gives each key a level of its hierarchy. Its table over every key is a regrouping of an
already built table — the nearest ancestor's in the search tree — through the level maps
(:func:`gpurisk.freq.lattice.regroup`), so the records are never read again, and each scenario's
table is a roll-up of it onto the scenario's keys. Nodes are visited depth first along the
set-enumeration tree whose parent of a node lowers its first generalised key by one level; its
preorder is the colexicographic order of the level vectors, a linear extension of the lattice's
order, so every node below a node is visited before it and the tables kept at any time are one chain
of ancestors.

A scenario's measures depend only on the levels of its own keys, so their results are kept per
projection of the node onto those keys (a key outside every scenario costs no measure evaluation).

Pruning (predictive tagging) is used only for criteria whose meeting is inherited upwards (a
monotone field, see :mod:`gpurisk.protect.criteria`): a node above one that met such a criterion
meets it without evaluation. θ̂ and its upper bound are not monotone, so with them every node is
evaluated. The optimum is exact either way: a tagged node's status is a theorem, not a guess, and
its loss is computed like every other node's; only its risk value is not (it takes no part in the
front).

The front is the set of evaluated nodes that no other evaluated node dominates in (loss, worst risk):
worst risk is the most adverse value of one criterion (the first, by default) over the scenarios.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from gpurisk.freq.lattice import regroup
from gpurisk.freq.table import FreqTable
from gpurisk.core.evaluate import evaluate as evaluate_measure
from gpurisk.measure import Context
from gpurisk.protect.criteria import Criterion, field_value
from gpurisk.protect.hierarchy import KeyLevels
from gpurisk.protect.loss import Loss, Node


@dataclass
class SearchResult:
    """Every node visited, in visit (colexicographic) order."""

    keys: list[str]
    heights: tuple[int, ...]
    scenarios: list[tuple[str, ...]]
    criteria: list[Criterion]
    loss_name: str
    levels: np.ndarray            # (nodes, keys) int
    loss: np.ndarray              # (nodes,) raw loss
    loss_top: float               # loss of the top node (for the scaled loss)
    values: np.ndarray            # (nodes, criteria, scenarios): the criterion's field, NaN if none
    met: np.ndarray               # (nodes, criteria): met on every scenario
    tagged: np.ndarray            # (nodes, criteria): met by predictive tagging, not evaluated
    front_by: int = 0
    #: records (``suppress_mode="records"``) or key values (``"values"``) suppressed at each node
    #: (0 without --suppress-limit), and the cell-size threshold r
    suppressed: np.ndarray | None = None
    suppress_r: np.ndarray | None = None
    suppress_mode: str = "records"
    #: (nodes, keys): key values suppressed per key
    suppressed_keys: np.ndarray | None = None
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)

    # --- derived ---------------------------------------------------------------------------
    @property
    def feasible(self) -> np.ndarray:
        return self.met.all(axis=1)

    def worst(self, c: int | None = None) -> np.ndarray:
        """Per node, criterion ``c``'s most adverse value over the scenarios (NaN if any is none)."""
        c = self.front_by if c is None else c
        v = self.values[:, c, :]
        w = v.max(axis=1) if self.criteria[c].lower_is_better else v.min(axis=1)
        return np.where(np.isnan(v).any(axis=1), np.nan, w)

    @property
    def optimum(self) -> list[int]:
        """Indices of the feasible nodes of least loss (visit order), [] when none is feasible."""
        ok = np.flatnonzero(self.feasible)
        if ok.size == 0:
            return []
        best = self.loss[ok].min()
        return [int(i) for i in ok[self.loss[ok] == best]]

    @property
    def front(self) -> list[int]:
        """Indices of the Pareto front of (loss, worst risk), by loss then risk."""
        return pareto_front(self.loss, self.worst(), self.criteria[self.front_by].lower_is_better)

    @property
    def scaled_loss(self) -> np.ndarray:
        return self.loss / self.loss_top if self.loss_top > 0 else np.zeros_like(self.loss)

    def node(self, i: int) -> dict[str, int]:
        return {k: int(v) for k, v in zip(self.keys, self.levels[i])}

    def frame(self, rows: Sequence[int] | None = None) -> pd.DataFrame:
        """One row per node: the keys' levels, loss (raw and scaled), each criterion's worst value
        over the scenarios, and whether it is met (``tagged``: met by predictive tagging)."""
        idx = np.arange(len(self.loss)) if rows is None else np.asarray(list(rows), dtype=np.int64)
        out = pd.DataFrame(self.levels[idx], columns=self.keys)
        out.insert(0, "node", idx)
        out[self.loss_name] = self.loss[idx]
        out[f"{self.loss_name}_scaled"] = self.scaled_loss[idx]
        for c, crit in enumerate(self.criteria):
            out[crit.text] = self.worst(c)[idx]
            out[f"{crit.text} met"] = self.met[idx, c]
            if self.tagged[:, c].any():
                out[f"{crit.text} tagged"] = self.tagged[idx, c]
        if self.suppressed is not None and self.suppressed.any():
            out[f"suppressed {self.suppress_mode}"] = self.suppressed[idx]
        out["feasible"] = self.feasible[idx]
        return out


def pareto_front(loss: np.ndarray, risk: np.ndarray, lower_is_better: bool = True) -> list[int]:
    """Nodes no other node dominates: none has loss <= and risk at least as good with one strict.
    Nodes with an undefined risk (NaN) take no part. Ties in both are all kept."""
    ok = np.flatnonzero(~np.isnan(risk))
    if ok.size == 0:
        return []
    bad = risk[ok] if lower_is_better else -risk[ok]
    order = np.lexsort((bad, loss[ok]))
    L, B = loss[ok][order], bad[order]
    out = []
    best_before = math.inf           # least badness among strictly smaller losses
    i = 0
    while i < len(L):
        j = i
        while j < len(L) and L[j] == L[i]:
            j += 1
        m = B[i]                     # least badness at this loss (sorted)
        if m < best_before:
            out += [int(ok[order[t]]) for t in range(i, j) if B[t] == m]
            best_before = m
        i = j
    return out


def search(root: FreqTable, keys: list[KeyLevels], scenarios: Sequence[Sequence[str]],
           criteria: Sequence[Criterion], loss: Loss, measures: dict, ctx: Context,
           prune: bool = True, front_by: int = 0,
           progress: Callable[[int, int], None] | None = None, state=None,
           suppress_limit: float = 0.0, suppress_mode: str = "values") -> SearchResult:
    """Visit every node of the lattice of ``keys``' levels; see the module docstring.

    ``root`` is the finest table over every key (in the order of ``keys``); ``measures`` maps each
    criterion's measure name to an instance; ``state`` (a :class:`gpurisk.protect.state.SearchState`)
    loads the values a killed run kept and saves them as the search goes; ``suppress_limit`` lets a
    node that fails suppress single key values (``suppress_mode="values"``, a share of the n·K key
    values: :mod:`gpurisk.protect.suppress_values`) or whole records (``"records"``, a share of the
    records: :mod:`gpurisk.protect.suppress`); no predictive tagging then.
    """
    from gpurisk.protect import suppress_values as sv
    from gpurisk.protect.suppress import original_counts, search_suppression, suppressed_table
    t0 = time.perf_counter()
    K = len(keys)
    names = [k.key for k in keys]
    heights = tuple(k.height for k in keys)
    total = math.prod(h + 1 for h in heights)
    scen = [tuple(k for k in names if k in set(s)) for s in scenarios]
    scen_idx = [np.array([names.index(k) for k in s], dtype=np.int64) for s in scen]
    whole = [len(s) == K for s in scen]
    C, S = len(criteria), len(scen)
    levels = np.zeros((total, K), dtype=np.int64)
    losses = np.zeros(total)
    values = np.full((total, C, S), np.nan)
    met = np.zeros((total, C), dtype=bool)
    tagged = np.zeros((total, C), dtype=bool)
    cache: list[dict] = state.load(len(scen)) if state is not None else [dict() for _ in scen]
    by_values = suppress_mode == "values"
    limit = int(math.floor(float(suppress_limit) * root.n * (K if by_values else 1) + 1e-9))
    upward = [c for c in range(C) if prune and criteria[c].upward and limit == 0]
    supp = np.zeros(total, dtype=np.int64)
    supp_r = np.zeros(total, dtype=np.int64)
    supp_keys = np.zeros((total, K), dtype=np.int64)
    met_nodes: dict[int, list] = {c: [] for c in upward}
    met_arr: dict[int, np.ndarray | None] = {c: None for c in upward}
    need = sorted({c.measure for c in criteria})
    stats = {"tables": 0, "scenario_tables": 0, "evaluations": 0}
    n = root.n

    class Entry:
        __slots__ = ("levels", "first", "parent", "table")

        def __init__(self, levels, first, parent, table=None):
            self.levels, self.first, self.parent, self.table = levels, first, parent, table

    def table_of(e: Entry) -> FreqTable:
        if e.table is None:
            a = e.parent
            while a.table is None:
                a = a.parent
            maps = {names[v]: keys[v].between(a.levels[v], e.levels[v])
                    for v in range(K) if a.levels[v] != e.levels[v]}
            e.table = regroup(a.table, a.table.keys, maps)
            stats["tables"] += 1
        return e.table

    def scenario_values(e: Entry, s: int) -> list:
        proj = tuple(e.levels[v] for v in scen_idx[s])
        hit = cache[s].get(proj)
        if hit is None:
            t = table_of(e)
            if not whole[s]:
                t = regroup(t, scen[s])
                stats["scenario_tables"] += 1
            res = {m: evaluate_measure(measures[m], t, ctx) for m in need}
            stats["evaluations"] += 1
            hit = [field_value(c, res[c.measure]) for c in criteria]
            cache[s][proj] = hit
        return hit

    def evaluate(tabs) -> list:
        out = []
        for t in tabs:
            res = {m: evaluate_measure(measures[m], t, ctx) for m in need}
            stats["evaluations"] += 1
            out.append([field_value(c, res[c.measure]) for c in criteria])
        return out

    def holds(vals) -> bool:
        return all(criteria[c].holds(v[c]) for c in range(C) for v in vals)

    def visit(e: Entry, i: int) -> None:
        lev = e.levels
        for j in range(e.first, -1, -1):       # children, popped in ascending j
            if lev[j] < heights[j]:
                child = list(lev)
                child[j] += 1
                stack.append(Entry(tuple(child), j, e))
        x = np.array(lev, dtype=np.int64)
        levels[i] = x
        todo = []
        for c in range(C):
            if c in met_nodes and met_nodes[c]:
                arr = met_arr[c]
                if arr is None:
                    arr = met_arr[c] = np.array(met_nodes[c], dtype=np.int64)
                if (arr <= x).all(axis=1).any():
                    met[i, c] = tagged[i, c] = True
                    continue
            todo.append(c)
        if todo:
            per = [scenario_values(e, s) for s in range(S)]
            for c in todo:
                vals = [p[c] for p in per]
                values[i, c, :] = [math.nan if v is None else v for v in vals]
                met[i, c] = all(criteria[c].holds(v) for v in vals)
                if met[i, c] and c in met_nodes:
                    met_nodes[c].append(x)
                    met_arr[c] = None
        found = None
        if limit and not met[i].all() and by_values:
            found = sv.search_value_suppression(table_of(e), scen, limit, evaluate, holds)
        elif limit and not met[i].all():
            found = search_suppression(table_of(e), scen, limit, evaluate, holds)
        if found is not None and by_values:
            r, per_key, sup, vals = found
            for c in range(C):
                values[i, c, :] = [math.nan if p[c] is None else p[c] for p in vals]
            met[i, :] = True
            supp[i], supp_r[i] = sum(per_key.values()), r
            supp_keys[i] = [per_key[k] for k in names]
            T = table_of(e)
            node = Node(lev, keys, n, per_key, int(sup.f[sup.mask.any(axis=1)].sum()),
                        lambda T=T, sup=sup: sv.kept_cells(T, sup),
                        lambda sup=sup, lev=lev: sv.original_counts(root, keys, dict(zip(names, lev)),
                                                                    sup))
        elif found is not None:
            r, m, small, vals = found
            for c in range(C):
                values[i, c, :] = [math.nan if p[c] is None else p[c] for p in vals]
            met[i, :] = True
            supp[i], supp_r[i] = m, r
            supp_keys[i] = m
            T = table_of(e)
            node = Node(lev, keys, n, {k: m for k in names}, m,
                        lambda T=T, small=small: suppressed_table(T, small, add_cell=False),
                        lambda small=small, lev=lev: original_counts(root, keys, lev, small))
        else:
            node = Node(lev, keys, n, {k: 0 for k in names}, 0, lambda e=e: table_of(e))
        losses[i] = float(loss.compute(node))

    stack = [Entry(tuple([0] * K), K - 1, None, root)]
    try:
        for i in range(total):
            visit(stack.pop(), i)
            if state is not None:
                state.maybe_save(cache)
            if progress is not None and ((i + 1) % 32 == 0 or i + 1 == total):
                progress(i + 1, total)
    finally:
        if state is not None:
            state.save(cache)
    # the colexicographic order ends at the top node
    assert tuple(levels[-1]) == tuple(heights)
    loss_top = float(losses[-1])
    if supp[-1]:            # scale by the top node without suppression
        maps = {names[v]: keys[v].between(0, heights[v]) for v in range(K) if heights[v]}
        top = regroup(root, root.keys, maps) if maps else root
        loss_top = float(loss.compute(Node(tuple(heights), keys, n, {k: 0 for k in names}, 0,
                                           lambda: top)))
    stats["nodes"] = total
    stats["tagged"] = int(tagged.any(axis=1).sum())
    stats["resumed"] = state.loaded if state is not None else 0
    stats["suppressing"] = int((supp > 0).sum())
    return SearchResult(names, heights, scen, list(criteria), loss.name, levels, losses, loss_top,
                        values, met, tagged, front_by, suppressed=supp, suppress_r=supp_r,
                        suppress_mode=suppress_mode, suppressed_keys=supp_keys,
                        seconds=time.perf_counter() - t0, stats=stats)
