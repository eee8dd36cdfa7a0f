"""Record swapping of a geography variable, as in Elliot (2001) §16. SPEC §6.

``swap:fraction=0.10,geo=COL[,region=COL][,pairing=A+B+...][,stratify=true]``

1. A swap sample of ``fraction / 2`` of the records is drawn, stratified by ``geo``: in each
   geography value g with n_g records, floor(n_g fraction / 2) records plus one more with
   probability equal to the remainder, chosen at random. The swapping fraction counts both records
   of a pair (Elliot's footnote 5), so about ``fraction`` of the records change hands.
2. Each drawn record is paired with a record outside the sample in the same higher-level ``region``
   (a coarser geography column; without it the whole file is one region): at random among those
   with the same values of the ``pairing`` variables, and, when none is left, at random in the
   region (Elliot's footnote 4: a fall-back record). Partners are drawn without replacement.
3. The two records of a pair exchange their ``geo`` values. Nothing else changes, so the file's
   counts of ``geo`` are unchanged.

The partner may by chance hold the same ``geo`` value (the paper does not exclude it); such a swap
changes nothing. All ``size`` replicates of a batch are drawn by the same sorts: the replicate index
is the leading part of every grouping key. After a call, :attr:`RecordSwap.last_info` holds the
numbers of pairs, pairs matched on the pairing variables, fall-back pairs and unpaired records.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from gpurisk.errors import BadInput
from gpurisk.hookspecs import hookimpl
from gpurisk.dis.perturb.base import Perturbation, as_bool, as_float, as_list, combine_codes, group_rank


class RecordSwap(Perturbation):
    name = "swap"
    description = ("record swapping: exchange the geography of pairs of records in the same region, "
                   "paired on chosen variables")
    reference = "Elliot (2001), paras. 16-18 and Tables 2-5"
    options = {"fraction": None, "geo": None, "region": None, "pairing": None, "stratify": True}

    def __init__(self, **options):
        super().__init__(**options)
        o = self.opts
        if o["fraction"] is None:
            raise BadInput("perturbation 'swap': give fraction=F, the share of records swapped "
                           "(both records of a pair count)")
        if not o["geo"]:
            raise BadInput("perturbation 'swap': give geo=COL, the geography variable to swap")
        self.fraction = as_float(self.name, "fraction", o["fraction"], 0.0, 1.0)
        self.geo = str(o["geo"])
        self.region = str(o["region"]) if o["region"] not in (None, "", "none") else None
        self.pairing = as_list(o["pairing"])
        self.stratify = as_bool(self.name, "stratify", o["stratify"])
        if self.geo in self.pairing:
            raise BadInput("perturbation 'swap': the geography variable cannot be a pairing variable")
        self.last_info: dict[str, int] = {}

    def columns(self, keys: Sequence[str]) -> list[str]:
        want = ([self.region] if self.region else []) + self.pairing
        return [c for c in dict.fromkeys(want) if c not in keys]

    def check(self, keys, categories, codes=None) -> None:
        if self.geo not in keys:
            raise BadInput(f"perturbation 'swap': geo={self.geo!r} is not a key variable "
                           f"(keys: {', '.join(keys)}); swapping it cannot change any key")

    def perturb_batch(self, codes, categories, rng, *, keys, extra=None, size=1):
        keys = list(keys)
        self.check(keys, categories)
        extra = dict(extra or {})
        B = int(size)
        n = codes[0].shape[-1]

        def col(name):
            if name in keys:
                return np.broadcast_to(codes[keys.index(name)], (B, n)), len(categories[keys.index(name)])
            if name in extra:
                a = np.asarray(extra[name])
                return np.broadcast_to(a, (B, n)), int(a.max()) + 1 if a.size else 1
            raise BadInput(f"perturbation 'swap': column {name!r} was not supplied")

        gv = keys.index(self.geo)
        geo, G = col(self.geo)
        geo = geo.astype(np.int64)
        rep = np.broadcast_to(np.arange(B, dtype=np.int64)[:, None], (B, n))
        reg, R = col(self.region) if self.region else (np.zeros((B, n), np.int64), 1)
        out = [np.broadcast_to(c, (B, n)).copy() for c in codes]
        if n == 0 or self.fraction == 0.0:
            self.last_info = {"pairs": 0, "matched": 0, "fallback": 0, "unpaired": 0}
            return out

        # 1. the swap sample, stratified by geography (per replicate)
        half = self.fraction / 2.0
        stratum = combine_codes([rep, geo], [B, G]).ravel() if self.stratify else rep.ravel()
        nstrata = B * G if self.stratify else B
        n_g = np.bincount(stratum, minlength=nstrata)
        target = n_g * half
        m_g = np.floor(target).astype(np.int64)
        m_g += rng.random(nstrata) < (target - m_g)
        _, rank = group_rank(stratum, rng)
        chosen = rank < m_g[stratum]

        # 2. partners: first on the pairing variables within region, then at random in region
        base = combine_codes([rep.ravel(), reg.ravel().astype(np.int64)], [B, R])
        free = ~chosen
        want = chosen.copy()
        partner = np.full(B * n, -1, np.int64)
        matched = 0
        if self.pairing:
            pv = [col(p) for p in self.pairing]
            pcode = combine_codes([a.ravel().astype(np.int64) for a, _ in pv], [k for _, k in pv])
            group = combine_codes([base, pcode], [B * R, int(pcode.max()) + 1])
            matched = _pair_within(group, want, free, partner, rng)
        fallback = _pair_within(base, want, free, partner, rng)

        # 3. exchange the geography values of each pair
        a = np.flatnonzero(partner >= 0)
        b = partner[a]
        g_flat = geo.ravel()
        new = np.ascontiguousarray(out[gv]).reshape(-1).copy()
        new[a] = g_flat[b].astype(new.dtype)
        new[b] = g_flat[a].astype(new.dtype)
        out[gv] = new.reshape(B, n)
        self.last_info = {"pairs": int(a.size), "matched": int(matched), "fallback": int(fallback),
                          "unpaired": int(want.sum())}
        return out


def _pair_within(group: np.ndarray, want: np.ndarray, free: np.ndarray, partner: np.ndarray,
                 rng: np.random.Generator) -> int:
    """Pair records in ``want`` with records in ``free`` of the same ``group``, at random.

    Within each group the k-th wanting record (random order) takes the k-th free record (random
    order) while both exist. Updates ``partner`` (index of the partner, for the wanting record),
    and clears the paired records from ``want`` and ``free``. Returns the number of pairs.
    """
    wi = np.flatnonzero(want)
    fi = np.flatnonzero(free)
    if wi.size == 0 or fi.size == 0:
        return 0
    gw, gf = group[wi], group[fi]
    span = max(int(wi.size), int(fi.size)) + 1
    if (int(max(gw.max(), gf.max())) + 1) * span > 2**62:  # re-densify the groups first
        _, inv = np.unique(np.concatenate([gw, gf]), return_inverse=True)
        gw, gf = inv[:wi.size].astype(np.int64), inv[wi.size:].astype(np.int64)
    _, wrank = group_rank(gw, rng)
    fo, frank = group_rank(gf, rng)
    # key (group, rank) of each free record, in ascending order along ``fo``
    fsorted = (gf * span + frank)[fo]
    wkey = gw * span + wrank
    pos = np.minimum(np.searchsorted(fsorted, wkey), fsorted.size - 1)
    hit = fsorted[pos] == wkey
    a = wi[hit]
    b = fi[fo[pos[hit]]]
    partner[a] = b
    want[a] = False
    free[b] = False
    return int(a.size)


@hookimpl
def gpurisk_register_perturbations():
    return [RecordSwap]
