"""Planning a family of roll-ups (:class:`Planner`, the base of :class:`gpurisk.freq.lattice.Lattice`):
which tables to build, which are cubes, each from which parent, with intermediate tables where they
lower the estimated total cost."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from gpurisk.xp import to_host
from gpurisk.freq.cellid import INT64_LIMIT, decode_radix
from gpurisk.freq.rollup import DENSE_LIMIT, DENSE_MIN, _key_index, _radix, _surrogate
from gpurisk.freq.table import FreqTable

#: tables whose id space has at most this many cells are kept as dense arrays of sums ("cubes"):
#: every coarser table of a cube is an axis sum over it, at a cost per cell of the space, not per
#: cell of the parent (Zhao, Deshpande & Naughton 1997, array-based aggregation) ...
CUBE_LIMIT = 1 << 23
#: ... provided the space is at most this many times the root's cells (or below DENSE_MIN)
CUBE_FACTOR = 32


def _mask(idx: Iterable[int]) -> int:
    m = 0
    for i in idx:
        m |= 1 << i
    return m


def _bits(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


@dataclass
class Plan:
    """Which tables to build, in which order, each from which parent (all by root-key bitmasks)."""

    order: list[int]                      # masks, parents before children
    parent: dict[int, int]                # mask -> parent mask (root: absent)
    targets: list[int]                    # the wanted masks, in the caller's order
    estimate: dict[int, float] = field(default_factory=dict)   # estimated cells (sparse nodes)
    intermediates: list[int] = field(default_factory=list)
    cube: frozenset = frozenset()          # masks summed as dense arrays (see Lattice)

    def needed(self, wanted: Iterable[int]) -> set[int]:
        """The masks to build to obtain ``wanted``: themselves and their chains of parents."""
        need: set[int] = set()
        for m in wanted:
            while m in self.parent and m not in need:
                need.add(m)
                m = self.parent[m]
        return need


class Planner:
    """The plan of a family of key subsets of one finest ``root`` table (by root-key bitmasks); the
    cost constants below are in units of one cube element summed."""

    #: roots with fewer cells than this are planned without intermediates (everything is cheap)
    PLAN_MIN_CELLS = 1 << 17
    #: cells sampled from the root to estimate the size of a subset's table
    SAMPLE = 1 << 12
    #: reading one cell of a sparse table (ids + ``bincount``), in units of one cube element summed
    CELL_COST = 12.0
    #: a roll-up's fixed cost (Python and numpy call overhead), in the same units
    OVERHEAD = 100_000.0
    #: per id-space element of a table built (allocating, zeroing and scanning its sums: a cube of
    #: 8·10^6 sums built from 1 000 cells took 6.3 ns an element, an axis sum 0.73 ns an element)
    SPACE_COST = 8.0
    #: per cell and key of a sparse table decoded to serve as a parent
    DECODE_COST = 2.0
    #: a roll-up that must sort reads each fine cell this many times more slowly than a bincount
    SORT_PENALTY = 8.0
    #: a ``bincount`` into an accumulator of more than 2**CACHE_BITS sums (8 bytes each: about a
    #: core's L2 cache) misses the cache: each doubling beyond costs CACHE_SLOPE more per fine cell
    #: (numpy, one core, 20 M cells, ids + bincount of 3 keys: 3.3 ns a cell up to 10^5 sums, 4.6 ns
    #: at 3·10^5, 7.9 ns at 10^6, 11.8 ns at 8·10^6)
    CACHE_BITS = 17
    CACHE_SLOPE = 0.42
    #: at most this many candidate intermediates are weighed
    MAX_CANDIDATES = 400
    #: rounds that weigh the unions of tables still built from the root's cells (:meth:`plan`)
    REFINE_ROUNDS = 3
    #: the root's children are built this many at a time (side by side in a pool), each group then
    #: followed by the tables below it: bounds the large tables kept at once
    ROOT_GROUP = 4
    #: families with more tables than this are planned without intermediates, parents found locally
    MAX_PLANNED = 3000

    def __init__(self, root: FreqTable, codes: list | None = None):
        self.root = root
        self.keys = tuple(root.keys)
        self.cards = tuple(root.cards)
        self.full = (1 << len(self.keys)) - 1
        self._root_codes = codes
        self._sample_codes = None


    # --- helpers -------------------------------------------------------------------------------
    def _codes_at(self, pick: np.ndarray) -> list[np.ndarray]:
        """The root's codes of the cells at ``pick`` (numpy int64), without decoding every cell."""
        root = self.root
        pick_x = root.xp.asarray(pick)
        if self._root_codes is not None:
            return [to_host(c[pick_x]).astype(np.int64) for c in self._root_codes]
        if root.stored_cell_codes is not None:
            return [to_host(c[pick_x]).astype(np.int64) for c in root.stored_cell_codes]
        ids = to_host(root.cell_id[pick_x]).astype(np.int64)
        return [c.astype(np.int64) for c in decode_radix(ids, self.cards)]

    def mask_of(self, keys: Sequence[str]) -> int:
        return _mask(_key_index(self.root, keys))

    @property
    def root_cells(self) -> int:
        return int(self.root.cell_id.shape[0])

    def _space(self, mask: int) -> int:
        return math.prod(self.cards[i] for i in _bits(mask))

    def estimate(self, mask: int) -> float:
        """Estimated number of cells of the table over ``mask``, from a sample of the root's cells.

        With q the sampled fraction, d the distinct sub-ids seen and f_i how many were seen i times:
        Shlosser's estimator d + f1 Σ(1-q)^i f_i / Σ i q (1-q)^(i-1) f_i errs high and the GEE
        estimator sqrt(1/q) f1 + (d - f1) errs low when most sampled sub-ids are distinct; their
        geometric mean, bounded by the root's cells and the subset's id space, came within a factor
        of 2.7 of the truth for 90 % of the subsets with over 10^5 possible cells of the skewed 8-key
        register of bench/bench_scan.py (GEE alone: a factor of 16).
        """
        m = self.root_cells
        if mask == self.full:
            return float(m)
        bound = float(min(m, self._space(mask)))
        if self._sample_codes is None:
            rng = np.random.default_rng(0)
            take = min(m, self.SAMPLE)
            pick = np.sort(rng.choice(m, size=take, replace=False)) if take < m else np.arange(m)
            self._sample_codes = self._codes_at(pick)
        idx = _bits(mask)
        cards = [self.cards[i] for i in idx]
        codes = [self._sample_codes[i] for i in idx]
        sub = _radix(np, codes, cards) if self._space(mask) <= INT64_LIMIT else _surrogate(np, codes, cards)
        _, cnt = np.unique(sub, return_counts=True)
        d = cnt.size
        s = codes[0].size
        if s >= m:
            return float(d)
        q = s / m
        fr = np.bincount(cnt).astype(np.float64)
        f1 = fr[1] if fr.size > 1 else 0.0
        i = np.arange(fr.size)
        num = float(np.sum((1.0 - q) ** i * fr))
        den = float(np.sum(i * q * (1.0 - q) ** np.maximum(i - 1, 0) * fr))
        shlosser = min(bound, d + f1 * num / den) if den > 0 else d
        gee = min(bound, math.sqrt(1.0 / q) * f1 + (d - f1))
        return float(min(bound, max(d, math.sqrt(max(d, shlosser) * max(d, gee)))))

    # --- planning ------------------------------------------------------------------------------
    def is_cube(self, mask: int) -> bool:
        """Whether the table over ``mask`` is kept as a dense array of sums (a cube).

        Its id space must be at most :data:`CUBE_LIMIT` and, unless tiny, at most
        :data:`CUBE_FACTOR` times the root's cells (else allocating and scanning it costs more than
        the cells it sums). Every subset of a cube is a cube.
        """
        if mask == self.full:
            return False
        s = self._space(mask)
        return s <= CUBE_LIMIT and (s <= DENSE_MIN or s <= CUBE_FACTOR * self.root_cells)

    def _cost(self, mask: int, est: dict[int, float], cost: dict[int, float], big: bool) -> float:
        """Cost of reading the table over ``mask`` once to build a child (units: one cube element).

        A cube's child is an axis sum over its elements (1 each); a sparse table's child is a
        ``bincount`` over its cells (:attr:`CELL_COST` each), their number estimated from a sample.
        """
        if mask not in cost:
            if self.is_cube(mask):
                cost[mask] = float(self._space(mask))
            else:
                if mask not in est:
                    est[mask] = (self.estimate(mask) if big
                                 else float(min(self.root_cells, self._space(mask))))
                cost[mask] = self.CELL_COST * est[mask]
        return cost[mask]

    def plan(self, targets: Sequence[Sequence[str]]) -> Plan:
        masks = [self.mask_of(t) for t in targets]
        uniq = list(dict.fromkeys(masks))
        big = self.root_cells >= self.PLAN_MIN_CELLS
        est: dict[int, float] = {self.full: float(self.root_cells)}
        cost: dict[int, float] = {self.full: self.CELL_COST * self.root_cells}
        for m in uniq:
            self._cost(m, est, cost, big)
        chosen: list[int] = []
        if len(uniq) <= self.MAX_PLANNED and (big or any(self.is_cube(m) for m in uniq)):
            chosen = self._choose_intermediates(uniq, est, cost, big)
            for _ in range(self.REFINE_ROUNDS if big else 0):
                # tables still read from the root's cells, two of which one cube could serve
                # with one pass: their unions are weighed next
                nodes = [m for m in dict.fromkeys(uniq + chosen) if m != self.full]
                par = self._parents(nodes, cost)
                lone = [m for m in nodes if par[m] == self.full and self.is_cube(m)]
                unions = self._cube_unions(lone, set(nodes))
                # weighed for the lone tables alone: the others have cheaper parents already
                more = self._greedy(lone, unions, est, cost) if unions else []
                if not more:
                    break
                chosen += more
        nodes = [m for m in dict.fromkeys(uniq + chosen) if m != self.full]
        parent = self._parents(nodes, cost)
        # the root's children in groups of ROOT_GROUP (larger first: the costliest roll-ups,
        # independent of each other, so a pool builds a group side by side), each group followed by
        # its subtrees depth first: a table is dropped once its subtree is built, so at most one group
        # and one chain of ancestors below it are kept at a time
        kids: dict[int, list[int]] = {}
        for m in nodes:
            kids.setdefault(parent[m], []).append(m)
        size_first = lambda m: (-bin(m).count("1"), m)   # noqa: E731
        top = sorted(kids.get(self.full, []), key=size_first)
        order: list[int] = []
        for g in range(0, len(top), self.ROOT_GROUP):
            group = top[g:g + self.ROOT_GROUP]
            order += group
            for t in group:
                stack = sorted(kids.get(t, []), key=size_first)[::-1]
                while stack:
                    node = stack.pop()
                    order.append(node)
                    stack.extend(sorted(kids.get(node, []), key=size_first)[::-1])
        return Plan(order, parent, masks, est, chosen, frozenset(m for m in nodes if self.is_cube(m)))

    def _parents(self, nodes: list[int], cost: dict[int, float]) -> dict[int, int]:
        """Each node's parent: the strict superset among the nodes (or the root) cheapest to build
        it from: a cube's axis sums at its cost, a sparse table's cells at the node's penalty."""
        if not nodes:
            return {}
        root_cost = cost[self.full]
        pen = {m: self._penalty(m) for m in nodes}
        cube = {m: self.is_cube(m) for m in nodes}
        if len(nodes) <= self.MAX_PLANNED:
            vm = np.array(nodes, dtype=np.uint64)
            ve = np.array([cost[m] for m in nodes])
            vp = np.array([pen[m] for m in nodes])
            vc = np.array([cube[m] for m in nodes], dtype=bool)
            sup = ((vm[:, None] & ~vm[None, :]) == 0) & (vm[:, None] != vm[None, :])
            e = np.where(sup, np.where(vc[None, :], ve[None, :], vp[:, None] * ve[None, :]), np.inf)
            j = np.argmin(e, axis=1)
            best = e[np.arange(len(nodes)), j]
            return {m: (nodes[int(jj)] if b < p * root_cost else self.full)
                    for m, jj, b, p in zip(nodes, j, best, vp)}
        # many nodes: look only at supersets with one or two more keys
        have = set(nodes)
        n = len(self.keys)
        out = {}
        for m in nodes:
            best, be = self.full, pen[m] * root_cost
            free = [i for i in range(n) if not m >> i & 1]
            for a, i in enumerate(free):
                for c in [m | 1 << i] + [m | 1 << i | 1 << j for j in free[a + 1:]]:
                    if c in have:
                        e = cost[c] if cube[c] else pen[m] * cost[c]
                        if e < be:
                            best, be = c, e
            out[m] = best
        return out

    def _grow_cube(self, mask: int) -> int:
        """``mask`` with keys added, smallest cardinality first, while it stays a cube."""
        for i in sorted(range(len(self.keys)), key=lambda i: (self.cards[i], i)):
            if not mask >> i & 1 and self.is_cube(mask | 1 << i):
                mask |= 1 << i
        return mask

    def _choose_intermediates(self, targets: list[int], est: dict[int, float],
                              cost: dict[int, float], big: bool) -> list[int]:
        """Greedy choice of extra tables that lower the total cost of the roll-ups (HRU-style benefit).

        Candidates: each target with one or two more keys, and each cube target grown to the largest
        cube containing it (one pass over the root's cells then serves every target inside it).
        """
        tset = set(targets) | {self.full}
        cands: dict[int, int] = {}
        n = len(self.keys)
        pairs = len(targets) * n * n <= 200_000
        for t in targets:
            free = [i for i in range(n) if not t >> i & 1]
            for a, i in enumerate(free):
                c = t | 1 << i
                if c not in tset and (big or self.is_cube(c)):
                    cands[c] = cands.get(c, 0) + 1
                for j in (free[a + 1:] if pairs else ()):
                    c2 = c | 1 << j
                    if c2 not in tset and (big or self.is_cube(c2)):
                        cands[c2] = cands.get(c2, 0) + 1
        grown: dict[int, int] = {}
        for t in targets:
            if self.is_cube(t):
                g = self._grow_cube(t)
                if g not in tset:
                    grown[g] = grown.get(g, 0) + 1
        if not cands and not grown:
            return []
        # ranked by the targets each holds per pass cost (a cube grown from one target can hold many)
        cand = self._by_targets_held(list(grown), targets)[: self.MAX_CANDIDATES // 4]
        cand += [c for c in self._by_targets_held(list(cands), targets)
                 if c not in grown][: self.MAX_CANDIDATES - len(cand)]
        return self._greedy(targets, cand, est, cost, big)

    def _greedy(self, targets: list[int], cand: list[int], est: dict[int, float],
                cost: dict[int, float], big: bool = True) -> list[int]:
        """The candidates ``cand`` chosen one at a time, the largest net benefit first, while it
        is positive: what each saves building ``targets`` (and the candidates chosen before it),
        less building it."""
        if len(cand) > self.MAX_CANDIDATES:
            cand = self._by_targets_held(cand, targets)[: self.MAX_CANDIDATES]
        for c in cand:
            self._cost(c, est, cost, big)
        V = [v for v in targets if v != self.full]
        vm = np.array(V, dtype=np.uint64)
        cm = np.array(cand, dtype=np.uint64)
        ve = np.array([cost[v] for v in V])
        ce = np.array([cost[c] for c in cand])
        vcube = np.array([self.is_cube(v) for v in V], dtype=bool)
        ccube = np.array([self.is_cube(c) for c in cand], dtype=bool)
        vpen = np.array([self._penalty(v) for v in V])
        cpen = np.array([self._penalty(c) for c in cand])
        root = cost[self.full]

        def cheapest_parent(masks, pen):
            # a cube parent is summed along axes (its cost as it is); a sparse one (the root
            # included) is read cell by cell, at the child's penalty
            sup = ((masks[:, None] & ~vm[None, :]) == 0) & (masks[:, None] != vm[None, :])
            c = np.where(vcube[None, :], ve[None, :], pen[:, None] * ve[None, :])
            return np.minimum(np.where(sup, c, np.inf).min(axis=1, initial=np.inf), pen * root)

        vcost = cheapest_parent(vm, vpen)       # cost of building each target, as things stand
        # a candidate costs building it, a pass over its id space (a cube's, or a dense
        # accumulator's), and decoding its cells when a sparse table serves as a parent
        fixed = np.array([self.SPACE_COST * min(self._space(c), DENSE_LIMIT)
                          + (0.0 if self.is_cube(c) else
                             self.DECODE_COST * est[c] * bin(c).count("1")) for c in cand])
        ccost = cheapest_parent(cm, cpen)
        # sub[i, j]: node j is a strict subset of candidate i (nodes: targets, then chosen ones)
        sub = ((vm[None, :] & ~cm[:, None]) == 0) & (vm[None, :] != cm[:, None])
        npen = vpen.copy()
        alive = np.ones(len(cand), dtype=bool)
        chosen = []

        def via(i_pen, j):
            # the cost of building nodes at penalties ``i_pen`` from candidate ``j``
            return np.where(ccube[j], ce[j], i_pen * ce[j])
        while alive.any():
            gain = (sub * np.maximum(0.0, vcost[None, :] - np.where(
                ccube[:, None], ce[:, None], npen[None, :] * ce[:, None]))).sum(axis=1)
            benefit = np.where(alive, gain - ccost - fixed - self.OVERHEAD, -np.inf)
            i = int(np.argmax(benefit))
            if benefit[i] <= 0:
                break
            chosen.append(int(cand[i]))
            alive[i] = False
            vcost = np.where(sub[i], np.minimum(vcost, via(npen, i)), vcost)
            below = ((cm & ~cm[i]) == 0) & (cm != cm[i])
            ccost = np.where(below, np.minimum(ccost, via(cpen, i)), ccost)
            sub = np.concatenate([sub, ((cm[i] & ~cm) == 0)[:, None] & (cm != cm[i])[:, None]], axis=1)
            vcost = np.append(vcost, ccost[i])
            npen = np.append(npen, cpen[i])
        return chosen

    def _penalty(self, mask: int) -> float:
        """Relative cost per cell of a sparse parent of building the table over ``mask``: a table that
        must sort costs more, and so does a dense accumulator too large for the cache."""
        space = self._space(mask)
        if not self.is_cube(mask) and space > DENSE_LIMIT:
            return self.SORT_PENALTY
        return 1.0 + self.CACHE_SLOPE * max(0.0, math.log2(max(space, 1)) - self.CACHE_BITS)

    def _cube_unions(self, masks: list[int], have: set) -> list[int]:
        """The unions of two of ``masks`` that are cubes and not in ``have`` (each once)."""
        if len(masks) < 2:
            return []
        m = np.array(masks, dtype=np.uint64)
        i, j = np.triu_indices(len(masks), k=1)
        u = np.unique(m[i] | m[j])
        # log2 of each union's id space, key by key (the bits are the keys)
        logs = np.zeros(u.shape[0])
        for b, card in enumerate(self.cards):
            logs += ((u >> np.uint64(b)) & np.uint64(1)).astype(np.float64) * math.log2(max(card, 1))
        near = u[logs <= math.log2(CUBE_LIMIT) + 1e-9]    # then checked exactly
        return [int(c) for c in near if int(c) not in have and self.is_cube(int(c))]

    def _by_targets_held(self, masks: list[int], targets: list[int]) -> list[int]:
        """``masks`` sorted by how many of ``targets`` each contains per unit of the cost of a pass
        that builds it (most first; ties by mask)."""
        if not masks:
            return []
        cm = np.array(masks, dtype=np.uint64)
        held = np.zeros(len(masks), dtype=np.int64)
        tm = np.array(targets, dtype=np.uint64)
        for lo in range(0, len(masks), 4096):      # bounds the masks × targets matrix
            held[lo:lo + 4096] = ((tm[None, :] & ~cm[lo:lo + 4096, None]) == 0).sum(axis=1)
        pen = np.array([self._penalty(int(c)) for c in cm])
        return [int(cm[i]) for i in np.lexsort((cm, -held / pen))]

