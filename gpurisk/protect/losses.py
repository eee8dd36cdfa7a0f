"""The built-in information-loss measures of ``protect`` (SPEC §11), registered as plugins.

With n records, K keys, h_k the height of key k's hierarchy, L_k the node's level of key k, x_ik the
original and g_ik the generalised value of record i (a suppressed value counts as generalised to the
top):

- ``precision``: (1/(nK)) Σ_i Σ_k level_ik / h_k (= 1 − Sweeney's Prec; a key with h_k = 0 adds 0).
  Sweeney (2002), IJUFKS 10(5).
- ``nonuniform_entropy``: Σ_i Σ_k −log2(#{x_k = x_ik} / #{g_k = g_ik}). Gionis & Tassa (2009),
  IEEE TKDE 21(2); ARX's non-uniform entropy. With suppression the counts are over the records not
  suppressed, and a suppressed value adds −log2(#{x_k = x_ik} / n) (generalised to the top).
- ``discernibility``: Σ_E |E|² over the equivalence classes E of the released keys, plus
  n · (records with a suppressed value). Bayardo & Agrawal (2005), ICDE.
- ``suppressed``: (suppressed key values) / (nK).

Each is computed per key from its category counts (no pass over the records) except
discernibility, which reads the node's table (Σ_j f_j²).
"""
from __future__ import annotations

import numpy as np

from gpurisk.hookspecs import hookimpl
from gpurisk.protect.loss import Loss, Node
from gpurisk.xp import scalar


class Precision(Loss):
    name = "precision"
    description = "generalisation intensity: mean share of each key's hierarchy climbed (1 - Prec)"
    reference = "Sweeney (2002), IJUFKS 10(5)"

    def compute(self, node: Node) -> float:
        n, K = node.n, len(node.keys)
        if n == 0 or K == 0:
            return 0.0
        total = 0.0
        for kl, lev in zip(node.keys, node.levels):
            if kl.height == 0:
                continue
            s = int(node.suppressed.get(kl.key, 0))
            total += ((n - s) * lev + s * kl.height) / kl.height
        return total / (n * K)


class NonUniformEntropy(Loss):
    name = "nonuniform_entropy"
    description = "non-uniform entropy: bits lost per value, -log2(#original / #generalised)"
    reference = "Gionis & Tassa (2009), IEEE TKDE 21(2); ARX"

    def compute(self, node: Node) -> float:
        total = 0.0
        for kl, lev in zip(node.keys, node.levels):
            c = kl.counts.astype(np.float64)
            sup = node.suppressed_counts(kl.key)
            if sup is not None:
                # a suppressed value is generalised to the top: all n records share it
                held = sup > 0
                total += float(np.sum(sup[held] * np.log2(node.n / c[held])))
                c = c - sup
            if lev == 0:
                continue
            g = np.bincount(kl.luts[lev], weights=c, minlength=len(kl.cats[lev]))
            held = c > 0
            total += float(np.sum(c[held] * np.log2(g[kl.luts[lev]][held] / c[held])))
        return total


class Discernibility(Loss):
    name = "discernibility"
    description = "discernibility: sum of squared equivalence-class sizes (+ n per suppressed record)"
    reference = "Bayardo & Agrawal (2005), ICDE"
    reads = "table"

    def compute(self, node: Node) -> float:
        t = node.table
        f = t.f.astype(t.xp.float64)
        return float(scalar((f * f).sum())) + float(node.n) * node.suppressed_records


class Suppressed(Loss):
    name = "suppressed"
    description = "share of key values set to missing by local suppression"
    reference = "share of key values set to missing (sdcMicro and ARX report it)"

    def compute(self, node: Node) -> float:
        n, K = node.n, len(node.keys)
        return float(sum(node.suppressed.values())) / (n * K) if n and K else 0.0


@hookimpl
def gpurisk_register_losses():
    return [Precision, NonUniformEntropy, Discernibility, Suppressed]
