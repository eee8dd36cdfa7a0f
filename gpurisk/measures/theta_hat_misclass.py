"""theta_hat_misclass: θ̂ when the intruder's keys are misclassified versions of the file's. SPEC §2.

The intruder observes X̃ with Pr(X̃ = j* | X = j) = M_{j j*}, M the Kronecker product of one matrix
per key variable (identity for keys not named), so M_jj = Π_v M_v[j_v, j_v]:

    θ̂_M = π S1 / (π S1 + 2(1 − π) S2 + n A)                                        (eq. 12)
    S1 = Σ_j I(f_j = 1) M_jj,   S2 = Σ_j I(f_j = 2) M_jj,
    n A = Σ_j [E_M(f̃_j) − M_jj] I(f_j = 1),   E_M(f̃_j) = Σ_{i∈s} M_{X_i, j}         (eq. 13)

E_M(f̃) is the count tensor f (shape = the keys' cardinalities) multiplied along each misclassified
variable's mode by its matrix: ``tensordot`` + ``moveaxis`` per variable on the dense tensor when
it has at most ``dense_limit`` cells; otherwise the same mode products on the sparse list of
non-zero cells, keeping after each product only the entries that can still reach a sample unique
(their already-transformed and untouched codes equal some unique's). With identity matrices
θ̂_M = θ̂ (eq. 7).

Option ``matrices``: key variable -> matrix (a keep probability, a K x K list, a labelled mapping or
a CSV file), or a JSON file of that mapping; see :mod:`gpurisk.dis.perturb.matrices`.
Skinner & Elliot (2002) §4, eqs. 12-13, Proposition 5.
"""
from __future__ import annotations

import math

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.xp import to_host
from gpurisk.hookspecs import hookimpl
from gpurisk.measure import Context, Measure, Result
from gpurisk.options import Option

DENSE_LIMIT = 1 << 23  # float64 cells of the dense count tensor (64 MiB)


def _cells(table):
    f = to_host(table.f).astype(np.int64)
    keep = f > 0
    codes = [to_host(c)[keep].astype(np.int64) for c in table.cell_codes()]
    return codes, f[keep]


def expected_counts_dense(codes, f, cards, mats, targets) -> np.ndarray:
    """E_M(f̃) at the cells ``targets`` (boolean over cells) through the dense tensor."""
    t = np.zeros(tuple(int(k) for k in cards), dtype=np.float64)
    t[tuple(codes)] = f
    for v, M in sorted(mats.items()):
        t = np.moveaxis(np.tensordot(t, M, axes=([v], [0])), -1, v)
    return t[tuple(c[targets] for c in codes)]


def _combine(arrays, cards):
    from gpurisk.dis.perturb.base import combine_codes
    return combine_codes(arrays, cards)


def expected_counts_sparse(codes, f, cards, mats, targets) -> np.ndarray:
    """E_M(f̃) at the cells ``targets`` by sparse mode products with pruning."""
    nv = len(cards)
    tcodes = [c[targets] for c in codes]
    ent = [c.copy() for c in codes]
    val = f.astype(np.float64)
    fixed = [v for v in range(nv) if v not in mats]

    def prune(ent, val, on):
        if not on:
            return ent, val
        cs = [cards[v] for v in on]
        m = ent[0].size
        # both sides combined together, so that a re-densified id space stays common
        both = _combine([np.concatenate([ent[v], tcodes[v]]) for v in on], cs)
        eid, tid = both[:m], np.unique(both[m:])
        keep = np.isin(eid, tid)
        return [e[keep] for e in ent], val[keep]

    ent, val = prune(ent, val, fixed)
    done = list(fixed)
    for v, M in sorted(mats.items()):
        rows, cols = np.nonzero(M)
        ptr = np.searchsorted(rows, np.arange(M.shape[0] + 1))
        k = ent[v]
        cnt = ptr[k + 1] - ptr[k]
        src = np.repeat(np.arange(k.size), cnt)
        within = np.arange(src.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        nz = ptr[k[src]] + within
        ent = [e[src] for e in ent]
        ent[v] = cols[nz].astype(np.int64)
        val = val[src] * M[rows[nz], cols[nz]]
        done.append(v)
        ent, val = prune(ent, val, done)
        ids = _combine(ent, cards)
        uniq, first, inv = np.unique(ids, return_index=True, return_inverse=True)
        val = np.bincount(inv, weights=val, minlength=uniq.size)
        ent = [e[first] for e in ent]
    # every remaining entry is a target cell; targets no entry reached get 0
    both = _combine([np.concatenate([e, t]) for e, t in zip(ent, tcodes)], cards)
    eid, tid = both[:ent[0].size], both[ent[0].size:]
    order = np.argsort(eid)
    pos = np.minimum(np.searchsorted(eid[order], tid), max(eid.size - 1, 0))
    hit = eid.size > 0
    out = np.zeros(tid.size)
    if hit:
        m = eid[order][pos] == tid
        out[m] = val[order][pos[m]]
    return out


def theta_hat_misclass(table, pi: float, mats: dict[int, np.ndarray], method: str = "auto",
                       dense_limit: int = DENSE_LIMIT) -> dict:
    """Eq. 12 and its parts; ``mats`` = {key index: K x K matrix}."""
    codes, f = _cells(table)
    cards = table.cards
    mjj = np.ones(f.size)
    for v, M in mats.items():
        mjj *= np.diagonal(M)[codes[v]]
    su = f == 1
    s1 = float(mjj[su].sum())
    s2 = float(mjj[f == 2].sum())
    if method == "auto":
        method = "dense" if math.prod(cards) <= dense_limit else "sparse"
    if not mats or not su.any():
        E = mjj[su]
    elif method == "dense":
        if math.prod(cards) > dense_limit:
            raise BadInput(f"theta_hat_misclass: the dense count tensor would have "
                           f"{math.prod(cards)} cells (dense_limit {dense_limit}); "
                           "use method=sparse")
        E = expected_counts_dense(codes, f, cards, mats, su)
    elif method == "sparse":
        E = expected_counts_sparse(codes, f, cards, mats, su)
    else:
        raise BadInput(f"theta_hat_misclass: method={method!r} is not auto, dense or sparse")
    nA = float((E - mjj[su]).sum())
    den = pi * s1 + 2.0 * (1.0 - pi) * s2 + nA
    value = pi * s1 / den if den > 0 else math.nan
    return {"value": value, "S1": s1, "S2": s2, "nA": nA, "method": method}


class ThetaHatMisclass(Measure):
    name = "theta_hat_misclass"
    description = "theta_hat allowing for misclassification of the keys (per-variable matrices)"
    needs = frozenset({"fraction"})
    reference = "Skinner & Elliot (2002), §4, eqs. (12) and (13)"
    options = {
        "matrices": Option((str, dict), None,
                           help="misclassification matrices: FILE.json, JSON text or a mapping"),
        "method": Option(str, "auto", choices=("auto", "dense", "sparse")),
        "dense_limit": Option(int, DENSE_LIMIT, min=1, help="largest dense count tensor (cells)"),
    }

    #: without matrices it does not apply (and reads no cell). With them it stays a "cells" measure:
    #: E_M(f̃_j) moves counts between cells (a product over the whole count tensor), which a bucket
    #: of cells alone cannot give
    requires_options = ("matrices",)

    def compute(self, table, ctx: Context) -> Result:
        from gpurisk.dis.perturb.matrices import key_matrices
        spec = ctx.option(self.name, "matrices", None)
        if spec is None:
            return Result.not_applicable("needs misclassification matrices: give "
                                         "{option:theta_hat_misclass.matrices=FILE.json}")
        codes, f = _cells(table)
        # records per category (a value held by one record is never named in a message)
        present = [np.bincount(c, weights=f, minlength=len(cat)).astype(np.int64)
                   for c, cat in zip(codes, table.categories)]
        mats = key_matrices(spec, list(table.keys), table.categories, self.name, present,
                            allow_outside=True)
        r = theta_hat_misclass(table, ctx.fraction, mats,
                               method=str(ctx.option(self.name, "method", "auto")),
                               dense_limit=int(ctx.option(self.name, "dense_limit", DENSE_LIMIT)))
        value = r.pop("value")
        if r["S2"] == 0 and r["nA"] == 0 and r["S1"] > 0 and ctx.fraction < 1.0:
            return Result(value=None, extra=r | {"estimable": False},
                          reason="not estimable: no sample pair and no expected false match "
                                 "(S2 = nA = 0), so eq. 12 gives 1 whatever the data")
        if math.isnan(value):
            return Result(value=math.nan, reason="no unique match can happen (S1 = S2 = nA = 0)",
                          extra=r)
        return Result(value=value, extra=r)


@hookimpl
def gpurisk_register_measures():
    return [ThetaHatMisclass]
