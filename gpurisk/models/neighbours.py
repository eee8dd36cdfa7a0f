"""A numeric parent's neighbouring categories as the target of a rooted arc's shrinkage (option
``arc_target=neighbours`` of :mod:`gpurisk.measures._ll_poisson`; issue 43).

The rooted form (:mod:`gpurisk.models.eb_forest`) shrinks a child key's shares given its parent's
category x_p towards the child's overall shares q_c: p(· | x_p) ~ Dirichlet(β q_c). Where the
parent is a number (an age, a year, an income band) the child's shares drift with it: the share
married at age 78 is not the sample's overall share, and a rare age's own records say little. A
sample unique alone in its (age, married) pair then gets from the others a share far below the
truth (Viet Nam's age → married at π = 5 %, 20 samples: the uniques' leave-one-out share 0.29 on
average against a true 0.38, a median ratio of 0.71; pooled over the two nearest ages on each
side, 0.36 and 0.96).

With ``arc_target=neighbours`` the target of a parent category x_p is the child's shares among the
records of the parent's neighbouring categories, its own left out: with the k nearest seen
categories on each side in numeric order (a missing value has no neighbours),

    t_{x_p}(x_c) = (N^k_{pc} − n_pc + ½ q_c)/(N^k_p − n_p + ½),

N^k the counts summed over the window of 2k + 1 categories around x_p, n its own category's (so
k = 0 gives q_c: the global target), ½ Jeffreys' pseudo-count spread by the child's shares. The
window k ∈ {0} ∪ WINDOWS of each arc, with its β, is the one whose leave-one-out likelihood of the
records' child categories (:func:`gpurisk.models.eb_forest.loo_beta`) is largest: the records
choose between the global and the local targets, and a parent whose numbers carry no order (a
code list) keeps k = 0 where its neighbours predict no better. The leave-one-out forms read the
same neighbour counts (a record is in its own parent category, which the window leaves out) with
q̃_c for q_c. A parent that is not numeric, or whose (positions × child categories) table would
pass DENSE_MAX entries, keeps the global target.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

#: the windows (nearest seen categories on each side) tried besides the global target k = 0;
#: fixed in advance, the records choose among them
WINDOWS = (1, 2, 4, 8)
#: the largest (parent positions × child categories) table the neighbour sums are formed for
DENSE_MAX = 1 << 22
#: Jeffreys' pseudo-count of the window's own counts (as the rooted form's)
PSEUDO = 0.5


def positions(values) -> np.ndarray | None:
    """Each category's position along the numeric order of ``values`` (the key's seen categories,
    by code), or None where they are not numbers. A missing value (None, NaN) is put past the
    others' ends, beyond any window, so that it has no neighbours."""
    nums, missing = [], []
    for i, x in enumerate(values):
        if x is None or (isinstance(x, (float, np.floating)) and math.isnan(x)):
            missing.append(i)
        elif isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer,
                                                                    np.floating)):
            return None
        else:
            nums.append(i)
    if len(nums) < 3:          # two categories: each one's neighbour is everything else
        return None
    out = np.empty(len(values), dtype=np.int64)
    order = sorted(nums, key=lambda i: float(values[i]))
    out[order] = np.arange(len(order))
    out[missing] = len(order) + max(WINDOWS) + 1 + np.arange(len(missing)) * (2 * max(WINDOWS) + 1)
    return out


def shrunk(pair, parent, q):
    """t = (N^k_pc − n_pc + ½ q_c)/(N^k_p − n_p + ½) (module docstring) from the neighbour counts
    ``pair`` and ``parent`` and the child's shares ``q`` (broadcast together)."""
    return ((np.asarray(pair, dtype=np.float64) + PSEUDO * q)
            / (np.asarray(parent, dtype=np.float64) + PSEUDO))


class Near(NamedTuple):
    """An arc's neighbour counts at a window: ``pair`` (positions × child categories, flat) holds
    N^k_pc − n_pc, ``parent`` (per position) N^k_p − n_p, ``pos`` each parent code's position,
    ``cards`` the child's categories."""
    pair: np.ndarray
    parent: np.ndarray
    pos: np.ndarray
    cards: int

    def at(self, xp, xc) -> tuple[np.ndarray, np.ndarray]:
        """(N^k_pc − n_pc, N^k_p − n_p) at parent codes ``xp`` and child codes ``xc``."""
        where = self.pos[xp]
        return self.pair[where * self.cards + xc], self.parent[where]

    def target(self, xp, xc, q) -> np.ndarray:
        """t_{x_p}(x_c) of the module docstring, ``q`` the child's shares at ``xc``."""
        return shrunk(*self.at(xp, xc), q)


def _window_sums(table: np.ndarray, k: int) -> np.ndarray:
    """Σ over rows i − k … i + k of ``table`` (rows beyond the ends count nothing), the row itself
    left out."""
    size = table.shape[0]
    cum = np.concatenate([np.zeros((1,) + table.shape[1:]), np.cumsum(table, axis=0)])
    hi = np.minimum(np.arange(size) + k + 1, size)
    lo = np.maximum(np.arange(size) - k, 0)
    return cum[hi] - cum[lo] - table


def near(pos, parent_counts, npc, xp, xc, cards_c: int, k: int) -> Near | None:
    """:class:`Near` of an arc at window k from its observed (parent, child) counts ``npc`` at codes
    ``xp``, ``xc`` and the parent's counts per code; None where the table would pass DENSE_MAX."""
    if pos is None:
        return None
    size = int(pos.max()) + 1
    if size * cards_c > DENSE_MAX:
        return None
    table = np.bincount(pos[xp] * cards_c + xc, weights=npc,
                        minlength=size * cards_c).reshape(size, cards_c)
    parent = np.bincount(pos, weights=parent_counts, minlength=size)
    return Near(_window_sums(table, k).reshape(-1), _window_sums(parent, k), pos, cards_c)
