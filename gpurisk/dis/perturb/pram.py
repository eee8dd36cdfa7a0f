"""PRAM, the post-randomisation method: each chosen key's value is redrawn from a row of its
transition matrix. SPEC §6.

``pram:vars=A+B[,p=0.9][,matrix=FILE.json][,invariant=true]``

- ``vars``: the key variables to perturb (default: every key named in ``matrix``, else all keys);
- ``p``: keep probability of the default matrix p I + (1 − p)/(K − 1)(J − I) over the K categories
  that occur in the file;
- ``matrix``: per-variable matrices (JSON inline or a file; see :mod:`gpurisk.dis.perturb.matrices`),
  which override ``p`` for the variables they name;
- ``invariant``: replace each matrix P by the invariant R = P Q, Q_kl = P_lk π_l / Σ_j P_jk π_j,
  where π is the variable's observed distribution in the file (Gouweleeuw, Kooiman, Willenborg &
  de Wolf 1998, J. Official Statistics 14: 463-478). Then π R = π: the expected marginal counts
  are those of the original file.

A record with code c gets new code j with probability P[c, j], independently of every other
record and variable: ``sample_rows`` draws the whole (size, n) batch with one ``searchsorted``.
"""
from __future__ import annotations

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.hookspecs import hookimpl
from gpurisk.dis.perturb.base import Perturbation, as_bool, as_float, as_list, load_json_option, sample_rows
from gpurisk.dis.perturb.matrices import cumulative_rows, key_matrices, matrix_for


def invariant_matrix(P: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """R = P Q with Q the backward matrix of P under the distribution ``pi``; pi R = pi."""
    P = np.asarray(P, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64) / np.sum(pi)
    lam = pi @ P                                   # distribution after P
    Q = (P * pi[:, None]).T                        # Q[k, l] = P[l, k] pi_l
    with np.errstate(invalid="ignore", divide="ignore"):
        Q = np.where(lam[:, None] > 0, Q / lam[:, None], 0.0)
    unreachable = lam <= 0
    Q[unreachable, unreachable] = 1.0                # never used: no mass reaches k
    R = P @ Q
    return R / R.sum(axis=1, keepdims=True)


class Pram(Perturbation):
    name = "pram"
    description = "PRAM: redraw chosen key variables from per-variable transition matrices"
    reference = "Gouweleeuw et al. (1998); Elliot (2001), para. 13"
    options = {"vars": None, "p": None, "matrix": None, "invariant": False}

    def __init__(self, **options):
        super().__init__(**options)
        o = self.opts
        self.vars = as_list(o["vars"])
        self.p = None if o["p"] is None else as_float(self.name, "p", o["p"], 0.0, 1.0)
        self.matrix = load_json_option(self.name, "matrix", o["matrix"]) if o["matrix"] else None
        self.invariant = as_bool(self.name, "invariant", o["invariant"])
        if self.p is None and self.matrix is None:
            raise BadInput("perturbation 'pram': give p=KEEP_PROBABILITY or matrix=FILE.json")

    def _matrices(self, keys, categories, codes=None) -> dict[int, np.ndarray]:
        keys = list(keys)
        present = None
        if codes is not None:
            # records per category (counts, not flags: a value of one record is never named)
            present = [np.bincount(np.asarray(c).ravel().astype(np.int64), minlength=len(cat))[:len(cat)]
                       for c, cat in zip(codes, categories)]
        given = (key_matrices(self.matrix, keys, categories, "perturbation 'pram'", present)
                 if self.matrix else {})
        names = self.vars or ([keys[v] for v in given] if self.p is None else keys)
        unknown = [v for v in names if v not in keys]
        if unknown:
            raise BadInput(f"perturbation 'pram': vars {', '.join(map(repr, unknown))} are not key "
                           f"variables (keys: {', '.join(keys)})")
        out = {}
        for name in names:
            v = keys.index(name)
            if v in given:
                out[v] = given[v]
            elif self.p is not None:
                out[v] = matrix_for(name, self.p, categories[v], "perturbation 'pram'",
                                    None if present is None else present[v])
            else:
                raise BadInput(f"perturbation 'pram': no matrix for {name!r} and no p=")
        return out

    def check(self, keys, categories, codes=None) -> None:
        self._matrices(keys, categories, codes)

    def transition_matrices(self, codes, categories, keys) -> dict[int, np.ndarray]:
        """The matrix applied to each perturbed key (made invariant to ``codes`` if asked)."""
        mats = self._matrices(keys, categories, codes)
        if self.invariant:
            for v, P in mats.items():
                c = np.asarray(codes[v]).ravel()
                mats[v] = invariant_matrix(P, np.bincount(c, minlength=P.shape[0]))
        return mats

    def perturb_batch(self, codes, categories, rng, *, keys, extra=None, size=1):
        B = int(size)
        n = codes[0].shape[-1]
        mats = self.transition_matrices(codes, categories, keys)
        out = []
        for v, c in enumerate(codes):
            cb = np.broadcast_to(c, (B, n))
            if v not in mats:
                out.append(cb.copy())
                continue
            new = sample_rows(cumulative_rows(mats[v]), cb, rng.random((B, n)))
            out.append(new.astype(np.asarray(c).dtype, copy=False))
        return out


@hookimpl
def gpurisk_register_perturbations():
    return [Pram]
